"""The Signal gateway end to end: the shipped agent (`build_agent()` on a temporary home, a scripted model)
served by `run_signal` or hosted by the daemon, against signal-cli's HTTP daemon on loopback
(`tests/signal_server.py`, speaking the documented JSON-RPC methods and event stream).

What must hold: the owner's direct messages drive the agent, each owner their own conversation; a held
action is answered by a reaction or a reply, once, the decision audited with its channel, also after a
daemon restart; strangers, forged or inconsistent senders, group messages, replayed events, oversized and
control-character messages and floods run nothing and lose none of the owner's work; signal-cli down is
reported once and retried with backoff; the daemon bounds a conversation's queue.
"""
import os, socket, threading, subprocess, sys, signal as signals_module
from contextlib import contextmanager
from pathlib import Path

import pytest

from passepartout.app import build_agent
from passepartout.audit import AuditLog
from passepartout.approvals import ApprovalStore
from passepartout.reason import ScriptedProvider, Proposal
from passepartout.signals import reply, tool_call
from passepartout.vault import Vault
from passepartout.signal_gateway import run_signal, signal_service, HeldMessages, STRANGER_REPLY, MAX_INPUT_CHARS, REACT_HINT

from signal_server import SignalCLIServer, ACCOUNT
from _daemon_support import daemon_in_thread

ROOT = Path(__file__).resolve().parents[1]
OWNER, OTHER_OWNER, STRANGER = '+4915112345678', '+4915187654321', '+4915166666666'
OWNER_UUID = '7ccae375-cd51-4c82-8b1e-7be3280aa485'
echo = lambda req: reply(f"{req.signal.session}|{req.signal.text}")


def _free_port() -> int:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    "A temporary home and workspace, two owners, the account in the vault, the URL of a signal-cli not started yet."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    (tmp_path / 'ws').mkdir()
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_OWNERS', f"{OWNER},{OTHER_OWNER}")
    monkeypatch.delenv('PASSEPARTOUT_SIGNAL_ACCOUNT', raising=False)
    server = SignalCLIServer(port=_free_port())
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_URL', server.url)
    Vault().add('SIGNAL_ACCOUNT', ACCOUNT)
    server.workspace = tmp_path / 'ws'
    yield server
    server.stop()


@pytest.fixture
def server(home):
    "signal-cli running."
    return home.start()


@contextmanager
def serving(agent, **kw):
    "`run_signal(agent)` in a thread, backing off briefly; stopped on exit."
    stop, ready, out = threading.Event(), threading.Event(), {}
    def main():
        out['gw'] = run_signal(agent, stop, ready=lambda gw: (out.__setitem__('gw', gw), ready.set()), backoff=(0.02, 0.2), **kw)
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(120), "the gateway did not start"
    try: yield out['gw']
    finally:
        stop.set(); thread.join(120)
        assert not thread.is_alive()


def listening(server, gw):
    "Wait until the gateway reads the stream."
    server.wait_for(lambda: gw.state == 'running')


def agent_with(*script):
    return build_agent(provider=ScriptedProvider(list(script)))


# -- the owner's conversations --------------------------------------------------------------------------

def test_the_owners_message_gets_the_agents_reply(server):
    agent = agent_with(*[echo] * 3)
    with serving(agent) as gw:
        listening(server, gw)
        server.message('hello')
        server.wait_for(lambda: server.texts(OWNER))
        server.message('hello too', number=OTHER_OWNER)
        server.message('and again')
        server.wait_for(lambda: len(server.texts()) == 3)
    assert server.texts(OWNER) == [f'signal-{OWNER}|hello', f'signal-{OWNER}|and again']
    assert server.texts(OTHER_OWNER) == [f'signal-{OTHER_OWNER}|hello too']
    assert [m['content'] for m in agent.transcript(f'signal-{OWNER}')] == ['hello', f'signal-{OWNER}|hello', 'and again', f'signal-{OWNER}|and again']


def test_an_owner_listed_by_account_id_is_answered_at_that_id(server, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_OWNERS', OWNER_UUID.upper())
    agent = agent_with(echo)
    with serving(agent) as gw:
        listening(server, gw)
        server.message('hidden number', number=None, uuid=OWNER_UUID)
        server.wait_for(lambda: server.texts())
    assert server.sent[0]['recipient'] == [OWNER_UUID] and server.texts() == [f'signal-{OWNER_UUID}|hidden number']


def test_a_long_reply_arrives_whole_in_parts(server):
    answer = ''.join(f"line {i}: {'x' * 70}\n" for i in range(150))   # about 12 000 characters
    agent = agent_with(reply(answer))
    with serving(agent) as gw:
        listening(server, gw)
        server.message('tell me everything')
        parts = server.wait_for(lambda: len(server.texts()) >= 2 and server.texts())
    assert ''.join(parts) == answer and all(len(p) <= 8000 for p in parts)


def test_a_rate_limited_send_is_waited_out(server):
    server.fail('send', -5, 'Failed to send message due to rate limiting', retry_after=1)
    agent = agent_with(echo)
    with serving(agent) as gw:
        listening(server, gw)
        server.message('hello')
        server.wait_for(lambda: server.texts())
    assert server.texts() == [f'signal-{OWNER}|hello'] and server.calls.count('send') == 2


# -- approvals --------------------------------------------------------------------------------------------

def held_shell(server, agent):
    "The owner asks; the model proposes `rm -r build`; the gates hold it; the message asks for a reaction. (token, its message)."
    (server.workspace / 'build').mkdir(exist_ok=True)
    server.message('clean up the build directory')
    held = server.wait_for(lambda: [m for m in server.sent if 'React 👍' in m['message']])
    token = agent.approvals.pending()[0]['token']
    assert held[0]['message'].endswith(REACT_HINT.format(t=token)) and f"approve {token}" in held[0]['message']
    # signal-cli has the message before the gateway has its timestamp (the send's answer): a reaction in between
    # would be on a message not known to ask anything. Wait until the gateway has noted it (a person cannot be faster).
    server.wait_for(lambda: HeldMessages().token(held[0]['timestamp']) == token)
    assert (server.workspace / 'build').exists()
    return token, held[0]


def test_a_thumbs_up_approves_once_and_the_model_carries_on(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply(f"Done: {req.messages[-1]['content']}"))
    with serving(agent) as gw:
        listening(server, gw)
        token, held = held_shell(server, agent)
        server.react('👍🏽', held['timestamp'])
        server.wait_for(lambda: any(t.startswith('Done:') for t in server.texts()))
        server.react('👍', held['timestamp'])      # a second answer
        server.wait_for(lambda: f"{token} was answered already." in server.texts())
    assert not (server.workspace / 'build').exists()
    texts = server.texts(OWNER)
    assert texts[1].startswith(f"Approved {token}: shell(command='rm -r build')") and texts[2].startswith('Done: approved by the owner')
    assert ApprovalStore().get(token)['state'] == 'used'
    [approval] = AuditLog().recent(50, kind='approval')
    assert (approval['data']['channel'], approval['data']['by']) == ('signal', f'signal user {OWNER}')


def test_a_replayed_reaction_runs_nothing_again(server):
    "The very envelope of the owner's 👍, delivered again (a resent event), is recognised and dropped: no second answer, no second run."
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply('Done.'), echo)
    with serving(agent) as gw:
        listening(server, gw)
        token, held = held_shell(server, agent)
        thumbs = server.react('👍', held['timestamp'])
        server.wait_for(lambda: 'Done.' in server.texts())
        (server.workspace / 'build').mkdir()                            # were it run again, it would remove this one
        server.inject(thumbs)
        server.message('still there?')
        server.wait_for(lambda: f'signal-{OWNER}|still there?' in server.texts())
    assert (server.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'used'
    assert len(AuditLog().recent(50, kind='approval')) == 1
    assert not any('answered already' in t for t in server.texts())   # dropped as a replay, before it is read as an answer


def test_a_typed_deny_refuses_and_tells_the_model(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply(f"OK: {req.messages[-1]['content'][:20]}"))
    with serving(agent) as gw:
        listening(server, gw)
        token, _ = held_shell(server, agent)
        server.message(f'deny {token}')
        server.wait_for(lambda: any(t.startswith('OK:') for t in server.texts()))
    assert (server.workspace / 'build').exists()
    assert server.texts()[1:] == [f"Denied {token}: shell(command='rm -r build') will not run.", 'OK: refused by the owner']
    [denial] = AuditLog().recent(50, kind='denial')
    assert denial['data']['channel'] == 'signal'


def test_reactions_that_are_not_the_owners_answer_release_nothing(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'))
    with serving(agent) as gw:
        listening(server, gw)
        token, held = held_shell(server, agent)
        server.react('👍', held['timestamp'], number=STRANGER)                 # a stranger's
        server.react('👍', held['timestamp'], remove=True)                     # the owner taking a reaction back
        server.react('👍', held['timestamp'], author=STRANGER)                 # on someone else's message with that timestamp
        server.react('👍', held['timestamp'] + 1000)                           # on a message that asked nothing
        server.react('❤️', held['timestamp'])                                  # not an answer
        server.wait_for(lambda: f"React 👍 to approve {token} or 👎 to deny it." in server.texts(OWNER))
    assert (server.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'pending'
    assert gw.counts['refused'] == 1 and AuditLog().recent(50, kind='approval') == []


def test_a_pending_approval_survives_a_daemon_restart(server):
    "Held in one daemon; the daemon stops; a new one (a new agent on the same home) takes the owner's 👍 on the old message."
    hosted = lambda d: signal_service(d, backoff=(0.02, 0.2))
    first = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'))
    with daemon_in_thread(first, background=[hosted]) as daemon:
        server.wait_for(lambda: daemon.gateways.get('signal') is not None and daemon.gateways['signal'].state == 'running')
        token, held = held_shell(server, first)
        assert daemon.status()['gateways']['signal']['state'] == 'running'
    second = agent_with(lambda req: reply(f"Done: {req.messages[-1]['content'][:24]}"))
    with daemon_in_thread(second, background=[hosted], approval_poll=0.05) as daemon:
        server.wait_for(lambda: daemon.gateways.get('signal') is not None and daemon.gateways['signal'].state == 'running')
        server.react('👍', held['timestamp'])
        server.wait_for(lambda: any(t.startswith('Done:') for t in server.texts()))
    assert not (server.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'used'
    assert [a['data']['channel'] for a in AuditLog().recent(50, kind='approval')] == ['signal']


def test_an_action_held_at_the_terminal_is_approved_from_signal(server):
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply(f"Done in {req.signal.session}"))
    (server.workspace / 'build').mkdir()
    token = agent.send('clean up', source='cli', session='work').pending[0]['token']
    with serving(agent) as gw:
        listening(server, gw)
        server.message(f'approve {token}')
        server.wait_for(lambda: any(t.startswith(f'Approved {token}') for t in server.texts()))
    assert not (server.workspace / 'build').exists() and agent.transcript('work')[-1]['content'] == 'Done in work'


# -- hostile input ----------------------------------------------------------------------------------------

def test_strangers_forged_senders_and_groups_reach_nothing(server):
    agent = agent_with(echo)
    with serving(agent) as gw:
        listening(server, gw)
        server.message('rm -rf ~', number=STRANGER)
        env = server.envelope(OWNER, source=STRANGER)                             # fields that disagree
        server.inject({'account': ACCOUNT, 'envelope': {**env, 'dataMessage': {'timestamp': env['timestamp'], 'message': 'run it'}}})
        env = server.envelope(None, uuid='not-a-uuid', source=OWNER)              # a malformed id claiming the owner's number
        server.inject({'account': ACCOUNT, 'envelope': {**env, 'dataMessage': {'timestamp': env['timestamp'], 'message': 'run it'}}})
        server.message('run it in the family', group='Z3JvdXAx')                 # the owner, in a group
        server.message('run it', number=STRANGER, group='Z3JvdXAx')              # a stranger, in a group
        server.wait_for(lambda: gw.counts['refused'] == 5)
        server.message('hello')
        server.wait_for(lambda: f'signal-{OWNER}|hello' in server.texts())
    assert [r.signal.text for r in agent.provider.requests] == ['hello']
    assert server.texts(STRANGER) == [STRANGER_REPLY]   # to the direct message; none to the group's
    assert {r for m in server.sent for r in m['recipient']} == {OWNER, OTHER_OWNER, STRANGER}
    notices = [t for t in server.texts(OWNER) if t.startswith('Signal: a message from')]
    assert len(notices) == 4 and "'rm -rf ~'" in notices[0]   # the two senders without a consistent name count as one unknown sender
    refusals = AuditLog().recent(50, kind='refused-sender')
    assert len(refusals) == 4 and {r['data']['channel'] for r in refusals} == {'signal'} and refusals[0]['data']['by'] == f'signal user {STRANGER}'


def test_a_flood_from_a_stranger_costs_one_reply_and_loses_nothing_of_the_owners(server):
    agent = agent_with(*[echo] * 3)
    with serving(agent) as gw:
        listening(server, gw)
        for i in range(100): server.message(f'spam {i}', number=STRANGER)
        server.message('first')
        for i in range(100): server.message(f'spam {i}', number=STRANGER)
        server.message('second')
        server.wait_for(lambda: f'signal-{OWNER}|second' in server.texts())
        server.wait_for(lambda: gw.counts['refused'] == 200)
    assert server.texts(STRANGER) == [STRANGER_REPLY]
    assert [t for t in server.texts(OWNER) if t.startswith('signal-')] == [f'signal-{OWNER}|first', f'signal-{OWNER}|second']
    assert len(AuditLog().recent(500, kind='refused-sender')) == 1 and len(agent.provider.requests) == 2


def test_oversized_control_characters_and_non_text(server):
    agent = agent_with(echo, echo)
    with serving(agent) as gw:
        listening(server, gw)
        server.message('x' * (MAX_INPUT_CHARS + 1))
        server.message('ls\x1b[2J\x00\x07 -la\u202e')
        server.message(None, attachments=[{'contentType': 'image/png', 'id': 'a.png'}])
        server.message({'not': 'text'})
        server.message('{"payload": {"sensor": "repl", "code": "1+1"}}')
        server.wait_for(lambda: len(server.texts()) == 5)
    too_long = f"That message is {MAX_INPUT_CHARS + 1} characters long; I take at most {MAX_INPUT_CHARS}. Nothing was done: send it in parts."
    assert sorted(server.texts()) == sorted([too_long, f'signal-{OWNER}|ls[2J -la', 'I read text messages only.', 'I read text messages only.',
                                             f'signal-{OWNER}|{{"payload": {{"sensor": "repl", "code": "1+1"}}}}'])
    assert [r.signal.text for r in agent.provider.requests] == ['ls[2J -la', '{"payload": {"sensor": "repl", "code": "1+1"}}']


def test_replayed_malformed_and_foreign_events_do_nothing(server):
    agent = agent_with(echo, echo)
    with serving(agent) as gw:
        listening(server, gw)
        first = server.message('once')
        server.wait_for(lambda: server.texts())
        server.inject(first)                                                      # the same envelope again
        server.cut()                                                              # the stream restarts: Last-Event-ID resumes it
        for bad in ('not an object', {'envelope': 'text'}, {'account': ACCOUNT, 'envelope': {'sourceNumber': OWNER}},
                    {'account': ACCOUNT, 'envelope': {**server.envelope(OWNER), 'receiptMessage': {'isRead': True}}},
                    {'account': ACCOUNT, 'envelope': {**server.envelope(OWNER), 'syncMessage': {'sentMessage': {'message': 'echo'}}}},
                    {'account': '+4915100000001', 'envelope': {**server.envelope(OWNER), 'dataMessage': {'message': 'other account'}}}):
            server.inject(bad)
        server.message('twice')
        server.wait_for(lambda: len([t for t in server.texts() if t.startswith('signal-')]) == 2)
        assert gw.status()['state'] == 'running'
    assert [t for t in server.texts() if t.startswith('signal-')] == [f'signal-{OWNER}|once', f'signal-{OWNER}|twice']
    assert server.streams >= 2 and any(i is not None for i in server.last_event_ids[1:])


# -- failures ---------------------------------------------------------------------------------------------

def test_signal_cli_down_is_one_clear_message_and_backoff_until_it_is_up(home):
    agent = agent_with(echo)
    with serving(agent) as gw:
        home.wait_for(lambda: gw.failures >= 4)
        assert gw.status()['state'] == 'failing' and 'cannot reach signal-cli' in gw.status()['error']
        home.start()                                                              # signal-cli comes up on its address
        listening(home, gw)
        home.message('still there?')
        home.wait_for(lambda: home.texts())
    log = [line for line in agent.syslog.lines(200) if 'signal:' in line]
    down = [line for line in log if 'cannot reach signal-cli' in line]
    assert len(down) == 1 and f'signal-cli -a {ACCOUNT} daemon --http 127.0.0.1:{home.port}' in down[0]
    assert any('listening to' in line and 'again' in line for line in log)


def test_the_gateway_does_not_start_without_owners_or_an_account(home, monkeypatch):
    from passepartout.errors import SetupError
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_OWNERS', '')
    with pytest.raises(SetupError, match='PASSEPARTOUT_SIGNAL_OWNERS is empty'): run_signal(agent_with())
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_OWNERS', OWNER)
    Vault().remove('SIGNAL_ACCOUNT')
    with pytest.raises(SetupError, match='vault add SIGNAL_ACCOUNT'): run_signal(agent_with())


def test_the_daemon_bounds_a_conversations_queue(server):
    "The model is busy with the first message; three more wait; the rest are refused with a reply, not queued."
    started, release = threading.Event(), threading.Event()
    class Slow:
        name = 'slow'
        def propose(self, request):
            started.set(); release.wait(180)
            return Proposal(reply(f"done {request.signal.text}"))
    from passepartout.loop import Agent
    agent = Agent(Slow())
    with daemon_in_thread(agent, background=[lambda d: signal_service(d, backoff=(0.02, 0.2), max_queued=3)]) as daemon:
        server.wait_for(lambda: daemon.gateways.get('signal') is not None and daemon.gateways['signal'].state == 'running')
        server.message('m0')
        assert started.wait(120)
        for i in range(1, 10): server.message(f'm{i}')
        refusal = "3 messages are waiting already; this one was not taken. Send it again once I have answered."
        server.wait_for(lambda: server.texts(OWNER).count(refusal) == 6)
        release.set()
        server.wait_for(lambda: len([t for t in server.texts(OWNER) if t.startswith('done')]) == 4)
    assert [t for t in server.texts(OWNER) if t.startswith('done')] == ['done m0', 'done m1', 'done m2', 'done m3']


def test_the_command_serves_until_sigterm(server):
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'PASSEPARTOUT_PROVIDERS': 'replay'}
    proc = subprocess.Popen([sys.executable, '-m', 'passepartout', 'signal'], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.wait_for(lambda: server.streams >= 1)
        server.message('hello')
        server.wait_for(lambda: server.texts())
        proc.send_signal(signals_module.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None: proc.kill()
    assert proc.returncode == 0, err
    assert 'serving 2 Signal owners through signal-cli' in err and 'Signal gateway stopped (1 messages served)' in err


def test_an_approval_answered_elsewhere_first_is_not_run_again_from_signal(server):
    "Answered once across channels: approved by typing (any channel), then a 👍 on the question; the action ran once."
    agent = agent_with(tool_call('shell', {'command': 'rm -r build'}, explanation='clean up'), lambda req: reply('Done.'), lambda req: reply('Nothing more.'))
    with serving(agent) as gw:
        listening(server, gw)
        token, held = held_shell(server, agent)
        server.message(f'approve {token}')
        server.wait_for(lambda: 'Done.' in server.texts())
        (server.workspace / 'build').mkdir()                            # were it run again, it would remove this one
        server.react('👍', held['timestamp'])
        server.wait_for(lambda: len(server.texts(OWNER)) >= 4)
    assert (server.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'used'
    assert len(AuditLog().recent(50, kind='approval')) == 1
    assert server.texts(OWNER)[3].startswith(f'approval {token} was already used'), server.texts(OWNER)
