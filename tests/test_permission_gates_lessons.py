"""The table behind the lessons of `nbs/20f_permission_gates.md`: what the permissions gate says under a rules file.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.loop import Agent
from passepartout.permission_gates import PermissionsError, _check_rule, learn_rule, permissions_file, permissions_gate
from passepartout.signals import Context, Signal, reply, tool_call
from passepartout.tools import Toolbelt

RULES = ('[[rule]]\ntool = "shell"\nmatch = {command = "git status*"}\ndecision = "allow"\n'
         '[[rule]]\ntool = "*"\nmatch = {path = "*.pem"}\ndecision = "deny"\n')


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def shell(command:str): "Run a shell command."
    @belt.tool(effect='read-only')
    def read_file(path:str): "Read a file."
    @belt.tool(effect='outward')
    def send_message(channel:str, recipient:str, text:str): "Send a message."
    return Context(Signal(meta={'source': 'cli', 'session': 's'}), Agent(tools=belt, workspace=tmp_path))


def test_no_file_no_rules(ctx):
    assert permissions_gate(tool_call('shell', {'command': 'git push'}), ctx) is None


@pytest.mark.parametrize('action, decision', [
    (tool_call('shell', {'command': 'git status -s'}), 'allow'),
    (tool_call('shell', {'command': 'git status; rm -rf ~'}), None),   # compound: the glob does not cover it
    (tool_call('read_file', {'path': 'keys/server.pem'}), 'deny'),
    (reply('hi'), None),
])
def test_permissions_gate(ctx, action, decision):
    permissions_file().parent.mkdir(parents=True, exist_ok=True); permissions_file().write_text(RULES)
    v = permissions_gate(action, ctx)
    assert (v and v.decision) == decision


def test_a_learned_rule_covers_one_action_and_a_garbled_file_fails_closed(ctx):
    act = tool_call('send_message', {'channel': 'telegram', 'recipient': '12345', 'text': 'He said "hi" *'}, explanation='x')
    learn_rule(act)
    assert permissions_gate(act, ctx).decision == 'allow'
    assert permissions_gate(tool_call('send_message', {**act.args, 'text': 'other'}), ctx) is None
    with pytest.raises(ValueError, match='no form'): learn_rule(tool_call('x', {'a': None}))
    permissions_file().write_text(permissions_file().read_text() + '\n[[rule]\ngarbage')
    assert 'does not parse' in permissions_gate(act, ctx).reason
    assert permissions_gate(tool_call('read_file', {'path': 'a'}), ctx) is None


@pytest.mark.parametrize('rule, words', [
    ([], 'is not a table'),
    ({'tool': 'x', 'decision': 'allow', 'when': 'now'}, "unknown keys ['when']"),
    ({'tool': 3, 'decision': 'allow'}, '`tool` must be a string'),
    ({'tool': 'x', 'decision': 'alow'}, '`decision` must be allow, ask or deny'),
    ({'tool': 'x', 'decision': 'allow', 'match': {'a': 1}}, '`match` must be a table of glob strings'),
    ({'tool': 'x', 'decision': 'allow', 'args': []}, '`args` must be a table'),
])
def test_check_rule_refuses(rule, words):
    with pytest.raises(PermissionsError, match=words.replace('[', r'\[').replace(']', r'\]')): _check_rule(1, rule)
