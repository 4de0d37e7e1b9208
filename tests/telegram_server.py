"""A Telegram Bot API server on 127.0.0.1 for the gateway's tests.

It speaks the documented methods the gateway uses, over `POST /bot<TOKEN>/<method>` with a JSON body:
`getUpdates` (`offset` confirms and drops older updates, `timeout` long-polls), `sendMessage` (refuses
an empty text or one over 4096 UTF-16 code units, as Telegram does), `answerCallbackQuery` and
`editMessageReplyMarkup`. A wrong token is a 401, an unknown method a 404. Answers have Telegram's
shape: `{"ok": true, "result": ...}` or `{"ok": false, "error_code": N, "description": ...}`, with
`parameters.retry_after` for a 429.

The test side injects updates (`message`, `press`, `inject`), forces failures (`fail`: a status and
description, or `'drop'` to close the connection without an answer) and reads what the bot did
(`sent`, `answers`, `edits`, `calls`). `wait_for(predicate)` polls; nothing sleeps.
"""
import json, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address): pass   # a client that hangs up mid-poll (the gateway stopping) is normal


class BotAPIServer:
    "A loopback Bot API: updates in, the bot's messages out."
    def __init__(self, token='123456:TEST-token-abcdefghijklmnop'):
        self.token, self.lock, self.cond = token, threading.Lock(), threading.Condition()
        self.updates, self.once, self.next_update, self.next_message = [], [], 1, 1
        self.sent, self.answers, self.edits, self.calls, self.failures = [], [], [], [], []
        self.httpd = _QuietServer(('127.0.0.1', 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self): return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self): self.thread.start(); return self
    def __exit__(self, *exc):
        with self.cond: self.cond.notify_all()
        self.httpd.shutdown(); self.httpd.server_close()

    # -- the test side ------------------------------------------------------------------------------------

    def inject(self, update:dict, once:bool=False) -> dict:
        "Queue `update` as is (its `update_id` given or the next one); `once`: hand it out at the next poll whatever the offset (a replay)."
        with self.cond:
            if isinstance(update, dict) and 'update_id' not in update: update = {'update_id': self.next_update, **update}
            if isinstance(update, dict) and type(update.get('update_id')) is int: self.next_update = max(self.next_update, update['update_id'] + 1)
            (self.once if once else self.updates).append(update); self.cond.notify_all()
        return update

    def message(self, text, chat=1001, user=None, is_bot=False, **extra) -> dict:
        "A text message in `chat` from `user` (default: the chat itself, a private chat)."
        user = chat if user is None else user
        with self.lock: mid = self.next_message; self.next_message += 1
        msg = {'message_id': mid, 'date': int(time.time()), 'chat': {'id': chat, 'type': 'private' if chat == user else 'group'},
               'from': {'id': user, 'is_bot': is_bot, 'first_name': f"user{user}"}, **({'text': text} if text is not None else {}), **extra}
        return self.inject({'message': msg})

    def press(self, data, chat=1001, user=None, qid=None, message_id=1) -> dict:
        "A press on an inline button with callback data `data`, on message `message_id` of `chat`."
        user = chat if user is None else user
        query = {'id': qid or f"cq{self.next_update}", 'chat_instance': '1', 'data': data,
                 'from': {'id': user, 'is_bot': False, 'first_name': f"user{user}"},
                 'message': {'message_id': message_id, 'date': int(time.time()), 'chat': {'id': chat, 'type': 'private'}}}
        return self.inject({'callback_query': query})

    def fail(self, method, status=500, description='Internal Server Error', retry_after=None, times=1):
        "Answer the next `times` calls of `method` with an error (`status='drop'`: close the connection without an answer)."
        with self.lock: self.failures += [(method, status, description, retry_after)] * times

    def texts(self, chat=None) -> list:
        "The texts the bot sent (to `chat`), in order."
        with self.lock: return [m['text'] for m in self.sent if chat is None or str(m['chat_id']) == str(chat)]

    def wait_for(self, predicate, timeout=60.0):
        "Poll `predicate()` until it is true; its value, or an AssertionError after `timeout` seconds."
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := predicate(): return value
            time.sleep(0.01)
        raise AssertionError(f"timed out waiting; sent so far: {self.texts()}")

    # -- the server side ----------------------------------------------------------------------------------

    def _answer(self, method, body):
        with self.lock:
            self.calls.append(method)
            failure = next((f for f in self.failures if f[0] == method), None)
            if failure is not None: self.failures.remove(failure)
        if failure is not None:
            _, status, description, retry_after = failure
            if status == 'drop': return 'drop', None
            return status, {'ok': False, 'error_code': status, 'description': description,
                            **({'parameters': {'retry_after': retry_after}} if retry_after is not None else {})}
        handler = getattr(self, f"_m_{method}", None)
        if handler is None: return 404, {'ok': False, 'error_code': 404, 'description': 'Not Found'}
        return handler(body)

    def _m_getUpdates(self, body):
        offset, timeout = body.get('offset') or 0, min(float(body.get('timeout') or 0), 5.0)
        deadline = time.monotonic() + timeout
        with self.cond:
            self.updates = [u for u in self.updates if not (isinstance(u, dict) and type(u.get('update_id')) is int and u['update_id'] < offset)]   # confirmed
            while not self.updates and not self.once and time.monotonic() < deadline: self.cond.wait(deadline - time.monotonic())
            result, self.once = self.once + self.updates[:100], []
            return 200, {'ok': True, 'result': result}

    def _m_sendMessage(self, body):
        text = body.get('text')
        if not isinstance(text, str) or not text.strip(): return 400, {'ok': False, 'error_code': 400, 'description': 'Bad Request: message text is empty'}
        if len(text.encode('utf-16-le')) // 2 > 4096: return 400, {'ok': False, 'error_code': 400, 'description': 'Bad Request: message is too long'}
        with self.lock:
            mid = self.next_message; self.next_message += 1
            self.sent.append({**body, 'message_id': mid})
        return 200, {'ok': True, 'result': {'message_id': mid, 'date': int(time.time()), 'chat': {'id': body.get('chat_id')}, 'text': text}}

    def _m_answerCallbackQuery(self, body):
        with self.lock: self.answers.append(body)
        return 200, {'ok': True, 'result': True}

    def _m_editMessageReplyMarkup(self, body):
        with self.lock: self.edits.append(body)
        return 200, {'ok': True, 'result': True}

    def _handler(self):
        server = self
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args): pass
            def do_POST(self):
                try: body = json.loads(self.rfile.read(int(self.headers.get('Content-Length') or 0)) or b'{}')
                except ValueError: body = None
                parts = self.path.strip('/').split('/')
                if len(parts) != 2 or parts[0] != f"bot{server.token}":
                    status, answer = 401, {'ok': False, 'error_code': 401, 'description': 'Unauthorized'}
                elif not isinstance(body, dict): status, answer = 400, {'ok': False, 'error_code': 400, 'description': 'Bad Request: not JSON'}
                else: status, answer = server._answer(parts[1], body)
                if status == 'drop': self.close_connection = True; self.connection.close(); return
                data = json.dumps(answer).encode()
                self.send_response(status); self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)
        return Handler
