"""Approval round trip through the shipped agent (`build_agent()`: its gates, its approvals store in
SQLite, its audit log and vault, in a temporary PASSEPARTOUT_HOME): the gates verify a `touch` call
(a local-write tool added to the belt, which the user's permissions file says must ask) -> the action
is held (persisted) -> approved through a second ApprovalStore on the same database (as
`passepartout approve` in another process would) -> `resolve_approval` claims it, runs the last-mile
gates and the tool, records it all in the audit log.

Prints the median (and quartiles) of the CPU time of each round trip (`time.process_time` around
one), next to the 1 ms target as a ratio; the bare round trip for comparison (no gates, no audit log:
the store alone); the daemon's look for decisions written elsewhere (`store.version()`, taken every
0.5 s, and `decided()` when it moved); and the floor (the tool called directly).

    python bench/approval_roundtrip.py [--rounds 1500]
"""
import argparse, os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, cpu_per_turn, show


def touch(name:str): # file name
    "Pretend to create a file."
    return f"created {name}"


def shipped(home):
    from passepartout.app import build_agent
    from passepartout.builtin_gates import permissions_file
    from passepartout.approvals import ApprovalStore
    agent = build_agent(provider=None)
    permissions_file().write_text('[[rule]]\ntool = "touch"\ndecision = "ask"\n')
    agent.tools.add(touch, 'touch', 'local-write')
    return agent, agent.approvals, ApprovalStore(agent.approvals.path)


def bare(tmp):
    from passepartout.approvals import ApprovalStore
    from passepartout.gates import GateEngine, ask
    from passepartout.loop import Agent
    from passepartout.tools import Toolbelt
    belt = Toolbelt(); belt.add(touch, 'touch', 'local-write')
    gates = GateEngine(); gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'touch' else None)
    store = ApprovalStore(tmp / 'bare-approvals.db')
    return Agent(gates=gates, tools=belt), store, ApprovalStore(store.path)


def round_trip(agent, holder, approver):
    "One round trip as a function: verify (ask) -> hold -> approve elsewhere -> resolve."
    from passepartout.approval_flow import resolve_approval
    from passepartout.signals import Context, Signal, tool_call
    action = tool_call('touch', {'name': 'x'}, explanation='the owner asked for the file')
    def one():
        ctx = Context(Signal(meta={'source': 'cli', 'session': 'bench'}, payload={'sensor': 'user-input', 'text': 'make x'}), agent)
        decision = agent.gates.verify(action, ctx)
        assert decision.decision == 'ask', decision
        token = holder.hold(action, decision, ctx)
        approver.approve(token)
        res = resolve_approval(agent, approver, token)
        assert res.output == 'created x', res
    return one


def watch_cost(holder, approver, agent, rounds):
    "(µs per `version()` when nothing changed, µs per `decided()` with 10 decisions waiting)."
    from passepartout.gates import Decision
    from passepartout.signals import Context, Signal, tool_call
    ctx = Context(Signal(meta={'source': 'cli'}, payload={'sensor': 'user-input', 'text': 'x'}), agent)
    for i in range(10): approver.approve(holder.hold(tool_call('touch', {'name': str(i)}), Decision('ask', None, []), ctx))
    holder.version()
    quiet = cpu_per_turn(holder.version, rounds)
    return quiet, cpu_per_turn(lambda: holder.decided(), rounds // 10)


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=1500)
    a = ap.parse_args()
    home, ws = shipped_home()
    agent, holder, approver = shipped(home)
    one = round_trip(agent, holder, approver)
    for _ in range(30): one()
    print(show('shipped: verify, hold, approve (2nd store), run', cpu_per_turn(one, a.rounds), target=1000))
    b = bare(home)
    one = round_trip(*b)
    for _ in range(30): one()
    print(show('bare: the store alone (no gates, no audit log)', cpu_per_turn(one, a.rounds)))
    quiet, scan = watch_cost(b[1], b[2], b[0], 10000)
    print(show('daemon look: version(), nothing changed', quiet))
    print(show('daemon look: decided(), 10 decisions waiting', scan))
    print(show('floor: the tool called directly', cpu_per_turn(lambda: touch('x'), 10000)))
