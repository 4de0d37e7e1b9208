"""The audit log's chain against real tampering of the SQLite file (edit, delete, insert, reorder), concurrent
appends from several processes, and the log as the sink of real agent turns."""
import json, multiprocessing, os, sqlite3, subprocess, sys

import pytest

from passepartout.audit import AuditLog, GENESIS, record_hash, canonical_json
from passepartout.gates import GateEngine, ask
from passepartout.loop import Agent
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply
from passepartout.tools import Toolbelt


@pytest.fixture
def log(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db')
    for i in range(1, 9):
        log.append({'kind': 'result', 'step': i, 'output': f"output {i}"})
    log.close()
    return tmp_path / 'audit.db'


def attacker(path, *statements):
    "A separate connection writing the database file directly, as someone with disk access would."
    db = sqlite3.connect(path)
    for sql, *args in statements: db.execute(sql, *args)
    db.commit(); db.close()


def rows(path):
    db = sqlite3.connect(path)
    out = db.execute('SELECT seq, time, kind, data, prev_hash, hash, mac FROM audit ORDER BY seq').fetchall()
    db.close()
    return out


MAC_MISMATCH = 'record #{}: its MAC does not match (forged or re-hashed without the key, or the key was replaced)'


def problems(path):
    ok, found = AuditLog(path).verify()
    assert not ok
    return found


def first_problem(path):
    ok, problems = AuditLog(path).verify()
    assert not ok
    return problems[0]


def test_intact(log):
    ok, problems = AuditLog(log).verify()
    assert (ok, problems) == (True, [])


def test_edited_data(log):
    attacker(log, ("UPDATE audit SET data = ? WHERE seq = 5", (canonical_json({'step': 5, 'output': 'nothing happened'}),)))
    assert first_problem(log) == 'record #5: content does not match its hash (edited)'


def test_edited_time_and_kind(log):
    attacker(log, ("UPDATE audit SET time = time - 3600 WHERE seq = 3",))
    assert first_problem(log) == 'record #3: content does not match its hash (edited)'


def test_edited_then_rehashed_record_breaks_the_next_link(log):
    "An attacker who recomputes the edited record's own hash is caught by its MAC, and by the following record."
    seq, at, kind, data, prev, _, _ = rows(log)[3]
    forged = {'step': 4, 'output': 'forged'}
    attacker(log, ("UPDATE audit SET data = ?, hash = ? WHERE seq = ?", (canonical_json(forged), record_hash(seq, at, kind, forged, prev), seq)))
    assert problems(log)[:2] == [MAC_MISMATCH.format(4), 'record #5: does not follow record #4 (inserted, deleted or reordered)']


def test_deleted(log):
    attacker(log, ("DELETE FROM audit WHERE seq = 4",))
    assert first_problem(log) == 'record #4: missing (deleted); found #5 in its place'


def test_deleted_first(log):
    attacker(log, ("DELETE FROM audit WHERE seq = 1",))
    assert first_problem(log).startswith('record #1: missing (deleted)')


def test_inserted_in_the_middle(log):
    "A forged record with a correct-looking hash, slipped in at #4 and everything after renumbered."
    old = rows(log)
    _, at, kind, _, prev, _, _ = old[2]
    forged_hash = record_hash(4, at + 0.1, 'result', {'output': 'forged'}, old[2][5])
    new = old[:3] + [(4, at + 0.1, 'result', canonical_json({'output': 'forged'}), old[2][5], forged_hash, old[2][6])] + \
          [(s + 1, *rest) for s, *rest in old[3:]]
    attacker(log, ("DELETE FROM audit",), *[("INSERT INTO audit VALUES (?,?,?,?,?,?,?)", r) for r in new])
    assert problems(log)[:2] == [MAC_MISMATCH.format(4), 'record #5: does not follow record #4 (inserted, deleted or reordered)']


def test_appended_copy_of_an_old_record(log):
    old = rows(log)[1]
    attacker(log, ("INSERT INTO audit VALUES (?,?,?,?,?,?,?)", (9, *old[1:])))
    assert first_problem(log) == 'record #9: does not follow record #8 (inserted, deleted or reordered)'


def test_reordered(log):
    "Records 3 and 6 swap places (their contents move, the numbers stay)."
    r = {x[0]: x for x in rows(log)}
    swap = lambda dst, src: ("UPDATE audit SET time = ?, kind = ?, data = ?, prev_hash = ?, hash = ?, mac = ? WHERE seq = ?", (*src[1:], dst))
    attacker(log, swap(3, r[6]), swap(6, r[3]))
    assert first_problem(log) == 'record #3: does not follow record #2 (inserted, deleted or reordered)'


def test_renumbered(log):
    "Records 3 and 6 swap numbers (each keeps its content)."
    attacker(log, ("UPDATE audit SET seq = 100 WHERE seq = 3",), ("UPDATE audit SET seq = 3 WHERE seq = 6",),
             ("UPDATE audit SET seq = 6 WHERE seq = 100",))
    assert first_problem(log) == 'record #3: does not follow record #2 (inserted, deleted or reordered)'


def test_data_that_is_not_json(log):
    attacker(log, ("UPDATE audit SET data = '{oops' WHERE seq = 2",))
    assert first_problem(log) == 'record #2: data is not valid JSON (edited)'


def test_cli_verify_names_the_first_bad_record(tmp_path):
    home = tmp_path / 'home'
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(home)}
    cli = lambda *a: subprocess.run([sys.executable, '-c', 'from passepartout.cli import main; main()', 'audit', *a],
                                    capture_output=True, text=True, env=env)
    log = AuditLog(home / 'data' / 'audit.db', vault=False,
                   key_file=home / 'config' / 'audit.key', head_file=home / 'state' / 'audit.head')
    for i in range(1, 9): log.append({'kind': 'result', 'step': i, 'output': f"output {i}"})
    log.close()
    r = cli('verify')
    assert r.returncode == 0 and r.stdout.startswith('audit log intact: 8 records, head #8 '), r.stdout + r.stderr
    assert r.stdout.strip().endswith('anchored by the checkpoint at #8')
    r = cli('-n', '3')
    assert r.returncode == 0 and r.stdout.count('\n') == 3 and 'output 8' in r.stdout and 'output 5' not in r.stdout
    attacker(home / 'data' / 'audit.db', ("DELETE FROM audit WHERE seq = 6",))
    r = cli('verify')
    assert r.returncode == 1
    assert 'TAMPERED' in r.stderr and 'record #6: missing (deleted); found #7 in its place' in r.stderr


def _appender(path, n, who):
    log = AuditLog(path, vault=False)
    for i in range(n): log.append({'kind': 'result', 'who': who, 'i': i})


def test_concurrent_appends_keep_one_chain(tmp_path):
    path = tmp_path / 'audit.db'
    AuditLog(path, vault=False).close()
    ctx = multiprocessing.get_context('spawn')
    procs = [ctx.Process(target=_appender, args=(path, 60, w)) for w in range(3)]
    for p in procs: p.start()
    for p in procs: p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    log = AuditLog(path, vault=False)
    assert len(log) == 180 and log.verify() == (True, [])
    assert log.head[0] == 180


def test_every_event_of_a_real_turn_is_logged(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    from passepartout.approvals import ApprovalStore, install_approvals, resolve_approval
    belt = Toolbelt()
    @belt.tool
    def touch(name: str):  # file name
        "Pretend to create a file."
        return f"created {name}"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'touch' and a.args['name'] != 'ok' else None)
    log = AuditLog()
    agent = Agent(ScriptedProvider([tool_call('touch', {'name': 'ok'}), reply('made ok'), tool_call('touch', {'name': 'x'})]),
                  gates=gates, tools=belt)
    agent.audit = log.append
    store = ApprovalStore(); install_approvals(agent, store)
    turn = agent.send('make ok')
    token = agent.send('make x').pending[0]['token']
    res = resolve_approval(agent, store, token)
    assert res.output == 'created x'
    kinds = [r['kind'] for r in log.recent(100)]
    assert kinds == ['message', 'proposal', 'verdict', 'result', 'proposal', 'verdict', 'reply',
                     'message', 'proposal', 'verdict', 'pending', 'reply', 'approval', 'last-mile', 'result']
    assert [r['data']['payload']['text'] for r in log.recent(100, kind='message')] == ['make ok', 'make x']
    assert log.recent(1, kind='pending')[0]['data']['token'] == token
    assert log.verify() == (True, [])
