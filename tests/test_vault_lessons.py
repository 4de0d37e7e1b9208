"""The tables behind the lessons of `nbs/22_vault.md`: bindings, what redaction and `secrets_in` find, and the vault
gate's verdicts.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import base64
import pytest
from passepartout.builtin_tools import builtin_tools
from passepartout.loop import Agent
from passepartout.signals import Context, reply, tool_call
from passepartout.vault import Vault, VaultError, redact, secrets_in, vault_gate

GITHUB, SMTP = 'ghp_rotatedValue43', 'correct horse battery'


@pytest.fixture
def v(tmp_path):
    "The lessons' vault after its bindings lesson: a rotated GitHub token bound to two hosts, an SMTP password bound nowhere."
    vault = Vault(tmp_path / 'data' / 'vault.enc', tmp_path / 'config' / 'vault.key')
    vault.add('GITHUB_TOKEN', GITHUB, ['api.github.com', '*.githubusercontent.com'])
    vault.add('SMTP_PASSWORD', SMTP)
    return vault


# ---- bindings
@pytest.mark.parametrize('destination, bound', [('api.github.com', True), ('raw.githubusercontent.com', True),
                                                ('githubusercontent.com', False), ('evil.com', False), ('telegram:1', False),
                                                ('tool:shell', False)])
def test_bound(v, destination, bound):
    assert v.bound('GITHUB_TOKEN', destination) is bound


def test_allow_then_revoke(v):
    assert v.allow('GITHUB_TOKEN', 'tool:shell') == ('*.githubusercontent.com', 'api.github.com', 'tool:shell')
    assert v.bound('GITHUB_TOKEN', 'tool:shell')
    assert v.revoke('GITHUB_TOKEN', 'tool:shell') == ('*.githubusercontent.com', 'api.github.com')
    with pytest.raises(VaultError, match='not bound to tool:shell; it is bound to '):
        v.revoke('GITHUB_TOKEN', 'tool:shell')


def test_a_new_value_keeps_its_destinations(v):
    v.add('GITHUB_TOKEN', 'ghp_rotatedAgain44')
    assert Vault(v.path, v.key_path).destinations('GITHUB_TOKEN') == ('*.githubusercontent.com', 'api.github.com')


def test_unbound_and_unknown_names(v):
    assert v.destinations('SMTP_PASSWORD') == ()
    with pytest.raises(VaultError, match="no secret named 'NOPE'"):
        v.allow('NOPE', 'a.com')


# ---- what redaction finds
@pytest.mark.parametrize('text, redacted', [
    ('Ghp_RotatedValue43 / ' + base64.b32encode(b'>' + GITHUB.encode()).decode(), '{{vault:GITHUB_TOKEN}} / HZ{{vault:GITHUB_TOKEN}}Y='),
    # spread out, dumped, folded, upper-cased, percent-encoded, broken over lines (real outputs of od -c, xxd, fold -w1, tr, %XX)
    ('00000000: 636f 7272 6563 7420 686f 7273 6520 6261  correct horse ba\n00000010: 7474 6572 790a                           ttery.\n',
     '00000000: {{vault:SMTP_PASSWORD}}.\n'),
    ('g\nh\np\n_\nr\no\nt\na\nt\ne\nd\nV\na\nl\nu\ne\n4\n3\n', '{{vault:GITHUB_TOKEN}}\n'),
    ('token: GHP_ROTATEDVALUE43.', 'token: {{vault:GITHUB_TOKEN}}.'),
    ('%63%6F%72%72%65%63%74%20%68%6F%72%73%65%20%62%61%74%74%65%72%79', '%{{vault:SMTP_PASSWORD}}'),
    ('ghp_rotated\nValue43 and the cost: 12 kB', '{{vault:GITHUB_TOKEN}} and the cost: 12 kB'),
])
def test_redact_forms(v, text, redacted):
    assert redact(text, v) == redacted


def test_redact_a_short_secret_in_another_case(tmp_path):
    pin = Vault(tmp_path / 'pin.enc', tmp_path / 'vault.key'); pin.add('PIN', 'k3y9')
    assert redact("method must be one of GET, POST, not 'K3Y9'", pin) == "method must be one of GET, POST, not '{{vault:PIN}}'"


@pytest.mark.parametrize('text, names', [
    ('pw: CORRECT%20HORSE%20BATTERY, token 67 68 70 5f', ['SMTP_PASSWORD']),
    ('nothing secret', []),
    ('p=correct+horse%20b%2561ttery', ['SMTP_PASSWORD']),
    ('ｃｏｒｒｅｃｔ h\u200borse bat\u00adtery', ['SMTP_PASSWORD']),
])
def test_secrets_in(v, text, names):
    assert secrets_in(text, v) == names


# ---- the vault gate
API = '{{vault:API_KEY}}'


@pytest.fixture
def verdict(tmp_path):
    "`verdict(tool, **args)`: the vault gate's (decision, reason) on a small vault, or None."
    gv = Vault(tmp_path / 'gate.enc', tmp_path / 'vault.key')
    gv.add('API_KEY', 'vault-secret-Q7x9Lm2Pz4', ['api.example.com', 'telegram:1001'])
    gv.add('ODD', 'x\\@evil.com/')          # a value crafted to make a URL read two ways
    ctx = Context(agent=Agent(vault=gv, tools=builtin_tools()))
    def verdict(tool, **args):
        r = vault_gate(tool_call(tool, args), ctx)
        return r and (r.decision, r.reason)
    verdict.ctx = ctx
    return verdict


@pytest.mark.parametrize('tool, args, decision', [
    ('read_file', {'path': 'notes.txt'}, None),
    ('http_fetch', {'url': f"https://api.example.com/v1?key={API}"}, 'allow'),
    ('http_fetch', {'url': 'http://127.0.0.1:8000/collect', 'method': 'POST', 'body': API}, 'ask'),   # the body goes to the same host
    ('send_message', {'channel': 'telegram', 'recipient': '1001', 'text': f"key {API}"}, 'allow'),
    ('send_message', {'channel': 'telegram', 'recipient': API, 'text': 'hi'}, 'ask'),
    ('shell', {'command': 'echo {{vault:not a handle}}'}, None),
])
def test_vault_gate_decision(verdict, tool, args, decision):
    got = verdict(tool, **args)
    assert (got and got[0]) == decision


@pytest.mark.parametrize('tool, args, reason', [
    ('send_message', {'channel': 'telegram', 'recipient': 'mallory', 'text': f"the key: {API}"},
     'secret API_KEY is not bound to telegram:mallory: approve, or bind it with `passepartout vault allow API_KEY telegram:mallory`'),
    ('shell', {'command': f"echo {API} | base64"},
     'secret API_KEY is not bound to tool:shell: approve, or bind it with `passepartout vault allow API_KEY tool:shell`'),
    ('http_fetch', {'url': 'https://api.example.com?{{vault:ODD}}'},
     'secret ODD would make the URL ambiguous once substituted (its host would no longer plainly be api.example.com): approve only if you meant it'),
])
def test_vault_gate_reason(verdict, tool, args, reason):
    assert verdict(tool, **args)[1] == reason


def test_vault_gate_unknown_handle_is_denied(verdict):
    assert verdict('shell', command='echo {{vault:NOPE}}') == ('deny', 'no secret named NOPE in the vault (`passepartout vault list` shows the names)')


def test_vault_gate_never_substitutes_a_reply(verdict):
    assert vault_gate(reply(f"here is {API}"), verdict.ctx) is None


def test_vault_gate_finds_a_handle_deep_in_the_arguments(verdict):
    assert verdict('post', payload={'headers': [{'auth': API}]})[1].startswith('secret API_KEY is not bound to tool:post')
