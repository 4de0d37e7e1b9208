"""Harness overhead per turn, as users run it: `build_agent()` (default gates, built-in tools, approvals,
audit log, vault; temporary PASSEPARTOUT_HOME and workspace) with a model that builds the OpenAI wire
body of every request (see bench/_shipped.py). A user message -> N tool calls -> a reply, each turn
in a fresh conversation (bench/history_cost.py measures long ones).

Prints the median (and quartiles) of the CPU time per turn for 1 and 10 calls of a read-only `echo` tool added to the shipped belt (it costs nothing, so the
harness's own cost shows), next to the targets (<= 100 µs, <= 1 ms) as ratios; the same less the
model's own CPU time in each turn (building and serialising the request, parsing the answer: what
any provider pays), which is the harness's share (measured over the same turns run again with the
model's clock on: its two clock readings a request are system calls, kept out of the first figure); the 1-tool turn with Python's default garbage collector (every figure else has it tuned as the daemon and the
gateways tune it, `passepartout.app.tune_collector`: the startup heap frozen, the young collected less often); the 1-tool turn with each turn written as it ends
(`window=0`: no group commit across turns), without the audit log, then also without the session
store (what each costs of a turn); the
built-in `read_file` (the tool's own cost included) and `write_file` (a tool with effects: the audit
log commits and anchors before it runs); the bare pipeline for comparison (`Agent` with the default
gates and one echo tool, no audit log, no vault, a model that reads nothing); the floor (the same
calls as plain Python); and the import time.

How the CPU time of a turn is measured: the audit log and the session store leave a finished turn to
a writer thread, which writes every turn of a few milliseconds in one transaction (group commit), so
a turn's writing happens in another thread, at another time, once for several turns. Timing each
turn alone would leave most turns without their share of it. So the turns run in batches of 25, each
batch ends with both stores' durability barrier (`sync`: everything written and anchored), and the
figure of a batch is its `time.process_time` (every thread of the process) divided by 25; medians and
quartiles are over the batches. Every turn figure in this file, the bare pipeline's too, is measured
that way, so they compare.

    python bench/loop_overhead.py [--turns 1500]
"""
import argparse, gc, itertools, statistics, subprocess, sys, time, os
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, shipped_agent, cpu_per_turn, cpu_per_turn_batched, show


class InstantModel:
    "Proposes `n` tool calls, then a reply; reads nothing of its request."
    name = 'instant'
    def __init__(self, n): self.n, self.left = n, n
    def propose(self, request):
        from passepartout.reason import Proposal
        from passepartout.signals import tool_call, reply
        if request.signal.sensor == 'user-input': self.left = self.n
        if self.left:
            self.left -= 1
            return Proposal(tool_call('echo', {'text': 'hi'}, explanation='benchmark'))
        return Proposal(reply('done'))


def bare_agent(n, gates:bool=True):
    "The bare pipeline: the default gates (none if not `gates`) and one tool, nothing persisted."
    from passepartout.loop import Agent
    from passepartout.tools import Toolbelt
    from passepartout.builtin_gates import default_gates
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def echo(text: str):  # text to echo back
        "Echo the text."
        return text
    return Agent(InstantModel(n), gates=default_gates() if gates else None, tools=belt)


_NAMES = itertools.count()   # session names never used before in this process, whichever agent and call

def turns(agent, n, calls, turns_count, session='bench', harness=None, batch=25):
    "CPU time per turn over `turns_count` turns (after a warm-up), each in a new session, checking each ran `calls` tools: one figure per batch of `batch` turns (`cpu_per_turn_batched`); `harness`: a list that gets each batch's figure minus the model's own CPU."
    model = agent.provider
    def one():
        name = f"{session}-{next(_NAMES)}"         # a new conversation (the store keeps every session): bench/history_cost.py measures long ones
        t = agent.send('go', session=name)
        agent.transcripts.pop(name, None); agent.used.pop(name, None)
        assert t.reply == 'done' and len(t.of('result')) == calls and not t.pending, t.events[-3:]
    for _ in range(20): one()
    out = cpu_per_turn_batched(one, turns_count, agent, batch)   # the model untimed: its clock readings are not part of a turn
    if harness is None: return out
    harness.clear(); model.timed = True
    for _ in range(max(1, turns_count // batch)):   # the same turns again, the model's own CPU counted and taken off
        before = model.cpu
        harness.append(cpu_per_turn_batched(one, batch, agent, batch)[0] - (model.cpu - before) * 1e6 / batch)
    model.timed = False
    return out


def import_ms(repeat):
    code = "import time; t=time.perf_counter(); import passepartout; print((time.perf_counter()-t)*1000)"
    return [float(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True).stdout) for _ in range(repeat)]


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--turns', type=int, default=1500)
    a = ap.parse_args()
    home, ws = shipped_home()
    one = shipped_agent(1)
    from passepartout.app import tune_collector
    tune_collector()   # as every long-lived process does (the daemon's `serve`, the foreground gateways); the default's cost is printed below
    print(f"shipped agent: {one!r}; audit {one.audit.__self__!r}; gates {[g.name for g in one.gates.gates]}")
    harness = []
    print(show('shipped 1-tool turn (echo)', turns(one, 1, 1, a.turns, harness=harness), target=100))
    print(show("  less the model's own CPU (building the request)", harness, target=100))
    young = gc.get_threshold(); gc.unfreeze(); gc.set_threshold(700, *young[1:])
    print(show("  the same with Python's default collector", turns(one, 1, 1, a.turns)))
    tune_collector()
    log = one.audit.__self__
    log.window = one.sessions.window = 0
    print(show('  the same, each turn written as it ends (window=0)', turns(one, 1, 1, a.turns)))
    log.window = one.sessions.window = 0.005
    one.audit = None
    print(show('  the same turn without the audit log', turns(one, 1, 1, a.turns)))
    one.sessions = None
    print(show('  ... and without the session store', turns(one, 1, 1, a.turns)))
    print(show('shipped 10-tool turn (echo)', turns(shipped_agent(10), 10, 10, a.turns // 5, harness=harness), target=1000))
    print(show("  less the model's own CPU (building the request)", harness, target=1000))
    ten = shipped_agent(10); ten.audit.__self__.window = ten.sessions.window = 0
    print(show('  the same, each turn written as it ends (window=0)', turns(ten, 10, 10, a.turns // 5)))
    print(show('shipped 1-tool turn (built-in read_file)', turns(shipped_agent(1, 'read_file', {'path': 'notes.txt'}), 1, 1, a.turns // 3)))
    write = shipped_agent(1, 'write_file', {'path': 'out.txt', 'content': 'hello'})
    print(show('shipped 1-tool turn (built-in write_file)', turns(write, 1, 1, a.turns // 3)))
    print(show('bare pipeline 1-tool turn', turns(bare_agent(1), 1, 1, a.turns)))
    print(show('bare pipeline 10-tool turn', turns(bare_agent(10), 10, 10, a.turns // 5)))
    def echo(text): return text
    print(show('floor: 1 plain call per turn', cpu_per_turn(lambda: [echo('hi') for _ in range(1)], a.turns)))
    print(show('import passepartout', import_ms(5), unit='ms'))
