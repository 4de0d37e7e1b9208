"""Loopback model servers for the provider tests: one per wire format (OpenAI chat completions, Ollama
/api/chat, Anthropic Messages), real sockets on 127.0.0.1 with ephemeral ports, standard library only.

A server plays a script of responses, one per request (a default reply when the script is empty), and
records every request it received (method, path, headers, raw header block, body) so that tests can
assert on what the client really sent.  A scripted response is a dict:

    {'json': {...}, 'status': 200, 'headers': {...}}   a whole JSON body
    {'body': b'...', 'status': 200}                     raw bytes (invalid JSON, ...)
    {'stream': [str | threading.Event, ...]}            chunks written one by one; an Event is waited on
    {'truncate': True}                                  with 'stream': close before the end marker
    {'delay': seconds}                                  wait before sending the status line (slow headers)

GET of the model list (`MODELS`) always answers with one model, whatever the script says about chat: a
server whose list answers while every chat request is refused is a case `doctor` must see through.
"""
import json, os, threading, time
from collections import deque
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATHS = {'openai': '/v1/chat/completions', 'ollama': '/api/chat', 'anthropic': '/v1/messages'}
HOLD = 120   # how long a stream waits for its Event at most: a hang detector, far above any client timeout a test sets
MODELS = {'openai': '/v1/models', 'ollama': '/api/tags', 'anthropic': '/v1/models'}
MODEL_LISTS = {'openai': {'object': 'list', 'data': [{'id': 'test-model', 'object': 'model'}]},
               'ollama': {'models': [{'name': 'llama3.2', 'model': 'llama3.2'}]},
               'anthropic': {'data': [{'id': 'claude-test', 'type': 'model'}], 'has_more': False}}


class LLMServer:
    "A loopback server speaking one wire format."
    def __init__(self, kind):
        assert kind in PATHS, kind
        self.kind, self.script, self.requests = kind, deque(), []
        server = self
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self): server._serve(self)
            def do_GET(self): server._list_models(self)
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self): return self.httpd.server_address[1]
    @property
    def url(self):
        "The base URL a provider is configured with (OPENAI_BASE_URL, OLLAMA_HOST, ANTHROPIC_BASE_URL)."
        return f"http://127.0.0.1:{self.port}" + ('/v1' if self.kind == 'openai' else '')

    def add(self, *responses):
        self.script.extend(responses); return self

    def close(self):
        self.httpd.shutdown(); self.httpd.server_close()

    def _record(self, h):
        body = h.rfile.read(int(h.headers.get('content-length') or 0))
        self.requests.append({'method': h.command, 'path': h.path, 'headers': {k.lower(): v for k, v in h.headers.items()},
                              'raw_headers': str(h.headers), 'body': body, 'json': json.loads(body) if body else None,
                              'time': time.monotonic()})

    def _list_models(self, h):
        self._record(h)
        if h.path != MODELS[self.kind]: return self._send(h, {'status': 404, 'json': {'error': {'message': f'no route {h.path}'}}})
        self._send(h, {'json': MODEL_LISTS[self.kind]})

    def _serve(self, h):
        self._record(h)
        if h.path != PATHS[self.kind]:
            return self._send(h, {'status': 404, 'json': {'error': {'message': f'no route {h.path}'}}})
        self._send(h, self.script.popleft() if self.script else DEFAULT[self.kind]('ok'))

    def _send(self, h, r):
        if r.get('delay'): time.sleep(r['delay'])
        try:
            h.send_response(r.get('status', 200))
            for k, v in (r.get('headers') or {}).items(): h.send_header(k, v)
            if 'stream' in r:
                h.send_header('content-type', 'application/x-ndjson' if self.kind == 'ollama' else 'text/event-stream')
                h.send_header('connection', 'close'); h.end_headers()
                for chunk in r['stream']:
                    if isinstance(chunk, threading.Event): chunk.wait(HOLD); continue
                    h.wfile.write(chunk.encode()); h.wfile.flush()
                return
            data = json.dumps(r['json']).encode() if 'json' in r else r.get('body', b'')
            h.send_header('content-type', 'application/json'); h.send_header('content-length', str(len(data))); h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError): pass


# ---- OpenAI chat completions ----
def openai_text(text, usage=(10, 5)):
    return {'json': {'id': 'chatcmpl-1', 'object': 'chat.completion', 'choices': [{'index': 0, 'finish_reason': 'stop',
            'message': {'role': 'assistant', 'content': text}}], 'usage': {'prompt_tokens': usage[0], 'completion_tokens': usage[1]}}}

def openai_tool(name, args, text=None, call_id='call_1', raw_args=None, usage=(20, 8)):
    call = {'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': raw_args if raw_args is not None else json.dumps(args)}}
    return {'json': {'choices': [{'index': 0, 'finish_reason': 'tool_calls', 'message': {'role': 'assistant', 'content': text, 'tool_calls': [call]}}],
                     'usage': {'prompt_tokens': usage[0], 'completion_tokens': usage[1]}}}

def openai_stream(pieces, tool=None, truncate=False, usage=(7, 3)):
    sse = lambda d: f"data: {json.dumps(d)}\n\n"
    out = [sse({'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': p}}]}) if isinstance(p, str) else p for p in pieces]
    if tool:
        name, args = tool
        out.append(sse({'choices': [{'index': 0, 'delta': {'tool_calls': [{'index': 0, 'id': 'call_s', 'type': 'function', 'function': {'name': name, 'arguments': ''}}]}}]}))
        text = json.dumps(args)
        for i in range(0, len(text), 5):
            out.append(sse({'choices': [{'index': 0, 'delta': {'tool_calls': [{'index': 0, 'function': {'arguments': text[i:i + 5]}}]}}]}))
    if truncate: return {'stream': out[:max(1, len(out) - 1)]}
    out.append(sse({'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'tool_calls' if tool else 'stop'}]}))
    out.append(sse({'choices': [], 'usage': {'prompt_tokens': usage[0], 'completion_tokens': usage[1]}}))
    out.append('data: [DONE]\n\n')
    return {'stream': out}


# ---- Ollama /api/chat ----
def ollama_text(text, usage=(12, 6)):
    return {'json': {'model': 'llama3.2', 'message': {'role': 'assistant', 'content': text}, 'done': True,
                     'prompt_eval_count': usage[0], 'eval_count': usage[1]}}

def ollama_tool(name, args, usage=(15, 9)):
    return {'json': {'model': 'llama3.2', 'message': {'role': 'assistant', 'content': '', 'tool_calls': [{'function': {'name': name, 'arguments': args}}]},
                     'done': True, 'prompt_eval_count': usage[0], 'eval_count': usage[1]}}

def ollama_stream(pieces, truncate=False, usage=(4, 2)):
    out = [json.dumps({'message': {'role': 'assistant', 'content': p}, 'done': False}) + '\n' if isinstance(p, str) else p for p in pieces]
    if not truncate: out.append(json.dumps({'message': {'role': 'assistant', 'content': ''}, 'done': True, 'prompt_eval_count': usage[0], 'eval_count': usage[1]}) + '\n')
    return {'stream': out}


# ---- Anthropic Messages ----
def anthropic_text(text, usage=(11, 4)):
    return {'json': {'id': 'msg_1', 'type': 'message', 'role': 'assistant', 'content': [{'type': 'text', 'text': text}],
                     'stop_reason': 'end_turn', 'usage': {'input_tokens': usage[0], 'output_tokens': usage[1]}}}

def anthropic_tool(name, args, text=None, call_id='toolu_1', usage=(30, 12)):
    blocks = ([{'type': 'text', 'text': text}] if text else []) + [{'type': 'tool_use', 'id': call_id, 'name': name, 'input': args}]
    return {'json': {'id': 'msg_2', 'type': 'message', 'role': 'assistant', 'content': blocks, 'stop_reason': 'tool_use',
                     'usage': {'input_tokens': usage[0], 'output_tokens': usage[1]}}}

def anthropic_stream(pieces, tool=None, truncate=False, usage=(9, 5)):
    ev = lambda d: f"event: {d['type']}\ndata: {json.dumps(d)}\n\n"
    out = [ev({'type': 'message_start', 'message': {'id': 'msg_s', 'usage': {'input_tokens': usage[0], 'output_tokens': 1}}}),
           ev({'type': 'content_block_start', 'index': 0, 'content_block': {'type': 'text', 'text': ''}}), 'event: ping\ndata: {"type": "ping"}\n\n']
    out += [ev({'type': 'content_block_delta', 'index': 0, 'delta': {'type': 'text_delta', 'text': p}}) if isinstance(p, str) else p for p in pieces]
    out.append(ev({'type': 'content_block_stop', 'index': 0}))
    if tool:
        name, args = tool
        out.append(ev({'type': 'content_block_start', 'index': 1, 'content_block': {'type': 'tool_use', 'id': 'toolu_s', 'name': name, 'input': {}}}))
        text = json.dumps(args)
        out += [ev({'type': 'content_block_delta', 'index': 1, 'delta': {'type': 'input_json_delta', 'partial_json': text[i:i + 4]}}) for i in range(0, len(text), 4)]
        out.append(ev({'type': 'content_block_stop', 'index': 1}))
    if truncate: return {'stream': out}
    out += [ev({'type': 'message_delta', 'delta': {'stop_reason': 'tool_use' if tool else 'end_turn'}, 'usage': {'output_tokens': usage[1]}}),
            ev({'type': 'message_stop'})]
    return {'stream': out}


DEFAULT = {'openai': openai_text, 'ollama': ollama_text, 'anthropic': anthropic_text}
TEXT = DEFAULT
TOOL = {'openai': openai_tool, 'ollama': ollama_tool, 'anthropic': anthropic_tool}
STREAM = {'openai': openai_stream, 'ollama': ollama_stream, 'anthropic': anthropic_stream}


def pick_model(request, provider):
    "A model selector for the tests (PASSEPARTOUT_MODEL_SELECTOR=llm_servers:pick_model): short asks get the small model."
    last = request.messages[-1].get('content') or ''
    return 'small-model' if len(last) < 12 else None


def loopback_env(tmp_path, url:str, **extra) -> dict:
    """The environment of a `passepartout` process on a fresh home and workspace under `tmp_path`, with the
    loopback server at `url` as its only provider (no setting of the machine's own leaks in)."""
    ws = tmp_path / 'ws'; ws.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PASSEPARTOUT_', 'OPENAI_', 'NO_COLOR'))}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1]), PASSEPARTOUT_HOME=str(tmp_path / 'home'),
               PASSEPARTOUT_WORKSPACE=str(ws), PASSEPARTOUT_PROVIDERS='openai', OPENAI_BASE_URL=url,
               OPENAI_API_KEY='sk-test', OPENAI_MODEL='test-model', PASSEPARTOUT_TIMEOUT='20')
    env.update(extra)
    return env
