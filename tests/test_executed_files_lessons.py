"""The table behind a lesson of `nbs/32a_executed_files.md`: what `_named` finds a command runs.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.executed_files import _named


@pytest.mark.parametrize('argv, expected', [
    (['bash', '-e', 'build.sh', 'x'], ([('build.sh', 'shell')], False, ['/w'])),
    (['python3', '-m', 'pkg.tool'], ([('pkg.tool', 'module')], False, ['/w'])),
    (['bash', '-xc', 'echo'], ([], True, ['/w'])),
    (['make', '-C', 'sub', '-f', 'rules.mk'], ([('rules.mk', 'make')], False, ['/w', '/w/sub'])),
    (['./run.sh'], ([('./run.sh', 'exec')], False, ['/w'])),
    (['ls'], None),
    (['make', '-fother.mk'], ([('other.mk', 'make')], False, ['/w'])),
    (['python', '-mpkg'], ([('pkg', 'module')], False, ['/w'])),
], ids=lambda v: ' '.join(v) if isinstance(v, list) and all(isinstance(w, str) for w in v) else None)
def test_named(argv, expected):
    assert _named(argv, ['/w']) == expected
