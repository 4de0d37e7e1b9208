"""The tables behind the lessons of `nbs/23_policy.md`: reading the input of `policy check`, and the command's answers.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import json
import pytest
from click.testing import CliRunner
from passepartout.policy import parse_check_input, policy_command
from passepartout.signals import tool_call


@pytest.mark.parametrize('command, action_json, why, action', [
    ('ls -la', None, None, tool_call('shell', {'command': 'ls -la'})),
    ('ls -la', None, 'look', tool_call('shell', {'command': 'ls -la', 'why': 'look'})),
    (None, '{"tool":"write_file","args":{"path":"a","content":""}}', 'keep a', tool_call('write_file', {'path': 'a', 'content': '', 'why': 'keep a'})),
    (None, '{"kind":"tool","tool":"list_dir","args":{}}', None, tool_call('list_dir', {})),
    (None, '{"tool":"read_file","args":{"path":"a"}}', None, tool_call('read_file', {'path': 'a'})),
], ids=['shell command', 'shell command with a why', 'JSON with a why', 'JSON goes to the tool actuator', 'short form'])
def test_parse_check_input(command, action_json, why, action):
    got = parse_check_input(command, action_json, why)
    assert got == action and got.target == 'tool'


@pytest.mark.parametrize('command, action_json, why, words', [
    (None, '{"kind":"reply","text":"hi"}', 'x', 'not a reply'),
    ('ls', None, ' ', '--why is empty'),
    (None, None, None, 'exactly one'),
    (None, '{kind: tool}', None, 'not JSON'),
    (None, '[1, 2]', None, 'not an action'),
    (None, '{"text":"hi"}', None, 'expected {"tool": NAME'),
    (None, '{"kind":"reply","text":"x","run":true}', None, 'unknown action fields'),
    ('  ', None, None, 'the command is empty'),
])
def test_parse_check_input_refuses(command, action_json, why, words):
    with pytest.raises(ValueError) as e: parse_check_input(command, action_json, why)
    assert words in str(e.value)


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws')); (tmp_path / 'ws').mkdir()
    return lambda *args: CliRunner().invoke(policy_command, ['check', *args])


def test_check_with_a_why(run):
    r = run('--why', 'keep the old notes', 'mv notes.txt old.txt')
    assert r.stdout.split('\n')[:2] == ["ASK  shell(command='mv notes.txt old.txt')", '  why: keep the old notes']


def test_check_json(run):
    out = json.loads(run('--json', '--action', '{"kind":"tool","tool":"write_file","args":{"path":"../x","content":"y"},"explanation":"try"}').stdout)
    assert set(out['trace'][0]) == {'gate', 'decision', 'reason', 'us'}
    assert json.loads(run('--json', 'touch a').stdout)['again']['action']['args'] == {'command': 'touch a'}


def test_check_self_protection(run):
    r = run('--why', 'turn the network on', 'echo PASSEPARTOUT_SHELL_NETWORK=1 >> "$PASSEPARTOUT_HOME/config/.env"')
    assert (r.exit_code, r.stdout.split()[0]) == (0, 'DENY')
    assert 'self-protection  deny' in r.output


@pytest.mark.parametrize('args', [(), ('--action', 'nope'), ('ls', '--action', '{"kind":"reply","text":"hi"}'), ('--why', ' ', 'ls')],
                         ids=['nothing', 'not JSON', 'both', 'empty why'])
def test_unusable_input_exits_2(run, args):
    assert run(*args).exit_code == 2


def test_a_reply_is_checked_too(run):
    assert 'ALLOW' in run('--action', '{"kind":"reply","text":"hi"}').output
