"""Harness overhead per turn: user message -> an instant fake model proposes N tool calls -> each
tool runs -> final reply, through every gate of the default pipeline registered at the time.

Prints the median and spread in microseconds per turn for 1 and 10 tool calls, the cost of a bare
Python loop doing the same calls (the floor), and the import time of the package.

    python bench/loop_overhead.py [--repeat 7] [--turns 2000]
"""
import argparse, statistics, subprocess, sys, time

from passepartout.loop import Agent
from passepartout.reason import Proposal
from passepartout.signals import tool_call, reply
from passepartout.tools import Toolbelt


class InstantModel:
    "Proposes `n` tool calls, then a reply; costs nothing."
    name = 'instant'
    def __init__(self, n): self.n, self.left = n, n
    def propose(self, request):
        if request.signal.sensor == 'user-input': self.left = self.n
        if self.left:
            self.left -= 1
            return Proposal(tool_call('echo', {'text': 'hi'}, explanation='benchmark'))
        return Proposal(reply('done'))


def default_gates():
    "The default gate pipeline, as far as this build has one."
    try:
        from passepartout.builtin_gates import default_gates as make
    except ImportError:
        from passepartout.gates import GateEngine
        return GateEngine()
    return make()


def build(n):
    belt = Toolbelt()
    @belt.tool
    def echo(text: str):  # text to echo back
        "Echo the text."
        return text
    return Agent(InstantModel(n), gates=default_gates(), tools=belt)


def per_turn_us(n, turns, repeat):
    agent = build(n)
    samples = []
    for _ in range(repeat):
        agent.transcripts.clear()
        t0 = time.perf_counter()
        for _ in range(turns): turn = agent.send('go')
        samples.append((time.perf_counter() - t0) / turns * 1e6)
        assert turn.reply == 'done' and len(turn.of('result')) == n, turn.events[-3:]
    return samples


def bare_loop_us(n, turns, repeat):
    "The floor: the same tool calls as plain Python function calls."
    def echo(text): return text
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(turns):
            out = [echo('hi') for _ in range(n)]
        samples.append((time.perf_counter() - t0) / turns * 1e6)
    return samples


def import_ms(repeat):
    code = "import time; t=time.perf_counter(); import passepartout; print((time.perf_counter()-t)*1000)"
    return [float(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True).stdout) for _ in range(repeat)]


def show(label, xs, unit):
    print(f"{label}: {statistics.median(xs):.1f}  (min {min(xs):.1f}, max {max(xs):.1f} {unit}, n={len(xs)})")


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=7)
    ap.add_argument('--turns', type=int, default=2000)
    a = ap.parse_args()
    print(f"gates in the pipeline: {[g.name for g in default_gates().gates]}")
    one, ten = per_turn_us(1, a.turns, a.repeat), per_turn_us(10, max(a.turns // 5, 1), a.repeat)
    show('1-tool', one, 'µs per turn'); show('10-tool', ten, 'µs per turn')
    floor = bare_loop_us(1, a.turns, a.repeat)
    show('bare-loop-1-tool', floor, 'µs per turn')
    print(f"ratio 1-tool / target 100 µs: {statistics.median(one) / 100:.2f}; 10-tool / target 1000 µs: {statistics.median(ten) / 1000:.2f}")
    show('import passepartout', import_ms(a.repeat), 'ms')
