"""Purge erases a memory object for good: from the memory now, from every snapshot, and from the bytes of the
SQLite file (database, WAL and shared-memory files), while every other object and every snapshot still verifies.

The bytes are checked before the purge too (the forgotten content is still in the file, kept by the history),
so the test would fail if purge did nothing."""
import random, subprocess, sys, os
from pathlib import Path
import pytest
from click.testing import CliRunner
from passepartout.memory_store import MemoryStore
import passepartout.recall  # noqa: F401  (store.recall)
from passepartout.memory_commands import memory_command

SECRET = 'IBAN DE89 3704 0044 0532 0130 00, PIN swordfishy'


def on_disk(path:Path) -> bytes:
    return b''.join(p.read_bytes() for p in path.parent.glob(path.name + '*') if p.is_file())


def secret_in(path) -> bool:
    data = on_disk(path).lower()
    return any(w in data for w in (b'swordfishy', b'de89', b'0532 0130'))


def build(path):
    "A memory where the secret had three versions, was linked from a note and a task, was recalled (indexed), then forgotten."
    store, rng = MemoryStore(path), random.Random(3)
    for i in range(300): store.remember(f'n{i}', f'filler note {i} about the garden')
    store.remember('secret:bank', f'old: {SECRET}'); store.snapshot('first')
    store.remember('secret:bank', SECRET, provenance='tool:http_fetch')
    store.remember('note:bank', 'Pay the rent from the bank account', links=['secret:bank', 'n1'])
    store.remember('task:rent', 'Rent is due on the 1st', links=['note:bank'])
    store.snapshot('second')
    assert store.recall('swordfishy')[0].object.id == 'secret:bank'              # the index holds its words now
    store.remember('secret:bank', f'new: {SECRET}'); store.snapshot('third')
    store.remember('note:bank', 'Pay the rent from the bank account', links=['n1'])
    store.forget('secret:bank'); store.snapshot('forgot')
    return store


def test_purge_erases_the_bytes_and_keeps_everything_else(tmp_path):
    path = tmp_path / 'memory.db'
    store = build(path)
    before = {s.seq: s for s in store.history(100)}
    contents = {s.seq: {id: store._by_hash(h).content for id, h in store._entries(s.root).items() if id != 'secret:bank'} for s in before.values()}
    assert secret_in(path)                                                          # forgotten, but history keeps it
    cause = store.purge('secret:bank')
    assert cause.startswith('purge: 3 snapshots rewritten') and not secret_in(path)
    assert store.verify(every=True) == [] and store.recall('swordfishy') == [] and store.recall('garden')
    after = {s.seq: s for s in store.history(100)}
    assert set(after) == set(before) | {store.head.seq}
    for seq, s in before.items():                                                   # every other object, in every snapshot, as it was
        entries = store._entries(after[seq].root)
        assert 'secret:bank' not in entries and {id: store._by_hash(h).content for id, h in entries.items()} == contents[seq]
        assert after[seq].objects == len(entries)
    linked = store._by_hash(store._entries(after[3].root)['note:bank'])
    assert linked.links == ('n1',)                                                  # the link to it is gone, the other kept
    store.rollback(3); assert 'note:bank' in store and 'secret:bank' not in store
    store.close()
    reopened = MemoryStore(path)
    assert reopened.verify(every=True) == [] and not secret_in(path)


def test_purge_is_refused_while_something_links_to_it(tmp_path):
    store = MemoryStore(tmp_path / 'memory.db')
    store.remember('secret:a', SECRET); store.remember('note:a', 'x', links=['secret:a']); store.snapshot('s')
    head = store.head
    with pytest.raises(ValueError, match="linked from \\['note:a'\\]"): store.purge('secret:a')
    assert store.head == head and store['secret:a'].content == SECRET and secret_in(tmp_path / 'memory.db')


def test_purge_command(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    store = build(tmp_path / 'home' / 'data' / 'memory.db'); store.close()
    run = lambda *a, input=None: CliRunner().invoke(memory_command, list(a), input=input)
    r = run('purge', 'secret:bank', input='n\n')
    assert r.exit_code == 1 and secret_in(tmp_path / 'home' / 'data' / 'memory.db')  # the owner said no
    r = run('purge', 'secret:bank', '--yes')
    assert r.exit_code == 0 and 'purge: 3 snapshots rewritten' in r.output, r.output
    assert not secret_in(tmp_path / 'home' / 'data' / 'memory.db')
    r = run('purge', 'nobody', '--yes')
    assert r.exit_code == 1 and "no object 'nobody' in memory or its history" in r.output
