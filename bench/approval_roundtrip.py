"""Approval round trip: hold an action (persisted in SQLite) -> approve it through a second ApprovalStore
on the same database (as another process would) -> resolve: claim, last-mile gates, run the tool.

Prints the median and spread in microseconds per round trip, without and with the audit log as the
turn sink, and the floor (the same tool called directly). Target: median <= 1 ms in-process.
Also the daemon's look for decisions written elsewhere (`store.version()`, PRAGMA data_version), taken
every 0.5 s: its cost when nothing changed, and the read of the waiting decisions when something did.

    python bench/approval_roundtrip.py [--repeat 7] [--rounds 300]
"""
import argparse, statistics, tempfile, time
from pathlib import Path

from passepartout.approvals import ApprovalStore, resolve_approval
from passepartout.audit import AuditLog
from passepartout.gates import GateEngine, Decision, ask
from passepartout.loop import Agent
from passepartout.signals import Context, Signal, tool_call
from passepartout.tools import Toolbelt


def setup(tmp: Path, audit: bool):
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def touch(name: str):  # file name
        "Pretend to create a file."
        return f"created {name}"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'touch' else None)
    agent = Agent(gates=gates, tools=belt)
    if audit: agent.audit = AuditLog(tmp / 'audit.db', vault=False).append
    holder, approver = ApprovalStore(tmp / 'approvals.db'), ApprovalStore(tmp / 'approvals.db')
    return agent, holder, approver


def run(rounds: int, audit: bool) -> float:
    "Mean µs per round trip over `rounds` (one sample; the median is taken over samples)."
    with tempfile.TemporaryDirectory() as d:
        agent, holder, approver = setup(Path(d), audit)
        action = tool_call('touch', {'name': 'x'}, explanation='bench')
        ctx = Context(Signal(meta={'source': 'cli'}, payload={'sensor': 'user-input', 'text': 'x'}), agent)
        decision = Decision('ask', action, [])
        for _ in range(20):  # warm up
            resolve_approval(agent, approver, approver.approve(holder.hold(action, decision, ctx))['token'])
        t0 = time.perf_counter()
        for _ in range(rounds):
            token = holder.hold(action, decision, ctx)        # persisted by the holding "process"
            approver.approve(token)                           # granted from the other connection
            res = resolve_approval(agent, approver, token)    # claimed, re-checked, run
        dt = time.perf_counter() - t0
        assert res.output == 'created x', res
        return dt / rounds * 1e6


def watch_cost(rounds: int) -> tuple:
    "(µs per `version()` when nothing changed, µs per `decided()` with 10 decisions waiting)."
    with tempfile.TemporaryDirectory() as d:
        agent, holder, approver = setup(Path(d), False)
        ctx = Context(Signal(meta={'source': 'cli'}, payload={'sensor': 'user-input', 'text': 'x'}), agent)
        for i in range(10): approver.approve(holder.hold(tool_call('touch', {'name': str(i)}), Decision('ask', None, []), ctx))
        holder.version()
        t0 = time.perf_counter()
        for _ in range(rounds): holder.version()
        quiet = (time.perf_counter() - t0) / rounds * 1e6
        t0 = time.perf_counter()
        for _ in range(rounds // 10): assert len(holder.decided()) == 10
        return quiet, (time.perf_counter() - t0) / (rounds // 10) * 1e6


def floor(rounds: int) -> float:
    belt = Toolbelt()
    @belt.tool
    def touch(name: str): return f"created {name}"
    t0 = time.perf_counter()
    for _ in range(rounds): belt.run('touch', {'name': 'x'})
    return (time.perf_counter() - t0) / rounds * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=7)
    ap.add_argument('--rounds', type=int, default=300)
    a = ap.parse_args()
    for audit in (False, True):
        samples = [run(a.rounds, audit) for _ in range(a.repeat)]
        med = statistics.median(samples)
        label = 'hold -> approve (2nd store) -> run' + (' + audit log' if audit else '')
        print(f"{label:<48}: median {med:8.1f} µs  "
              f"(min {min(samples):.1f}, max {max(samples):.1f}, {a.repeat}x{a.rounds})  target <= 1000 µs: {'ok' if med <= 1000 else 'MISSED'}")
    quiet, scan = watch_cost(10000)
    print(f"{'daemon look: version(), nothing changed':<48}: {quiet:8.2f} µs  (every 0.5 s: {quiet * 2:.1f} µs of work per second)")
    print(f"{'daemon look: decided(), 10 decisions waiting':<48}: {scan:8.1f} µs  (only when version() moved)")
    print(f"{'floor (the tool called directly)':<48}: {floor(10000):8.2f} µs")


if __name__ == '__main__':
    main()
