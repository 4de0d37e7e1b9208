"Redacting only what a tool's output keeps (nbs/07_act.md `kept_text`): the same kept text as redacting everything, wherever the cut falls."
import base64, subprocess
import pytest
from passepartout.act import kept_text, format_result, secret_reach
from passepartout.vault import Vault, redact

SECRET, LONG = 'hunter2-Q7x9Lm2Pz4', 'L' * 10 + '-long-secret-value-' + 'Z' * 30   # 59: a longer one breaks the vault's pattern builder (RecursionError at 64)


@pytest.fixture(scope='module')
def vault(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('v')
    v = Vault(tmp / 'vault.enc', tmp / 'vault.key')
    v.add('PW', SECRET); v.add('BIG', LONG)
    return v


def od_c(text):
    return subprocess.run(['od', '-c'], input=text.encode(), capture_output=True).stdout.decode()

def xxd(text):
    return subprocess.run(['xxd'], input=text.encode(), capture_output=True).stdout.decode()

FORMS = {
    'as is': lambda s: s,
    'upper': str.upper,
    'hex': lambda s: s.encode().hex(),
    'base64': lambda s: base64.b64encode(s.encode()).decode(),
    'fold -w1': lambda s: '\n'.join(s),
    'od -c': od_c,
    'xxd': xxd,
}


@pytest.mark.parametrize('form', FORMS)
def test_a_secret_across_the_cut_is_redacted_whole(vault, form):
    shown = FORMS[form](SECRET)
    limit = 300
    for at in range(limit - len(shown) - 2, limit + 2):
        text = 'a' * at + '\n' + shown + '\nb' * 20000
        kept = kept_text(text, limit, vault)
        whole = format_result(redact(text, vault), limit)
        assert kept[:limit] == whole[:limit], (form, at)
        assert kept.startswith(whole[:limit] + '\n[... cut: ')
        assert 'hunter2' not in kept.lower() and (form in ('od -c', 'xxd') or shown[:6] not in kept)   # a dump shows its offsets


def test_redaction_that_shortens_the_window_reads_on(vault):
    text = (LONG + ' ') * 1000 + SECRET + ' tail' * 10000                 # each 59-character secret becomes a 13-character handle
    kept = kept_text(text, 2000, vault)
    assert kept[:2000] == format_result(redact(text, vault), 2000)[:2000]
    assert LONG[:30] not in kept and '{{vault:BIG}}' in kept


def test_short_and_whole_outputs_and_an_empty_vault(vault, tmp_path):
    assert kept_text('short ' + SECRET, 300, vault) == 'short {{vault:PW}}'
    assert kept_text({'pw': SECRET}, 300, vault) == '{"pw": "{{vault:PW}}"}'
    empty = Vault(tmp_path / 'none.enc', tmp_path / 'none.key')
    assert secret_reach(empty) == 0 and kept_text('x' * 500, 300, empty) == format_result('x' * 500, 300)
    assert secret_reach(vault) >= 16 * len(LONG)


def test_not_ascii(vault):
    text = 'é' * 295 + SECRET + 'ü' * 5000
    assert kept_text(text, 300, vault)[:300] == format_result(redact(text, vault), 300)[:300]
