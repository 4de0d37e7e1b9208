"""How long another thread waits for the interpreter while one call holds it: one thread runs the call, another
does trivial work every millisecond and records its longest wait. The figures are that longest wait per run,
median and quartiles over `--repeat` runs, against the target (<= 1000 ms).

- `search_files` (nbs/30_builtin_tools.md) with patterns built for catastrophic backtracking (Python's own
  engine made another thread wait 3.6 s on three short lines); tests/test_file_races.py checks the answers and
  that the patterns go to RE2;
- `shell_verdict` (nbs/21_shell_gate.md) on commands whose parse is quadratic in tree-sitter's error recovery
  (a full parse takes about 20 s); tests/test_shell_adversarial.py checks that the parse is cut short.

    python bench/stall.py [--repeat 5]
"""
import argparse, os, sys, tempfile, threading, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import show

SEARCHES = {'search, 3 lines of 25 chars': (25, [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$']),
            'search, 150 lines of 9000 chars': (9000, [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$', r'(.*a){20}$', r'^(([a-z])+.)+[A-Z]([a-z])+$'])}
COMMANDS = {'a=(': 'a=(' * 20_000, '$[': '$[' * 30_000, 'x=( $[': 'x=(' * 10_000 + ' $[' * 10_000}


def longest_wait_ms(call) -> float:
    "The longest a 1 ms ticker thread waited while another thread ran `call()`."
    stop, longest = threading.Event(), [0.0]
    def run():
        try: call()
        finally: stop.set()
    def trivial():
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.001); now = time.monotonic(); longest[0] = max(longest[0], now - last); last = now
    threads = [threading.Thread(target=run), threading.Thread(target=trivial)]
    for t in threads: t.start()
    for t in threads: t.join()
    return longest[0] * 1000


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=5)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    from passepartout.builtin_tools import search_files
    from passepartout.shell_gate import shell_verdict
    from passepartout.signals import Context
    for label, (n, patterns) in SEARCHES.items():
        ws = Path(tempfile.mkdtemp(prefix='pp-ws-'))
        (ws / 'bait.txt').write_text(('a' * n + '!\n' + 'x' * n + '\n' + 'b' * (n + 9) + '!\n') * (1 if n < 100 else 50))
        ctx = Context(agent=SimpleNamespace(workspace=ws))
        waits = [longest_wait_ms(lambda: [search_files(p, ctx=ctx) for p in patterns]) for _ in range(a.repeat)]
        print(show(label, waits, 'ms', target=1000))
    ws = Path(tempfile.mkdtemp(prefix='pp-ws-'))
    shell_verdict('ls', ws)                                   # build the parser outside the measurement
    for label, command in COMMANDS.items():
        print(show(f"shell gate, {label} x 10,000+", [longest_wait_ms(lambda: shell_verdict(command, ws)) for _ in range(a.repeat)], 'ms', target=1000))
