"""The memory store against a plain dict: random puts, forgets, snapshots and rollbacks must leave the
store saying what the dict says, with a root hash that depends only on the contents (the trie's shape is
canonical), diffs that match the dicts' difference, and a store that verifies and reopens the same."""
import random, sqlite3

import pytest

from passepartout.memory_store import MemoryObject, MemoryStore, digest


def fill(store, ids):
    for id in ids: store.remember(id, f'content of {id}')
    return store.snapshot('fill')


def test_the_root_depends_only_on_the_contents(tmp_path):
    "Two stores reaching the same objects by different paths (order, deletions that fold branches) have the same root."
    a, b = MemoryStore(tmp_path / 'a.db'), MemoryStore(tmp_path / 'b.db')
    ids = [f'n{i}' for i in range(300)]
    fill(a, ids)
    for id in ids[100:]: a.forget(id)
    a.snapshot('shrunk')
    fill(b, reversed(ids[:100]))
    assert a.head.root == b.head.root and a.head.objects == b.head.objects == 100
    empty = MemoryStore(tmp_path / 'c.db')
    for id in ids[:100]: a.forget(id)
    assert a.snapshot('emptied').root == empty.head.root


def test_random_operations_match_a_dict(tmp_path):
    rng = random.Random(5)
    store, model, saved = MemoryStore(tmp_path / 'm.db'), {}, {}   # model: id -> (content, links); saved: seq -> model copy
    saved[store.head.seq] = {}
    for step in range(1500):
        op = rng.random()
        id = f'o{rng.randrange(150)}'
        if op < 0.6:
            candidates = [i for i in model if i != id]
            links = tuple(rng.sample(candidates, min(len(candidates), rng.choice([0, 0, 1, 2]))))
            try:
                store.remember(id, f'{id} v{step}', links=links); model[id] = (f'{id} v{step}', links)
            except ValueError as e: assert 'cycle' in str(e)
        elif op < 0.7 and id in model:
            users = sorted(u for u, (_, links) in model.items() if id in links)
            if users:
                with pytest.raises(ValueError): store.forget(id)
            else: store.forget(id); del model[id]
        elif op < 0.85:
            saved[store.snapshot(f'step {step}').seq] = dict(model)
        elif op < 0.9 and len(saved) > 2:
            to = rng.choice(sorted(saved))
            before = store.head.seq
            if store._pending: saved[before + 1] = dict(model)   # the "before rollback" snapshot
            head = store.rollback(to)
            model = dict(saved[to]); saved[head.seq] = dict(model)
        assert len(store) == len(model)
    assert {id: (store[id].content, store[id].links) for id in store} == model
    head = store.snapshot('end'); saved[head.seq] = dict(model)
    assert store.verify(every=True) == []
    seqs = sorted(saved)
    for a, b in zip(seqs[-8:], seqs[-7:]):
        d, ma, mb = store.diff(a, b), saved[a], saved[b]
        assert d.added == sorted(mb.keys() - ma.keys()) and d.removed == sorted(ma.keys() - mb.keys())
        assert set(d.changed) >= {k for k in ma.keys() & mb.keys() if ma[k] != mb[k]}   # plus objects rehashed for a link
    again = MemoryStore(tmp_path / 'm.db')
    assert again.head == store.head and {id: (again[id].content, again[id].links) for id in again} == model


def test_every_link_names_the_version_the_snapshot_holds(tmp_path):
    "A chain a -> b -> c: changing c gives b and a new hashes, and each stored link carries the target's current hash."
    store = MemoryStore(tmp_path / 'm.db')
    store.remember('c', 'c1'); store.remember('b', 'b', links=['c']); store.remember('a', 'a', links=['b', 'c'])
    old = {i: store._hash_of(i) for i in 'abc'}
    store.remember('c', 'c2')
    new = {i: store._hash_of(i) for i in 'abc'}
    assert all(old[i] != new[i] for i in 'abc')
    store.snapshot('x')
    body = store.db.execute('SELECT body FROM objects WHERE hash = ?', (new['a'],)).fetchone()[0]
    assert digest(body) == new['a'] and f'["b","{new["b"]}"]' in body and f'["c","{new["c"]}"]' in body
    assert store.verify() == []


def test_verify_finds_missing_and_altered_rows(tmp_path):
    store = MemoryStore(tmp_path / 'm.db')
    fill(store, [f'n{i}' for i in range(200)])
    root = store.head.root
    with sqlite3.connect(tmp_path / 'm.db') as db:
        db.execute('DELETE FROM objects WHERE hash = ?', (store._hash_of('n5'),))
    problems = MemoryStore(tmp_path / 'm.db').verify()
    assert problems == [f"object 'n5' {store._hash_of('n5')[:12]} is missing"]
    with sqlite3.connect(tmp_path / 'm.db') as db: db.execute('UPDATE nodes SET body = body || \' \' WHERE hash = ?', (root,))
    assert MemoryStore(tmp_path / 'm.db').verify() == [f"node {root[:12]} does not match its hash"]


def test_the_file_is_private(tmp_path):
    store = MemoryStore(tmp_path / 'data' / 'memory.db')
    store.remember('a', 'secret plans'); store.snapshot('x')
    assert (tmp_path / 'data' / 'memory.db').stat().st_mode & 0o777 == 0o600
    assert store.db.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'


def test_the_default_path_is_under_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    assert MemoryStore().path == tmp_path / 'home' / 'data' / 'memory.db'
