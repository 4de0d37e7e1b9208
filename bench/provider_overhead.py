"""What the provider client and the cascade add per model call, on top of the server's own time.

A loopback OpenAI-compatible server (HTTP/1.1 keep-alive, standard library) answers every request with
the same small chat completion and measures its own handler time.  Timed per call, median over
repeated runs:

  floor     raw httpx.Client.post of pre-encoded request bytes, response .json()  (transport + server)
  provider  OpenAIProvider.propose(request)   (builds the body from the transcript, parses into an action)
  cascade   Cascade([provider]).propose(request) with prices and a budget cap (estimate + reservation)

Prints µs per call and the differences provider - floor and cascade - provider (what our code adds).

    python bench/provider_overhead.py [--calls 500] [--repeat 5]
"""
import argparse, json, socket, statistics, threading, time
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--calls', type=int, default=500)
    ap.add_argument('--repeat', type=int, default=5)
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


if __name__ == '__main__':
    main()
