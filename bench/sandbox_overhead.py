"""What running a command in the sandbox (`run_sandboxed`, nbs/31_sandbox.md) costs: the wall time of
`true`, sandboxed and unconfined (`run_unconfined`, the floor: a plain shell in a process group), median and
quartiles over `--repeat` runs, and the ratio to the target (<= 1000 ms per sandboxed command; it was a
sanity bound in tests/test_sandbox.py, which now checks only results).

    python bench/sandbox_overhead.py [--repeat 15]
"""
import argparse, os, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import show


def wall_ms(f, n:int) -> list:
    "Wall time (ms) of each of `n` calls of `f()`: a command's cost is mostly in other processes, which CPU time of ours misses."
    out = []
    for _ in range(n):
        t0 = time.perf_counter(); f(); out.append((time.perf_counter() - t0) * 1000)
    return out


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=15)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    from passepartout.sandbox import run_sandboxed, run_unconfined, sandbox_available, sandbox_problem
    ws = Path(tempfile.mkdtemp(prefix='pp-ws-'))
    floor = wall_ms(lambda: run_unconfined('true', ws, timeout=20), a.repeat)
    print(show("run_unconfined('true') (the floor)", floor, 'ms'))
    if not sandbox_available(): sys.exit(f"no usable sandbox: {sandbox_problem()}")
    boxed = wall_ms(lambda: run_sandboxed('true', ws, timeout=20), a.repeat)
    print(show("run_sandboxed('true')", boxed, 'ms', target=1000))
    print(f"sandboxed / unconfined: {statistics.median(boxed) / statistics.median(floor):.1f}")
