"""The contributor's tools: the build's refusal to let a generated .ipynb overwrite its Markdown source
(tools/md_is_source.py, run by tools/build.sh)."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


jupytext = pytest.importorskip('jupytext')


def _pair(tmp_path):
    "A copy of one notebook and the repository's jupytext settings, synced the way tools/build.sh does."
    shutil.copy(ROOT / 'pyproject.toml', tmp_path)
    (tmp_path / 'nbs').mkdir()
    md = tmp_path / 'nbs' / '01_errors.md'
    shutil.copy(ROOT / 'nbs' / '01_errors.md', md)
    subprocess.run(['jupytext', '--quiet', '--sync', str(md)], check=True, cwd=tmp_path)
    return md, md.with_suffix('.ipynb')


def _check(tmp_path, md):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / 'md_is_source.py'), str(md)], capture_output=True, text=True, cwd=tmp_path)


def test_a_synced_pair_passes_and_a_newer_diverging_ipynb_is_refused(tmp_path):
    md, ipynb = _pair(tmp_path)
    assert _check(tmp_path, md).returncode == 0   # the .ipynb is newer after a sync, but says the same
    nb = json.loads(ipynb.read_text())
    nb['cells'][0]['source'] = ['# Edited in the notebook\n']
    ipynb.write_text(json.dumps(nb))
    os.utime(ipynb, (md.stat().st_mtime + 5,) * 2)
    run = _check(tmp_path, md)
    assert run.returncode == 1 and 'refusing to sync' in run.stderr and 'jupytext --to md' in run.stderr, run.stderr
    assert '# Edited in the notebook' not in md.read_text()   # nothing was written
    os.utime(md, (ipynb.stat().st_mtime + 5,) * 2)            # the .md edited after: it is the source again
    assert _check(tmp_path, md).returncode == 0
