"""The Telegram gateway end to end: the shipped agent (`build_agent()` on a temporary home, a scripted
model) served by `run_telegram` against a Bot API server on loopback (`tests/telegram_server.py`).

What must hold: the owner's chats drive the agent, each its own conversation; approvals are buttons
answered once, the decision audited with its channel; strangers, forged senders, oversized or
control-character messages, replayed updates and callback queries, and floods run nothing and lose
none of the owner's work; a failing Bot API (401, 5xx, a dropped connection, 429) is reported and
retried, never fatal; the token appears in no log.
"""
import os, threading, subprocess, sys, signal as signals_module
from contextlib import contextmanager
from pathlib import Path

import pytest

from passepartout.app import build_agent
from passepartout.audit import AuditLog
from passepartout.approvals import ApprovalStore
from passepartout.reason import ScriptedProvider
from passepartout.signals import reply, tool_call
from passepartout.vault import Vault
from passepartout.telegram import run_telegram, telegram_service, STRANGER_REPLY, MAX_INPUT_CHARS

from telegram_server import BotAPIServer
from _daemon_support import daemon_in_thread, token_of

ROOT = Path(__file__).resolve().parents[1]
OWNER, OTHER_OWNER, STRANGER = 1001, 1002, 666
echo = lambda req: reply(f"{req.signal.session}|{req.signal.text}")


@pytest.fixture
def server(tmp_path, monkeypatch):
    "A temporary home and workspace, owners 1001 and 1002, the bot token in the vault, a Bot API on loopback."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    (tmp_path / 'ws').mkdir()
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', f"{OWNER},{OTHER_OWNER}")
    monkeypatch.delenv('PASSEPARTOUT_TELEGRAM_TOKEN', raising=False)
    with BotAPIServer() as s:
        monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_API', s.url)
        Vault().add('TELEGRAM_TOKEN', s.token)
        s.workspace = tmp_path / 'ws'
        yield s


@contextmanager
def serving(agent, **kw):
    "`run_telegram(agent)` in a thread, polling quickly and backing off briefly; stopped on exit."
    stop, ready, out = threading.Event(), threading.Event(), {}
    def main():
        out['gw'] = run_telegram(agent, stop, ready=lambda gw: (out.__setitem__('gw', gw), ready.set()),
                                 poll_timeout=1, backoff=(0.02, 0.2), **kw)
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(120), "the gateway did not start"
    try: yield out['gw']
    finally:
        stop.set(); thread.join(120)
        assert not thread.is_alive()


def agent_with(*script):
    return build_agent(provider=ScriptedProvider(list(script)))


# -- the owner's conversations --------------------------------------------------------------------------

def test_each_owner_chat_is_its_own_conversation(server):
    agent = agent_with(*[echo] * 4)
    with serving(agent):
        server.message('hello', chat=OWNER)
        server.wait_for(lambda: server.texts(OWNER))
        server.message('hello too', chat=OTHER_OWNER)
        server.message('and again', chat=OWNER)
        server.wait_for(lambda: len(server.texts()) == 3)
    assert server.texts(OWNER) == ['telegram-1001|hello', 'telegram-1001|and again']
    assert server.texts(OTHER_OWNER) == ['telegram-1002|hello too']
    assert [m['content'] for m in agent.transcript('telegram-1001')] == ['hello', 'telegram-1001|hello', 'and again', 'telegram-1001|and again']


def test_a_long_reply_is_cut_at_the_limit_and_nothing_is_lost(server):
    answer = ''.join(f"line {i}: {'x' * 70}\n" for i in range(150))   # about 12 000 characters
    agent = agent_with(reply(answer))
    with serving(agent):
        server.message('tell me everything')
        parts = server.wait_for(lambda: len(server.texts()) >= 3 and server.texts())
    assert ''.join(parts) == answer and all(len(p) <= 4096 for p in parts)


def test_a_429_is_waited_out_and_the_reply_arrives(server):
    server.fail('sendMessage', 429, 'Too Many Requests: retry after 1', retry_after=1)
    agent = agent_with(echo)
    with serving(agent):
        server.message('hello')
        server.wait_for(lambda: server.texts())
    assert server.texts() == ['telegram-1001|hello'] and server.calls.count('sendMessage') == 2


# -- approvals --------------------------------------------------------------------------------------------

def held_shell(server, agent):
    "The owner asks; the model proposes `rm -r build`; the gates hold it; the chat gets buttons. The token."
    (server.workspace / 'build').mkdir()
    server.message('clean up the build directory')
    held = server.wait_for(lambda: [m for m in server.sent if m.get('reply_markup')])
    token = agent.approvals.pending()[0]['token']
    assert f"approve {token}" in held[0]['text'] and (server.workspace / 'build').exists()
    rows = held[0]['reply_markup']['inline_keyboard']
    assert [b['callback_data'] for row in rows for b in row] == [f'pp:a:{token}', f'pp:d:{token}', f'pp:A:{token}']
    return token, held[0]


def test_approve_button_runs_once_and_the_model_carries_on_in_the_chat(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'),
                       lambda req: reply(f"Done: {req.messages[-1]['content']}"))
    with serving(agent):
        token, held = held_shell(server, agent)
        server.press(f'pp:a:{token}', qid='first', message_id=held['message_id'])
        server.wait_for(lambda: any(t.startswith('Done:') for t in server.texts()))
        server.press(f'pp:a:{token}', qid='first', message_id=held['message_id'])   # the same callback query again
        server.press(f'pp:a:{token}', qid='second', message_id=held['message_id'])  # a new query for the same token
        server.wait_for(lambda: len(server.answers) == 2)
        server.message('anything else?')   # the gateway is still up; the script is spent, so the turn fails cleanly
        server.wait_for(lambda: len(server.texts()) >= 4)
    assert not (server.workspace / 'build').exists()
    assert [a['text'] for a in server.answers] == ['Approving…', f'{token} was answered already.']
    assert server.edits == [{'chat_id': OWNER, 'message_id': held['message_id'], 'reply_markup': {'inline_keyboard': []}}]
    texts = server.texts(OWNER)
    assert texts[1].startswith(f"Approved {token}: shell(command='rm -r build')") and texts[2].startswith('Done: approved by the owner')
    assert ApprovalStore().get(token)['state'] == 'used'
    [approval] = AuditLog().recent(50, kind='approval')
    assert (approval['data']['channel'], approval['data']['by']) == ('telegram', 'telegram user 1001')


def test_deny_button_refuses_and_tells_the_model(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply(f"OK: {req.messages[-1]['content'][:20]}"))
    with serving(agent):
        token, held = held_shell(server, agent)
        server.press(f'pp:d:{token}', message_id=held['message_id'])
        server.wait_for(lambda: any(t.startswith('OK:') for t in server.texts()))
    assert (server.workspace / 'build').exists()
    assert server.texts()[1:] == [f"Denied {token}: shell(command='rm -r build') will not run.", 'OK: refused by the owner']
    [denial] = AuditLog().recent(50, kind='denial')
    assert denial['data']['channel'] == 'telegram'


def test_a_strangers_press_and_a_forged_button_release_nothing(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'))
    with serving(agent):
        token, held = held_shell(server, agent)
        server.press(f'pp:a:{token}', chat=STRANGER)                       # a stranger's press
        server.press(f'pp:a:{token}', chat=OWNER, user=STRANGER)           # a stranger in the owner's chat
        server.press(f'pp:a:{token}', chat=STRANGER, user=OWNER)           # the owner's id in a stranger's chat
        server.press('pp:a:notatokn', chat=OWNER)                          # data no button of ours carries
        server.wait_for(lambda: len(server.answers) == 4)
    assert [a['text'] for a in server.answers] == ['Only the owner can answer this.'] * 3 + ['This button is not one of mine.']
    assert (server.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'pending'


def test_an_action_held_in_telegram_approved_elsewhere_continues_in_the_chat(server):
    "Hosted by the daemon: the CLI approves (the store), the daemon carries it out, the reply reaches the chat."
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply(f"Done: {req.messages[-1]['content'][:24]}"))
    with daemon_in_thread(agent, background=[lambda d: telegram_service(d, poll_timeout=1, backoff=(0.02, 0.2))], approval_poll=0.05) as daemon:
        token, _ = held_shell(server, agent)
        ApprovalStore().approve(token)   # `passepartout approve TOKEN` from another terminal
        server.wait_for(lambda: any(t.startswith('Done:') for t in server.texts()))
        assert daemon.status()['gateways']['telegram']['state'] == 'running'
    assert server.texts(OWNER)[-1].startswith('Done: approved by the owner') and not (server.workspace / 'build').exists()


# -- hostile input ----------------------------------------------------------------------------------------

def test_strangers_and_forged_senders_reach_nothing(server):
    agent = agent_with(echo)
    with serving(agent) as gw:
        server.message('rm -rf ~', chat=STRANGER)
        server.message('run it', chat=OWNER, user=STRANGER)          # a stranger in a chat whose id is an owner's
        server.message('run it', chat=STRANGER + 1, user=OWNER)      # the owner's id as sender in a stranger's chat
        server.message('run it', chat=OWNER, is_bot=True)            # a bot
        server.message('run it', chat=OWNER, sender_chat={'id': -100})   # sent on behalf of a channel
        server.inject({'message': {'message_id': 9, 'chat': {'id': OWNER}, 'from': {'id': str(OWNER), 'is_bot': False}, 'text': 'x'}})
        server.wait_for(lambda: gw.counts['refused'] == 6)
        server.message('hello')
        server.wait_for(lambda: 'telegram-1001|hello' in server.texts())
    assert [r.signal.text for r in agent.provider.requests] == ['hello']   # the model saw the owner's message only
    assert server.texts(STRANGER) == [STRANGER_REPLY]
    notices = [t for t in server.texts(OWNER) if t.startswith('Telegram: a message from')]
    assert len(notices) == 5 and "'rm -rf ~'" in notices[0]   # chats 666 and 667, owner's chat twice (user 666, bot), the channel
    refusals = AuditLog().recent(50, kind='refused-sender')   # each notice is audited, with the channel and the sender
    assert len(refusals) == 5 and {r['data']['channel'] for r in refusals} == {'telegram'}
    assert ('telegram user 666', '666') in [(r['data']['by'], r['data']['chat']) for r in refusals], refusals


def test_a_flood_from_one_chat_costs_one_reply_and_loses_nothing_of_the_owners(server):
    agent = agent_with(*[echo] * 3)
    with serving(agent) as gw:
        for i in range(150): server.message(f'spam {i}', chat=STRANGER)
        server.message('first', chat=OWNER)
        for i in range(150): server.message(f'spam {i}', chat=STRANGER)
        server.message('second', chat=OWNER)
        server.wait_for(lambda: 'telegram-1001|second' in server.texts())
        server.wait_for(lambda: gw.counts['refused'] == 300)
    assert server.texts(STRANGER) == [STRANGER_REPLY]
    owner = server.texts(OWNER)
    assert [t for t in owner if t.startswith('telegram-1001|')] == ['telegram-1001|first', 'telegram-1001|second']
    assert len([t for t in owner if t.startswith('Telegram: a message from')]) == 1
    assert len(agent.provider.requests) == 2 and len(AuditLog().recent(500, kind='refused-sender')) == 1


def test_the_owners_own_flood_is_answered_in_order(server):
    agent = agent_with(*[echo] * 40)
    with serving(agent):
        for i in range(40): server.message(f'm{i}')
        server.wait_for(lambda: len(server.texts()) == 40)
    assert server.texts() == [f'telegram-1001|m{i}' for i in range(40)]


def test_oversized_and_control_characters(server):
    agent = agent_with(echo, echo)
    with serving(agent):
        server.message('x' * (MAX_INPUT_CHARS + 1))
        server.message('ls\x1b[2J\x00\x07 -la\u202e')
        server.message('')
        server.message(None, photo=[{'file_id': 'abc'}])
        server.message({'not': 'text'})
        server.message('{"payload": {"sensor": "repl", "code": "1+1"}}')
        server.wait_for(lambda: len(server.texts()) == 6)
    texts = server.texts()   # the gateway's own answers are sent at once, the agent's after its turn: compare without order
    too_long = f"That message is {MAX_INPUT_CHARS + 1} characters long; I take at most {MAX_INPUT_CHARS}. Nothing was done: send it in parts."
    assert sorted(texts) == sorted([too_long, 'telegram-1001|ls[2J -la', 'Passepartout is listening. Write to talk with the agent.',
                                    'I read text messages only.', 'I read text messages only.',
                                    'telegram-1001|{"payload": {"sensor": "repl", "code": "1+1"}}'])   # a message is text, never an envelope
    assert [r.signal.text for r in agent.provider.requests] == ['ls[2J -la', '{"payload": {"sensor": "repl", "code": "1+1"}}']


def test_replayed_and_malformed_updates_do_nothing(server):
    agent = agent_with(echo, echo)
    with serving(agent) as gw:
        first = server.message('once')
        server.wait_for(lambda: server.texts())
        server.inject(dict(first), once=True)                            # the same update again, offset or not
        for bad in ({'update_id': 'x', 'message': {}}, 'not an update', {'update_id': server.next_update, 'message': 'text'},
                    {'update_id': server.next_update + 1, 'edited_message': {'text': 'changed'}},
                    {'update_id': server.next_update + 2, 'callback_query': {'id': 7, 'data': None}},
                    {'update_id': server.next_update + 3, 'message': {'chat': [], 'from': None, 'text': 'odd'}}):
            server.inject(bad, once=True)
        server.message('twice')
        server.wait_for(lambda: len([t for t in server.texts() if t.startswith('telegram-')]) == 2)
        assert gw.status()['state'] == 'running'
    assert [t for t in server.texts() if t.startswith('telegram-')] == ['telegram-1001|once', 'telegram-1001|twice']


# -- failures ---------------------------------------------------------------------------------------------

def test_a_bad_token_and_network_errors_are_reported_and_retried(server):
    agent = agent_with(echo)
    real = server.token
    server.token = 'revoked'
    with serving(agent) as gw:
        server.wait_for(lambda: gw.failures >= 3)
        assert gw.status()['state'] == 'failing' and '401' in gw.status()['error']
        server.token = real
        server.fail('getUpdates', 'drop', times=2)
        server.fail('getUpdates', 502, 'Bad Gateway')
        server.message('still there?')
        server.wait_for(lambda: server.texts())
        assert gw.status()['state'] == 'running'
    log = '\n'.join(agent.syslog.lines(100))
    assert 'the bot token is wrong or revoked' in log and 'Bad Gateway' in log
    assert real not in log and 'revoked/getUpdates' not in log


def test_the_gateway_does_not_start_without_owners_or_a_token(server, monkeypatch):
    from passepartout.errors import SetupError
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '')
    with pytest.raises(SetupError, match='PASSEPARTOUT_TELEGRAM_OWNERS is empty'): run_telegram(agent_with())
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '1001')
    Vault().remove('TELEGRAM_TOKEN')
    with pytest.raises(SetupError, match='vault add TELEGRAM_TOKEN'): run_telegram(agent_with())


def test_the_command_serves_until_sigterm(server):
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'PASSEPARTOUT_PROVIDERS': 'replay'}
    proc = subprocess.Popen([sys.executable, '-c', 'from passepartout.cli import main; main()', 'telegram'], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.message('hello')
        server.wait_for(lambda: server.texts())
        proc.send_signal(signals_module.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None: proc.kill()
    assert proc.returncode == 0, err
    assert 'serving 2 Telegram owner ids' in err and 'Telegram gateway stopped (1 messages served)' in err


def test_a_gateway_that_cannot_start_leaves_the_daemon_up(server):
    from passepartout.daemon import Client
    Vault().remove('TELEGRAM_TOKEN')
    agent = agent_with(echo)
    with daemon_in_thread(agent, background=[telegram_service]) as daemon:
        server.wait_for(lambda: any('the gateway cannot start' in line for line in agent.syslog.lines(50)))
        with Client(address=daemon.address, token=token_of(daemon)) as client:
            answer = client.ask({'type': 'REQUEST', 'meta': {'id': 1, 'session': 's'}, 'payload': {'sensor': 'user-input', 'text': 'hi'}})
        assert answer['turn']['reply'] == 's|hi'
        shown = daemon.status()['gateways']
        assert shown['telegram']['state'] == 'cannot start' and 'vault add TELEGRAM_TOKEN' in shown['telegram']['error'], shown


def test_a_crowd_of_strangers_gets_a_bounded_number_of_replies(server):
    from passepartout.telegram import STRANGER_NOTICES
    agent = agent_with(echo)
    with serving(agent) as gw:
        for i in range(40): server.message('hello bot', chat=5000 + i)
        server.message('mine')
        server.wait_for(lambda: 'telegram-1001|mine' in server.texts())
        server.wait_for(lambda: gw.counts['refused'] == 40)
    assert len([m for m in server.sent if m['text'] == STRANGER_REPLY]) == STRANGER_NOTICES
    assert len([t for t in server.texts(OWNER) if t.startswith('Telegram: a message from')]) == STRANGER_NOTICES


def test_a_group_drives_the_agent_only_when_the_group_and_the_sender_are_listed(server, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', f"{OWNER},-100500")
    agent = agent_with(echo)
    with serving(agent) as gw:
        server.message('from a member', chat=-100500, user=777)
        server.message('from me', chat=-100500, user=OWNER)
        server.wait_for(lambda: 'telegram--100500|from me' in server.texts())
    assert [r.signal.text for r in agent.provider.requests] == ['from me'] and gw.counts['refused'] == 1


def test_send_message_to_the_owner_goes_through_the_gateway(server):
    agent = agent_with(tool_call('send_message', {'channel': 'telegram', 'recipient': str(OTHER_OWNER), 'text': 'build finished'},
                                 explanation='tell the other chat'), reply('told them'))
    with serving(agent):
        server.message('tell my other chat the build finished')
        server.wait_for(lambda: 'told them' in server.texts())
    assert server.texts(OTHER_OWNER) == ['build finished'] and server.texts(OWNER) == ['told them']


def test_an_action_held_at_the_terminal_is_approved_from_telegram(server):
    "Any gateway answers any approval: held in a terminal session, approved by typing in Telegram; the model goes on in that session."
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'),
                       lambda req: reply(f"Done in {req.signal.session}"))
    (server.workspace / 'build').mkdir()
    token = agent.send('clean up', source='cli', session='work').pending[0]['token']
    with serving(agent):
        server.message(f'approve {token}')
        server.wait_for(lambda: any(t.startswith(f'Approved {token}') for t in server.texts()))
    assert not (server.workspace / 'build').exists()
    assert agent.transcript('work')[-1]['content'] == 'Done in work'    # the terminal's conversation carried on, not the chat's
    assert [a['data']['channel'] for a in AuditLog().recent(50, kind='approval')] == ['telegram']


def test_the_daemon_bounds_a_chats_queue(server):
    "Hosted by the daemon: the model is busy with the first message; three more wait; the rest are refused with a reply."
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    started, release = threading.Event(), threading.Event()
    class Slow:
        name = 'slow'
        def propose(self, request):
            started.set(); release.wait(180)
            return Proposal(reply(f"done {request.signal.text}"))
    hosted = lambda d: telegram_service(d, poll_timeout=1, backoff=(0.02, 0.2), max_queued=3)
    with daemon_in_thread(Agent(Slow()), background=[hosted]) as daemon:
        server.message('m0')
        assert started.wait(120)
        for i in range(1, 10): server.message(f'm{i}')
        refusal = "3 messages are waiting already; this one was not taken. Send it again once I have answered."
        server.wait_for(lambda: server.texts(OWNER).count(refusal) == 6)
        release.set()
        server.wait_for(lambda: len([t for t in server.texts(OWNER) if t.startswith('done')]) == 4)
    assert [t for t in server.texts(OWNER) if t.startswith('done')] == ['done m0', 'done m1', 'done m2', 'done m3']
