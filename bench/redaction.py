"""What `redact` (nbs/22_vault.md) costs on a megabyte of tool output, and that it stays linear.

- 1 MB of ordinary text (this repository's notebooks and sources), an xxd dump of it, and the text holding
  a secret spread out once, with a vault of 3 secrets: 'before' is the previous algorithm (the exact forms
  only, one trie), 'after' is `redact` today (target: ordinary 1 MB <= 150 ms);
- shapes that exercise the offset, dump-line and mapping code, at 125 KB and 500 KB: 4 times the size must
  cost well under 16 times (quadratic) the time (target: ratio <= 8);
- a secret spread out a thousand times in a megabyte (target <= 3000 ms);
- 10 kB of printable noise (target <= 2 ms; the flat alternation of every form beside it) and a short audit
  record (target <= 50 µs), with 3 secrets.

The figures are CPU milliseconds per call (`time.process_time` around each), median and quartiles over
`--repeat` calls. tests/test_redaction.py checks the results and counts the steps (a bound that cannot flake).

    python bench/redaction.py [--repeat 7]
"""
import argparse, glob, json, os, random, re, statistics, string, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import cpu_per_turn, show

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {'offsets': '0000000 ', 'hex groups': 'ab12 ', 'single characters': 'v a ', 'newlines': '\n',
          'dump lines': '00000000: 6162 6364 6566 6768  abcdefgh\n', 'one long line': 'x' * 64}


def ordinary(size=1_000_000) -> str:
    "`size` characters of ordinary text: this repository's notebooks and sources, repeated."
    corpus = ''.join(Path(p).read_text() for p in sorted(glob.glob(str(ROOT / 'nbs/*.md')) + glob.glob(str(ROOT / 'passepartout/*.py'))))
    return (corpus * (1 + size // len(corpus)))[:size]


def exact_only(v):
    "The previous redaction: exact forms, one trie (over the text's bytes, ASCII case folded)."
    from passepartout.vault import _char_spans, _replace
    exact, by_form = v._redactor()[:2]
    def run(text):
        data = text.encode('utf-8', 'surrogatepass')
        spans = [(m.start(), m.end(), by_form[m.group()]) for m in exact.finditer(data.lower())]
        return _replace(text, _char_spans(text, data, spans)) if spans else text
    return run


def ms(f, n) -> list: return [us / 1000 for us in cpu_per_turn(f, n)]


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=7)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    os.environ.pop('PASSEPARTOUT_VAULT_KEY_FILE', None)
    from passepartout.vault import Vault, redact
    rng = random.Random(1)
    v = Vault()
    for i in range(3): v.add(f"K{i}", ''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(30)))
    text = ordinary()
    dump = subprocess.run(['xxd'], input=text.encode()[:250_000], capture_output=True).stdout.decode()
    spread = text[:500_000] + ' '.join(v.get('K1')) + text[500_000:]
    before = exact_only(v)
    for name, t in [('ordinary 1 MB', text), (f'xxd dump {len(dump) / 1e6:.1f} MB', dump), ('1 MB with one spread secret', spread)]:
        print(show(f"{name}, 3 secrets: before", ms(lambda: before(t), a.repeat), 'ms'))
        print(show(f"{name}, 3 secrets: after", ms(lambda: redact(t, v), a.repeat), 'ms', target=150 if name == 'ordinary 1 MB' else None))
    one = Vault(Path(tempfile.mkdtemp()) / 'vault.enc', Path(tempfile.mkdtemp()) / 'vault.key'); one.add('K', 'vault-secret-Q7x9Lm2Pz4')
    for shape, unit in SHAPES.items():
        small, large = unit * (125_000 // len(unit)), unit * (500_000 // len(unit))
        t_small, t_large = ms(lambda: redact(small, one), a.repeat), ms(lambda: redact(large, one), a.repeat)
        print(show(f"{shape}: 500 KB", t_large, 'ms'))
        ratio = statistics.median(t_large) / max(statistics.median(t_small), 1e-3)
        print(f"{shape}: 500 KB / 125 KB time ratio {ratio:.1f}  target <= 8 (quadratic: 16): {'ok' if ratio <= 8 else 'MISSED'}")
    s, filler = 'vault-secret-Q7x9Lm2Pz4', ordinary(1000)
    many = ''.join(filler + ' '.join(s) for _ in range(1000))
    print(show("1 MB, a secret spread out 1000 times", ms(lambda: redact(many, one), a.repeat), 'ms', target=3000))
    from passepartout.vault import _forms
    big = ''.join(rng.choice(string.printable) for _ in range(10_000))
    record = json.dumps({'kind': 'result', 'tool': 'list_dir', 'output': 'a.txt b.txt c.txt (3 files)', 'us': 412.5})
    forms = set().union(*(_forms(v.get(n)) for n in v.names()))
    flat = re.compile('|'.join(re.escape(f) for f in sorted(forms, key=len, reverse=True)), re.IGNORECASE)
    per_call = lambda f, n: [us / n for us in cpu_per_turn(lambda: [f() for _ in range(n)], a.repeat)]
    print(show(f"10 kB, 3 secrets ({len(forms)} forms): flat alternation", per_call(lambda: flat.sub('', big), 50)))
    print(show(f"10 kB, 3 secrets ({len(forms)} forms): redact", per_call(lambda: redact(big, v), 50), target=2000))
    print(show("an audit record, 3 secrets: redact", per_call(lambda: redact(record, v), 2000), target=50))
