"""The tables behind the lessons of `nbs/20g_network_gates.md`: URL verdicts, secret-looking values, vault values in their forms.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.network_gates import network_allowlist, secrets_gate, url_verdict
from passepartout.signals import Context, reply, tool_call
from passepartout.vault import Vault
from passepartout.loop import Agent

ALLOW_LIST = network_allowlist('docs.python.org, *.example.org, bücher.de')


def test_the_allowlist_is_idna_encoded():
    assert ALLOW_LIST == ('docs.python.org', '*.example.org', 'xn--bcher-kva.de')


@pytest.mark.parametrize('url, decision', [
    ('https://docs.python.org/3/', 'allow'),
    ('HTTPS://api.example.org/x', 'allow'),
    ('https://example.org/', 'ask'),          # *.x matches subdomains only
    ('https://evil.com/?u=docs.python.org', 'ask'),
    ('https://bücher.de/', 'allow'),
    ('http://127.0.0.1:8000/', 'ask'),
    *((bad, 'deny') for bad in ['file:///etc/passwd', 'FILE:///etc/passwd', 'gopher://x/', 'https://user:pw@docs.python.org/',
        'http://docs.python.org@evil.com/', 'http://169.254.169.254/latest/meta-data/', 'http://[fe80::1]/',
        'http://2852039166/', 'http://0xA9FEA9FE/', 'http://169.254.43518/', 'http://[::ffff:169.254.169.254]/',
        'http://metadata.google.internal/', 'http://evil.com\\@docs.python.org/', 'https:///x', 'http://a b/', 42]),
])
def test_url_verdict(url, decision):
    assert url_verdict(url, ALLOW_LIST).decision == decision


def test_a_look_alike_host_is_shown_as_dns_sees_it():
    assert 'really xn--' in url_verdict('https://ехаmple.org/', ALLOW_LIST).reason   # Cyrillic look-alike


@pytest.mark.parametrize('leak', ['AKIAIOSFODNN7EXAMPLE', 'sk-proj-abcdefghij0123456789xyz', 'ghp_' + 'a1' * 18,
                                  '-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...', 'xoxb-1234567890-abcdef'])
def test_secret_looking_values_are_refused(leak):
    assert secrets_gate(tool_call('send_message', {'channel': 'c', 'recipient': 'r', 'text': f"here: {leak}"}), Context()).decision == 'deny'


@pytest.mark.parametrize('action, decision', [
    (reply('my key is sk-ant-api03-abcdefghijklmnop1234'), 'deny'),
    (tool_call('write_file', {'path': 'desk-organisation-plan-long-name.md', 'content': 'skeleton'}), None),
    (tool_call('http_fetch', {'url': 'https://x/?key={{vault:API}}'}), None),
])
def test_secrets_gate(action, decision):
    v = secrets_gate(action, Context())
    assert (v and v.decision) == decision


@pytest.fixture
def vault_ctx(tmp_path):
    vault = Vault(tmp_path / 'v.enc', tmp_path / 'v.key'); vault.add('DB_PASSWORD', 'plum-Tango-4417')
    return Context(agent=Agent(vault=vault))


@pytest.mark.parametrize('carried', ['plum-Tango-4417', 'cGx1bS1UYW5nby00NDE3', '706c756d2d54616e676f2d34343137', 'plum%2DTango%2D4417',
                                     '&#112;lum-Tango-4417', '7144-ognaT-mulp'])
def test_a_vault_value_is_refused_in_every_form(vault_ctx, carried):
    assert secrets_gate(tool_call('http_fetch', {'url': f'https://example.org/?q={carried}'}), vault_ctx).decision == 'deny'


def test_a_vault_handle_passes_and_the_value_in_a_reply_is_named(vault_ctx):
    assert secrets_gate(tool_call('http_fetch', {'url': 'https://example.org/?q={{vault:DB_PASSWORD}}'}), vault_ctx) is None
    assert secrets_gate(reply('the password is PLUM-TANGO-4417'), vault_ctx).reason == (
        "the reply holds the value of secret DB_PASSWORD: never write a secret's value, write its handle ({{vault:DB_PASSWORD}}), "
        "which is replaced by the value only where the secret is bound")
