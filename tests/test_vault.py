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

    @belt.tool(effect='read-only')
    def leak(token: str):  # the token
        "Fail with the secret in the error message (a local tool: its error is withheld, not only redacted)."
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
    shown = json.dumps([req.messages for req in agent.provider.requests], ensure_ascii=False)
    assert '"echo": {"token": "{{vault:SLACK_TOKEN}}"' in shown.replace('\\"', '"')   # the outward tool's echo, redacted
    assert '[failed (RuntimeError); output withheld: this call used secret SLACK_TOKEN' in turn.reply  # a local tool's error: withheld
    assert clean(turn.reply)
    raw = _all_bytes(log.path)
    assert SECRET.encode() not in raw and b'S3CR3T' not in raw and len(log.recent(-1)) >= 5   # message; verdict and result of post; leak's verdict with its error, the reply's with it (entries of one record a batch)
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


# --- encoded forms and the trie pattern -----------------------------------------------------------

import base64, random, re, string
from passepartout.vault import base64_cores, trie_pattern, _forms, handle


def test_encoded_forms_are_redacted_at_every_alignment(home):
    "base64 (both alphabets) of a secret inside any longer stream, hex, and reversed: the secret never survives."
    rng = random.Random(7)
    v = Vault()
    secrets = {f"S{i}": ''.join(rng.choice(string.ascii_letters + string.digits + '+/?~-_é"\\') for _ in range(rng.randint(4, 40)))
               for i in range(6)}
    for n, s in secrets.items(): v.add(n, s)
    for n, s in secrets.items():
        b = s.encode()
        for _ in range(30):
            before, after = rng.randbytes(rng.randint(0, 20)), rng.randbytes(rng.randint(0, 20))
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                stream = enc(before + b + after).decode()
                out = redact(stream, v)
                assert handle(n) in out, (s, stream)
                # what is left is too short to carry the secret: at most 2 characters of it at each end
                assert not any(c in out for c in base64_cores(b)), (s, out)
        for shown in (b.hex(), b.hex().upper(), s[::-1]):
            assert redact(f"[{shown}]", v) == f"[{handle(n)}]"


def test_trie_pattern_matches_like_a_longest_first_alternation():
    rng = random.Random(3)
    for _ in range(200):
        words = {''.join(rng.choice('abc.') for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 12))}
        text = ''.join(rng.choice('abc.x') for _ in range(200))
        flat = re.compile('|'.join(re.escape(w) for w in sorted(words, key=len, reverse=True)))
        trie = re.compile(trie_pattern(words))
        assert trie.findall(text) == flat.findall(text), (words, text)


def test_trie_redaction_equals_a_flat_alternation(home):
    "10 kB of tool output and a short audit record, 3 secrets (about 13 forms each); what it costs: `python bench/redaction.py`."
    rng = random.Random(1)
    v = Vault()
    for i in range(3): v.add(f"K{i}", ''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(30)))
    big = ''.join(rng.choice(string.printable) for _ in range(10_000))
    record = json.dumps({'kind': 'result', 'tool': 'list_dir', 'output': 'a.txt b.txt c.txt (3 files)', 'us': 412.5})
    forms = set().union(*(_forms(v.get(n)) for n in v.names()))
    flat = re.compile('|'.join(re.escape(f) for f in sorted(forms, key=len, reverse=True)), re.IGNORECASE)
    by_form = v._redactor()[1]
    assert redact(big, v) == flat.sub(lambda m: by_form[m.group(0).encode().lower()], big)   # the trie changes the speed, not the result
    assert redact(record, v) == record
