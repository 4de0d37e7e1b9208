"""signal-cli's HTTP daemon on 127.0.0.1, for the Signal gateway's tests.

It speaks what `signal-cli-jsonrpc(5)` documents for `signal-cli -a ACCOUNT daemon --http HOST:PORT`:

- `POST /api/v1/rpc`: one JSON-RPC 2.0 request (`Content-Type: application/json`, else 415). `send`
  takes `recipient` (a list or one value) and `message`, answers `{"timestamp": T, "results": [...]}`
  with a fresh timestamp; an `account` other than the daemon's is error -32602 "Specified account does
  not exist"; an unknown method -32601; a body that is not JSON -32700; no `method` -32600. A request
  refused for rate limiting is error -5 with `data.response.results[].retryAfterSeconds`, as signal-cli
  reports it.
- `GET /api/v1/events`: a Server-Sent Events stream; each incoming message is one event `id:N`,
  `event:receive`, `data:{"account": ..., "envelope": {...}}`, and `:` keeps the connection alive.
  A new client gets the events from then on; a `Last-Event-ID` header resumes after that event, and an
  unknown one gets every kept event again.
- `GET /api/v1/check`: 200. A request whose `Host` is not the bound address is refused with 421, as
  signal-cli pins it.

The test side injects envelopes (`message`, `react`, `inject`), forces failures (`fail`), restarts the
stream (`cut`) and reads what the gateway sent (`sent`, `texts`). `wait_for(predicate)` polls; nothing
sleeps a fixed time.
"""
import json, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlsplit

ACCOUNT = '+4915100000000'


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def handle_error(self, request, client_address): pass   # a client that hangs up mid-stream (the gateway stopping) is normal


class SignalCLIServer:
    "A loopback signal-cli HTTP daemon: envelopes in as events, the gateway's messages out."
    def __init__(self, account=ACCOUNT, port=0, keepalive=0.2):
        self.account, self.port, self.keepalive = account, port, keepalive
        self.lock, self.cond = threading.Lock(), threading.Condition()
        self.events, self.sent, self.failures, self.calls, self.streams = [], [], [], [], 0
        self.clock, self.generation, self.last_event_ids = 1_700_000_000_000, 0, []
        self.httpd = None

    @property
    def url(self): return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.httpd = _QuietServer(('127.0.0.1', self.port), self._handler())
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        with self.cond: self.generation += 1; self.cond.notify_all()
        if self.httpd is not None: self.httpd.shutdown(); self.httpd.server_close(); self.httpd = None

    def __enter__(self): return self.start()
    def __exit__(self, *exc): self.stop()

    # -- the test side ------------------------------------------------------------------------------------

    def tick(self) -> int:
        "A fresh timestamp (milliseconds), as Signal gives every message."
        with self.lock: self.clock += 1; return self.clock

    def inject(self, data) -> dict:
        "Queue one event's data as is (normally `{'account': ..., 'envelope': ...}`)."
        with self.cond: self.events.append(data); self.cond.notify_all()
        return data

    def envelope(self, number, uuid=None, name='Ann', **fields) -> dict:
        "An envelope from `number` (and `uuid`), as signal-cli writes it."
        ts = self.tick()
        return {'source': number or uuid, 'sourceNumber': number, 'sourceUuid': uuid, 'sourceName': name, 'sourceDevice': 1,
                'timestamp': ts, 'serverReceivedTimestamp': ts, 'serverDeliveredTimestamp': ts, **fields}

    def message(self, text, number='+4915112345678', uuid=None, group=None, **extra) -> dict:
        "A data message with `text` from `number` (in `group`, a base64 id, if given)."
        env = self.envelope(number, uuid)
        data = {'timestamp': env['timestamp'], 'message': text, 'expiresInSeconds': 0, 'viewOnce': False, **extra}
        if group: data['groupInfo'] = {'groupId': group, 'groupName': 'family', 'revision': 1, 'type': 'DELIVER'}
        return self.inject({'account': self.account, 'envelope': {**env, 'dataMessage': data}})

    def react(self, emoji, target, number='+4915112345678', remove=False, author=None) -> dict:
        "A reaction `emoji` from `number` to the message sent at timestamp `target` (by the account, unless `author`)."
        reaction = {'emoji': emoji, 'targetAuthor': author or self.account, 'targetAuthorNumber': author or self.account,
                    'targetAuthorUuid': None, 'targetSentTimestamp': target, 'isRemove': remove}
        return self.message(None, number=number, reaction=reaction)

    def fail(self, method, code=-1, message='Failed to send message', retry_after=None, times=1):
        "Answer the next `times` calls of `method` with JSON-RPC error `code`."
        with self.lock: self.failures += [(method, code, message, retry_after)] * times

    def cut(self):
        "Close every open event stream (signal-cli restarting its HTTP side); kept events stay."
        with self.cond: self.generation += 1; self.cond.notify_all()

    def texts(self, recipient=None) -> list:
        "The messages the gateway sent (to `recipient`), in order."
        with self.lock: return [m['message'] for m in self.sent if recipient is None or recipient in m['recipient']]

    def wait_for(self, predicate, timeout=60.0):
        "Poll `predicate()` until it is true; its value, or an AssertionError after `timeout` seconds."
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := predicate(): return value
            time.sleep(0.01)
        raise AssertionError(f"timed out waiting; sent so far: {self.texts()}")

    # -- the server side ----------------------------------------------------------------------------------

    def _rpc(self, request):
        if not isinstance(request, dict): return {'jsonrpc': '2.0', 'error': {'code': -32600, 'message': 'request must be an object', 'data': None}, 'id': None}
        rid, method, params = request.get('id'), request.get('method'), request.get('params') or {}
        error = lambda code, message, data=None: {'jsonrpc': '2.0', 'error': {'code': code, 'message': message, 'data': data}, 'id': rid}
        if not isinstance(method, str): return error(-32600, 'method field must be set')
        with self.lock:
            self.calls.append(method)
            failure = next((f for f in self.failures if f[0] == method), None)
            if failure is not None: self.failures.remove(failure)
        if params.get('account') not in (None, self.account): return error(-32602, 'Specified account does not exist')
        if failure is not None:
            _, code, message, retry_after = failure
            results = [{'recipientAddress': {'uuid': None, 'number': r, 'username': None}, 'type': 'RATE_LIMIT_FAILURE' if code == -5 else 'NETWORK_FAILURE',
                        **({'retryAfterSeconds': retry_after} if retry_after is not None else {})} for r in _list(params.get('recipient'))]
            return error(code, message, {'response': {'timestamp': self.tick(), 'results': results}})
        if method != 'send': return error(-32601, 'Method not implemented')
        recipients, text = _list(params.get('recipient')), params.get('message')
        if not recipients or not all(isinstance(r, str) for r in recipients): return error(-1, 'No recipients given')
        if not isinstance(text, str): return error(-1, 'Message is missing')
        ts = self.tick()
        with self.lock: self.sent.append({'recipient': recipients, 'message': text, 'timestamp': ts})
        results = [{'recipientAddress': {'uuid': None, 'number': r, 'username': None}, 'type': 'SUCCESS'} for r in recipients]
        return {'jsonrpc': '2.0', 'result': {'timestamp': ts, 'results': results}, 'id': rid}

    def _subscribe(self, last_id) -> tuple:
        "Where a new stream starts: (generation, index of its first event); before the client hears the stream is open."
        with self.cond:
            generation, self.streams = self.generation, self.streams + 1
            self.last_event_ids.append(last_id)
            if last_id is None: start = len(self.events)                     # a new client: what comes from now on
            elif last_id.isdigit() and int(last_id) < len(self.events): start = int(last_id) + 1
            else: start = 0                                                 # an unknown id: every kept event again
        return generation, start

    def _stream(self, handler, generation, start):
        "Write the events from `start` on until the stream is cut or the client leaves."
        sent = start
        while True:
            with self.cond:
                if self.generation == generation and sent >= len(self.events): self.cond.wait(self.keepalive)
                if self.generation != generation: return
                batch, first = self.events[sent:], sent
                sent = len(self.events)
            out = ''.join(f"id:{first + i}\nevent:receive\ndata:{json.dumps(data)}\n\n" for i, data in enumerate(batch)) or ':\n'
            handler.wfile.write(out.encode()); handler.wfile.flush()

    def _handler(self):
        server = self
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args): pass
            def _host_ok(self):
                host = (self.headers.get('Host') or '').rsplit(':', 1)[0]
                if host in ('127.0.0.1', 'localhost'): return True
                self.send_response(421); self.send_header('Content-Length', '0'); self.end_headers(); return False
            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status); self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)
            def do_POST(self):
                if not self._host_ok(): return
                if urlsplit(self.path).path != '/api/v1/rpc': return self._json(404, {})
                if not (self.headers.get('Content-Type') or '').startswith('application/json'): return self._json(415, {})
                try: request = json.loads(self.rfile.read(int(self.headers.get('Content-Length') or 0)))
                except ValueError: return self._json(200, {'jsonrpc': '2.0', 'error': {'code': -32700, 'message': 'Parse error', 'data': None}, 'id': None})
                self._json(200, server._rpc(request))
            def do_GET(self):
                if not self._host_ok(): return
                path = urlsplit(self.path).path
                if path == '/api/v1/check': self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers(); return
                if path != '/api/v1/events': return self._json(404, {})
                generation, start = server._subscribe(self.headers.get('Last-Event-ID'))
                self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.end_headers(); self.wfile.flush()
                try: server._stream(self, generation, start)
                except OSError: pass
                self.close_connection = True
        return Handler


def _list(value) -> list: return value if isinstance(value, list) else [value] if value is not None else []
