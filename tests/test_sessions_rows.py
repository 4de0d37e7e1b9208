"""The session store's rows: a turn's messages stored as one row, databases written one row per message (by the
store before that change) read, listed, shown, continued and forgotten as before, and what the store knows of a
session given up as soon as another connection commits."""
import json, os, sqlite3, subprocess, sys, time
from pathlib import Path

import pytest
from click.testing import CliRunner

from passepartout.sessions import SessionStore, Transcript, sessions_command, session_line

ROOT = Path(__file__).resolve().parents[1]

# What the store wrote before a turn became one row: this schema, a row per message keyed by its position.
OLD_SCHEMA = ("""CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created REAL NOT NULL, used REAL NOT NULL,
               messages INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0, title TEXT NOT NULL DEFAULT '',
               source TEXT NOT NULL DEFAULT '')""",
              """CREATE TABLE IF NOT EXISTS messages (session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
               PRIMARY KEY (session, seq)) WITHOUT ROWID""",
              "CREATE INDEX IF NOT EXISTS sessions_by_use ON sessions (used)")

OLD_TALK = [{'role': 'user', 'content': 'Tidy the build dir\nplease', 'owner': True},
            {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c1', 'name': 'shell', 'args': {'command': 'rm -r build'}}]},
            {'role': 'tool', 'call_id': 'c1', 'name': 'shell', 'content': 'held for human approval (token k7m2x9qa)', 'held': 'k7m2x9qa', 'is_error': False},
            {'role': 'assistant', 'content': 'Waiting for you.'},
            {'role': 'user', 'content': 'café?', 'owner': True},
            {'role': 'assistant', 'content': 'Café.'}]


def old_database(path:Path, sessions:dict):
    "A database as the store wrote it before: `sessions` maps an id to its messages, each turn committed as the old `_write` did."
    db = sqlite3.connect(path, isolation_level=None)
    db.execute('PRAGMA journal_mode=WAL')
    for statement in OLD_SCHEMA: db.execute(statement)
    for n, (session, messages) in enumerate(sessions.items()):
        created = 1_700_000_000.0 + n
        for version, turn in enumerate((messages[:4], messages[4:]), 1):   # two turns: (user, call, held note, reply), (user, reply)
            db.execute('BEGIN IMMEDIATE')
            count = db.execute('SELECT messages FROM sessions WHERE id = ?', (session,)).fetchone()
            count = count[0] if count else 0
            db.executemany('INSERT INTO messages VALUES (?,?,?)',
                           [(session, count + i, json.dumps(m, ensure_ascii=False, separators=(',', ':'))) for i, m in enumerate(turn)])
            db.execute('INSERT INTO sessions VALUES (?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET used = excluded.used, '
                       'messages = excluded.messages, version = excluded.version, title = excluded.title',
                       (session, created, created + version, count + len(turn), version, 'Tidy the build dir', 'cli'))
            db.execute('COMMIT')
    db.close()


def test_a_database_written_a_row_per_message_loads_lists_shows_and_forgets(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    path = tmp_path / 'home' / 'data' / 'sessions.db'
    path.parent.mkdir(parents=True)
    old_database(path, {'notes': OLD_TALK, 'other': OLD_TALK})
    store = SessionStore(vault=False)
    assert store.messages('notes') == OLD_TALK
    t = store.load('notes')
    assert (list(t), t.base, t.version) == (OLD_TALK, 0, 2)
    short = store.load('notes', limit=3)                       # the last 3 start at a reply: cut to the user message
    assert (list(short), short.base) == (OLD_TALK[4:], 4)
    assert [(s['id'], s['messages'], s['title'], s['source']) for s in store.sessions()] == \
           [('other', 6, 'Tidy the build dir', 'cli'), ('notes', 6, 'Tidy the build dir', 'cli')]
    assert session_line(store.get('notes')).endswith('6 messages  Tidy the build dir')
    r = CliRunner().invoke(sessions_command, ['show', 'notes'])
    assert r.exit_code == 0 and r.output.splitlines()[0] == 'you> Tidy the build dir' and r.output.splitlines()[-1] == 'agent> Café.'
    assert CliRunner().invoke(sessions_command, []).output.splitlines()[1].startswith('notes  ')
    assert CliRunner().invoke(sessions_command, ['forget', 'other']).output == 'forgot other\n'
    assert (store.get('other'), store.messages('other')) == (None, [])


def test_an_old_conversation_continues_in_rows_per_turn_and_reads_back_whole(tmp_path):
    "The owner's decision replaces a held note of an old row; new turns are one row each; every window of it reads right."
    path = tmp_path / 'sessions.db'
    old_database(path, {'notes': OLD_TALK})
    store = SessionStore(path, vault=False, window=0)
    t = store.load('notes')
    released = {**t[2], 'content': 'approved by the owner: (no output)', 'released': True}
    t[2] = released                                            # in an old one-message row
    turn = [{'role': 'user', 'content': 'and now?', 'owner': True},
            {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c2', 'name': 'echo', 'args': {'text': 'x'}}]},
            {'role': 'tool', 'call_id': 'c2', 'name': 'echo', 'content': 'x', 'is_error': False},
            {'role': 'assistant', 'content': 'Done.'}]
    t += turn
    assert store.save(t, 'cli') is True
    expected = OLD_TALK[:2] + [released] + OLD_TALK[3:] + turn
    assert store.messages('notes') == expected
    assert store.db.execute("SELECT seq FROM messages WHERE session = 'notes' ORDER BY seq").fetchall() == [(i,) for i in range(6)] + [(9,)]
    later = SessionStore(path, vault=False)                    # another process
    for limit in range(1, 12):                                 # every window: the last `limit`, from a user message
        w = later.load('notes', limit)
        start = next(i for i in range(max(0, 10 - limit), 11) if i == 10 or expected[i]['role'] == 'user')
        assert (list(w), w.base) == (expected[start:], start), limit
    w = later.load('notes', 5)                                 # a message inside a turn's row replaced
    w[w.index(turn[2])] = {**turn[2], 'content': 'y'}
    w.append({'role': 'user', 'content': 'thanks', 'owner': True})
    assert later.save(w) is True and later.sync() is None
    assert [m['content'] for m in store.messages('notes')][-3:] == ['y', 'Done.', 'thanks']
    assert store.get('notes')['messages'] == 11


def test_a_damaged_row_keeps_the_positions_after_it(tmp_path):
    "A row that cannot be read stands for the positions it held: the messages after it keep theirs, and a replacement lands right."
    path = tmp_path / 'sessions.db'
    store = SessionStore(path, vault=False, window=0)
    t = store.load('s')
    t += [{'role': 'user', 'content': 'a', 'owner': True}, {'role': 'assistant', 'content': 'b'}]; store.save(t)
    t += [{'role': 'user', 'content': 'c', 'owner': True}, {'role': 'assistant', 'content': 'd'}, {'role': 'tool', 'content': 'e'}]; store.save(t)
    t += [{'role': 'user', 'content': 'f', 'owner': True}, {'role': 'assistant', 'content': 'g'}]; store.save(t)
    with sqlite3.connect(path) as db: db.execute("UPDATE messages SET body = 'not json' WHERE session = 's' AND seq = 4")
    got = SessionStore(path, vault=False).messages('s')
    assert [m['content'] for m in got][:2] + [m['content'] for m in got][5:] == ['a', 'b', 'f', 'g'] and len(got) == 7
    assert all('could not be read' in m['content'] and m['owner'] is False for m in got[2:5])
    reader = SessionStore(path, vault=False, window=0)
    u = reader.load('s')
    assert u.base == 0 and u[5]['content'] == 'f'
    u[6] = {'role': 'assistant', 'content': 'G'}; u.append({'role': 'user', 'content': 'h', 'owner': True})
    assert reader.save(u) is True
    assert [m['content'] for m in SessionStore(path, vault=False).messages('s')][5:] == ['f', 'G', 'h']


def test_a_commit_by_another_connection_makes_the_store_read_again(tmp_path):
    "What the store knows (a session not stored, a session as it wrote it) is given up when anyone else commits: the turn lands after theirs."
    path = tmp_path / 'sessions.db'
    store = SessionStore(path, vault=False, window=1000)       # left turns: written by `sync`
    t = store.load('s')                                       # known: not stored
    assert store.known == {'s': None}
    old_database(path, {'s': OLD_TALK})                        # another process (here: today's store's statements) stores it meanwhile
    t += [{'role': 'user', 'content': 'mine', 'owner': True}]
    store.save(t); store.sync()
    assert t.stale and not store.current(t)                    # out of step: the agent reads the session again
    assert [m['content'] for m in store.messages('s')] == [m['content'] for m in OLD_TALK] + ['mine']
    u = store.load('s')                                        # known now, as read; written by this store alone: no read at the write
    assert store.known['s'][1:3] == (7, 3)
    u.append({'role': 'assistant', 'content': 'noted'})
    reads = []
    store.db.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith('SELECT') else None)
    store.save(u); store.sync()
    store.db.set_trace_callback(None)
    assert reads == [] and not u.stale and store.current(u)
    with sqlite3.connect(path) as db: db.execute("UPDATE sessions SET version = version + 1 WHERE id = 's'")   # a write elsewhere
    u.append({'role': 'user', 'content': 'again', 'owner': True}); store.save(u); store.sync()
    assert u.stale                                             # noticed at once, from the write's own transaction


def test_new_sessions_cost_no_read_while_the_store_knows_every_id_and_one_after_another_commit(tmp_path):
    path = tmp_path / 'sessions.db'
    old_database(path, {'notes': OLD_TALK})
    store, reads = SessionStore(path, vault=False, window=3600), []   # the knowledge stays fresh for the test's length
    store.db.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith('SELECT') else None)
    for n in range(16): assert list(store.load(f"new-{n}")) == []
    assert len(reads) == 17 and store.ids == {'notes'}        # 16 reads of new sessions paid for reading the ids
    reads.clear()
    assert [list(store.load(f"newer-{n}")) for n in range(50)] == [[]] * 50 and reads == []
    assert store.load('notes')[0]['content'].startswith('Tidy') and len(reads) == 1   # a stored one is read
    t = store.load('mine'); t.append({'role': 'user', 'content': 'mine', 'owner': True}); store.save(t); store.sync()
    assert 'mine' in store.ids                                 # its own new session
    old_database(path, {'theirs': OLD_TALK})                  # another process creates one this store took for not stored
    assert list(store.load('theirs')) == []                    # within the window: the copy of a moment ago
    t.append({'role': 'assistant', 'content': 'noted'}); store.save(t); store.sync()   # the next group's check
    assert store.ids is None and list(store.known) == ['mine']   # another connection committed: all forgotten, but what this write read
    assert store.load('theirs') == OLD_TALK
    strict = SessionStore(path, vault=False, window=0)         # no window: every load reads
    strict.db.set_trace_callback(lambda sql: reads.append(sql) if sql.startswith('SELECT') else None)
    reads.clear()
    for n in range(40): strict.load(f"x{n}")
    assert len([r for r in reads if 'LEFT JOIN' in r]) == 40


def test_a_load_known_not_stored_does_not_wait_for_a_group_being_written(tmp_path):
    "The writer thread holds the store's lock while a group commits: a new session's load answers without it."
    import threading
    store = SessionStore(tmp_path / 'sessions.db', vault=False, window=3600)
    store.load('new')                                          # learned: not stored
    done = threading.Event()
    with store.lock:                                           # a group's transaction in progress
        th = threading.Thread(target=lambda: (store.load('new'), done.set()), daemon=True)
        th.start()
        assert done.wait(120), 'the load waited for the lock'
    th.join(120)
