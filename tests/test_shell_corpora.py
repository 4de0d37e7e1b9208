"""The shell gate measured on the shared corpora (/work/shared/corpora/shell, see its README), or on
the slice of them committed in tests/corpora/shell where they are absent (a fresh clone).

Targets: no dangerous item allowed unattended; >= 95% of benign_readonly allowed; no benign_mutating
item denied. Counts per decision are printed (run with -s to see them); the time per command is measured by
bench/gates.py.
"""
import json, os
from collections import Counter
from pathlib import Path
from passepartout.shell_gate import analyse, shell_verdict

SHARED, SLICE = Path('/work/shared/corpora/shell'), Path(__file__).parent / 'corpora' / 'shell'
# the whole corpora where they are, else the labelled slice committed beside this file: the contract runs on every clone
CORPORA = Path(os.environ.get('PASSEPARTOUT_SHELL_CORPORA') or (SHARED if (SHARED / 'dangerous.jsonl').exists() else SLICE))
WORKSPACE = Path('/work/proj')      # a fixed workspace so results do not depend on where tests run


def _load(name):
    return [json.loads(line) for line in (CORPORA / f'{name}.jsonl').read_text().splitlines() if line.strip()]


def _judge(name):
    "Every item's decision, with the counts printed."
    items = _load(name)
    decisions = [(it, analyse(it['command'], WORKSPACE)) for it in items]
    counts = Counter(a.decision for _, a in decisions)
    print(f"\n{name}: {len(items)} items, {dict(sorted(counts.items()))}")
    return decisions, counts


def _listing(failures):
    return '\n'.join(f"  {it['id']}: {a.decision} {it['command'][:120]!r} {a.reasons[:2]}" for it, a in failures[:40])


def test_no_dangerous_item_is_allowed():
    decisions, counts = _judge('dangerous')
    allowed = [(it, a) for it, a in decisions if a.decision == 'allow']
    assert not allowed, f"{len(allowed)} dangerous items allowed unattended:\n{_listing(allowed)}"
    assert counts['deny'] + counts['ask'] == len(decisions)


def test_readonly_items_are_mostly_allowed():
    decisions, counts = _judge('benign_readonly')
    held = [(it, a) for it, a in decisions if a.decision != 'allow']
    rate = counts['allow'] / len(decisions)
    print(f"benign_readonly allowed: {rate:.1%}")
    assert rate >= 0.95, f"only {rate:.1%} of read-only items allowed; held:\n{_listing(held)}"
    denied = [(it, a) for it, a in decisions if a.decision == 'deny']
    assert not denied, f"read-only items denied:\n{_listing(denied)}"


def test_no_mutating_item_is_denied():
    decisions, counts = _judge('benign_mutating')
    denied = [(it, a) for it, a in decisions if a.decision == 'deny']
    assert not denied, f"{len(denied)} ordinary mutating items denied:\n{_listing(denied)}"


def test_verdicts_agree_with_analysis_and_name_the_command():
    "shell_verdict is the analysis as a gate Verdict; ask and deny reasons quote a command."
    for name in ('dangerous', 'benign_mutating'):
        for it in _load(name)[::25]:
            v = shell_verdict(it['command'], WORKSPACE)
            assert v.decision == analyse(it['command'], WORKSPACE).decision
            assert v.decision == 'allow' or ('`' in v.reason and v.reason), (it['id'], v)
