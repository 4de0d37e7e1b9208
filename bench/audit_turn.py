"""The audit log's CPU time per shipped turn (issue 14, requirement 4), two ways:

1. **The log alone** (`replay`): the events of one shipped 1-tool and one 10-tool turn (`build_agent()`, a read-only
   `echo` tool, the wire model of bench/_shipped.py) are captured once, then appended again, each turn inside
   `log.batch()` as the loop does, 25 turns, then `sync()` (every record written and anchored); the figure of a
   group is its `time.process_time` (every thread: the writer thread's share included) divided by 25. An empty
   vault (as shipped) and a vault that holds one secret (every record redacted).
2. **Its share of a shipped turn** (`share`): the shipped 1-tool turn with the log and without it, batches
   alternating in one process so that both share the machine's load (bench/loop_overhead.py measures the same
   share, without alternating).

Prints medians and quartiles, and the share next to the 20 µs target as a ratio.

    python bench/audit_turn.py [--rounds 40]
"""
import argparse, itertools, os, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, shipped_agent, cpu_per_turn_batched, show


def capture(calls:int) -> tuple:
    "The events the shipped agent hands its audit log in one `calls`-tool turn (copies, as the loop made them), and (records, bytes of data) it wrote of them."
    agent, events = shipped_agent(calls), []
    log = agent.audit.__self__
    agent.audit = lambda e: (events.append(dict(e)), log.append(e))   # a plain sink: the loop opens no batch around it
    before = len(log)
    with log.batch(): agent.send('go', session='capture')
    log.sync()
    stored = log.db.execute('SELECT count(*), sum(length(data)) FROM audit WHERE seq > ?', (before,)).fetchone()
    return events, stored


def replay(events:list, rounds:int, vault=None, batch:int=25) -> list:
    "CPU µs per turn of appending `events` as one turn, `batch` turns a group, then `sync()`: one figure per group (`vault` None: the default one, empty)."
    from passepartout.audit import AuditLog
    log = AuditLog(Path(tempfile.mkdtemp(prefix='pp-audit-')) / 'audit.db', vault=vault)
    def turn():
        with log.batch():
            for e in events: log.append(dict(e))    # the loop hands the log a new dict each time
    for _ in range(4 * batch): turn()
    log.sync()
    out, clock = [], time.process_time
    for _ in range(rounds):
        t0 = clock()
        for _ in range(batch): turn()
        log.sync()
        out.append((clock() - t0) * 1e6 / batch)
    ok, problems = log.verify()
    assert ok, problems[:3]
    return out


def share(rounds:int, batch:int=25) -> tuple:
    "(with the log, without): CPU µs per shipped 1-tool turn, batches alternating."
    agent, names = shipped_agent(1), itertools.count()
    def one():
        name = f"audit-turn-{next(names)}"
        t = agent.send('go', session=name)
        agent.transcripts.pop(name, None); agent.used.pop(name, None)
        assert len(t.of('result')) == 1 and t.reply == 'done', t.events[-3:]
    for _ in range(4 * batch): one()
    sink, on, off = agent.audit, [], []
    for _ in range(rounds):
        agent.audit = sink; on += cpu_per_turn_batched(one, batch, agent, batch)
        agent.audit = None; off += cpu_per_turn_batched(one, batch, agent, batch)
    agent.audit = sink
    return on, off


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=40)
    a = ap.parse_args()
    home, _ = shipped_home()
    from passepartout.app import tune_collector
    from passepartout.vault import Vault
    tune_collector()
    (one, (records1, bytes1)), (ten, (records10, bytes10)) = capture(1), capture(10)
    print(f"events per turn: {len(one)} (1 tool), {len(ten)} (10 tools); records: {records1} ({bytes1} bytes of data), {records10} ({bytes10} bytes)")
    secret = Vault(home / 'bench-vault.enc', home / 'bench-vault.key'); secret.add('BENCH_TOKEN', 'bench-secret-value-0123456789')
    print(show('the log alone, 1-tool turn (empty vault)', replay(one, a.rounds)))
    print(show('the log alone, 1-tool turn (one secret)', replay(one, a.rounds, vault=secret)))
    print(show('the log alone, 10-tool turn (empty vault)', replay(ten, max(4, a.rounds // 4))))
    on, off = share(a.rounds)
    print(show('shipped 1-tool turn with the audit log', on))
    print(show('shipped 1-tool turn without it', off))
    print(f"{'  the log share (median with - median without)':<50} {statistics.median(on) - statistics.median(off):10.1f} µs  "
          f"target <= 20 µs: ratio {(statistics.median(on) - statistics.median(off)) / 20:.2f}")
