"""Redacting a tool's output: what the model keeps (`kept_text`, nbs/07_act.md) against redacting the
whole output before cutting it (what Act did before), for outputs of 100 KB to 4 MB, with a vault of
three secrets. Prints the median CPU time per output (`time.process_time` around each call).

    python bench/redaction_cut.py [--repeat 15]
"""
import argparse, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import cpu_per_turn, show
from passepartout.act import kept_text, format_result
from passepartout.vault import Vault, redact

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=15)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    vault = Vault(tmp / 'vault.enc', tmp / 'vault.key')
    for name, value in (('GITHUB_TOKEN', 'ghp_s3cr3tValue42xyz'), ('SMTP', 'correct horse battery'), ('API', 'sk-live-0123456789abcdef')):
        vault.add(name, value)
    line = '2026-11-24 21:00:01 INFO worker-3 handled request /api/v1/items?page=7 in 12 ms (200)\n'
    for size in (100_000, 1_000_000, 4_000_000):
        text = (line * (size // len(line) + 1))[:size]
        print(show(f"{size // 1000} KB: redact what is kept (20,000 chars)", cpu_per_turn(lambda: kept_text(text, 20000, vault), a.repeat)))
        print(show(f"{size // 1000} KB: redact all, then cut (before)", cpu_per_turn(lambda: format_result(redact(text, vault), 20000), a.repeat)))
