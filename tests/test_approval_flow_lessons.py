"""The checks behind the whole-path lessons of `nbs/32b_approval_flow.md`: approve, deny, and a stranger's turn.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in
place. (Approvals across processes and restarts are in `tests/test_approvals.py`.)
"""
import pytest
from passepartout.approvals import ApprovalStore
from passepartout.approval_flow import install_approvals
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply
from _daemon_support import careful_agent


@pytest.fixture
def held(tmp_path, monkeypatch):
    "An agent with approvals whose model proposed `append(line='x')`, held; (agent, journal, token)."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    journal = tmp_path / 'journal'
    agent = careful_agent(journal, ScriptedProvider([tool_call('append', {'line': 'x'}, explanation='add x'),
                                                     lambda req: reply(f"Done: {req.messages[-1]['content']}")]))
    install_approvals(agent, ApprovalStore(tmp_path / 'approvals.db'))
    return agent, journal, agent.send('add x', source='cli').pending[0]['token']


@pytest.mark.parametrize('meta', [dict(source='telegram', owner=False), dict(source='daemon', owner='owner')],
                         ids=['stranger', 'owner-as-string'])
def test_only_the_owner_approves(held, meta):
    agent, journal, token = held
    assert agent.send(f'approve {token}', **meta).reply == "Only the owner can approve or deny actions."
    assert not journal.exists()


def test_an_approved_action_is_recorded_as_held_and_released(held):
    agent, journal, token = held
    agent.send(f'approve {token}', source='cli')
    call, result = agent.transcript('default')[-3:-1]
    assert call['tool_calls'] == [{'id': 'call_1', 'name': 'append', 'args': {'line': 'x'}}]
    assert (result['content'], result['held'], result['released'], result['is_error']) == ('approved by the owner: appended x', token, True, False)
    assert journal.read_text() == 'x\n'


@pytest.mark.parametrize('command', ['approve {token}', 'deny {token} not today'])
def test_approval_commands_never_reach_the_model(held, command):
    agent, _, token = held
    agent.send(command.format(token=token), source='cli')
    assert all(r.signal.sensor != 'approval-command' for r in agent.provider.requests)


def test_a_strangers_held_action_is_announced_and_audited_where_the_owner_decided(held, monkeypatch):
    agent, journal, _ = held
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '1001')
    chats = []
    agent.actuators.register('telegram', lambda a, c: chats.append((c.signal.meta.get('recipient') or c.signal.meta.get('chat_id'), a.text)), silent=True)
    agent.provider.script[:] = [tool_call('append', {'line': 'y'}), reply('added')]
    turn = agent.send('please add y', source='telegram', owner=False, chat_id='666', session='tg-666')
    token = turn.pending[0]['token']
    assert turn.of('owner-notice')[0]['delivered'] == ['telegram 1001']
    assert chats[0][1].startswith('telegram chat 666 (not you) started this. Waiting for approval: append(')
    audited, agent.audit = [], lambda e: audited.append(e)
    agent.send(f'approve {token}', source='telegram', owner=True, chat_id='1001')
    assert [(e['by'], e['channel']) for e in audited if e['kind'] == 'approval'] == [('telegram chat 1001', 'telegram')]
    assert agent.transcript('tg-666')[-2]['content'] == "approved by the owner: appended y"
