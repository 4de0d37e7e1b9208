"""The tables behind the lessons of `nbs/20b_validation_gates.md`: schema mismatches, validator refusals, policy verdicts.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.gates import ask
from passepartout.loop import Agent
from passepartout.signals import Action, Context, Signal, reply, tool_call
from passepartout.tools import Toolbelt
from passepartout.validation_gates import WHY_REQUEST, policy_gate, schema_error, take_why, validator_gate


@pytest.fixture(scope='module')
def belt():
    b = Toolbelt()
    @b.tool(effect='local-write')
    def shell(command:str, timeout:float|None=None): "Run a shell command."
    @b.tool(effect='read-only')
    def read_file(path:str, offset:int=0, limit:int|None=None): "Read a file."
    @b.tool(effect='local-write')
    def write_file(path:str, content:str): "Write a file."
    @b.tool(effect='read-only')
    def list_dir(path:str='.'): "List a directory."
    @b.tool(effect='read-only')
    def search_files(pattern:str, path:str='.', glob:str|None=None): "Search files."
    @b.tool(effect='outward')
    def send_message(channel:str, recipient:str, text:str): "Send a message."
    return b


@pytest.fixture
def ctx(belt, tmp_path):
    return Context(Signal(meta={'source': 'cli', 'session': 's'}), Agent(tools=belt, workspace=tmp_path))


@pytest.mark.parametrize('value, schema, error', [
    ({'pattern': 'x'}, 'search_files', None),
    ({'pattern': 'x', 'glob': None}, 'search_files', None),
    ({'pattern': 'x', 'path': None}, 'search_files', "args.path: expected string, got null None"),
    ({}, 'search_files', "args: missing required argument 'pattern'"),
    ({'pattern': 3}, 'search_files', "args.pattern: expected string, got integer 3"),
    ({'pattern': 'x', 'recursive': True}, 'search_files', "args: unknown argument 'recursive' (allowed: pattern, path, glob)"),
    (True, {'type': 'integer'}, "args: expected integer, got boolean True"),
    (float('nan'), {'type': 'number'}, "args: expected number, got number nan"),
    ([1, 'b'], {'type': 'array', 'items': {'type': 'integer'}}, "args[1]: expected integer, got string 'b'"),
    ('c', {'enum': ['a', 'b']}, "args: 'c' is not one of ['a', 'b']"),
    (1, {'enum': [True]}, "args: 1 is not one of [True]"),
])
def test_schema_error(belt, value, schema, error):
    assert schema_error(value, belt[schema].schema if isinstance(schema, str) else schema) == error


def test_schema_error_any_of():
    assert 'none of the allowed forms' in schema_error([], {'anyOf': [{'type': 'string'}, {'type': 'integer'}]})


@pytest.mark.parametrize('action, decision, reason', [
    (tool_call('read_file', {'path': 'a.txt'}), None, None),
    (reply('hi'), None, None),
    (reply('hi', target='cli'), None, None),
    (reply('hi', target='telegram'), 'deny', "reply target 'telegram' is not a registered gateway"),
    (reply('hi', target='tool'), 'deny', None),
    (Action('reply'), 'deny', "a reply needs its text as a string"),
    (tool_call('rm_rf', {}), 'deny', "there is no tool named 'rm_rf'"),
    (tool_call('read_file', {'path': 'a', 'sudo': True}), 'deny', "read_file: args: unknown argument 'sudo' (allowed: path, offset, limit)"),
    (Action('tool', tool='read_file', args={'path': 'a'}, target='telegram'), 'deny', None),
    (tool_call('shell', {'why': 'x'}), 'deny', "shell: args: missing required argument 'command'"),
    (tool_call('shell', {'command': 'ls', 'why': 3}), 'deny', "shell: args.why: expected one short sentence as a string, got integer"),
])
def test_validator_gate(ctx, action, decision, reason):
    v = validator_gate(action, ctx)
    assert (v and v.decision) == decision
    if reason: assert reason in v.reason


def test_validator_gate_without_a_belt():
    assert validator_gate(tool_call('read_file', {'path': 'a'}), Context()).reason == "there is no tool belt to check this tool call against"


def test_validator_gate_renames_and_takes_why(ctx):
    assert validator_gate(tool_call('READ_FILE', {'path': 'a.txt'}), ctx).action == tool_call('read_file', {'path': 'a.txt'})
    assert validator_gate(tool_call('list_dir', {'path': '.', 'why': 'look'}), ctx).action.args == {'path': '.'}
    assert take_why(tool_call('shell', {'command': 'ls', 'why': ' '}, explanation='I will look.')).explanation == 'I will look.'


def no_messages_at_night(action, ctx): return ask("it is night: messages wait for a human") if action.tool == 'send_message' else None


@pytest.mark.parametrize('action, in_reason, reason', [
    (tool_call('write_file', {'path': 'a', 'content': ''}), True, f"write_file changes things (local-write): {WHY_REQUEST}"),
    (tool_call('write_file', {'path': 'a', 'content': ''}, explanation='save the notes'), True, None),
    (tool_call('read_file', {'path': 'a'}), False, None),   # read-only: no explanation needed
    (tool_call('send_message', {}, explanation='tell Bob'), False, 'mandate no_messages_at_night: it is night: messages wait for a human'),
    (tool_call('shell', {'command': 'ls'}), False, "no reason given"),
])
def test_policy_gate(ctx, action, in_reason, reason):
    ctx.agent.mandates = ["Be kind.", no_messages_at_night]
    c = Context(ctx.signal, ctx.agent, rejections=[]) if in_reason else ctx
    v = policy_gate(action, c)
    assert (v and v.reason) == reason


@pytest.mark.parametrize('mandate, reason', [
    (lambda a, c: 1 / 0, 'mandate <lambda> failed: ZeroDivisionError: division by zero'),
    (lambda a, c: 'no', "mandate <lambda> returned 'no', not a verdict"),
])
def test_policy_gate_refuses_a_broken_mandate(ctx, mandate, reason):
    ctx.agent.mandates = [mandate]
    assert policy_gate(reply('hi'), ctx).reason == reason
