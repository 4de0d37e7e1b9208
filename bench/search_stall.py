"""How long another thread waits for the interpreter while `search_files` (nbs/30_builtin_tools.md) runs
patterns built for catastrophic backtracking: one thread searches, another does trivial work every
millisecond and records its longest wait. The figures are that longest wait per run, median and quartiles
over `--repeat` runs, against the target (<= 1000 ms; Python's own engine made it 3.6 s on three short lines).
tests/test_file_races.py checks the answers and that the patterns go to RE2.

    python bench/search_stall.py [--repeat 5]
"""
import argparse, os, sys, tempfile, threading, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import show

CASES = {'stall, 3 lines of 25 chars': (25, [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$']),
         'stall, 150 lines of 9000 chars': (9000, [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$', r'(.*a){20}$', r'^(([a-z])+.)+[A-Z]([a-z])+$'])}


def longest_wait_ms(ws:Path, patterns:list) -> float:
    "The longest a 1 ms ticker thread waited while another thread ran `search_files` with each of `patterns`."
    from passepartout.builtin_tools import search_files
    from passepartout.signals import Context
    ctx, stop, longest = Context(agent=SimpleNamespace(workspace=ws)), threading.Event(), [0.0]
    def search():
        for pattern in patterns: search_files(pattern, ctx=ctx)
        stop.set()
    def trivial():
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.001); now = time.monotonic(); longest[0] = max(longest[0], now - last); last = now
    threads = [threading.Thread(target=search), threading.Thread(target=trivial)]
    for t in threads: t.start()
    for t in threads: t.join()
    return longest[0] * 1000


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=5)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    for label, (n, patterns) in CASES.items():
        ws = Path(tempfile.mkdtemp(prefix='pp-ws-'))
        (ws / 'bait.txt').write_text(('a' * n + '!\n' + 'x' * n + '\n' + 'b' * (n + 9) + '!\n') * (1 if n < 100 else 50))
        print(show(label, [longest_wait_ms(ws, patterns) for _ in range(a.repeat)], 'ms', target=1000))
