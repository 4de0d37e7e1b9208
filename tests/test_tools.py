"""The contributor's tools: the commit-msg hook (CONTRIBUTING.md, "Commits") and the build's refusal to let
a generated .ipynb overwrite its Markdown source (tools/md_is_source.py, run by tools/build.sh)."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / 'tools' / 'hooks' / 'commit-msg'


@pytest.mark.parametrize('message, ok', [
    ('Docs: search over an offline index\n\n- tools/docs.py writes search.json\n', True),
    ('Merge branch docs\n', True),
    ('Docs: search over an offline index\n', False),                       # no body
    ('Docs: search\n- no blank line before the body\n', False),
    ('x' * 73 + '\n\n- body\n', False),                                     # subject over 72 characters
    ('x' * 72 + '\n\n- body\n', True),
    ('\n\n- a body without a subject\n', False),
])
def test_commit_msg_hook(tmp_path, message, ok):
    (tmp_path / 'MSG').write_text(message)
    run = subprocess.run(['bash', str(HOOK), str(tmp_path / 'MSG')], capture_output=True, text=True)
    assert (run.returncode == 0) == ok, (message, run.stderr)
    if not ok: assert 'commit-msg:' in run.stderr and 'CONTRIBUTING.md' in run.stderr


def test_the_hook_runs_as_a_git_hook(tmp_path):
    "Enabled the way CONTRIBUTING.md says (core.hooksPath), git itself refuses a subject-only commit."
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@t', GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@t')
    git = lambda *a: subprocess.run(['git', '-C', str(tmp_path), *a], capture_output=True, text=True, env=env)
    git('init', '-q'); (tmp_path / 'tools').mkdir(); shutil.copytree(HOOK.parent, tmp_path / 'tools' / 'hooks')
    git('config', 'core.hooksPath', 'tools/hooks')
    refused = git('commit', '-q', '--allow-empty', '-m', 'Only a subject')
    assert refused.returncode != 0 and 'no body' in refused.stderr, refused
    assert git('commit', '-q', '--allow-empty', '-m', 'A subject', '-m', '- a body').returncode == 0


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


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='module')
def lab():
    "JupyterLab started with tools/lab.sh's settings (tools/jupyterlab/overrides.json), on a loopback port."
    import time, urllib.request
    if not shutil.which('jupyter-lab'): pytest.skip("JupyterLab is not installed (pip install -e '.[dev]')")
    port, token = _free_port(), 'passepartout-test'
    args = ['jupyter-lab', '--no-browser', f'--port={port}', '--ServerApp.ip=127.0.0.1', f'--ServerApp.token={token}',
            f'--LabApp.app_settings_dir={ROOT / "tools" / "jupyterlab"}', f'--ServerApp.root_dir={ROOT}']
    if os.geteuid() == 0: args.append('--allow-root')
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    get = lambda path: json.load(urllib.request.urlopen(f'{url}{path}{"&" if "?" in path else "?"}token={token}', timeout=30))
    try:
        for _ in range(120):
            try: get('/api/status'); break
            except OSError: time.sleep(0.5)
        else: pytest.fail('JupyterLab did not start within 60 s')
        yield get
    finally:
        server.terminate(); server.wait(timeout=30)


def test_jupyterlab_opens_markdown_as_a_notebook_and_starts_the_kernel(lab):
    "The two settings tools/lab.sh gives JupyterLab are ones it knows, with the values wanted."
    viewers = lab('/lab/api/settings/@jupyterlab/docmanager-extension:plugin')['schema']['properties']['defaultViewers']
    assert viewers['default'].get('markdown') == 'Jupytext Notebook', viewers
    tracker = lab('/lab/api/settings/@jupyterlab/notebook-extension:tracker')['schema']['properties']
    assert tracker['autoStartDefaultKernel']['default'] is True


def test_jupyterlab_reads_a_markdown_notebook_with_its_kernel(lab):
    "jupytext serves nbs/*.md as a notebook; the built pair gives it a kernelspec, so no kernel must be picked."
    if not (ROOT / 'nbs' / '02_signals.ipynb').exists(): pytest.skip('notebooks not built (tools/build.sh)')
    model = lab('/api/contents/nbs/02_signals.md?type=notebook&content=1')
    assert model['type'] == 'notebook' and len(model['content']['cells']) > 5
    assert model['content']['metadata']['kernelspec']['name'] == 'python3', model['content']['metadata']
