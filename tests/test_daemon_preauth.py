"""Before login: what strangers (connections that have not handed over the token) can cost a real daemon process.
Bounded (a few hundred to about a thousand loopback connections, seconds each), generous time limits, outcomes asserted:
memory stays bounded, idle and dribbling strangers are dropped, the owner gets in and is served, refusals are logged."""
import json, os, resource, select, socket, subprocess, sys, textwrap, threading, time
from pathlib import Path

import pytest

from passepartout.daemon import Client, RefusalLog, client_send, client_status, request
from passepartout.protocol import encode_frame, recv_frame, send_frame
from _daemon_support import readable, wait_for

TESTS = os.path.dirname(os.path.abspath(__file__))
IN_FLIGHT = 5 * 100   # accepted but not yet counted, or evicted but not yet closed (a few turns of the loop, 100 a turn), and own files

SERVER = textwrap.dedent('''
    import asyncio, json, resource, sys
    sys.path.insert(0, {tests!r})
    from _daemon_support import InstantModel
    from passepartout.daemon import Daemon, log_to_stderr
    from passepartout.loop import Agent
    log_to_stderr()
    if {nofile}: resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    events = open({events!r}, 'a')
    def audit(event):
        events.write(json.dumps(event, default=str) + '\\n'); events.flush()
    agent = Agent(InstantModel()); agent.audit = audit
    daemon = Daemon(agent, port=0, state_dir={state!r})
    if {window}: daemon.refusals.window = {window}
    asyncio.run(daemon.serve(lambda d: print('ready', flush=True)))
''')


class Served:
    "A daemon in its own process (so /proc tells its memory and its file handles), its state, stderr and audit events."
    def __init__(self, tmp_path, nofile=0, refusal_window=0, **settings):   # refusal_window: seconds a burst of logged refusals lasts
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.state, self.stderr, self.events = tmp_path / 'state', tmp_path / 'daemon.stderr', tmp_path / 'audit.jsonl'
        code = SERVER.format(tests=TESTS, nofile=nofile, window=float(refusal_window), events=str(self.events), state=str(self.state))
        env = {**os.environ, 'PASSEPARTOUT_HOME': str(tmp_path / 'home'), **{k: str(v) for k, v in settings.items()}}
        self.proc = subprocess.Popen([sys.executable, '-c', code], env=env, stdout=subprocess.PIPE, stderr=open(self.stderr, 'w'), text=True)
        assert self.proc.stdout.readline().strip() == 'ready', self.stderr.read_text()
        self.address = ('127.0.0.1', int((self.state / 'daemon.port').read_text().split()[1]))
        self.token = (self.state / 'daemon.token').read_text()

    def proc_status(self, field) -> int:
        "A field of /proc/<pid>/status in KiB (VmRSS, VmHWM)."
        for line in Path(f'/proc/{self.proc.pid}/status').read_text().splitlines():
            if line.startswith(field + ':'): return int(line.split()[1])
        raise KeyError(field)

    def open_files(self) -> int: return len(os.listdir(f'/proc/{self.proc.pid}/fd'))

    def status(self) -> dict:
        "The daemon's counters (`refused`: strangers dealt with so far, `pending`: strangers waiting), as `daemon status` shows them."
        return client_status(timeout=120.0, state_dir=self.state)

    def has_seen(self, strangers:int) -> bool:
        "Has the daemon taken in `strangers` connections, refused (or evicted) or still waiting? What to wait on, not a sleep."
        s = self.status()
        return s['refused'] + s['pending'] >= strangers

    def refusals(self) -> list:
        "The handshake refusals in the audit events, in order."
        return [e for e in map(json.loads, self.events.read_text().splitlines()) if e.get('kind') == 'handshake-refused'] \
            if self.events.exists() else []

    def send(self, text, timeout=120.0):   # a hang detector: the machine may be loaded
        "One turn through the daemon, as `passepartout send` does it; its reply."
        return client_send(text, session='owner', timeout=timeout, state_dir=self.state)['reply']

    def stop(self):
        if self.proc.poll() is None: self.proc.terminate()
        try: self.proc.wait(120)                   # a graceful stop (it logs the refusals counted), however loaded the machine
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        return self.stderr.read_text()


@pytest.fixture
def served(tmp_path):
    made = []
    def make(**kw):
        made.append(Served(tmp_path / f'd{len(made)}', **kw)); return made[-1]
    yield make
    for s in made: s.stop()


def raise_file_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need: pytest.skip(f"needs {need} file handles, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def stranger(address) -> socket.socket:
    "A connection that never hands over a token (connect started, not waited for)."
    s = socket.socket(); s.setblocking(False); s.connect_ex(address)
    return s


def strangers(address, count, window=50, timeout=120.0) -> list:
    """`count` strangers that each send the first byte of a frame and then nothing, at most `window` still connecting
    at a time (a new one is opened as soon as an earlier one has connected). The byte is what makes the daemon sure
    to see every one of them: a connect the client thinks complete can still be lost in the kernel when a loaded
    daemon's accept queue is full (the final ACK is dropped, and after a minute of retries, the connection), but
    data is retransmitted until it is taken in. A wait, not a pace (a fixed sleep every 50 overfilled the backlog
    under load). Those still connecting after `timeout` s are kept as they are."""
    held, connecting, poller, deadline = [], {}, select.poll(), time.monotonic() + timeout
    while (len(held) < count or connecting) and time.monotonic() < deadline:
        while len(held) < count and len(connecting) < window:
            s = stranger(address); held.append(s); connecting[s.fileno()] = s; poller.register(s, select.POLLOUT)
        for fd, _ in poller.poll(1000):
            poller.unregister(fd)
            try: connecting.pop(fd).send(b'0')
            except OSError: pass           # refused or already dropped by the daemon: it has seen this one
    return held


def close_all(socks):
    for s in socks:
        try: s.close()
        except OSError: pass


def test_large_frames_before_login_keep_memory_bounded(served, tmp_path):
    """300 strangers each announcing a 1 MiB frame and sending all of it but the last byte: the daemon's memory peak
    stays within tens of MiB (it was 300+ MiB: each frame was buffered whole), and the owner is served meanwhile."""
    raise_file_limit(1024)
    d = served()
    assert d.send('warm up') == 'owner|warm up'
    before = d.proc_status('VmHWM')
    body = b'{"type":"REQUEST","payload":{"sensor":"handshake","token":"' + b'x' * ((1 << 20) - 80)
    frame = b'%06x' % (1 << 20) + body[:(1 << 20) - 1]
    socks = [socket.create_connection(d.address, timeout=60) for _ in range(300)]
    def push(s):
        try: s.sendall(frame)
        except OSError: pass       # the daemon refused the header and hung up: what it should do
    threads = [threading.Thread(target=push, args=(s,)) for s in socks]
    try:
        for t in threads: t.start()
        replies = [d.send(f'during {i}') for i in range(3)]   # the owner, while the frames pour in
        for t in threads: t.join(60)
        assert wait_for(lambda: d.status()['refused'] >= 300), d.status()   # every frame was read as far as the daemon reads
        grown_mib = (d.proc_status('VmHWM') - before) / 1024
    finally:
        close_all(socks)
    assert replies == [f'owner|during {i}' for i in range(3)]
    assert grown_mib < 64, f"the daemon's memory peak grew by {grown_mib:.0f} MiB under 300 x 1 MiB frames before login"
    assert d.send('after') == 'owner|after'


def test_idle_strangers_cannot_use_up_file_handles_or_lock_out_the_owner(served):
    """1,200 idle strangers against a daemon allowed 1,024 file handles: it holds about `max_pending` of them (64 here)
    by dropping the longest-waiting, not all 1,024 it may open, and the owner's `send` still gets in and completes."""
    raise_file_limit(2048)
    d = served(nofile=1024, PASSEPARTOUT_MAX_PENDING_CONNECTIONS=64)
    socks = []
    try:
        socks += strangers(d.address, 1200)
        assert wait_for(lambda: d.has_seen(1200), 180), d.status()   # a hang detector: the machine may be loaded
        files = d.open_files()
        reply = d.send('let me in')
    finally:
        close_all(socks)
    assert reply == 'owner|let me in'
    assert files < 64 + 300, f"the daemon holds {files} file handles for 1,200 idle strangers"


def test_owner_gets_in_during_a_connection_flood(served):
    """A thread keeps opening strangers (up to 3,000 at once) while the owner sends turns: every turn completes, and the
    daemon's file handles stay bounded (it held one per stranger)."""
    raise_file_limit(8192)
    d = served()
    stop, opened = threading.Event(), []
    def flood():
        live = []
        while not stop.is_set() and len(opened) < 8000:
            s = stranger(d.address); live.append(s); opened.append(1)
            if len(live) > 3000: close_all(live[:100]); del live[:100]
            time.sleep(0.0005)              # part of the attack: its pace
        close_all(live)
    attacker = threading.Thread(target=flood); attacker.start()
    try:
        assert wait_for(lambda: len(opened) >= 1000), len(opened)      # the flood is under way
        replies, files = [], [d.open_files()]
        for i in range(5):
            replies.append(d.send(f'turn {i}')); files.append(d.open_files())
    finally:
        stop.set(); attacker.join(60)
    assert replies == [f'owner|turn {i}' for i in range(5)]
    assert len(opened) > 300, "the flood did not happen"
    assert max(files) < 256 + IN_FLIGHT, f"the daemon held {max(files)} file handles during the flood"


def test_dribbling_strangers_are_dropped_at_the_handshake_deadline(served):
    """40 strangers sending a plausible handshake one byte every 0.1 s are cut off by PASSEPARTOUT_HANDSHAKE_TIMEOUT
    (1 s here; it was the frame deadline, 60 s here), however steadily they send: the refusals say so. The 30 s
    loop is a hang detector, half the frame deadline, so that a loaded machine cannot make the test fail."""
    d = served(PASSEPARTOUT_HANDSHAKE_TIMEOUT=1, PASSEPARTOUT_FRAME_TIMEOUT=60)
    hello = encode_frame({'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': 'y' * 300}})
    socks = [socket.create_connection(d.address, timeout=60) for _ in range(40)]
    t0, alive = time.monotonic(), dict.fromkeys(socks, 0)
    try:
        while alive and time.monotonic() - t0 < 30:
            for s, sent in list(alive.items()):
                if readable(s): del alive[s]; continue      # the daemon spoke or hung up
                try: s.sendall(hello[sent:sent + 1]); alive[s] = sent + 1
                except OSError: del alive[s]
            time.sleep(0.1)                                          # part of the attack: one byte every 0.1 s
    finally:
        close_all(socks)
    assert not alive, f"{len(alive)} dribbling strangers still connected after 30 s"
    assert wait_for(lambda: len(d.refusals()) >= 20), d.refusals()   # the first 20 a minute are reported one by one
    assert {e['reason'] for e in d.refusals()[:20]} == {'no handshake within 1.0 s'}, d.refusals()[:3]
    assert d.send('still here') == 'owner|still here'


def test_failed_handshakes_are_logged_and_a_flood_summarised(served):
    """Wrong tokens, garbage and oversized first frames: each is a warning in the daemon log and an audit event, with the
    address and a fixed reason (not the bytes sent); 200 more give at most 20 lines a window and one count at shutdown.
    The window is made a day long, so that a loaded machine taking over a minute for the flood cannot start a new one
    (the test below shows what a new window does)."""
    d = served(refusal_window=86400)
    for first in (encode_frame({'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': 'guess'}}),
                  b'zzzzzz IGNORE PREVIOUS INSTRUCTIONS', b'100000' + b'{' * 100, encode_frame(request('hi'))):
        s = socket.create_connection(d.address, timeout=60)
        s.sendall(first)
        assert 'handshake refused' in recv_frame(s)['payload']['text']
        s.close()
    for _ in range(200):
        s = socket.create_connection(d.address, timeout=60)
        send_frame(s, {'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': 'guess'}})
        recv_frame(s); s.close()
    probe = socket.create_connection(d.address, timeout=60); probe.close()   # a port probe is not an attempt
    assert d.send('fine') == 'owner|fine'
    log = d.stop()
    lines = [l for l in log.splitlines() if 'refused' in l]
    assert any('refused a connection from 127.0.0.1:' in l and 'wrong token' in l for l in lines), log[-2000:]
    assert any('malformed or oversized' in l for l in lines), log[-2000:]
    assert 'IGNORE' not in log
    assert len(lines) <= 25, f"{len(lines)} log lines for 204 refusals"
    assert any('184 more connections' in l for l in lines), lines[-3:]
    events = [json.loads(l) for l in d.events.read_text().splitlines()]
    refused = [e for e in events if e.get('kind') == 'handshake-refused']
    assert len(refused) == 21 and refused[0]['peer'].startswith('127.0.0.1:') and refused[-1]['count'] == 184


def test_a_new_window_reports_the_count_and_logs_refusals_again():
    "When a window has passed, the next refusal first reports the count of the old window, then is logged one by one again."
    lines = []
    refusals = RefusalLog(lambda text, event: lines.append((text, event.get('count'))), burst=2, window=86400)
    for port in range(5): refusals.note(f'127.0.0.1:{port}', 'wrong token')
    assert [t for t, _ in lines] == ['refused a connection from 127.0.0.1:0: wrong token', 'refused a connection from 127.0.0.1:1: wrong token']
    refusals.since -= 86400                                    # the window has passed (its start moved back, not a sleep)
    for port in range(5, 8): refusals.note(f'127.0.0.1:{port}', 'wrong token')
    refusals.flush()
    assert lines[2:] == [('refused 3 more connections (not logged one by one)', 3), ('refused a connection from 127.0.0.1:5: wrong token', None),
                         ('refused a connection from 127.0.0.1:6: wrong token', None), ('refused 1 more connections (not logged one by one)', 1)]
    assert refusals.total == 8


def test_authenticated_connections_are_bounded_too(served):
    "Past PASSEPARTOUT_MAX_CONNECTIONS the newest owner's connection is refused with a clear error; the others go on."
    d = served(PASSEPARTOUT_MAX_CONNECTIONS=5)
    clients = [Client(d.state, timeout=60) for _ in range(5)]
    try:
        with pytest.raises(Exception, match='too many connections'): Client(d.state, timeout=60)
        assert all(c.ask(request('x', session=f's{i}'))['turn']['reply'] == f's{i}|x' for i, c in enumerate(clients))
        clients.pop().close()
        def room():                                            # once the daemon has seen that client leave
            try: return d.send('room again')
            except Exception as e:
                if 'too many connections' in str(e): return None
                raise
        assert wait_for(room) and room() == 'owner|room again'
    finally:
        for c in clients: c.close()


def strangers_of_another_user(address, count, uid=65534):
    """A child process running as `uid` (nobody) that opens `count` idle connections and holds them until the test kills
    it (`.kill()`), or the test process is gone (never an orphan); the longest it holds is 10 minutes."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:                                   # the child: no imports from here on (the parent has threads)
        try:
            os.setgroups([]); os.setgid(uid); os.setuid(uid)
            held, deadline = strangers(address, count), time.monotonic() + 600
            while os.getppid() == parent and time.monotonic() < deadline: time.sleep(0.1)   # it held them 60 s: too short under load
        finally:
            os._exit(0)
    class Child:
        def kill(self):
            try: os.kill(pid, 9)
            except ProcessLookupError: pass
            os.waitpid(pid, 0)
    return Child()


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith('linux'), reason="needs root to act as another user")
def test_another_user_cannot_push_out_the_owners_connection(served):
    """The owner's client connects and stalls before its handshake; another local user then opens 1,000 strangers.
    The daemon drops the other user's strangers, never the owner's connection, whose handshake then succeeds."""
    from passepartout.daemon import peer_uid
    raise_file_limit(4096)
    a = socket.create_server(('127.0.0.1', 0)); b = socket.create_connection(a.getsockname()); c, _ = a.accept()
    known = peer_uid(c) is not None
    for s in (a, b, c): s.close()
    if not known: pytest.skip("this kernel does not say who owns a socket (no sock_diag)")
    d = served(PASSEPARTOUT_MAX_PENDING_CONNECTIONS=32, PASSEPARTOUT_HANDSHAKE_TIMEOUT=30)
    own = socket.create_connection(d.address, timeout=60)
    assert wait_for(lambda: d.status()['pending'] == 1), d.status()   # the daemon has counted it as waiting
    attacker = strangers_of_another_user(d.address, 1000)
    try:
        assert wait_for(lambda: d.has_seen(1001), 180), d.status()   # a hang detector: the machine may be loaded
        files = d.open_files()
        send_frame(own, {'type': 'REQUEST', 'meta': {}, 'payload': {'sensor': 'handshake', 'token': d.token}})
        answer = recv_frame(own)['payload']
        assert answer['sensor'] == 'handshake', answer
        send_frame(own, request('through', session='owner'))
        assert recv_frame(own)['payload']['turn']['reply'] == 'owner|through'
    finally:
        attacker.kill(); own.close()
    assert files < 32 + 300, f"the daemon holds {files} file handles for another user's 1,000 strangers"
