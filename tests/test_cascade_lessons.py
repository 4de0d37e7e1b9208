"""The tables behind the lessons of `nbs/11_cascade.md`: amounts shown to a person, settings refused at startup.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.cascade import make_provider, provider_from_env, usd
from passepartout.errors import SetupError


@pytest.mark.parametrize('amount, shown', [
    (0, '$0.00'), (0.5, '$0.50'), (0.27, '$0.27'), (1.234, '$1.23'), (0.07, '$0.07'), (0.01, '$0.01'),
    (0.0042, '$0.0042'), (0.004, '$0.004'), (0.00004567, '$0.000046'), (12.5, '$12.50'),
])
def test_usd(amount, shown):
    assert usd(amount) == shown


@pytest.mark.parametrize('env, words', [
    ({'PASSEPARTOUT_PROVIDERS': 'gpt5'}, "unknown provider 'gpt5': use one or more of openai, openrouter, anthropic, ollama, replay"),
    ({'PASSEPARTOUT_PROVIDERS': 'ollama', 'PASSEPARTOUT_CONSENSUS': '2'}, 'only 1 provider is configured: add providers to PASSEPARTOUT_PROVIDERS'),
    ({'PASSEPARTOUT_MODEL_SELECTOR': 'no_such_module:pick'}, "PASSEPARTOUT_MODEL_SELECTOR='no_such_module:pick'"),
    ({'PASSEPARTOUT_RECORD_FILE': '/proc/none/calls.jsonl'}, 'PASSEPARTOUT_RECORD_FILE=/proc/none/calls.jsonl cannot be written'),
], ids=['unknown provider', 'consensus larger than the cascade', 'selector not found', 'record file not writable'])
def test_provider_from_env_refuses(env, words):
    with pytest.raises(SetupError) as e: provider_from_env(env)
    assert words in str(e.value)


def test_make_provider_refuses_an_unknown_name():
    with pytest.raises(SetupError) as e: make_provider('opnai', {})
    assert "unknown provider 'opnai'" in str(e.value)
