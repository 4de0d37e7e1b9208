"""Fuzz the daemon's wire protocol with hypothesis: random bytes and malformed frames, authenticated or
not, never crash the server, every bad connection ends, and a well-behaved client keeps being served.
Bodies of a costly shape (deep nesting, very long numbers) are one protocol error, never an exception."""
import json, socket, time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from passepartout.daemon import Client, request
from passepartout.errors import ProtocolError
from passepartout.protocol import decode_body, encode_frame, recv_frame, send_frame
from _daemon_support import daemon_in_thread, readable, token_of

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)


def body_frame(body: bytes) -> bytes: return b'%06x' % len(body) + body


def nested(depth: int, opener: bytes, closer: bytes, inner: bytes = b'') -> bytes:
    "`depth` levels of `opener`...`closer` around `inner`."
    return opener * depth + inner + closer * depth

costly_bodies = st.one_of(
    st.tuples(st.integers(1, 3000), st.sampled_from([(b'[', b']'), (b'{"a":', b'}'), (b'[{"k":', b'}]')]))
      .map(lambda t: nested(t[0], *t[1], inner=b'1')),                                 # deep, well formed
    st.integers(1, 3000).map(lambda n: b'[' * n),                                      # deep, never closed
    st.integers(90, 3000).map(lambda n: b'{"n": ' + b'9' * n + b'}'),                  # long integers
    st.integers(90, 3000).map(lambda n: b'{"n": 0.' + b'1' * n + b'e' + b'7' * n + b'}'),  # long fractions, exponents
    st.integers(1, 2000).map(lambda n: b'{"s": "' + b'\\"' * n + b'[' * n),          # escaped quotes, unterminated
)

pieces = st.one_of(
    st.binary(max_size=64),                                                            # raw noise
    json_values.map(lambda v: body_frame(json.dumps(v).encode())),                     # well framed, any JSON value
    st.dictionaries(st.sampled_from(['type', 'meta', 'payload', 'depth', 'text']), json_values, max_size=5)
      .map(lambda d: body_frame(json.dumps(d).encode())),                              # envelope-ish objects
    st.binary(max_size=40).map(body_frame),                                            # well framed, bytes body
    st.binary(min_size=6, max_size=6),                                                 # a random header
    st.tuples(st.integers(0, 5000), st.binary(max_size=50)).map(lambda t: b'%06x' % t[0] + t[1]),  # length lies
    costly_bodies.filter(lambda b: len(b) <= 4096).map(body_frame),                  # costly shapes
    st.sampled_from([b'ffffff', b'FFFFFF{}', b'-00002{}', b' 0002{}', b'0x0002', b'00002g{}',
                     b'000004\xff\xfe\xfd\xfc', b'000002[]', b'000004null', b'00000a{"a":"\xed\xa0\x80"}']),
)


@pytest.fixture(scope='module')
def served(tmp_path_factory):
    state = tmp_path_factory.mktemp('fuzz-state')
    # the frame deadline (0.5 s) is what the tests below cut; the handshake's is 5 s, so that the witness and the
    # well-behaved clients here, which must log in within it, do so on a loaded machine too
    with daemon_in_thread(state_dir=state, frame_timeout=0.5, handshake_timeout=5, max_frame_bytes=4096) as daemon:
        with Client(state) as witness:   # a well-behaved client connected the whole time
            yield daemon, witness


def drain(sock, limit=60.0) -> bytes:
    "Read until the server closes the connection; fail if it never does."
    sock.settimeout(limit)
    data, t0 = b'', time.time()
    while True:
        chunk = sock.recv(65536)
        if not chunk: return data
        data += chunk
        assert time.time() - t0 < limit, "server kept a broken connection open"   # a hang detector, not a speed test


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(handshake=st.booleans(), chunks=st.lists(pieces, max_size=6))
def test_garbage_never_hurts_the_server(served, handshake, chunks):
    daemon, witness = served
    s = socket.create_connection(daemon.address, timeout=10)
    try:
        if handshake:
            send_frame(s, {'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': token_of(daemon)}})
            assert recv_frame(s)['payload']['sensor'] == 'handshake'
        s.sendall(b''.join(chunks))
        s.shutdown(socket.SHUT_WR)          # the end of stream: the server must answer and close
        drain(s)
    finally:
        s.close()
    answer = witness.ask(request('still there?', session='witness'))
    assert answer['turn']['reply'] == 'witness|still there?'


def test_slow_client_is_cut_off_while_others_are_served(served):
    daemon, witness = served
    s = socket.create_connection(daemon.address, timeout=10)
    send_frame(s, {'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': token_of(daemon)}})
    recv_frame(s)
    s.sendall(b'00001')                     # a frame started ...
    for i in range(5):                      # ... and never finished, while the witness is served
        assert witness.ask(request(str(i), session='witness'))['turn']['reply'] == f'witness|{i}'
    answer = recv_frame(s)                  # the frame deadline answers (the socket's own 10 s timeout would raise)
    assert 'not completed within 0.5 s' in answer['payload']['text']
    assert drain(s) == b''
    s.close()


def test_dribbling_bytes_does_not_extend_the_deadline(served):
    "One byte every 50 ms keeps the connection busy, but the frame deadline (0.5 s) still applies."
    daemon, witness = served
    s = socket.create_connection(daemon.address, timeout=10)
    send_frame(s, {'type': 'REQUEST', 'payload': {'sensor': 'handshake', 'token': token_of(daemon)}})
    recv_frame(s)
    frame, sent = encode_frame(request('x' * 200)), 0
    for b in frame:                         # ~10 s at this pace if nobody stopped us
        if readable(s, 0.05): break   # the server answered: stop sending
        s.sendall(bytes([b])); sent += 1
    answer = recv_frame(s)
    assert 'not completed within 0.5 s' in answer['payload']['text'] and sent < len(frame), (sent, len(frame))
    s.close()


def test_many_bad_clients_at_once(served):
    daemon, witness = served
    socks = [socket.create_connection(daemon.address, timeout=10) for _ in range(50)]
    for i, s in enumerate(socks): s.sendall([b'zzzzzz', b'000003{}', b'\xff' * 10, b'00000'][i % 4])
    assert witness.ask(request('ok', session='witness'))['turn']['reply'] == 'witness|ok'
    for s in socks: drain(s); s.close()
    assert daemon.status()['connections'] == 1


@settings(max_examples=300, deadline=None)
@given(body=costly_bodies)
def test_a_costly_body_is_a_protocol_error_never_another_exception(body):
    """Whatever a body's shape, decoding it returns a dict or raises ProtocolError: no RecursionError, no crash."""
    try: obj = decode_body(body)
    except ProtocolError: return
    assert isinstance(obj, dict)


@pytest.mark.parametrize('body', [
    nested(100_000, b'[', b']'),
    b'{"type":"EVENT","meta":{"session":"deep"},"payload":{"sensor":"user-input","text":"x","args":' + nested(2_000, b'{"a":', b'}', b'1') + b'}}',
    b'{"type":"EVENT","meta":{"session":"big"},"payload":{"sensor":"user-input","text":"x","n":' + b'9' * 200 + b'}}',
], ids=['100k-deep-array', '2k-deep-objects', '200-digit-number'])
def test_costly_json_is_answered_and_the_connection_goes_on(tmp_path, body):
    """Deeply nested or huge-number frames from an authenticated client get a protocol-error reply on the same
    connection, which keeps working; other clients are served throughout (it was an unhandled RecursionError)."""
    with daemon_in_thread(state_dir=tmp_path) as daemon:
        with Client(tmp_path, timeout=20) as owner, Client(tmp_path, timeout=20) as other:
            owner.sock.sendall(body_frame(body))
            answer = recv_frame(owner.sock)['payload']
            assert answer['sensor'] == 'protocol-error', answer
            assert 'deeper than' in answer['text'] or 'digits' in answer['text']
            assert other.ask(request('meanwhile', session='other'))['turn']['reply'] == 'other|meanwhile'
            assert owner.ask(request('again', session='owner'))['turn']['reply'] == 'owner|again'


def test_costly_json_before_the_handshake_is_refused(served):
    """A deep nest as the first frame is refused like any bad handshake, and the server goes on."""
    daemon, witness = served
    s = socket.create_connection(daemon.address, timeout=10)
    s.sendall(body_frame(nested(2_000, b'[', b']')))
    assert 'handshake refused' in recv_frame(s)['payload']['text']
    s.close()
    assert witness.ask(request('ok', session='witness'))['turn']['reply'] == 'witness|ok'


def test_perceive_never_raises_on_deep_json_text():
    """Text that starts with '{' is tried as an envelope (`perceive`); a deep nest is bad input, not a RecursionError."""
    from passepartout.perceive import perceive
    signal = perceive('{"a": ' + '[' * 100_000 + ']' * 100_000 + '}', source='cli', session='s')
    assert signal.sensor == 'protocol-error' and 'invalid JSON' in signal.text
