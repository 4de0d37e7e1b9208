"""The session store's CPU per shipped turn (issue 14: its share <= 10 µs of a 1-tool turn).

1. Its share of a shipped 1-tool turn: the same `build_agent()` agent (audit log off, so only the store
   differs), each turn in a new conversation, run in batches of 25 with and without its session store,
   the batches interleaved so that the machine's load falls on both alike; the figure is the median of
   the per-batch differences (`time.process_time`, every thread, each batch ending with `sync`).
2. Its parts, alone: `load` of a session not stored (known not stored while the store's last check
   that nobody else committed is younger than its window, as while turns flow; and read from SQLite,
   as when the store has been idle longer), `save` of a 1-tool turn's four messages (left to the
   writer), and the commit of a group of 25 such turns, per turn.

    python bench/session_store.py [--batches 40]
"""
import argparse, itertools, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, shipped_agent, sync_stores, show

_NAMES = itertools.count()

def share(agent, batches:int, batch:int=25) -> tuple:
    "Per-batch CPU per turn with the store, without it, and their differences."
    store, clock = agent.sessions, time.process_time
    def one():
        name = f"share-{next(_NAMES)}"
        t = agent.send('go', session=name)
        agent.transcripts.pop(name, None); agent.used.pop(name, None)
        assert t.reply == 'done' and len(t.of('result')) == 1, t.events[-3:]
    def run():
        t0 = clock()
        for _ in range(batch): one()
        sync_stores(agent)
        return (clock() - t0) * 1e6 / batch
    for _ in range(4): run()
    with_, without = [], []
    for _ in range(batches):
        agent.sessions = store; with_.append(run())
        agent.sessions = None; without.append(run())
    agent.sessions = store
    return with_, without, [a - b for a, b in zip(with_, without)]

def parts(messages:list, rounds:int, group:int=25) -> tuple:
    "Per turn: load of a new session, save (left to the writer), the group's commit (`sync`)."
    from passepartout.sessions import SessionStore
    from passepartout.gates import turn_scope
    store, clock, loads, saves, commits, reads = SessionStore(window=1000), time.process_time, [], [], [], []
    strict = SessionStore(window=0)                # never trusts what it knows: every load reads
    for r in range(rounds + 5):
        with turn_scope():                     # as in the loop: the vault looked at once a turn
            t0 = clock(); ts = [store.load(f"part-{next(_NAMES)}") for _ in range(group)]; t1 = clock()
            for t in ts: t += [dict(m) for m in messages]
            t2 = clock()
            for t in ts: store.save(t, 'cli')
            t3 = clock(); store.sync(); t4 = clock()
            t5 = clock(); [strict.load(f"part-{next(_NAMES)}") for _ in range(group)]; t6 = clock()
        if r >= 5: loads.append((t1 - t0) * 1e6 / group); saves.append((t3 - t2) * 1e6 / group); commits.append((t4 - t3) * 1e6 / group)
        if r >= 5: reads.append((t6 - t5) * 1e6 / group)
    return loads, saves, commits, reads

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--batches', type=int, default=40)
    a = ap.parse_args()
    shipped_home()
    agent = shipped_agent(1)
    from passepartout.app import tune_collector
    tune_collector()
    agent.audit = None
    with_, without, diff = share(agent, a.batches)
    print(show('shipped 1-tool turn, audit off, with the store', with_))
    print(show('  the same without the session store', without))
    print(show("  the store's share (difference per batch pair)", diff, target=10))
    probe = 'probe'
    agent.send('go', session=probe)
    loads, saves, commits, reads = parts(list(agent.transcripts[probe]), a.batches * 4)
    print(show('  load of a session not stored', loads))
    print(show('  the same, read from SQLite (store idle, or window=0)', reads))
    print(show("  save of the turn's 4 messages (left to the writer)", saves))
    print(show('  commit, in a group of 25 turns, per turn', commits))
