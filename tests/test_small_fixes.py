"""Issue 13's smaller items, each proven where a user meets it: a sub-cent budget, tool names in any case,
the silent-actuators setting, a client's envelope depth, and the default recorded session in any workspace."""
import json, os, socket, subprocess, sys
from pathlib import Path

import pytest

from llm_servers import LLMServer, openai_text
from passepartout.cascade import provider_from_env, usd
from passepartout.loop import Agent

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- a sub-cent budget

def test_sub_cent_budget_is_printed_with_its_digits():
    "A budget of $0.004 refuses a call that could cost a cent, and says $0.004, not $0.00."
    server = LLMServer('openai').add(openai_text('never asked'))
    try:
        env = {'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': server.url, 'OPENAI_MODEL': 'gpt-4o',
               'OPENAI_API_KEY': 'sk-test-0123456789abcdef', 'PASSEPARTOUT_BUDGET_USD': '0.004'}
        provider = provider_from_env(env)
        answer = Agent(provider).send('hello').reply
    finally: server.close()
    assert server.requests == []                                       # refused before any request
    assert 'of the $0.004 budget remains' in answer and '$0.00 ' not in answer, answer
    assert 'only $0.004' in answer and repr(provider.budget) == 'Budget(spent $0.00 of $0.004, 0 calls)'
    assert (usd(0.0042), usd(0.5), usd(0.000031)) == ('$0.0042', '$0.50', '$0.000031')
