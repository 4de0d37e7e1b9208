"""The table behind a lesson of `nbs/07_act.md`: a secret cut by the limit is redacted whole, in every form and place.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.act import kept_text, format_result
from passepartout.vault import Vault, redact

SECRET = 'sk-live-0123456789'


@pytest.fixture(scope='module')
def vault(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('vault')
    v = Vault(tmp / 'vault.enc', tmp / 'vault.key')
    v.add('API_KEY', SECRET)
    return v


@pytest.mark.parametrize('shown', [SECRET, SECRET.encode().hex()], ids=['value', 'hex'])
@pytest.mark.parametrize('at', [19985, 19995, 19999])
def test_kept_text_is_what_whole_redaction_keeps(vault, shown, at):
    big = 'x' * at + shown + 'y' * 100000
    out = kept_text(big, 20000, vault)
    assert out[:20000] == format_result(redact(big, vault), 20000)[:20000]
    assert shown[:6] not in out and out.startswith('x' * at + '{{vault:API_KEY}}'[:20000 - at])


# --- With a vault, a tool gets the secret and nobody else does (the rows behind the lesson's one example) ---
from passepartout.act import act
from passepartout.signals import Signal, Context, Turn, tool_call
from passepartout.loop import Agent
from passepartout.gates import GateEngine
from passepartout.tools import Toolbelt


@pytest.fixture(scope='module')
def vault_agent(vault):
    belt = Toolbelt()
    @belt.tool(effect='outward')
    def echo(text:str): # the text to send back
        "Return the text unchanged, as a careless API would."
        return text
    @belt.tool(effect='read-only')
    def shout(text:str): # what to shout
        "Upper-case the text."
        return text.upper()
    agent = Agent(tools=belt, gates=GateEngine())
    agent.vault = vault
    return agent


def _act(agent, tool, text):
    turn = Turn()
    signal = Signal(meta={'source': 'cli'}, payload={'sensor': 'user-input'}, status='approved',
                    approved_action=tool_call(tool, {'text': text}))
    return act(signal, Context(agent=agent, turn=turn)), turn


@pytest.mark.parametrize('tool, text, shown', [
    ('echo', 'key={{vault:API_KEY}}', 'key={{vault:API_KEY}}'),                 # an outward echo is redacted
    ('echo', '{{vault:NOPE}}', "VaultError: no secret named 'NOPE' in the vault"),
], ids=['outward-echo-redacted', 'unknown-handle'])
def test_feedback_of_a_tool_given_a_handle(vault_agent, tool, text, shown):
    fb, _ = _act(vault_agent, tool, text)
    assert fb.text == shown


@pytest.mark.parametrize('tool, leaked', [('echo', 'sk-live'), ('shout', 'SK-LIVE')])
def test_the_turn_records_the_handle_never_the_value(vault_agent, tool, leaked):
    fb, turn = _act(vault_agent, tool, 'key={{vault:API_KEY}}')
    assert leaked not in str(turn.events) and leaked not in fb.text
    assert turn.of('result')[-1]['action']['args'] == {'text': 'key={{vault:API_KEY}}'}


def test_a_local_tool_given_a_secret_shows_only_its_outcome(vault_agent):
    fb, _ = _act(vault_agent, 'shout', 'key={{vault:API_KEY}}')
    assert fb.text.split(';')[0] == '[succeeded' and 'API_KEY' in fb.text


@pytest.mark.parametrize('size', [0, 50, 100, 101, 5000])
def test_kept_text_of_an_output_that_fits_looks_at_the_vault_once(vault, size, monkeypatch):
    "An output that fits is redacted whole with one look at the vault (its file checked once); a longer one is cut as before; the text is whole redaction's either way."
    text = ('sk-live-0123456789 ' + 'z' * size)[:max(size, 1)]
    looks = []
    monkeypatch.setattr(Vault, '_load', lambda self, load=Vault._load: (looks.append(1), load(self))[1])
    kept, looked = kept_text(text, 100, vault), len(looks)
    assert kept[:100] == format_result(redact(text, vault), 100)[:100]
    assert looked == 1 if len(text) <= 100 else looked >= 2
