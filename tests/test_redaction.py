"""Redaction at scale: correct on a megabyte of tool output, linear on adversarial shapes (counted in steps),
and ordinary output left alone (no false positives) while the spread-out forms are caught.

'before' is the previous algorithm, kept here as the reference: the exact forms only, one trie regex
(`exact.sub`), which is what `redact` did before the squeezed views. 'after' is `redact` today.
What they cost in time is measured by `python bench/redaction.py`, not here (machines are shared and noisy).
"""
import glob, os, random, re, string, subprocess, sys
from pathlib import Path

import pytest

from passepartout.vault import Vault, redact

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.delenv('PASSEPARTOUT_VAULT_KEY_FILE', raising=False)
    return tmp_path / 'home'


def _random_secret(rng, n):
    return ''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def ordinary(size=1_000_000) -> str:
    "`size` characters of ordinary text: this repository's notebooks and sources, repeated."
    corpus = ''.join(Path(p).read_text() for p in sorted(glob.glob(str(ROOT / 'nbs/*.md')) + glob.glob(str(ROOT / 'passepartout/*.py'))))
    return (corpus * (1 + size // len(corpus)))[:size]


def steps(f) -> int:
    """The lines of passepartout/vault.py that `f()` executes: a count of the work done in Python that does not
    depend on the machine's load, so a complexity bound on it cannot flake (time is in bench/redaction.py)."""
    from passepartout import vault
    count, source = [0], vault.__file__
    def line(frame, event, arg):
        if event == 'line': count[0] += 1
        return line
    previous = sys.gettrace()                 # a coverage or debugger tracer, put back after
    sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename == source else None)
    try: f()
    finally: sys.settrace(previous)
    return count[0]


def exact_only(v):
    "The previous redaction: exact forms, one trie (over the text's bytes, ASCII case folded)."
    from passepartout.vault import _char_spans, _replace
    exact, by_form = v._redactor()[:2]
    def run(text):
        data = text.encode('utf-8', 'surrogatepass')
        spans = [(m.start(), m.end(), by_form[m.group()]) for m in exact.finditer(data.lower())]
        return _replace(text, _char_spans(text, data, spans)) if spans else text
    return run


def test_one_megabyte_before_and_after(home):
    "1 MB of ordinary text, of an xxd dump, and of text holding the secret spread out once, with 3 secrets (figures: bench/redaction.py)."
    rng = random.Random(1)
    v = Vault()
    for i in range(3): v.add(f"K{i}", _random_secret(rng, 30))
    text = ordinary()
    dump = subprocess.run(['xxd'], input=text.encode()[:250_000], capture_output=True).stdout.decode()
    spread = text[:500_000] + ' '.join(v.get('K1')) + text[500_000:]
    before = exact_only(v)
    assert redact(text, v) == before(text) == text
    assert redact(spread, v) == text[:500_000] + '{{vault:K1}}' + text[500_000:] and before(spread) == spread
    assert redact(dump, v) == before(dump) == dump


@pytest.mark.parametrize('shape', ['offsets', 'hex groups', 'single characters', 'newlines', 'dump lines', 'one long line'])
def test_adversarial_shapes_stay_linear(home, shape):
    "Shapes that exercise the offset, dump-line and mapping code: 4 times the size takes at most 4 times the steps (plus a constant)."
    v = Vault(); v.add('K', 'vault-secret-Q7x9Lm2Pz4')
    unit = {'offsets': '0000000 ', 'hex groups': 'ab12 ', 'single characters': 'v a ', 'newlines': '\n',
            'dump lines': '00000000: 6162 6364 6566 6768  abcdefgh\n', 'one long line': 'x' * 64}[shape]
    small, large = unit * (125_000 // len(unit)), unit * (500_000 // len(unit))
    assert redact(small, v) == small and redact(large, v) == large     # also builds the patterns, which are not counted
    n_small, n_large = steps(lambda: redact(small, v)), steps(lambda: redact(large, v))
    assert n_large <= 4.4 * n_small + 100, (n_small, n_large)          # quadratic would be 16 times


def test_many_hits_are_mapped_in_one_pass(home):
    "A secret spread out a thousand times in a megabyte: every one redacted, in steps linear in the hits."
    v = Vault(); s = 'vault-secret-Q7x9Lm2Pz4'; v.add('K', s)
    filler = ordinary(1000)
    text, quarter = (''.join(filler + ' '.join(s) for _ in range(k)) for k in (1000, 250))
    assert redact(text, v) == ''.join(filler + '{{vault:K}}' for _ in range(1000))
    n_quarter, n_all = steps(lambda: redact(quarter, v)), steps(lambda: redact(text, v))
    assert n_all <= 4.4 * n_quarter + 100, (n_quarter, n_all)           # quadratic would be 16 times


@pytest.mark.parametrize('length', [4, 6, 8, 12, 30])
def test_no_false_positives_on_ordinary_output(home, length):
    """100 random secrets of each length: the squeezed views add nothing to what the exact forms already redact in a
    megabyte of sources and prose, an xxd dump of random bytes and `git log` (a 4-character secret's exact forms do
    occur by chance there: that is why shorter ones are refused, and why a squeezed match needs 40 bits)."""
    rng = random.Random(length)
    texts = {'sources': ordinary(),
             'xxd of random bytes': subprocess.run(['xxd'], input=rng.randbytes(200_000), capture_output=True).stdout.decode(),
             'git log': subprocess.run(['git', '-C', str(ROOT), 'log', '--stat', '-n', '500'], capture_output=True, text=True).stdout}
    v = Vault()
    changed = []
    for k in range(100 if length < 30 else 20):
        v.add('K', _random_secret(rng, length))
        changed += [(name, v.get('K')) for name, t in texts.items() if redact(t, v) != exact_only(v)(t)]
    assert changed == []


def test_short_secret_is_redacted_exactly_but_not_spread(home):
    "A squeezed form below 40 bits (8 letters or digits, 10 hex digits) would be met by chance: exact forms only, in any case."
    v = Vault(); v.add('PIN', 'k3y9')
    assert redact('the key k3y9, K3Y9 and K3y9?', v) == 'the key {{vault:PIN}}, {{vault:PIN}} and {{vault:PIN}}?'
    assert redact('k 3 y 9', v) == 'k 3 y 9' and redact(' 6b 33 79 39\n', v) == ' 6b 33 79 39\n'   # 32 bits: met by chance
    v.add('PIN', 'k3y9z')
    assert redact(' 6b 33 79 39 7a\n', v) == ' {{vault:PIN}}\n'           # od -An -tx1 of 5 bytes: 10 hex digits, 40 bits


@pytest.mark.parametrize('length', [10, 16, 30])
def test_the_secrets_gate_finds_values_and_no_false_ones(home, length):
    """`secrets_in` (what the secrets gate refuses) finds a random secret in every case and encoding inside ordinary text,
    also percent- or HTML-encoded in part, and finds none in a megabyte of sources and prose or in `git log`."""
    import base64, html, urllib.parse
    from passepartout.vault import secrets_in
    rng = random.Random(length)
    texts = {'sources': ordinary(), 'git log': subprocess.run(['git', '-C', str(ROOT), 'log', '--stat', '-n', '500'], capture_output=True, text=True).stdout}
    v = Vault()
    for k in range(10):
        s = _random_secret(rng, length); v.add('K', s); b = s.encode()
        assert [(name, s) for name, t in texts.items() if secrets_in(t, v)] == []
        for shown in (s, s.upper(), s.swapcase(), s[::-1], base64.b64encode(b'x' + b).decode(), base64.b32encode(b).decode(), b.hex(),
                      ''.join(f'%{c:02x}' for c in b), urllib.parse.quote(urllib.parse.quote(s[:3]) + s[3:]),
                      ''.join(html.escape(f'&#{ord(c)};') if i % 3 == 0 else c for i, c in enumerate(s)), ' '.join(s)):
            text = texts['sources'][:2000] + shown + texts['git log'][:2000]
            assert secrets_in(text, v) == ['K'], (s, shown)
