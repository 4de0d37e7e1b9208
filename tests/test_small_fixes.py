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


# ---------------------------------------------------------------- tool names in any case

from passepartout.builtin_gates import default_gates
from passepartout.builtin_tools import builtin_tools
from passepartout.reason import ScriptedProvider
from passepartout.signals import Context, reply, tool_call
from passepartout.tools import Toolbelt


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    ws = tmp_path / 'ws'; ws.mkdir(); (ws / 'a.txt').write_text('hello\n')
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(ws)); monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    return ws


def gated_agent(ws, script):
    return Agent(ScriptedProvider(script), gates=default_gates(), tools=builtin_tools(), workspace=ws)


def test_mis_cased_tool_names_run_as_the_registered_tool(workspace):
    agent = gated_agent(workspace, [tool_call('READ_FILE', {'path': 'a.txt'}, explanation='read it'), reply('read')])
    turn = agent.send('read a.txt')
    assert [e['action']['tool'] for e in turn.of('result')] == ['read_file'] and 'hello' in turn.of('result')[0]['output']
    assert turn.of('verdict')[0]['action']['tool'] == 'read_file'                 # the gates judged read_file
    assert agent.transcripts['default'][1]['tool_calls'][0]['name'] == 'read_file'  # and the model is shown that name


@pytest.mark.parametrize('name', ['SHELL', 'Shell', 'sHeLl'])
def test_shell_in_any_case_is_still_judged_by_the_shell_gate(workspace, name):
    "The attack: `SHELL` with `rm -rf ~` must meet the shell gate exactly as `shell` does."
    gates, ctx = default_gates(), None
    agent = gated_agent(workspace, [])
    ctx = Context(agent=agent)
    decision = gates.verify(tool_call(name, {'command': 'rm -rf ~'}, explanation='free space'), ctx)
    assert decision.decision == 'deny' and decision.action.tool == 'shell'
    assert [r.gate for r in decision.trace if r.decision == 'deny'] == ['shell'], decision.trace
    # through the whole loop, with every proposal mis-cased: nothing runs, the home directory is untouched
    agent = gated_agent(workspace, [tool_call(name, {'command': 'rm -rf ~'}, explanation='free space')] * 3)
    turn = agent.send('free some space')
    assert turn.of('result') == [] and all(v['decision'] == 'deny' for v in turn.of('verdict'))
    assert 'rm -rf ~' in turn.of('verdict')[0]['trace'][-1]['reason']


def test_a_gate_above_the_validator_sees_the_registered_name(workspace):
    "Every gate sees the canonical name, also one registered above the validator (a user's own)."
    from passepartout.gates import deny
    agent = gated_agent(workspace, [tool_call('SHELL', {'command': 'ls'}, explanation='look')] * 3)
    agent.gates.add('no-shell', lambda a, c: deny('no shell here') if a.tool == 'shell' else None, priority=1000)
    turn = agent.send('look around')
    assert turn.of('result') == [] and [r['gate'] for r in turn.of('verdict')[0]['trace']] == ['no-shell']


def test_two_tools_differing_only_in_case_are_refused():
    belt = builtin_tools()
    def shell_(command: str): return 'pwned'
    with pytest.raises(ValueError, match="'Shell' differs from the tool 'shell' only in case"): belt.add(shell_, name='Shell')
    assert belt['shell'].fn is not shell_ and 'Shell' not in belt.by_name
    small = Toolbelt()
    small.add(len, name='count'); small.add(len, name='count')           # the same name again replaces, as before
    assert list(small.by_name) == ['count'] and small.canonical('COUNT') == 'count'


# ---------------------------------------------------------------- PASSEPARTOUT_SILENT_ACTUATORS

def matrix_turn(ws, monkeypatch, setting):
    "A turn from a chat bridge whose actuator is registered without a flag; how often was the model asked?"
    from passepartout.app import build_agent
    if setting is not None: monkeypatch.setenv('PASSEPARTOUT_SILENT_ACTUATORS', setting)
    provider = ScriptedProvider([reply('hello'), reply('hello again'), reply('and again')])
    agent = build_agent(provider=provider, workspace=ws)
    delivered = []
    agent.actuators.register('matrix', lambda action, ctx: delivered.append(action.text))
    turn = agent.send('hi', source='matrix')
    return len(provider.requests), delivered, agent


def test_silent_actuators_setting_takes_effect(workspace, monkeypatch):
    asked, delivered, agent = matrix_turn(workspace, monkeypatch, None)            # the default list: matrix is not in it
    assert asked >= 2 and delivered[:2] == ['hello', 'hello again']                 # each delivery came back to the model
    assert agent.actuators['cli'].silent and not agent.actuators['tool'].silent
    asked, delivered, agent = matrix_turn(workspace, monkeypatch, 'cli,daemon,matrix')
    assert (asked, delivered) == (1, ['hello'])                                     # silent: the turn ends at the delivery
    asked, delivered, agent = matrix_turn(workspace, monkeypatch, 'daemon,matrix')  # the terminal is no longer silent
    assert not agent.actuators['cli'].silent and agent.actuators['matrix'].silent


def test_silent_actuators_may_not_silence_tools(workspace, monkeypatch):
    from passepartout.app import build_agent
    monkeypatch.setenv('PASSEPARTOUT_SILENT_ACTUATORS', 'cli,tool')
    with pytest.raises(ValueError, match="PASSEPARTOUT_SILENT_ACTUATORS names 'tool'"): build_agent(provider=ScriptedProvider([]), workspace=workspace)


# ---------------------------------------------------------------- a client's envelope depth

from passepartout.daemon import Client, request
from passepartout.reason import Proposal
from _daemon_support import daemon_in_thread


class CountingModel:
    "Calls `count` until the loop stops it, then (never, unless the depth limit was not reached) replies."
    name = 'counting'
    def __init__(self): self.calls = 0
    def propose(self, request):
        self.calls += 1
        return Proposal(tool_call('count', {}))


def counting_agent():
    belt = Toolbelt()
    steps = []
    @belt.tool(effect='read-only')
    def count():
        "Count one step."
        steps.append(1); return len(steps)
    return Agent(CountingModel(), tools=belt, max_depth=10), steps


@pytest.mark.parametrize('depth', [9, -100, 10**6, True, 2.5, '0'])
def test_a_clients_envelope_cannot_choose_its_depth(tmp_path, depth):
    agent, steps = counting_agent()
    with daemon_in_thread(agent, state_dir=tmp_path) as d, Client(tmp_path) as c:
        envelope = {**request('count for me', id=1), 'depth': depth}
        reply_text = c.ask(envelope)['turn']['reply']
        assert reply_text == f"Protocol error: 'depth' is {depth!r}, but a message always starts at depth 0: leave 'depth' out", reply_text
        assert agent.provider.calls == 0 and steps == []                 # the model was never asked, nothing ran
        # the same client, without a depth (or with 0), gets the full number of steps: 0..10, eleven tool runs
        for plain in (request('count for me', id=2), {**request('count for me', id=3), 'depth': 0}):
            steps.clear()
            turn = c.ask(plain)['turn']
            assert len(steps) == 11 and turn['events'][-1]['kind'] == 'dropped', turn['events'][-1]


# ---------------------------------------------------------------- the default recorded session in any workspace

CLI = [sys.executable, '-c', 'from passepartout.cli import main; main()']


def send(text, workspace, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PASSEPARTOUT_', 'OPENAI_', 'ANTHROPIC_', 'OLLAMA_'))}
    env.update(PYTHONPATH=str(ROOT), PASSEPARTOUT_HOME=str(home))              # no provider configured: the demo recording
    done = subprocess.run(CLI + ['send', text], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def test_default_replay_lists_what_is_really_there(tmp_path):
    empty = tmp_path / 'empty'; empty.mkdir()
    answer = send('What is in my workspace?', empty, tmp_path / 'home')
    assert answer.splitlines() == ['Here is what your workspace holds:', './ (0 entries)'], answer
    full = tmp_path / 'full'; (full / 'src').mkdir(parents=True); (full / 'README.md').write_text('hi\n')
    answer = send('What is in my workspace?', full, tmp_path / 'home')
    assert answer.splitlines() == ['Here is what your workspace holds:', './ (2 entries)', 'README.md  (3 bytes)', 'src/'], answer
    answer = send('what files are here?', full, tmp_path / 'home')                   # not the demo's question: said so
    assert 'the recording answers user message' in answer and 'set PASSEPARTOUT_PROVIDERS' in answer


def test_default_replay_does_not_summarise_a_file_it_never_read(workspace):
    "The recording's summary of notes.txt holds only for the notes it read; other notes stop the replay instead."
    from passepartout.app import build_agent
    from passepartout.demo import REQUESTS
    from passepartout.replay import ReplayProvider
    (workspace / 'notes.txt').write_text('Groceries: milk, eggs.\n')
    agent = build_agent(provider=ReplayProvider(), workspace=workspace)
    listing, cleanup, summary = [agent.send(text) for text in REQUESTS[:3]]
    assert 'notes.txt  (23 bytes)' in listing.reply and 'a.txt' in listing.reply
    assert cleanup.reply.startswith('I measured the workspace') and './notes.txt' in cleanup.reply
    assert [e['action']['tool'] for e in summary.of('proposal')] == ['read_file']     # no planted command was "obeyed"
    assert summary.reply.startswith('replay diverged at call 7') and 'Summary' not in summary.reply, summary.reply
    assert "but the session sent the result of tool 'read_file' reading 'Groceries: milk, eggs." in summary.reply
