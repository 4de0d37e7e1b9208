"""The loop's own CPU per turn: what Perceive, Reason's bookkeeping and Act cost when nothing else runs.

`loop_overhead.py` measures the shipped turn whole; this one takes away what other parts own, so a change
to the loop shows in its figure rather than in the noise of the gates, the audit log and the model:

- **bare, no gates**: `Agent` with one read-only `echo` tool and no gates, a model that reads nothing of
  its request (`InstantModel`, as in `loop_overhead.py`);
- **shipped, loop part**: `build_agent()` (built-in skills and tools, vault, approvals, memory, the skills
  refresh) with its gates emptied, no audit log, no session store, and the same instant model: what the
  shipped turn costs that is not gates, audit, store or model.
- **bare, no gates, with a stop flag**: the first agent, each turn sent with a `threading.Event` to stop it, as
  the chat, the TUI and the daemon send theirs: every model call then runs in a spare thread
  (`abandonable`, nbs/05_reason.md), so the figure shows what handing a call to another thread costs.

Each figure is the median over batches of the CPU time (`time.process_time`, every thread) per turn, each
turn in a new session; 1 and 10 tool calls a turn.

    python bench/loop_core.py [--turns 3000] [--repeat 3]
"""
import argparse, itertools, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, shipped_agent, cpu_per_turn_batched, show
from loop_overhead import InstantModel, bare_agent


def no_gates(calls:int):
    "The bare pipeline without gates: an `Agent`, one echo tool, an instant model."
    return bare_agent(calls, gates=False)


def shipped_loop(calls:int):
    "`build_agent()` without its gates, audit log and session store, with an instant model: the loop's part of a shipped turn."
    from passepartout.gates import GateEngine
    agent = shipped_agent(calls)
    agent.provider, agent.gates, agent.audit, agent.sessions = InstantModel(calls), GateEngine(), None, None
    return agent


_NAMES = itertools.count()

def per_turn(agent, calls:int, turns:int, batch:int=50, stop=None) -> list:
    "CPU µs per turn, one figure per batch of `batch` turns (each in a new session, checked to run `calls` tools; `stop`: sent with each)."
    def one():
        name = f"core-{next(_NAMES)}"
        t = agent.send('go', session=name, stop=stop)
        agent.transcripts.pop(name, None); agent.used.pop(name, None); agent.session_values.pop(name, None)
        assert t.reply == 'done' and len(t.of('result')) == calls, t.events[-3:]
    for _ in range(batch): one()
    return cpu_per_turn_batched(one, turns, agent, batch)


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--turns', type=int, default=3000)
    ap.add_argument('--repeat', type=int, default=3)
    a = ap.parse_args()
    shipped_home()
    from passepartout.app import tune_collector
    tune_collector()
    import threading
    for label, make, calls, stop in [('bare, no gates: 1-tool turn', no_gates, 1, None), ('bare, no gates: 10-tool turn', no_gates, 10, None),
                                     ('bare, no gates, with a stop flag: 1-tool turn', no_gates, 1, threading.Event()),
                                     ('shipped, loop part: 1-tool turn', shipped_loop, 1, None), ('shipped, loop part: 10-tool turn', shipped_loop, 10, None)]:
        agent, turns = make(calls), a.turns if calls == 1 else a.turns // 5
        print(show(label, [x for _ in range(a.repeat) for x in per_turn(agent, calls, turns, stop=stop)]))
