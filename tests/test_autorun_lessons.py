"""The table behind the lessons of `nbs/20a_autorun.md`: which workspace-relative paths are places that run code on the host.

The notebook keeps a few showing examples; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.autorun import _GIT, _PATH, _PY, autorun_reason


@pytest.mark.parametrize('rel, home, reason', [
    ('.git/config', None, _GIT),
    ('src/lib/.git/hooks/pre-commit', None, _GIT),
    ('.venv/lib/python3.12/site-packages/evil.pth', None, _PY),
    ('bin/build.sh', None, None),   # a project's bin/ is not on the PATH
    ('bin/git', '', _PATH),         # the home's is
    ('u/.local/bin/ls', 'u', _PATH),
    ('src/main.py', None, None), ('README.md', None, None), ('.gitignore', None, None),
    ('git/config', None, None), ('../.git/config', None, None),
])
def test_autorun_reason(rel, home, reason):
    assert autorun_reason(rel, home=home) == reason


def test_a_dotfile_counts_at_any_depth():
    assert autorun_reason('.bashrc') == autorun_reason('dotfiles/.bashrc') is not None
