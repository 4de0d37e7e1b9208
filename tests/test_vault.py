"""The vault for real: a secret used by a tool never reaches the model, the transcript, the turn, or the
audit log, even when the tool echoes it back; at rest it is ciphertext; a wrong key is a clear error."""
import json, os, subprocess, sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from passepartout.audit import AuditLog
from passepartout.gates import GateEngine
from passepartout.loop import Agent
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply
from passepartout.tools import Toolbelt
from passepartout.vault import Vault, VaultError, substitute, redact

SECRET = 'xoxb-51-"quoted"\\slash-ünïcode-S3CR3T'   # quotes, a backslash and non-ASCII: JSON escapes it


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.delenv('PASSEPARTOUT_VAULT_KEY_FILE', raising=False)
    return tmp_path / 'home'


def _all_bytes(path: Path) -> bytes:
    "The database file and its WAL, as an attacker reading the disk would see them."
    return b''.join(p.read_bytes() for p in path.parent.glob(path.name + '*'))


def test_secret_never_leaves_the_actuator(home):
    vault = Vault()
    vault.add('SLACK_TOKEN', SECRET)
    received, seen_by_gates = [], []
    belt = Toolbelt()

    @belt.tool(effect='outward')
    def post(token: str, text: str):  # the token, then the message
        "Echo everything back, as a careless API would."
        received.append(token)
        return {'echo': {'token': token, 'text': text}, 'raw': f"Authorization: Bearer {token}"}

    @belt.tool
    def leak(token: str):  # the token
        "Fail with the secret in the error message."
        raise RuntimeError(f"401 for token {token}")

    gates = GateEngine()
    gates.add('spy', lambda a, c: seen_by_gates.append(json.dumps(a.to_dict())))
    log = AuditLog(vault=vault)
    script = [tool_call('post', {'token': '{{vault:SLACK_TOKEN}}', 'text': 'hi'}),
              tool_call('leak', {'token': '{{vault:SLACK_TOKEN}}'}),
              lambda req: reply(f"the tool said: {req.messages[-1]['content']}")]
    agent = Agent(ScriptedProvider(script), gates=gates, tools=belt)
    agent.vault, agent.audit = vault, log.append
    turn = agent.send('post hi')

    assert received == [SECRET]                              # the tool really got the value
    escaped = json.dumps(SECRET)[1:-1]
    def clean(text):
        return SECRET not in text and escaped not in text and 'S3CR3T' not in text
    assert all(clean(s) for s in seen_by_gates) and seen_by_gates  # the gates saw only the handle
    assert clean(json.dumps(turn.to_dict(), ensure_ascii=False))
    assert clean(json.dumps(agent.transcripts, ensure_ascii=False))
    for req in agent.provider.requests:                      # everything the model was ever shown
        assert clean(json.dumps(req.messages, ensure_ascii=False))
        assert clean(req.signal.text)
    assert '{{vault:SLACK_TOKEN}}' in agent.provider.requests[1].messages[-1]['content']
    assert 'RuntimeError: 401 for token {{vault:SLACK_TOKEN}}' in turn.reply
    assert clean(turn.reply)
    raw = _all_bytes(log.path)
    assert SECRET.encode() not in raw and b'S3CR3T' not in raw and len(log) > 5
    assert log.verify() == (True, [])


def test_a_pasted_secret_is_redacted_from_the_audit_log(home):
    vault = Vault(); vault.add('PW', 'hunter2-long-password')
    log = AuditLog()                                          # the default vault of this home
    log.append({'kind': 'user-input', 'text': 'my password is hunter2-long-password'})
    assert log.recent(1)[0]['data']['text'] == 'my password is {{vault:PW}}'
    assert b'hunter2' not in _all_bytes(log.path)


def test_at_rest_and_keys(home, tmp_path):
    vault = Vault()
    vault.add('A_KEY', SECRET)
    blob = vault.path.read_bytes()
    assert SECRET.encode() not in blob and b'S3CR3T' not in blob and b'A_KEY' not in blob
    assert oct(vault.path.stat().st_mode & 0o777) == '0o600' and oct(vault.key_path.stat().st_mode & 0o777) == '0o600'
    assert vault.key_path.parent == home / 'config' and vault.path.parent == home / 'data'
    wrong = tmp_path / 'wrong.key'; wrong.write_bytes(Fernet.generate_key())
    with pytest.raises(VaultError, match='wrong key or damaged file'):
        Vault(key_path=wrong).get('A_KEY')
    damaged = bytearray(blob); damaged[len(damaged) // 2] ^= 1
    vault.path.write_bytes(bytes(damaged))
    with pytest.raises(VaultError, match='wrong key or damaged file'):
        Vault().names()
    vault.path.write_bytes(blob)
    garbage = tmp_path / 'garbage.key'; garbage.write_text('not a key')
    with pytest.raises(VaultError, match='not a valid key'):
        Vault(key_path=garbage).names()
    os.environ['PASSEPARTOUT_VAULT_KEY_FILE'] = str(wrong)
    try:
        with pytest.raises(VaultError, match=str(wrong)):
            Vault().names()
    finally:
        del os.environ['PASSEPARTOUT_VAULT_KEY_FILE']
    assert Vault().get('A_KEY') == SECRET


def test_changes_from_another_instance_are_seen(home):
    a, b = Vault(), Vault()
    a.add('ONE', 'value-one')
    assert b.names() == ['ONE'] and redact('x value-one', b) == 'x {{vault:ONE}}'
    b.add('TWO', 'value-two'); b.remove('ONE')
    assert a.names() == ['TWO'] and redact('value-one value-two', a) == 'value-one {{vault:TWO}}'


def test_substitute_and_redact_edges(home):
    v = Vault()
    v.add('SHORT', 'abcd'); v.add('LONG', 'abcd-efgh-ijkl')
    assert redact('abcd-efgh-ijkl and abcd', v) == '{{vault:LONG}} and {{vault:SHORT}}'   # longest first
    nested = {'a': [{'b': ('{{vault:SHORT}}', 1)}], 'c': None, 'd': '{{vault:SHORT}}{{vault:LONG}}'}
    assert substitute(nested, v) == {'a': [{'b': ('abcd', 1)}], 'c': None, 'd': 'abcdabcd-efgh-ijkl'}
    assert substitute({'x': '{{ vault:SHORT }}'}, v) == {'x': '{{ vault:SHORT }}'}   # not a handle
    with pytest.raises(VaultError, match='too short'):
        v.add('EMPTY', '')
    assert redact('', v) == '' and redact(None, v) is None


def cli(home, *args, input=None):
    "Run `passepartout ARGS` in a fresh process, as a user would."
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(home)}
    return subprocess.run([sys.executable, '-c', 'from passepartout.cli import main; main()', *args],
                          input=input, capture_output=True, text=True, env=env)


def test_cli_reads_the_value_from_stdin_never_argv(home):
    r = cli(home, 'vault', 'add', 'BOT', input='tok-123456789\n')
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'stored BOT; use it as {{vault:BOT}}\nit may go to: (nothing: every use asks)\n'
    r = cli(home, 'vault', 'list')
    assert r.stdout == 'BOT  {{vault:BOT}}  for: (nothing: every use asks)\n' and 'tok-123' not in r.stdout
    r = cli(home, 'vault', 'add', 'BOT', 'tok-on-argv')
    assert r.returncode == 2   # a value on the command line is a usage error
    assert Vault(home / 'data' / 'vault.enc', home / 'config' / 'vault.key').get('BOT') == 'tok-123456789'
    r = cli(home, 'vault', 'remove', 'NOPE')
    assert r.returncode == 1 and "no secret named 'NOPE'" in r.stderr
