"""A memory store survives a process killed with SIGKILL in the middle of writing.

A child process writes without pause (objects that link to each other, so a change rehashes the
objects above it; forgets; snapshots of a few changes and of hundreds; rollbacks). The test kills it
at a random moment, many times over on the same file, and after every kill opens the store and
verifies it: every hash recomputed, every link naming the version its snapshot holds, the history
in order, and the store still usable (a put and a snapshot succeed)."""
import os, random, signal, subprocess, sys, time
from pathlib import Path

from passepartout.memory_store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]

WRITER = r'''
import random, sys
from passepartout.memory_store import MemoryStore
store, rng = MemoryStore(sys.argv[1]), random.Random(int(sys.argv[2]))
print('ready', flush=True)
n = len(store)
while True:
    for _ in range(rng.choice([1, 5, 300])):            # small saves and big ones (a long snapshot transaction)
        ids = list(store._pending) or [f'o{rng.randrange(max(n, 1))}']
        id = f'o{rng.randrange(n + 20)}'
        links = [l for l in rng.sample(ids, min(2, len(ids))) if l != id and store.get(l) is not None]
        try: store.remember(id, f'{id} says {rng.random()}', links=links if rng.random() < 0.5 else [])
        except ValueError: pass                          # a cycle, refused
        n = max(n, int(id[1:]) + 1)
        if rng.random() < 0.02:
            victim = f'o{rng.randrange(n)}'
            try: store.forget(victim)
            except (KeyError, ValueError): pass
    store.snapshot('writer')
    if rng.random() < 0.1: store.rollback()
'''


def writer(path, seed):
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    p = subprocess.Popen([sys.executable, '-c', WRITER, str(path), str(seed)], stdout=subprocess.PIPE, env=env)
    assert p.stdout.readline() == b'ready\n'
    return p


def test_killed_writers_leave_a_store_that_opens_and_verifies(tmp_path):
    path, rng = tmp_path / 'memory.db', random.Random(17)
    heads = []
    for round in range(12):
        p = writer(path, round)
        time.sleep(rng.uniform(0.05, 0.6))               # the kill lands wherever the writer happens to be
        p.send_signal(signal.SIGKILL); p.wait(); p.stdout.close()
        store = MemoryStore(path)
        assert store.verify() == [], (round, store.verify()[:5])
        history = store.history(10**6)
        assert [s.seq for s in history] == sorted((s.seq for s in history), reverse=True)
        assert store.head == history[0] and store.head.objects == len(store)
        heads.append(store.head.seq)
        store.remember('probe', f'after kill {round}'); store.snapshot('probe')   # still writable
        store.close()
    assert heads[-1] > heads[0] + 12, heads                 # the writers did get snapshots in
    store = MemoryStore(path)
    assert store.verify(every=True) == []
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_failed_snapshot_changes_nothing(tmp_path, monkeypatch):
    "An exception inside the snapshot's transaction leaves the head, the history and the unsaved changes as they were."
    store = MemoryStore(tmp_path / 'memory.db')
    store.remember('a', 'one'); first = store.snapshot('first')
    store.remember('a', 'two')
    def boom(*a): raise OSError('disk full')
    monkeypatch.setattr(MemoryStore, '_record', boom)
    try: store.snapshot('second')
    except OSError: pass
    monkeypatch.undo()
    assert (store.head, store['a'].content, store.verify()) == (first, 'two', [])
    again = MemoryStore(tmp_path / 'memory.db')
    assert (again.head, again['a'].content) == (first, 'one')
    assert store.snapshot('second').seq == first.seq + 1
