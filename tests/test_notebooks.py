"""Run every notebook's lessons as one pytest item each (the same runner as `nbdev-test`)."""
import os
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for p in (ROOT / 'nbs').rglob('*.md') if not p.name.startswith('_') and '.ipynb_checkpoints' not in p.parts)


def test_notebooks_were_built():
    "A clone holds only the Markdown notebooks: tools/build.sh must have generated every .ipynb."
    assert SOURCES, "no notebooks under nbs/"
    missing = [str(p) for p in SOURCES if not p.with_suffix('.ipynb').exists()]
    assert not missing, f"run tools/build.sh first; not built: {missing}"


@pytest.mark.parametrize('source', SOURCES, ids=lambda p: str(p.relative_to(ROOT / 'nbs')))
def test_notebook(source, monkeypatch, tmp_path):
    from nbdev.test import test_nb
    monkeypatch.chdir(source.parent)
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    ok, _ = test_nb(source.with_suffix('.ipynb'), basepath=ROOT)
    assert ok, f"lessons failed in {source.name} (traceback above)"
