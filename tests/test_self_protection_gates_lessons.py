"""The table behind the lessons of `nbs/20e_self_protection_gates.md`: what the self-protection gate says of file tools and
shell commands when the agent's home lies inside the workspace.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
import passepartout
from passepartout.loop import Agent
from passepartout.self_protection_gates import self_protection_gate
from passepartout.signals import Context, Signal, tool_call
from passepartout.tools import Toolbelt


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    "A workspace that contains the agent's home (`home/`) and a project (`ws/`)."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path))
    (tmp_path / 'ws' / 'docs').mkdir(parents=True)
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def shell(command:str, timeout:float|None=None): "Run a shell command."
    @belt.tool(effect='read-only')
    def read_file(path:str, offset:int=0, limit:int|None=None): "Read a file."
    @belt.tool(effect='local-write')
    def write_file(path:str, content:str): "Write a file."
    @belt.tool(effect='local-write')
    def edit_file(path:str, old:str, new:str): "Replace text in a file."
    return Context(Signal(meta={'source': 'cli', 'session': 's'}), Agent(tools=belt))


@pytest.mark.parametrize('tool, args, decision, words', [
    ('write_file', {'path': 'home/config/permissions.toml', 'content': ''}, 'deny', 'the permissions file'),
    ('read_file', {'path': 'home/data/vault.enc'}, 'deny', 'the data directory'),
    ('shell', {'command': 'echo x >> "{home}/config/.env"'}, 'deny', 'the config directory'),
    ('shell', {'command': 'sed -i s/deny/allow/ "home/con""fig/permissions.toml"'}, 'deny', 'permissions'),
    ('shell', {'command': 'cd home/config; cp /tmp/mine permissions.toml'}, 'deny', 'the config directory'),
    ('shell', {'command': 'echo hi > {tmp}/ws/notes.txt'}, None, None),
    ('edit_file', {'path': passepartout.__file__, 'old': 'a', 'new': 'b'}, 'deny', 'the installed passepartout package'),
    ('read_file', {'path': passepartout.__file__}, None, None),   # reading the code is fine
    ('shell', {'command': 'mv home home2'}, 'deny', "home', a directory above the"),
    ('shell', {'command': 'ls -la home'}, None, None),
    ('shell', {'command': 'echo "[core]" >> ws/.git/config'}, 'ask', 'git'),
    ('shell', {'command': 'cat ws/.git/config'}, None, None),
    ('write_file', {'path': 'ws/.git/hooks/pre-commit', 'content': 'x'}, 'ask', 'hooks'),
])
def test_self_protection_gate(ctx, tmp_path, tool, args, decision, words):
    if 'command' in args: args = {'command': args['command'].format(home=tmp_path / 'home', tmp=tmp_path)}
    v = self_protection_gate(tool_call(tool, args), ctx)
    assert (v and v.decision) == decision, v
    if words: assert words in v.reason, v.reason
