"""What the vault gate (`vault_gate`, nbs/22_vault.md) costs on a tool call without a handle, the case of
nearly every action: CPU microseconds per call (`time.process_time` around 20,000 calls, divided), median and
quartiles over `--repeat` runs, against the target (<= 2 µs). The notebook checks that this path never reads
the vault.

    python bench/vault_gate.py [--repeat 7]
"""
import argparse, os, sys, tempfile
from types import SimpleNamespace
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import cpu_per_turn, show

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=7)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    from passepartout.signals import Context, tool_call
    from passepartout.vault import vault_gate
    ctx, n = Context(agent=SimpleNamespace(vault=None)), 20_000
    for label, action in (('write_file, 560 characters', tool_call('write_file', {'path': 'notes/today.md', 'content': 'a day of work ' * 40})),
                          ('http_fetch, a URL', tool_call('http_fetch', {'url': 'https://api.example.com/v1/items?page=2'}))):
        runs = [us / n for us in cpu_per_turn(lambda: [vault_gate(action, ctx) for _ in range(n)], a.repeat)]
        print(show(f"vault_gate, no handle: {label}", runs, target=2))
