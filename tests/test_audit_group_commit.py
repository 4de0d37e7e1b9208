"""Group commit across turns (`Later`, `AuditLog._defer`, `SessionStore._leave`): a process killed mid-load leaves a
verifiable prefix of the chain and whole turns; the durability barrier makes what came before visible to another
connection; turns that hold an action are written before they end; threads writing at once keep the chain valid;
a failed group write keeps its turns for the next."""
import json, os, sqlite3, subprocess, sys, threading

from click.testing import CliRunner

sys.path.insert(0, os.path.dirname(__file__))
from passepartout.audit import AuditLog, audit_command, canonical_json, entries
from passepartout.sessions import SessionStore, Transcript
from _daemon_support import wait_for


LOAD = '''
import sys, threading
from passepartout.audit import AuditLog
from passepartout.sessions import SessionStore
log, store = AuditLog(vault=False), SessionStore(sys.argv[1], vault=False)
def work(w):
    for n in range(10**9):
        with log.batch():
            for i in range(3): log.append({'kind': 'result', 'worker': w, 'turn': n, 'i': i})
            if n % 50 == 49: log.checkpoint()          # now and then a tool with effects: the barrier inside a turn
        t = store.load(f"w{w}")
        t += [{'role': 'user', 'content': f"w{w} {n}", 'owner': True}, {'role': 'assistant', 'content': f"w{w} {n} done"}]
        store.save(t)
for w in range(4): threading.Thread(target=work, args=(w,), daemon=True).start()
threading.Event().wait()
'''


def test_a_process_killed_mid_load_leaves_a_verifiable_chain_and_whole_turns(tmp_path, monkeypatch):
    "kill -9 while four threads append turns that wait for the writer thread: what is on disk verifies, every turn whole."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log_path, sessions = tmp_path / 'home' / 'data' / 'audit.db', tmp_path / 'sessions.db'
    proc = subprocess.Popen([sys.executable, '-c', LOAD, str(sessions)], env=dict(os.environ))
    def written():
        try: return sqlite3.connect(log_path).execute('SELECT count(*) FROM audit').fetchone()[0] >= 200   # 200 turns, one record each
        except sqlite3.Error: return False
    try: assert wait_for(written, 120), 'the loaded process wrote nothing'
    finally: proc.kill(); proc.wait(60)                # SIGKILL: no atexit, no drain, turns in memory lost
    assert proc.returncode == -9
    r = CliRunner().invoke(audit_command, ['verify'])
    assert r.exit_code == 0 and r.output.startswith('audit log intact: '), r.output
    rows = AuditLog(vault=False).recent(10**6)
    by_turn = {}
    for row in rows: by_turn.setdefault((row['data']['worker'], row['data']['turn']), []).append(row['data']['i'])
    assert all(i == [0, 1, 2] for i in by_turn.values())                     # a turn is written whole or not at all
    store = SessionStore(sessions, vault=False)
    for w in range(4):
        contents = [m['content'] for m in store.messages(f"w{w}")]
        assert contents == [c for n in range(len(contents) // 2) for c in (f"w{w} {n}", f"w{w} {n} done")]


def test_the_barrier_makes_every_finished_turn_visible_to_another_connection(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log, store = AuditLog(tmp_path / 'audit.db', vault=False), SessionStore(tmp_path / 'sessions.db', vault=False)
    for n in range(5):
        with log.batch(): log.append({'kind': 'reply', 'text': f"turn {n}"})
        t = store.load(f"s{n}"); t += [{'role': 'user', 'content': f"hi {n}", 'owner': True}]; store.save(t)
    assert (log.deferred, store.deferred) == (5, 5)                           # all left to the writer thread
    log.checkpoint(); store.sync()
    other = sqlite3.connect(tmp_path / 'audit.db')
    assert [r[0] for r in other.execute('SELECT data FROM audit ORDER BY seq')] == [f'{{"text":"turn {n}"}}' for n in range(5)]
    assert sqlite3.connect(tmp_path / 'sessions.db').execute('SELECT count(*) FROM messages').fetchone()[0] == 5
    assert AuditLog(tmp_path / 'audit.db', vault=False).verify() == (True, [])


def _stored_kinds(path) -> list:
    "(stored kind, entry kind) of every entry in the audit database at `path`, read by another connection as another process would."
    rows = sqlite3.connect(path).execute('SELECT seq, time, kind, data FROM audit ORDER BY seq')
    return [(k, e['kind']) for q, t, k, d in rows for e in entries({'seq': q, 'time': t, 'kind': k, 'data': json.loads(d)})]


def test_a_turn_that_holds_an_action_is_on_disk_when_it_ends(tmp_path, monkeypatch):
    "The owner may approve from another terminal at once: the pending record and the held note are there, no barrier called."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log, store = AuditLog(tmp_path / 'audit.db', vault=False), SessionStore(tmp_path / 'sessions.db', vault=False)
    with log.batch(): log.append({'kind': 'proposal'}); log.append({'kind': 'pending', 'token': 'k7m2x9qa'})
    t = store.load('s')
    t += [{'role': 'user', 'content': 'tidy', 'owner': True},
          {'role': 'tool', 'call_id': 'c1', 'name': 'shell', 'content': 'held for human approval', 'held': 'k7m2x9qa'}]
    assert store.save(t) is True
    assert (log.deferred, store.deferred) == (0, 0)
    assert _stored_kinds(tmp_path / 'audit.db') == [('turn', 'proposal'), ('turn', 'pending')]   # the turn: one record
    other = sqlite3.connect(tmp_path / 'sessions.db')        # another process: the turn (one row) and the held note in it
    assert other.execute("SELECT messages FROM sessions WHERE id = 's'").fetchone()[0] == 2
    assert '"held":"k7m2x9qa"' in other.execute("SELECT body FROM messages WHERE session = 's'").fetchone()[0]


def test_eight_threads_writing_at_once_keep_the_chain_valid_and_every_turn_whole(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log, store = AuditLog(tmp_path / 'audit.db', vault=False), SessionStore(tmp_path / 'sessions.db', vault=False)
    errors = []
    def work(w):
        try:
            t = store.load(f"w{w}")
            for n in range(60):
                with log.batch():
                    for i in range(3): log.append({'kind': 'result', 'worker': w, 'turn': n, 'i': i})
                    if n % 20 == 7: log.checkpoint()
                t += [{'role': 'user', 'content': f"{n}", 'owner': True}, {'role': 'assistant', 'content': f"{n} done"}]
                assert store.save(t) is True and store.current(t)
        except Exception as e: errors.append(e)
    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for th in threads: th.start()
    for th in threads: th.join(120)
    assert errors == [] and not any(th.is_alive() for th in threads)
    assert log.verify() == (True, []) and len(log) == 8 * 60                   # a turn is one record (`entries`)
    rows = log.recent(10**6)
    assert len(rows) == 8 * 60 * 3
    assert all([r['data']['i'] for r in rows[k:k + 3]] == [0, 1, 2] and len({(r['data']['worker'], r['data']['turn']) for r in rows[k:k + 3]}) == 1
               for k in range(0, len(rows), 3))                           # each turn's records together and in order
    for w in range(8):
        assert [m['content'] for m in store.messages(f"w{w}")] == [c for n in range(60) for c in (f"{n}", f"{n} done")]
    assert log.deferred > 0 and store.deferred > 0


class _FailingDb:
    "The log's connection, failing the next COMMIT."
    def __init__(self, db): self.db, self.fail = db, True
    def execute(self, sql, *args):
        if sql == 'COMMIT' and self.fail: self.fail = False; raise sqlite3.OperationalError('disk I/O error')
        return self.db.execute(sql, *args)
    def __getattr__(self, name): return getattr(self.db, name)


def test_a_failed_group_write_keeps_its_turns_for_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False)
    log.append({'kind': 'reply', 'text': 'first'})
    log.db = _FailingDb(log.db)
    with log.lock:                                                            # the writer thread cannot drain meanwhile
        with log.batch(): log.append({'kind': 'reply', 'text': 'left 1'})
        with log.batch(): log.append({'kind': 'reply', 'text': 'left 2'})
        failed = log._commit_waiting(log.key)                                 # the group write, failing
        assert str(failed) == 'disk I/O error' and len(log.waiting) == 2      # both turns wait again, in order
    log.sync()                                                                # the next write takes them
    assert [r['data']['text'] for r in log.recent(5)] == ['first', 'left 1', 'left 2'] and log.verify() == (True, [])


def test_a_left_turn_that_finds_another_writer_first_makes_the_agent_read_again(tmp_path):
    store, other = SessionStore(tmp_path / 'sessions.db', vault=False), SessionStore(tmp_path / 'sessions.db', vault=False, window=0)
    mine = store.load('s'); mine += [{'role': 'user', 'content': 'mine', 'owner': True}]; store.save(mine); store.sync()
    theirs = other.load('s'); theirs += [{'role': 'user', 'content': 'theirs', 'owner': True}]; assert other.save(theirs)
    mine += [{'role': 'user', 'content': 'mine again', 'owner': True}]
    assert store.save(mine) is True and store.current(mine)                   # left: the store cannot tell yet
    store.sync()
    assert mine.stale and not store.current(mine)                             # the write told: read it again
    assert [m['content'] for m in store.load('s')] == ['mine', 'theirs', 'mine again']


def test_a_forked_child_does_not_write_the_parents_waiting_turns(tmp_path, monkeypatch):
    "A child made by fork while the parent has a turn waiting (and its lock held) writes only its own records."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False)
    with log.lock:                                                            # held at the fork, as by a writer thread mid-write
        with log.batch(): log.append({'kind': 'reply', 'text': 'parent, left'})
        pid = os.fork()
        if pid == 0:
            try: log.append({'kind': 'reply', 'text': 'child'}); log.sync()
            finally: os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    log.sync()
    assert sorted(r['data']['text'] for r in log.recent(10)) == ['child', 'parent, left'] and log.verify() == (True, [])


def test_a_watched_turn_writes_its_records_before_a_tool_with_effects_runs(tmp_path, monkeypatch):
    "With `on_event` (chat, TUI) the turn's sink is a wrapper, not the log's `append`: the write-ahead must hold all the same."
    from passepartout.loop import Agent
    from passepartout.perceive import perceive
    from passepartout.reason import ScriptedProvider
    from passepartout.signals import tool_call, reply
    from passepartout.tools import Toolbelt
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log, seen, shown = AuditLog(tmp_path / 'audit.db', vault=False), {}, []
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def tidy():
        "Tidy up."
        seen['tidy'] = [k for _, k in _stored_kinds(tmp_path / 'audit.db')]
        return 'tidied'
    agent = Agent(ScriptedProvider([tool_call('tidy'), reply('tidied up')]), tools=belt)
    agent.audit = log.append
    agent.process(perceive('tidy up'), on_event=shown.append)
    assert seen['tidy'] == ['message', 'verdict'] and 'result' in [e['kind'] for e in shown]


ENDS = '''
import sys
from passepartout.audit import AuditLog
from passepartout.sessions import SessionStore
log, store = AuditLog(vault=False, window=60), SessionStore(sys.argv[1], vault=False, window=60)   # the writer thread would wait a minute
for n in range(5):
    with log.batch(): log.append({'kind': 'reply', 'text': f"turn {n}"})
    t = store.load(f"s{n}"); t += [{'role': 'user', 'content': f"hi {n}", 'owner': True}]; store.save(t)
assert (log.deferred, store.deferred) == (5, 5)
'''                                                                             # and the process ends at once, normally


def test_a_process_that_ends_normally_writes_every_waiting_turn(tmp_path, monkeypatch):
    "`send` and the daemon end through the interpreter's exit: `atexit` writes what waits (the writer thread would not have yet)."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    subprocess.run([sys.executable, '-c', ENDS, str(tmp_path / 'sessions.db')], env=dict(os.environ), check=True, timeout=120)
    assert [r['data']['text'] for r in AuditLog(vault=False).recent(10)] == [f"turn {n}" for n in range(5)]
    assert CliRunner().invoke(audit_command, ['verify']).exit_code == 0
    assert sqlite3.connect(tmp_path / 'sessions.db').execute('SELECT count(*) FROM messages').fetchone()[0] == 5


def _shipped_turn(log, n):
    "The events of a shipped 1-tool turn, as the loop hands them to the log, inside a batch."
    act = {'kind': 'tool', 'tool': 'echo', 'args': {'text': f"hi {n}"}, 'target': 'tool', 'explanation': 'asked', 'call_id': f"c{n}"}
    trace = [{'gate': g, 'decision': 'allow', 'reason': '', 'us': 1.5} for g in ('validator', 'paths', 'secrets')]
    with log.batch():
        log.append({'kind': 'message', 'sensor': 'user-input', 'source': 'cli', 'payload': {'text': f"go {n}"}})
        log.append({'kind': 'proposal', 'action': act, 'attempt': 1, 'provider': 'openai'})
        log.append({'kind': 'verdict', 'decision': 'allow', 'action': act, 'trace': trace, 'attempt': 1})
        log.append({'kind': 'result', 'actuator': 'tool', 'action': act, 'output': f"hi {n}"})
        log.append({'kind': 'proposal', 'action': {'kind': 'reply', 'text': 'done'}, 'attempt': 1, 'provider': 'openai'})
        log.append({'kind': 'verdict', 'decision': 'allow', 'action': {'kind': 'reply', 'text': 'done'}, 'trace': trace, 'attempt': 1})
        log.append({'kind': 'reply', 'text': 'done'})


def test_records_the_writer_makes_are_the_records_a_turn_makes_as_it_ends(tmp_path, monkeypatch):
    "A turn left to the writer thread (its events made records there) and one written as it ends give the same records, byte for byte."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    left, now = AuditLog(tmp_path / 'left.db', vault=False), AuditLog(tmp_path / 'now.db', vault=False, window=0)
    for n in range(3): _shipped_turn(left, n); _shipped_turn(now, n)
    assert left.deferred == 3 and now.deferred == 0
    left.sync()
    rows = [[(e['seq'], e['kind'], canonical_json(e['data'])) for e in log.recent(-1)] for log in (left, now)]   # each step's time is its own
    assert rows[0] == rows[1] and [k for _, k, _ in rows[0][:3]] == ['message', 'verdict', 'verdict']
    assert [k for k, in left.db.execute('SELECT kind FROM audit')] == ['turn'] * 3                              # a turn: one record
    assert all(log.verify() == (True, []) for log in (left, now))


def test_a_turn_whose_events_cannot_be_made_records_blocks_no_other_turn(tmp_path, monkeypatch):
    "Events the writer cannot make into records become a record saying so; the turns after them are written, the chain verifies."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False)
    with log.lock:                                                            # both turns in one group of the writer
        with log.batch(): log.append({'kind': 'result', 'output': 'odd', (1, 2): 'a key JSON cannot hold'})
        log.waiting.append([[('not an event',)], None, None, 'events'])     # a ticket no code could make records of
        _shipped_turn(log, 1)
    log.sync()
    kinds = [(r['kind'], sorted(r['data'])) for r in log.recent(10)]
    assert kinds[0] == ('result', ['output', 'unrecordable']) and kinds[1] == ('unrecordable', ['error', 'events'])
    assert [k for k, _ in kinds[2:]] == ['message', 'verdict', 'verdict'] and not log.waiting and log.verify() == (True, [])
