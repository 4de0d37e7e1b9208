"""What the provider client and the cascade add per model call, on top of the server's own time.

A loopback OpenAI-compatible server (HTTP/1.1 keep-alive, standard library) answers every request with
the same small chat completion and measures its own handler time.  Timed per call, median over
repeated runs:

  floor     raw httpx.Client.post of pre-encoded request bytes, response .json()  (transport + server)
  provider  OpenAIProvider.propose(request)   (builds the body from the transcript, parses into an action)
  cascade   Cascade([provider]).propose(request) with prices and a budget cap (estimate + reservation)

Prints µs per call and the differences provider - floor and cascade - provider (what our code adds).

Then what building the requests of a turn costs (`OpenAIProvider._prepare`: URL, headers, body bytes), CPU time
per request, median over repeated runs, with the shipped agent's system prompt and tool belt
(`build_agent()`, bench/_shipped.py), each turn in a new conversation as the loop grows it:

  1-tool turn    the two requests of a user message -> one call -> a reply
  10-tool turn   the eleven requests of a user message -> ten calls -> a reply (per request)
  at message N   one request of a conversation N messages long (what each message sent before still costs)

each next to the plain build of the same bodies: the public converters (`openai_messages`, `openai_tools`) and
`json.dumps(...).encode()`, as a provider without any kept part would build them.

Before those, the shipped model's own CPU per shipped 1-tool turn (`WireModel` of bench/_shipped.py: what
`bench/loop_overhead.py` takes off a turn as the model's share), per turn and per request.

Then what reading an answer costs: a tool call's answer, as each wire format's server sends it, read into a
proposal (`_read`: the body's JSON and the format's `parse`; `_proposal`: the action, its arguments read), CPU per
answer, next to the same with the body read by `json.loads`.

    python bench/provider_overhead.py [--calls 500] [--repeat 5] [--turns 300]
"""
import argparse, json, os, socket, statistics, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from passepartout.loop import Agent
from passepartout.perceive import perceive
from passepartout.reason import ProposalRequest
from passepartout.providers import OpenAIProvider
from passepartout.cascade import Cascade, Budget
from passepartout.tools import Toolbelt

BODY = json.dumps({'choices': [{'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': 'ok'}}],
                   'usage': {'prompt_tokens': 120, 'completion_tokens': 2}}).encode()
SERVER_NS = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def setup(self):
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stall on keep-alive
    def do_POST(self):
        t0 = time.perf_counter_ns()
        self.rfile.read(int(self.headers.get('content-length') or 0))
        self.send_response(200)
        self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(BODY)))
        self.end_headers(); self.wfile.write(BODY)
        SERVER_NS.append(time.perf_counter_ns() - t0)


def make_request():
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def list_dir(path: str = '.'):  # directory to list
        "List a directory."
        return []
    agent = Agent(None, tools=belt)
    msgs = [{'role': 'user', 'content': 'hello there'}, {'role': 'assistant', 'content': 'Hi! How can I help?'},
            {'role': 'user', 'content': 'what is in my workspace?'}]
    return ProposalRequest(agent, perceive('what is in my workspace?'), msgs, [])


def per_call_us(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls): fn()
    return (time.perf_counter() - t0) / calls * 1e6


def plain_body(provider, request, model) -> bytes:
    "The body of `request` as the public converters and `json.dumps` build it: no part kept from an earlier request."
    from passepartout.providers import AnthropicProvider, anthropic_messages, anthropic_tools, openai_messages, openai_tools
    if isinstance(provider, AnthropicProvider):
        b = {'model': model, 'max_tokens': provider.max_tokens, 'system': request.system, 'messages': anthropic_messages(request.messages)}
        if request.tools: b['tools'] = anthropic_tools(request.tools)
    else:
        b = {'model': model, 'messages': openai_messages(request.system, request.messages), 'max_tokens': provider.max_tokens}
        if request.tools: b['tools'] = openai_tools(request.tools)
    return json.dumps(b, ensure_ascii=False).encode()


def turn_requests(agent, calls:int, build) -> int:
    "Build the requests of one turn of `calls` tool calls in a new conversation, as the loop grows it; the number of requests."
    from passepartout.reason import note_action, note_signal
    from passepartout.signals import tool_call
    signal, transcript = perceive('go'), []
    note_signal(transcript, signal)
    for i in range(calls + 1):
        build(ProposalRequest(agent, signal, transcript, [], ''))
        if i < calls:
            note_action(transcript, tool_call('echo', {'text': 'hi'}, explanation='Doing what you asked.', call_id=f"call_{i}"))
            transcript.append({'role': 'tool', 'call_id': f"call_{i}", 'name': 'echo', 'content': 'hi', 'is_error': False})
    return calls + 1


def cpu_per_request(fn, runs:int, repeat:int) -> float:
    "Median over `repeat` runs of the CPU µs per request of `runs` calls of `fn()` (each returns its number of requests)."
    out = []
    for _ in range(repeat):
        t0, n = time.process_time(), 0
        for _ in range(runs): n += fn()
        out.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(out)


def request_building(turns:int, repeat:int):
    "CPU per request of building the requests of shipped turns, kept parts against the plain build."
    sys.path.insert(0, os.path.dirname(__file__))
    from _shipped import shipped_home, shipped_agent
    from passepartout.app import tune_collector
    shipped_home()
    from passepartout.providers import AnthropicProvider
    agent = shipped_agent(1); tune_collector()
    history = []
    for i in range(200):
        history += [{'role': 'user', 'content': f'question {i}', 'owner': True}, {'role': 'assistant', 'content': f'answer {i} ' * 20}]
    model_share(agent, turns, repeat)
    for provider in (OpenAIProvider('bench-model', base_url='http://127.0.0.1:9/v1'), AnthropicProvider('bench-model', base_url='http://127.0.0.1:9')):
        print(f"request building with {type(provider).__name__} (CPU per request, median of {repeat}; shipped prompt and belt):")
        building(agent, provider, history, turns, repeat)


def model_share(agent, turns:int, repeat:int):
    "The shipped model's own CPU (WireModel: `_prepare`, `_read`, `_proposal`) per 1-tool turn of the shipped agent, each turn in a new session."
    model, runs = agent.provider, []
    for r in range(repeat + 1):
        before, model.timed = model.cpu, True
        for i in range(turns):
            name = f"share-{r}-{i}"
            assert agent.send('go', session=name).reply == 'done'
            agent.transcripts.pop(name, None); agent.used.pop(name, None)
        model.timed = False
        if r: runs.append((model.cpu - before) / turns * 1e6)   # the first run warms up
    per_turn = statistics.median(runs)
    print(f"the shipped model's own CPU in a shipped 1-tool turn (2 requests; median of {repeat}x{turns} turns): "
          f"{per_turn:.1f} µs per turn, {per_turn / 2:.1f} µs per request")


def building(agent, provider, history, turns, repeat):
    "The request-building lines of one provider."
    kept = lambda r: provider._prepare(r, None, False)
    plain = lambda r: plain_body(provider, r, 'bench-model')
    for label, calls, runs in (('1-tool turn', 1, turns), ('10-tool turn', 10, max(1, turns // 5))):
        for f in (kept, plain): turn_requests(agent, calls, f)
        k, p = (cpu_per_request(lambda: turn_requests(agent, calls, f), runs, repeat) for f in (kept, plain))
        print(f"  {label:24} kept {k:7.1f} µs   plain build {p:7.1f} µs   kept/plain {k / p:.2f}")
    signal = perceive('go')
    for n in (10, 100, 400):
        transcript = history[:n]
        def grow(build):   # one more message, then the request: as a conversation goes on
            transcript.append({'role': 'user', 'content': 'and?', 'owner': True})
            build(ProposalRequest(agent, signal, transcript, [], '')); transcript.pop(); return 1
        k, p = (cpu_per_request(lambda: grow(f), turns, repeat) for f in (kept, plain))
        print(f"  {f'at message {n}':24} kept {k:7.1f} µs   plain build {p:7.1f} µs   kept/plain {k / p:.2f}")


ANSWERS = {   # a tool call's answer as each wire format's server sends it
    'OpenAIProvider': {'id': 'x', 'object': 'chat.completion', 'choices': [{'index': 0, 'finish_reason': 'tool_calls', 'message': {
        'role': 'assistant', 'content': 'Doing what you asked.', 'tool_calls': [{'id': 'call_0', 'type': 'function', 'function': {
            'name': 'echo', 'arguments': '{"text": "hi"}'}}]}}], 'usage': {'prompt_tokens': 2970, 'completion_tokens': 12}},
    'OllamaProvider': {'model': 'm', 'message': {'role': 'assistant', 'content': 'Doing what you asked.', 'tool_calls': [
        {'function': {'name': 'echo', 'arguments': {'text': 'hi'}}}]}, 'done': True, 'prompt_eval_count': 2970, 'eval_count': 12},
    'AnthropicProvider': {'id': 'msg_1', 'type': 'message', 'role': 'assistant', 'content': [{'type': 'text', 'text': 'Doing what you asked.'},
        {'type': 'tool_use', 'id': 'toolu_1', 'name': 'echo', 'input': {'text': 'hi'}}], 'usage': {'input_tokens': 2970, 'output_tokens': 12}},
}


def answer_reading(runs:int, repeat:int):
    "CPU per answer of reading a tool call's answer into a proposal (`_read`, `_proposal`), against `json.loads` then the same."
    from passepartout.providers import OllamaProvider, AnthropicProvider
    print(f"answer reading, a tool call's answer (CPU per answer, median of {repeat}):")
    for provider in (OpenAIProvider('m', base_url='http://127.0.0.1:9/v1'), OllamaProvider('m'), AnthropicProvider('m', base_url='http://127.0.0.1:9')):
        raw = json.dumps(ANSWERS[type(provider).__name__]).encode()
        ours = lambda: (provider._proposal(provider._read(raw)), 1)[1]
        plain = lambda: (provider._proposal(provider.parse(json.loads(raw))), 1)[1]
        k, p = (cpu_per_request(f, runs, repeat) for f in (ours, plain))
        print(f"  {type(provider).__name__:24} read  {k:7.1f} µs   json.loads    {p:7.1f} µs   read/json.loads {k / p:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--calls', type=int, default=500)
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--turns', type=int, default=300)
    args = ap.parse_args()
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler); httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    req = make_request()
    provider = OpenAIProvider('gpt-4o-mini', url, 'sk-bench')
    cascade = Cascade([OpenAIProvider('gpt-4o-mini', url, 'sk-bench')], budget=Budget(1e9))
    raw = httpx.Client(timeout=10)
    body = json.dumps(provider.body(req, 'gpt-4o-mini', False)).encode()
    headers = {'content-type': 'application/json', 'authorization': 'Bearer sk-bench'}
    floor_fn = lambda: raw.post(url + '/chat/completions', content=body, headers=headers).json()
    runs = {'floor': floor_fn, 'provider': lambda: provider.propose(req), 'cascade': lambda: cascade.propose(req)}
    for fn in runs.values():
        for _ in range(50): fn()  # warm up connections and caches
    samples = {k: [] for k in runs}
    SERVER_NS.clear()
    for _ in range(args.repeat):
        for k, fn in runs.items(): samples[k].append(per_call_us(fn, args.calls))
    med = {k: statistics.median(v) for k, v in samples.items()}
    server_us = statistics.median(SERVER_NS) / 1000
    for k, v in samples.items():
        print(f"{k:9} {med[k]:8.1f} µs/call  (min {min(v):.1f}, max {max(v):.1f}; {args.repeat}x{args.calls} calls)")
    print(f"server's own handler time: {server_us:.1f} µs/call (median)")
    print(f"added by the provider (provider - floor): {med['provider'] - med['floor']:+.1f} µs/call")
    print(f"added by the cascade  (cascade - provider): {med['cascade'] - med['provider']:+.1f} µs/call")
    print(f"client + cascade on top of the server's time: {med['cascade'] - server_us:.1f} µs/call "
          f"(of which httpx + loopback: {med['floor'] - server_us:.1f})")
    httpd.shutdown()
    request_building(args.turns, args.repeat)
    answer_reading(args.turns * 10, args.repeat)


if __name__ == '__main__':
    main()
