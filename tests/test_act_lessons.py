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
