"""What the benchmarks run: the shipped agent (`passepartout.app.build_agent()`, as `send` and the daemon
build it: default gates, built-in tools, approvals in SQLite, the audit log, the vault) in a temporary
PASSEPARTOUT_HOME and workspace, driven by a model that reads its request as a real provider does.

`WireModel` is a scripted model that pays what the OpenAI-compatible provider pays on every call
before and after the network: it builds the request body from the system prompt, the transcript and
the tool schemas (`OpenAIProvider._prepare`), and reads its scripted answer from a chat-completions
response as bytes, as the provider reads a response's body (`OpenAIProvider._read`: JSON, then `parse`;
then `_proposal`). Only
the HTTP round trip is left out, and the server's own work: an answer's bytes are encoded once, only
its usage figures filled in per request.
"""
import json, os, statistics, tempfile, time
from pathlib import Path


def shipped_home() -> tuple:
    "A temporary PASSEPARTOUT_HOME and workspace (set in the environment), with a small file to read."
    home, ws = Path(tempfile.mkdtemp(prefix='pp-home-')), Path(tempfile.mkdtemp(prefix='pp-ws-'))
    os.environ.update(PASSEPARTOUT_HOME=str(home), PASSEPARTOUT_WORKSPACE=str(ws))
    (ws / 'notes.txt').write_text('buy milk\ncall the plumber\n')
    return home, ws


class WireModel:
    "Answers `calls` tool calls (`tool`, `args`) then a reply per user message, building each request's wire body as the OpenAI provider does."
    name = 'wire'
    def __init__(self, calls:int, tool:str='echo', args:dict|None=None):
        from passepartout.providers import OpenAIProvider
        self.calls, self.tool, self.args, self.left, self.sent = calls, tool, args or {}, calls, 0
        self.wire = OpenAIProvider('bench-model', base_url='http://127.0.0.1:9/v1')   # local URL: no key needed, never contacted
        self.budget, self.cpu = None, 0.0       # cpu: seconds this model spent, for the benchmarks to subtract
        self._answers = {}                      # a message's encoded answer, less its usage
        self.timed = False                      # count `cpu` (two clock readings a request, each a system call: off unless asked for)
    def _answer(self, key, message) -> bytes:
        "The server's answer as bytes: its fixed part encoded once per `key` (a server's work, not the harness's; `message()` builds it), the usage filled in."
        head = self._answers.get(key)
        if head is None:
            head = self._answers[key] = json.dumps({'id': 'x', 'object': 'chat.completion', 'choices': [
                {'index': 0, 'message': message(), 'finish_reason': 'stop'}]})[:-1]
        return f'{head}, "usage": {{"prompt_tokens": {self.sent // 4}, "completion_tokens": 12}}}}'.encode()
    def propose(self, request):
        if not self.timed: return self._propose(request)
        t0 = time.process_time()
        try: return self._propose(request)
        finally: self.cpu += time.process_time() - t0
    def _propose(self, request):
        url, headers, body = self.wire._prepare(request, None, False)      # the request as it would go on the wire
        self.sent = len(body)
        if request.signal.sensor == 'user-input': self.left = self.calls
        if self.left:
            self.left -= 1
            call = lambda: {'id': f"call_{self.left}", 'type': 'function', 'function': {'name': self.tool, 'arguments': json.dumps(self.args)}}
            raw = self._answer(self.left, lambda: {'role': 'assistant', 'content': 'Doing what you asked.', 'tool_calls': [call()]})
        else: raw = self._answer(None, lambda: {'role': 'assistant', 'content': 'done'})
        return self.wire._proposal(self.wire._read(raw))                  # as `_parsed` reads a response's body


def echo(text:str): # the text to give back
    "Give the text back."
    return text

def shipped_agent(calls:int, tool:str='echo', args:dict|None=None):
    "`build_agent()`, plus a read-only `echo` tool (a tool that costs nothing: the harness's own cost shows), with a `WireModel` answering `calls` tool calls of `tool` per turn."
    from passepartout.app import build_agent
    agent = build_agent(provider=WireModel(calls, tool, args or ({'text': 'hi'} if tool == 'echo' else None)))
    agent.tools.add(echo, 'echo', 'read-only')
    return agent


def cpu_per_turn(turn, n:int) -> list:
    "CPU time (µs) of each of `n` calls of `turn()`, measured one by one with `time.process_time`."
    out, clock = [], time.process_time
    for _ in range(n):
        t0 = clock(); turn(); out.append((clock() - t0) * 1e6)
    return out


def sync_stores(agent):
    "The durability barrier of the agent's audit log and session store: every turn that ended is written (the writer thread's work done here if not yet done)."
    log = getattr(agent.audit, '__self__', None)
    if log is not None and hasattr(log, 'sync'): log.sync()
    if agent.sessions is not None and hasattr(agent.sessions, 'sync'): agent.sessions.sync()


def cpu_per_turn_batched(turn, n:int, agent, batch:int=25) -> list:
    """CPU time (µs) per turn as the mean over each batch of `batch` calls of `turn()`, the agent's stores synced at the
    end of each batch, so the turns' records and transcripts are written inside the measured time, whichever thread wrote
    them (`time.process_time` counts every thread of the process). One figure per batch, `n // batch` figures."""
    out, clock = [], time.process_time
    for _ in range(max(1, n // batch)):
        t0 = clock()
        for _ in range(batch): turn()
        sync_stores(agent)
        out.append((clock() - t0) * 1e6 / batch)
    return out


def show(label:str, xs:list, unit:str='µs', target:float|None=None, higher_is_better:bool=False) -> str:
    "One line: median, quartiles, n, and the ratio to `target` (figure / target; for a rate, target / figure)."
    med = statistics.median(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [med, med, med]
    line = f"{label:<50} median {med:10.1f} {unit}  (p25 {q[0]:.1f}, p75 {q[2]:.1f}, n={len(xs)})"
    if target:
        ratio = target / med if higher_is_better else med / target
        line += f"  target {'>=' if higher_is_better else '<='} {target:g} {unit}: ratio {ratio:.2f} {'ok' if ratio <= 1 else 'MISSED'}"
    return line
