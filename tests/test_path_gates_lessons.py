"""The tables behind the lessons of `nbs/20d_path_gates.md`: where paths really land, and which the paths gate refuses.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import os
import pytest
from passepartout.loop import Agent
from passepartout.path_gates import inside, paths_gate, resolve_path
from passepartout.signals import Context, Signal, tool_call
from passepartout.tools import Toolbelt


@pytest.fixture
def tree(tmp_path):
    "A workspace `ws` with `docs/a.txt` and a symlink `escape` to a directory outside it."
    ws = tmp_path / 'ws'; (ws / 'docs').mkdir(parents=True); (ws / 'docs' / 'a.txt').write_text('hello')
    (tmp_path / 'outside').mkdir(); os.symlink(tmp_path / 'outside', ws / 'escape')
    return tmp_path, ws, os.path.realpath(ws)


@pytest.fixture
def ctx(tree):
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def read_file(path:str): "Read a file."
    @belt.tool(effect='local-write')
    def write_file(path:str, content:str): "Write a file."
    @belt.tool(effect='read-only')
    def list_dir(path:str='.'): "List a directory."
    @belt.tool(effect='read-only')
    def search_files(pattern:str, path:str='.', glob:str|None=None): "Search files."
    return Context(Signal(meta={'source': 'cli', 'session': 's'}), Agent(tools=belt, workspace=tree[1]))


@pytest.mark.parametrize('path, lands', [
    ('docs/../docs/a.txt', 'ws/docs/a.txt'),
    ('escape/x', 'outside/x'),
    ('new/dir/file', 'ws/new/dir/file'),
])
def test_resolve_path(tree, path, lands):
    tmp, _, real_ws = tree
    assert resolve_path(path, real_ws) == os.path.join(os.path.realpath(tmp), lands)


def test_resolve_path_climbing_out(tree):
    real_ws = tree[2]
    assert resolve_path('../../etc/passwd', real_ws) == os.path.realpath(os.path.join(real_ws, '../../etc/passwd'))


def test_inside_compares_whole_components(tree):
    real_ws = tree[2]
    assert inside(real_ws + '/x', real_ws) and not inside(real_ws + '-evil/x', real_ws) and inside('/etc', '/')


@pytest.mark.parametrize('bad', ['../outside/x', '/etc/passwd', '~/.ssh/id_rsa', 'escape/secret', 'docs/../../outside',
                                 'a\x00b', 'x' * 300, 'a/' * 2100, ''])
def test_paths_gate_refuses(ctx, bad):
    assert paths_gate(tool_call('write_file', {'path': bad, 'content': ''}), ctx).decision == 'deny'


@pytest.mark.parametrize('action, decision', [
    (tool_call('read_file', {'path': 'docs/a.txt'}), None),
    (tool_call('list_dir', {}), None),
    (tool_call('search_files', {'pattern': 'k', 'glob': '../**/*.pem'}), 'deny'),
    (tool_call('shell', {'command': 'cat /etc/passwd'}), None),   # the shell gate's business
])
def test_paths_gate(ctx, action, decision):
    v = paths_gate(action, ctx)
    assert (v and v.decision) == decision


def test_a_link_out_is_outside(ctx):
    assert 'outside the workspace' in paths_gate(tool_call('read_file', {'path': 'escape/x'}), ctx).reason
