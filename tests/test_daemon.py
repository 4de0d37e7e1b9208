"""The daemon for real: loopback TCP, handshake, sessions, signals, the command line as a subprocess."""
import json, os, signal, socket, subprocess, sys, textwrap, threading, time
from pathlib import Path

import pytest

from passepartout.daemon import (Client, Daemon, client_send, client_status, daemon_running, read_address, request,
                                 state_files)
from passepartout.errors import PassepartoutError, ProtocolError
from passepartout.loop import Agent
from passepartout.protocol import encode_frame, recv_frame, send_frame
from _daemon_support import InstantModel, ScriptModel, daemon_in_thread, readable, token_of, wait_for

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from passepartout.cli import main; main()']


def raw_connect(daemon):
    return socket.create_connection(daemon.address, timeout=60)


def test_loopback_only():
    for host in ('0.0.0.0', '192.168.1.10', ''):
        with pytest.raises(ValueError, match='loopback only'): Daemon(Agent(InstantModel()), host=host)


def test_token_file_is_private_and_renewed(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as d:
        first = token_of(d)
        assert state_files(tmp_path)['token'].stat().st_mode & 0o777 == 0o600
        assert d.address[0] == '127.0.0.1'
    assert not state_files(tmp_path)['token'].exists()
    with daemon_in_thread(state_dir=tmp_path) as d: assert token_of(d) != first


def test_handshake_required(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as d:
        s = raw_connect(d)
        send_frame(s, request('hello'))                        # no handshake: refused and closed
        answer = recv_frame(s)
        assert answer['payload']['sensor'] == 'protocol-error' and 'handshake refused' in answer['payload']['text']
        assert s.recv(1) == b''
        s.close()
        # the model was never asked
        assert d.agent.transcripts == {}


def test_wrong_token_rejected(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as d:
        for token in ('', 'x' * 43, token_of(d)[:-1], token_of(d) + 'x', None, 12):
            s = raw_connect(d)
            send_frame(s, {'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': token}})
            assert recv_frame(s)['payload']['sensor'] == 'protocol-error'
            assert s.recv(1) == b''
            s.close()
        with pytest.raises(ProtocolError, match='handshake refused'): Client(tmp_path, token='wrong')
        with Client(tmp_path) as c:                             # the right token still works
            assert c.ask(request('hi'))['turn']['reply'] == 'default|hi'


def test_requests_sent_with_the_handshake_are_served(tmp_path):
    "Frames that arrive in the same write as the token (held by the handshake's reader) are served, in order, before anything later."
    with daemon_in_thread(state_dir=tmp_path) as d:
        s = raw_connect(d)
        hello = encode_frame({'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': token_of(d)}})
        s.sendall(hello + b''.join(encode_frame(request(t, session='piped', id=i)) for i, t in enumerate('abc')) + encode_frame(request('d', session='piped', id=3))[:9])
        assert recv_frame(s)['payload']['sensor'] == 'handshake'
        assert [recv_frame(s)['meta']['id'] for _ in range(3)] == [0, 1, 2]
        s.sendall(encode_frame(request('d', session='piped', id=3))[9:])   # the rest of a frame begun with the handshake
        answer = recv_frame(s)
        assert (answer['meta']['id'], answer['payload']['turn']['reply']) == (3, 'piped|d')
        s.sendall(encode_frame(request('e', session='piped'))[:4]); s.shutdown(socket.SHUT_WR)    # truncated, then gone
        assert 'truncated frame' in recv_frame(s)['payload']['text']
        assert s.recv(1) == b''
        s.close()


def test_silent_unauthenticated_client_is_dropped(tmp_path):
    with daemon_in_thread(state_dir=tmp_path, frame_timeout=0.3, handshake_timeout=0.3) as d:
        s = raw_connect(d)
        answer = recv_frame(s)              # dropped at its deadline: the socket's own 60 s timeout would raise instead
        assert answer['payload']['sensor'] == 'protocol-error'
        assert s.recv(1) == b''


def test_ordering_within_a_session(tmp_path):
    "Pipelined requests in one session are processed and answered strictly in order, even with jitter."
    seen = []
    def behave(text, session):
        time.sleep((hash(text) % 5) / 2000)     # part of the test: jitter, so that the order must be kept, not met by chance
        seen.append((session, int(text)))
        return text
    with daemon_in_thread(Agent(ScriptModel(behave)), state_dir=tmp_path) as d:
        clients = [Client(tmp_path) for _ in range(3)]
        for c in clients:
            for i in range(40): send_frame(c.sock, request(str(i), session=f"s{clients.index(c)}", id=i))
        for n, c in enumerate(clients):
            replies = [recv_frame(c.sock) for _ in range(40)]
            assert [r['meta']['id'] for r in replies] == list(range(40))
            assert [r['payload']['turn']['reply'] for r in replies] == [str(i) for i in range(40)]
            assert all(r['meta']['session'] == f"s{n}" for r in replies)
            c.close()
        for n in range(3): assert [i for s, i in seen if s == f"s{n}"] == list(range(40))


def test_concurrency_across_sessions(tmp_path):
    "Two sessions' turns run at the same time: each waits for the other at a barrier."
    barrier = threading.Barrier(2, timeout=120)   # a hang detector: each turn waits for the other one
    def behave(text, session):
        if text == 'meet': barrier.wait()
        return f"{session} met"
    with daemon_in_thread(Agent(ScriptModel(behave)), state_dir=tmp_path) as d:
        a, b = Client(tmp_path), Client(tmp_path)
        send_frame(a.sock, request('meet', session='A', id=1)); send_frame(b.sock, request('meet', session='B', id=1))
        assert recv_frame(a.sock)['payload']['turn']['reply'] == 'A met'
        assert recv_frame(b.sock)['payload']['turn']['reply'] == 'B met'
        a.close(); b.close()


def test_slow_session_does_not_block_others(tmp_path):
    blocking, release = threading.Event(), threading.Event()
    def behave(text, session):
        if text == 'block': blocking.set(); release.wait(120)
        return text
    with daemon_in_thread(Agent(ScriptModel(behave)), state_dir=tmp_path) as d:
        slow = Client(tmp_path)
        send_frame(slow.sock, request('block', session='slow'))
        assert blocking.wait(60)                                  # the slow turn holds its thread from now on
        for i in range(20): assert client_send(str(i), session='fast', state_dir=tmp_path)['reply'] == str(i)
        assert not readable(slow.sock)      # served while the slow turn was still blocked
        release.set()
        assert recv_frame(slow.sock)['payload']['turn']['reply'] == 'block'
        slow.close()


def test_a_watched_turn_stops_when_its_client_leaves_even_while_the_model_is_silent(tmp_path):
    "Ctrl-C in the chat or the TUI closes the connection; the turn ends without waiting for the model, which never answers here."
    blocking, release = threading.Event(), threading.Event()
    def behave(text, session):
        if text == 'block': blocking.set(); release.wait(120)
        return text
    with daemon_in_thread(Agent(ScriptModel(behave)), state_dir=tmp_path) as d:
        watcher = Client(tmp_path)
        envelope = request('block', session='s'); envelope['meta'].update(id=1, progress=True)
        send_frame(watcher.sock, envelope)
        assert blocking.wait(60)
        watcher.close()                                           # the person pressed Ctrl-C
        assert client_send('next', session='s', state_dir=tmp_path)['reply'] == 'next'   # same session: the stopped turn let it run
        release.set()


def test_progress_frames_come_before_their_reply_under_load(tmp_path):
    "20 clients, 4 requests in flight each, all asking for progress: every request's events arrive, in order, before its reply."
    import asyncio
    from passepartout.daemon import AsyncClient
    async def one(address, token, n, problems):
        client, session, events, done = await AsyncClient.connect(address, token), f"p{n}", {}, set()
        for i in range(20):
            envelope = request(f"m{i}", session=session, id=i); envelope['meta']['progress'] = True
            client.send(envelope)
        while len(done) < 20:
            frame = await asyncio.wait_for(client.receive(), 60)
            i, payload = frame['meta']['id'], frame['payload']
            if i in done: problems.append((session, i, 'a frame after its reply'))
            if payload['sensor'] == 'progress': events.setdefault(i, []).append(payload['event']['kind'])
            else:
                done.add(i)
                if events.get(i) != ['proposal', 'verdict', 'reply'] or payload['turn']['reply'] != f"{session}|m{i}":
                    problems.append((session, i, events.get(i), payload.get('turn', payload).get('reply')))
        await client.close()
    with daemon_in_thread(state_dir=tmp_path) as d:
        problems = []
        async def run(): await asyncio.gather(*(one(d.address, token_of(d), n, problems) for n in range(20)))
        asyncio.run(run())
    assert problems == []


def test_a_batch_that_fails_outside_its_turns_leaves_the_session_serving(tmp_path):
    "A failure of the daemon's own around a batch (here: for a background job, which has no client) is logged, and the session's next message still runs."
    from passepartout.signals import Signal
    with daemon_in_thread(state_dir=tmp_path) as d:
        run, failed = d._run_batch, []
        def once(batch):
            if not failed: failed.append(batch); raise KeyboardInterrupt('pretend')
            return run(batch)
        d._run_batch = once
        d.loop.call_soon_threadsafe(d.enqueue, Signal('EVENT', {'session': 'job', 'source': 'cron'}, {'sensor': 'user-input', 'text': 'tick'}))
        assert wait_for(lambda: failed and not d.workers)
        assert any('KeyboardInterrupt: pretend' in text for _, _, text in d.agent.syslog.entries)
        assert client_send('next', session='job', state_dir=tmp_path, timeout=60)['reply'] == 'job|next'


def test_a_turn_that_raises_is_one_error_reply(tmp_path):
    def behave(text, session):
        if text == 'crash': raise MemoryError('pretend')
        return text
    agent = Agent(ScriptModel(behave))
    original = agent.process
    agent.process = lambda s: (_ for _ in ()).throw(RuntimeError('boom')) if s.text == 'explode' else original(s)
    with daemon_in_thread(agent, state_dir=tmp_path) as d:
        with Client(tmp_path) as c:
            assert c.ask(request('explode'))['sensor'] == 'error'
            crashed = c.ask(request('crash'))             # the loop's own recovery turns it into a turn
            assert crashed['sensor'] == 'turn' and crashed['turn']['errors']
            assert c.ask(request('fine'))['turn']['reply'] == 'fine'
        with pytest.raises(PassepartoutError, match='RuntimeError: boom'): client_send('explode', state_dir=tmp_path)


def test_forged_owner_and_meta_are_overridden(tmp_path):
    captured = []
    agent = Agent(InstantModel())
    agent.handlers.register('user-input', lambda s: captured.append(dict(s.meta)))
    with daemon_in_thread(agent, state_dir=tmp_path) as d:
        with Client(tmp_path) as c:
            env = request('x', session='mine'); env['meta'].update(owner='nobody', connection='forged')
            c.ask(env)
            bad = request('x'); bad['meta']['session'] = ['not', 'a', 'string']
            assert c.ask(bad)['sensor'] == 'protocol-error'
            bad = request('x'); bad['meta'] = 'oops'
            send_frame(c.sock, bad)
            assert recv_frame(c.sock)['payload']['sensor'] == 'protocol-error'
            assert c.ask(request('still here'))['sensor'] == 'turn'
    from passepartout.daemon import OWNER
    assert captured[0]['owner'] is OWNER and captured[0]['session'] == 'mine'


def test_repl_through_the_daemon(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as d:
        with Client(tmp_path) as c:
            r = c.ask(request('x = 6 * 7\nx', session='repl', sensor='repl'))
            assert r['turn']['reply'] == '42'
            r = c.ask(request('type(agent).__name__', session='repl', sensor='repl'))
            assert r['turn']['reply'] == "'Agent'"
        # the model never saw the repl
        assert 'repl' not in d.agent.transcripts
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(tmp_path / 'none')}
    out = subprocess.run(CLI + ['repl', '1+1'], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and 'no daemon is running' in out.stderr


def test_max_frame_size(tmp_path):
    with daemon_in_thread(state_dir=tmp_path, max_frame_bytes=1000) as d:
        with Client(tmp_path) as c:
            send_frame(c.sock, request('x' * 2000))      # oversized: error then disconnect
            answer = recv_frame(c.sock)
            assert 'exceeds the limit of 1000' in answer['payload']['text'] and answer['payload']['fatal']
            assert c.sock.recv(1) == b''
        assert client_send('small', state_dir=tmp_path)['reply'] == 'default|small'


def test_status(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as d:
        client_send('a', session='one', state_dir=tmp_path); client_send('b', session='two', state_dir=tmp_path)
        st = client_status(timeout=120, state_dir=tmp_path)
        assert st['pid'] == os.getpid() and st['address'] == f"127.0.0.1:{d.port}" and st['sessions'] == 2
        assert st['uptime'] >= 0 and st['memory_kb'] > 0 and st['replies'] == 2
        assert read_address(tmp_path) == ('127.0.0.1', d.port)
    assert not daemon_running(tmp_path)


SERVER = textwrap.dedent('''
    import asyncio, os, sys, time
    from passepartout.daemon import Daemon
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.signals import reply

    class Slow:
        name = 'slow'
        def propose(self, request):
            text = request.signal.text
            if text.startswith('hold '):                   # in flight until the test creates the file named
                open(text[5:] + '.started', 'w').close()
                while not os.path.exists(text[5:]): time.sleep(0.01)
            return Proposal(reply('done ' + text))

    def save(): open(sys.argv[1], 'w').write('saved')
    asyncio.run(Daemon(Agent(Slow()), port=0, save_hooks=[save]).serve(lambda d: print('ready', flush=True)))
''')


def start_subprocess_daemon(tmp_path):
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(tmp_path / 'home')}
    script = tmp_path / 'server.py'; script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / 'saved')], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'ready', proc.stderr.read()
    return proc, env, tmp_path / 'home' / 'state'


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_signal_graceful_exit(tmp_path, sig):
    proc, env, state = start_subprocess_daemon(tmp_path)
    try:
        assert daemon_running(state)
        c = Client(state)
        go = tmp_path / 'go'
        send_frame(c.sock, request(f'hold {go}', id=1))      # a turn in flight when the signal comes
        assert wait_for(lambda: (tmp_path / 'go.started').exists())
        proc.send_signal(sig)
        go.touch()                                            # the turn can end now, after the signal
        answer = recv_frame(c.sock)                           # it is finished, not dropped
        assert answer['payload']['turn']['reply'] == f'done hold {go}'
        assert proc.wait(60) == 0
        assert (tmp_path / 'saved').read_text() == 'saved'   # the save hook ran
        assert sorted(p.name for p in state.iterdir()) == []  # pid, port and token removed
        with pytest.raises(OSError): socket.create_connection(read_address(state) or ('127.0.0.1', 1), timeout=1)
    finally:
        if proc.poll() is None: proc.kill()


def test_cli_status_json_and_stop(tmp_path):
    proc, env, state = start_subprocess_daemon(tmp_path)
    try:
        client_send('hello', session='s', state_dir=state)
        out = subprocess.run(CLI + ['daemon', 'status', '--json'], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        st = json.loads(out.stdout)
        assert st['running'] and st['pid'] == proc.pid and st['address'].startswith('127.0.0.1:') and st['sessions'] == 1
        out = subprocess.run(CLI + ['daemon', 'status'], capture_output=True, text=True, env=env)
        assert out.stdout.startswith(f"running: pid {proc.pid}")
        out = subprocess.run(CLI + ['daemon', 'stop'], capture_output=True, text=True, env=env)
        assert out.returncode == 0 and f"stopped daemon {proc.pid}" in out.stdout, out.stderr
        assert proc.wait(60) == 0
        out = subprocess.run(CLI + ['daemon', 'status', '--json'], capture_output=True, text=True, env=env)
        assert out.returncode == 1 and json.loads(out.stdout) == {'running': False}
    finally:
        if proc.poll() is None: proc.kill()


def test_cli_start_background_send_stop(tmp_path):
    "The real command line: start in the background, a turn through `send`, status, stop."
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(tmp_path / 'home'), 'PASSEPARTOUT_WORKSPACE': str(tmp_path),
           'PASSEPARTOUT_HEARTBEAT_INTERVAL': '0.05'}
    out = subprocess.run(CLI + ['daemon', 'start', '--port', '0', '--wait', '120'], capture_output=True, text=True, env=env, timeout=180)
    state = tmp_path / 'home' / 'state'
    try:
        assert out.returncode == 0, out.stderr + (state / 'daemon.log').read_text()
        assert 'listening on 127.0.0.1:' in out.stdout
        again = subprocess.run(CLI + ['daemon', 'start', '--port', '0'], capture_output=True, text=True, env=env)
        assert again.returncode == 1 and 'already running' in again.stderr
        st = json.loads(subprocess.run(CLI + ['daemon', 'status', '--json'], capture_output=True, text=True, env=env).stdout)
        assert st['running']
        assert 'doctor: ' in (state / 'daemon.log').read_text()   # the doctor ran at start (and did not stop it)
        with pytest.raises(ProtocolError, match='handshake refused'): Client(state, token='guess')
        assert 'WARNING refused a connection from 127.0.0.1:' in (state / 'daemon.log').read_text()   # a failed attempt is logged
        turn = client_send('hello', state_dir=state, timeout=60)
        assert isinstance(turn, dict) and {'reply', 'replies', 'events'} <= set(turn)
    finally:
        stop = subprocess.run(CLI + ['daemon', 'stop'], capture_output=True, text=True, env=env)
    assert stop.returncode == 0, stop.stderr
    assert not daemon_running(state)
