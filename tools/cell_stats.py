#!/usr/bin/env python
"""Lesson rhythm figures per notebook (issue 15): exported cells, their median and longest length, and
example cells that are walls of assertions.

    python tools/cell_stats.py [nbs/NN_x.md ...] [--over 10] [--asserts 5]

A cell is a ```python fence of a Markdown notebook.  An exported cell is one whose `#|` directives
hold `export` or `exports`; its length is its non-blank lines that are not `#|` directives.  An
example cell is any other code cell; an assertion is a line that starts with `assert`, `test_…(` or
`expect_fail(`.  Lists notebooks whose median is over `--over` with `*` and every example cell with
more than `--asserts` assertions (notebook, line, count)."""
import re, statistics, sys
from pathlib import Path

_assertion = re.compile(r'^\s*(assert\b|test_\w+\(|expect_fail\()')

def cells(text):
    "Yield `(first_line_number, lines)` for every ```python fence of a Markdown notebook."
    lines, start = text.splitlines(), None
    for n, line in enumerate(lines, 1):
        if start is None and line.strip() == '```python': start, body = n + 1, []
        elif start is not None and line.strip() == '```': yield start, body; start = None
        elif start is not None: body.append(line)

def is_exported(body):
    "Whether the cell's leading `#|` directives export it."
    for line in body:
        if not line.startswith('#|'): return False
        if re.fullmatch(r'#\|\s*exports?\b.*', line.strip()): return True
    return False

def code_length(body):
    "Non-blank lines that are not `#|` directives."
    return sum(1 for line in body if line.strip() and not line.startswith('#|'))

def stats(path, asserts=5):
    "Exported cell lengths and the example cells with more than `asserts` assertions of one notebook."
    lengths, walls = [], []
    for start, body in cells(Path(path).read_text()):
        if is_exported(body): lengths.append(code_length(body)); continue
        count = sum(1 for line in body if _assertion.match(line))
        if count > asserts: walls.append((start, count))
    return lengths, walls

def main(argv):
    "Print the table; exit 0."
    over, asserts, paths = 10, 5, []
    args = iter(argv)
    for a in args:
        if a == '--over': over = float(next(args))
        elif a == '--asserts': asserts = int(next(args))
        else: paths.append(a)
    paths = paths or sorted(str(p) for p in Path('nbs').rglob('*.md') if not p.name.startswith('_')
                            and p.name != 'index.md' and '.ipynb_checkpoints' not in p.parts)
    every = []
    print(f"{'notebook':32} {'cells':>5} {'median':>6} {'max':>4}")
    for path in paths:
        lengths, walls = stats(path, asserts)
        every += lengths
        if lengths:
            median = statistics.median(lengths)
            print(f"{Path(path).name:32} {len(lengths):5} {median:6.1f} {max(lengths):4}{' *' if median > over else ''}")
        for line, count in walls: print(f"  wall: {path}:{line} has {count} assertions")
    if every: print(f"{'all':32} {len(every):5} {statistics.median(every):6.1f} {max(every):4}")

if __name__ == '__main__': main(sys.argv[1:])
