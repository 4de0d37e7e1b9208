"""The table behind a lesson of `nbs/30_builtin_tools.md`: where `confine` walks a path, and what it refuses.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import os, tempfile
from pathlib import Path
import pytest
from passepartout.builtin_tools import confine


@pytest.fixture(scope='module')
def ws():
    ws = Path(os.path.realpath(tempfile.mkdtemp()))
    (ws / 'docs').mkdir(); (ws / 'docs' / 'a.txt').write_text('alpha\n')
    os.symlink('/etc', ws / 'etc-link'); os.symlink('docs', ws / 'manual'); os.symlink(ws / 'docs' / 'a.txt', ws / 'abs-link')
    return ws


@pytest.mark.parametrize('path, where', [
    ('docs/../docs/a.txt', 'docs/a.txt'),
    ('manual/a.txt', 'docs/a.txt'),      # a link inside: its target, walked
    ('abs-link', 'docs/a.txt'),          # an absolute one inside, too
    ('{ws}/new.txt', 'new.txt'),
])
def test_confine_inside(ws, path, where):
    assert confine(path.format(ws=ws), ws) == ws / where


@pytest.mark.parametrize('path, says', [
    ('../x', 'outside the workspace'),
    ('manual/../../x', 'outside the workspace'),
    ('gone/../../x', 'outside the workspace'),
    ('etc-link/passwd', 'resolves to /etc/passwd'),
    ('~/.bashrc', 'outside the workspace'),
    ('.ssh/id_rsa', "inside '.ssh'"),
])
def test_confine_refuses(ws, path, says):
    with pytest.raises(PermissionError, match=None) as e: confine(path, ws)
    assert says in str(e.value)
