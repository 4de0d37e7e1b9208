"""The audit log's chain against real tampering of the SQLite file (edit, delete, insert, reorder), concurrent
appends from several processes, and the log as the sink of real agent turns."""
import json, multiprocessing, os, sqlite3, subprocess, sys, threading, time

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
    for p in procs: p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    log = AuditLog(path, vault=False)
    assert len(log) == 180 and log.verify() == (True, [])
    assert log.head[0] == 180 and log.anchor == 'anchored by the checkpoint at #180'   # checkpoints of three processes, in order


def _batched_appender(path, home, turns, who):
    "Turns as the loop writes them: a batch of records, some written early (a checkpoint before a tool), from two threads."
    import threading
    os.environ['PASSEPARTOUT_HOME'] = home
    log = AuditLog(path, vault=False)
    def run(thread):
        for t in range(turns):
            with log.batch():
                for i in range(5):
                    log.append({'kind': 'result', 'who': who, 'thread': thread, 'turn': t, 'i': i})
                    if i == 2 and t % 2: log.checkpoint()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for th in threads: th.start()
    for th in threads: th.join()


def _race_with_verifier(path, home, writers, rounds):
    "Start a log at `path`, run `writers` [(target, args)] in processes while another verifies `rounds` times; (exit codes, what verify found)."
    AuditLog(path, vault=False).append({'kind': 'reply', 'text': 'start'})
    ctx = multiprocessing.get_context('spawn')
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=args) for target, args in writers]
    checker = ctx.Process(target=_verifier, args=(path, str(home), rounds, out))
    for p in procs + [checker]: p.start()
    bad = out.get(timeout=120)
    for p in procs + [checker]: p.join(120)
    return [p.exitcode for p in procs], bad


def test_batched_turns_of_two_processes_and_their_threads_keep_one_chain(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    path = tmp_path / 'audit.db'
    exits, bad = _race_with_verifier(path, tmp_path / 'home', [(_batched_appender, (path, str(tmp_path / 'home'), 40, w)) for w in range(2)], 30)
    assert exits == [0, 0] and bad == []
    log = AuditLog(path, vault=False)
    assert len(log) == 1 + 2 * 2 * (20 * 2 + 20) and log.verify() == (True, [])   # a batch is one record, cut in two by a checkpoint in odd turns
    assert len(log.recent(-1)) == 1 + 2 * 2 * 40 * 5                                  # every step of it an entry
    assert log.anchor == f"anchored by the checkpoint at #{len(log)}"
    turns = {}
    for r in log.recent(1000):
        if r['kind'] == 'result': turns.setdefault((r['data']['who'], r['data']['thread'], r['data']['turn']), []).append(r['data']['i'])
    assert len(turns) == 160 and all(v == [0, 1, 2, 3, 4] for v in turns.values())      # each turn's records in order, none lost


def test_every_event_of_a_real_turn_is_logged(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    from passepartout.approvals import ApprovalStore
    from passepartout.approval_flow import install_approvals, resolve_approval
    belt = Toolbelt()
    @belt.tool(effect='read-only')
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
    assert kinds == ['message', 'verdict', 'verdict',           # each proposal is one record with its verdict, and the outcome of a read-only call or a reply
                     'message', 'verdict', 'pending', 'reply', 'approval', 'last-mile', 'result']
    assert [(r['kind'], r['data']['output']) for r in log.recent(100, kind='result')] == [('verdict', 'created ok'), ('result', 'created x')]
    assert [(r['kind'], r['data']['text']) for r in log.recent(100, kind='reply')][0] == ('verdict', 'made ok')
    steps = [r['data'] for r in log.recent(100, kind='verdict')]
    assert [(d['action'].get('tool'), d['attempt'], d['provider'], d['decision']) for d in steps] == \
           [('touch', 1, 'scripted', 'allow'), (None, 1, 'scripted', 'allow'), ('touch', 1, 'scripted', 'ask')]
    assert [r['data']['payload']['text'] for r in log.recent(100, kind='message')] == ['make ok', 'make x']
    assert log.recent(1, kind='pending')[0]['data']['token'] == token
    held = [r['data']['trace'] for r in log.recent(100, kind='verdict')][-1]     # the gates' trace, compact: names, and the gate that objected
    assert held[-1] == ['careful', 'ask', 'writes need approval'] and all(type(t) is str for t in held[:-1]) and len(held) == len(gates.gates)
    assert log.verify() == (True, [])


def test_a_proposal_a_gate_changed_stays_a_record_of_its_own(tmp_path, monkeypatch):
    "What the model proposed and what the gates allowed differ: both are in the log, the proposal first."
    import dataclasses
    from passepartout.gates import allow
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def greet(name: str):  # who
        "Greet someone."
        return f"hello {name}"
    gates = GateEngine()
    gates.add('polite', lambda a, c: allow('names are capitalised', dataclasses.replace(a, args={'name': a.args['name'].title()}))
              if a.kind == 'tool' and a.args['name'] != a.args['name'].title() else None)
    log = AuditLog(vault=False)
    agent = Agent(ScriptedProvider([tool_call('greet', {'name': 'ada'}), reply('greeted')]), gates=gates, tools=belt)
    agent.audit = log.append
    agent.send('greet ada')
    records = log.recent(20)
    assert [r['kind'] for r in records] == ['message', 'proposal', 'verdict', 'verdict']   # each verdict holds what came of it
    proposal, verdict = records[1]['data'], records[2]['data']
    assert (proposal['action']['args'], verdict['action']['args'], 'provider' in verdict) == ({'name': 'ada'}, {'name': 'Ada'}, False)
    assert verdict['trace'][-1] == ['polite', 'allow', 'names are capitalised'] and verdict['output'] == 'hello Ada'
    assert (records[3]['data']['provider'], records[3]['data']['text']) == ('scripted', 'greeted')
    assert log.verify() == (True, [])

def test_a_log_with_traces_of_both_forms_verifies_and_reads(tmp_path, monkeypatch):
    "Records written before the compact trace (a list of objects, with timings) and after it share one chain."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(vault=False)
    old = [{'gate': 'paths', 'decision': 'allow', 'reason': '', 'us': 2.4}, {'gate': 'shell', 'decision': 'deny', 'reason': 'no', 'us': 0.3}]
    log._write([(time.time(), 'verdict', canonical_json({'decision': 'deny', 'trace': old}))]); log.checkpoint()   # as `append` wrote it before
    log.append({'kind': 'verdict', 'decision': 'deny', 'trace': old})
    assert [r['data']['trace'] for r in log.recent(2)] == [old, ['paths', ['shell', 'deny', 'no']]]
    assert log.verify() == (True, [])


# -- the anchor: crashes, concurrency, migration, one checkpoint per batch -------------------------------------------

CRASH_IN_A_TURN = '''
import os, sys
from passepartout.audit import AuditLog
log = AuditLog(sys.argv[1], vault=False)
with log.batch():
    for i in range(3): log.append({'kind': 'result', 'output': f"in the turn {i}"})
    log.flush()          # written, as Act has them written before a tool with effects runs (with a checkpoint there)
    log.append({'kind': 'result', 'output': 'queued, never written'})
    os._exit(0)          # killed mid-turn: the flushed records are committed, the queued one is lost, the checkpoint is not written
'''


def test_a_crash_between_the_records_and_their_checkpoint_does_not_fail_verify(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    path = tmp_path / 'audit.db'
    log = AuditLog(path, vault=False)
    for i in range(2): log.append({'kind': 'reply', 'text': f"before {i}"})
    r = subprocess.run([sys.executable, '-c', CRASH_IN_A_TURN, str(path)], env={**os.environ}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    log = AuditLog(path, vault=False)
    assert log.verify() == (True, []) and len(log) == 3                                  # the three flushed records: one turn record
    assert [r['data'].get('output') for r in log.recent(-1)][2:] == [f"in the turn {i}" for i in range(3)]
    assert log.anchor == 'anchored by the checkpoint at #2; #3 to #3 appended since'     # the lag the rule allows
    log.append({'kind': 'reply', 'text': 'after the restart'})                            # the next checkpoint covers them
    assert log.verify() == (True, []) and log.anchor == 'anchored by the checkpoint at #4'


def test_one_checkpoint_per_batch(tmp_path, monkeypatch):
    "Without a window (a turn written as it ends), a batch is one transaction and one checkpoint."
    import passepartout.audit as audit
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False, window=0)
    log.append({'kind': 'reply', 'text': 'first'})
    writes = []
    monkeypatch.setattr(audit, 'overwrite_head', lambda fd, content, w=audit.overwrite_head: (writes.append(json.loads(content)['seq']), w(fd, content)))
    with log.batch():
        for i in range(10): log.append({'kind': 'result', 'output': i})
        with log.batch(): log.append({'kind': 'result', 'output': 'nested'})
        assert writes == []
    assert writes == [2]                                                  # the batch: one record of eleven steps
    log.append({'kind': 'reply', 'text': 'outside a batch'})
    assert writes == [2, 3] and len(log.recent(-1)) == 13


def test_a_turn_anchors_before_its_tool_runs_and_at_its_end(tmp_path, monkeypatch):
    import passepartout.audit as audit
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(vault=False)
    writes = []
    monkeypatch.setattr(audit, 'overwrite_head', lambda fd, content, w=audit.overwrite_head: (writes.append(json.loads(content)['seq']), w(fd, content)))
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def look():
        "Look around."
        return 'nothing'
    @belt.tool(effect='local-write')
    def tidy():
        "Tidy up."
        return 'tidied'
    agent = Agent(ScriptedProvider([tool_call('look'), tool_call('tidy'), reply('seen')]), tools=belt)
    agent.audit = log.append
    agent.send('look around')
    assert [r['kind'] for r in log.recent(20)] == ['message', 'verdict', 'verdict', 'result', 'verdict']   # look's verdict holds its result
    assert writes == [1, 2]  # everything up to tidy's verdict anchored before it ran (look is read-only), one record; the rest at the turn's end
    assert log.verify() == (True, [])


def _verifier(path, home, rounds, out):
    os.environ['PASSEPARTOUT_HOME'] = home
    log = AuditLog(path, vault=False)
    bad = []
    for _ in range(rounds):
        ok, problems = log.verify()
        if not ok: bad.append(problems[:2])
    out.put(bad)


def test_verify_while_others_append_never_fails_falsely(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    path = tmp_path / 'audit.db'
    _, bad = _race_with_verifier(path, tmp_path / 'home', [(_appender, (path, 80, w)) for w in range(2)], 40)
    assert bad == []
    log = AuditLog(path, vault=False)
    assert log.verify() == (True, []) and log.anchor == 'anchored by the checkpoint at #161'


def _legacy_log(path, n):
    "A log as the starting code wrote it: six columns, no MAC, no key, no checkpoint."
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE audit (seq INTEGER PRIMARY KEY, time REAL NOT NULL, kind TEXT NOT NULL, "
               "data TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)")
    prev = GENESIS
    for seq in range(1, n + 1):
        data = {'text': f"old {seq}"}
        h = record_hash(seq, 1700000000.0 + seq, 'reply', data, prev)
        db.execute('INSERT INTO audit VALUES (?,?,?,?,?,?)', (seq, 1700000000.0 + seq, 'reply', canonical_json(data), prev, h))
        prev = h
    db.commit(); db.close()


def test_a_log_from_before_anchoring_is_migrated(tmp_path):
    home = tmp_path / 'home'
    (home / 'data').mkdir(parents=True)
    _legacy_log(home / 'data' / 'audit.db', 4)
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(home)}
    cli = lambda *a: subprocess.run([sys.executable, '-c', 'from passepartout.cli import main; main()', 'audit', *a],
                                    capture_output=True, text=True, env=env, timeout=60)
    r = cli('verify')
    assert r.returncode == 2 and 'no anchor yet: 4 records unanchored' in r.stdout, r.stdout + r.stderr
    assert not (home / 'config' / 'audit.key').exists()                  # verify anchors nothing
    anchored = subprocess.run([sys.executable, '-c', "from passepartout.audit import AuditLog; AuditLog(vault=False).append({'kind': 'reply', 'text': 'new'})"],
                              capture_output=True, text=True, env=env, timeout=60)
    assert anchored.returncode == 0, anchored.stderr
    r = cli('verify')
    assert r.returncode == 0 and r.stdout.strip().endswith('anchored by the checkpoint at #5'), r.stdout + r.stderr
    attacker(home / 'data' / 'audit.db', ("DELETE FROM audit WHERE seq >= 3",))    # the old records are covered now too
    r = cli('verify')
    assert r.returncode == 1 and 'records #3 to #5 are missing' in r.stderr


def test_reanchor_records_what_it_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(vault=False)
    for i in range(4): log.append({'kind': 'reply', 'text': f"r{i}"})
    attacker(log.path, ("DELETE FROM audit WHERE seq = 4",))
    assert not log.verify()[0]
    from click.testing import CliRunner
    from passepartout.audit import audit_command
    r = CliRunner().invoke(audit_command, ['reanchor', '--reason', 'power cut'])
    assert r.exit_code == 0 and 'new checkpoint at #4' in r.output, r.output
    reset = log.recent(1)[0]
    assert reset['kind'] == 'anchor-reset' and reset['data']['reason'] == 'power cut'
    assert reset['data']['problems'][0].startswith('records #4 to #4 are missing') and reset['data']['old_checkpoint']['seq'] == 4
    assert log.verify() == (True, [])


def test_a_turns_records_are_on_disk_before_anything_leaves_the_process(tmp_path, monkeypatch):
    "One transaction per turn, but a tool with effects and a gateway's reply find the records that allowed them committed."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log, seen = AuditLog(vault=False), {}
    other = lambda: [r['kind'] for r in AuditLog(log.path, vault=False).recent(50)]      # another process's view
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def look():
        "Look around."
        seen['look'] = other(); return 'nothing'
    @belt.tool(effect='local-write')
    def tidy():
        "Tidy up."
        seen['tidy'] = other(); return 'tidied'
    agent = Agent(ScriptedProvider([tool_call('look'), tool_call('tidy'), reply('tidied up')]), tools=belt)
    agent.actuators.register('telegram', lambda action, ctx: seen.setdefault('telegram', other()), silent=True)
    agent.audit = log.append
    agent.send('tidy up', source='telegram')
    assert seen['look'] == []                                                             # read-only: still queued
    assert seen['tidy'] == ['message', 'verdict', 'verdict']                            # each verdict holds its proposal; look's its result
    assert seen['telegram'] == seen['tidy'] + ['result', 'verdict']
    assert other() == seen['telegram'] + ['reply'] and log.verify() == (True, [])


def test_canonical_json_is_what_json_dumps_writes_to_the_byte():
    "`canonical_json` calls `json`'s C encoder directly: on random values (odd strings, non-finite and non-float timings, extra or missing keys) it equals `json.dumps`'s canonical form."
    import json, random
    from passepartout.audit import canonical_json, _finite
    def _json(obj):
        try: return json.dumps(obj, sort_keys=True, separators=(',', ':'), ensure_ascii=False, default=str, allow_nan=False)
        except ValueError: return json.dumps(_finite(obj), sort_keys=True, separators=(',', ':'), ensure_ascii=False, default=str)
    rs = random.Random(14)
    text = lambda: ''.join(rs.choice(['a', 'é', '"', '\\', '\n', '\x00', '\ud800', '😀', 'trace', ' ', '\u2028']) for _ in range(rs.randint(0, 5)))
    value = lambda: rs.choice([None, True, 1, -2.5, float('nan'), float('-inf'), 10**20, text(), [1, 'x'], {'k': 0.1}])
    def entry():
        e = {'gate': text(), 'decision': text(), 'reason': text(), 'us': rs.choice([0.7, 3, 1e-9, 123456.789, 1e22, float('nan'), True, '1', 2**70, None])}
        if rs.random() < 0.1: e['extra'] = value()
        if rs.random() < 0.05: del e['gate']
        return e
    for _ in range(5000):
        obj = {text(): value() for _ in range(rs.randint(0, 3))} | {'trace': [entry() for _ in range(rs.randint(0, 4))]}
        for k in ('action', 'zz', 'tracer', 'tr'):
            if rs.random() < 0.3: obj[k] = value()
        assert canonical_json(obj) == _json(obj), obj


class _CountingDb:
    "A stand-in for the log's connection that counts transactions begun and can fail the next commit."
    def __init__(self, db): self.db, self.begins, self.fail_commit = db, 0, False
    def execute(self, sql, *args):
        if sql.startswith('BEGIN'): self.begins += 1
        if sql == 'COMMIT' and self.fail_commit: self.fail_commit = False; raise sqlite3.OperationalError('disk I/O error')
        return self.db.execute(sql, *args)
    def __getattr__(self, name): return getattr(self.db, name)


def _queued_turns(log, n:int) -> tuple:
    "Run `n` turns of three records in threads while the write lock is held, so they queue behind it; (threads' errors, threads)."
    errors = []
    def turn(t):
        try:
            with log.batch():
                for i in range(3): log.append({'kind': 'result', 'turn': t, 'i': i})
        except Exception as e: errors.append(e)
    with log.lock:                                                    # a write in progress: the turns wait behind it
        threads = [threading.Thread(target=turn, args=(t,)) for t in range(n)]
        for th in threads: th.start()
        deadline = time.monotonic() + 180                             # a hang detector: the machine may be loaded
        while len(log.waiting) < n and time.monotonic() < deadline: time.sleep(0.001)
        assert len(log.waiting) >= n, f"only {len(log.waiting)} of {n} turns queued behind the lock in 180 s"
    for th in threads: th.join(180)
    assert not any(th.is_alive() for th in threads), "a turn still waits 180 s after the lock was released"
    return errors, threads


def test_threads_waiting_for_the_write_lock_share_one_transaction(tmp_path, monkeypatch):
    "Turns that wait for their own records (no window) and queue behind the write lock."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False, window=0)
    log.append({'kind': 'reply', 'text': 'first'})
    log.db = counting = _CountingDb(log.db)
    errors, _ = _queued_turns(log, 4)
    assert errors == [] and counting.begins == 1                      # four turns, one transaction
    rows = log.recent(12)
    turns = [[(r['data']['turn'], r['data']['i']) for r in rows[i:i + 3]] for i in range(0, 12, 3)]
    assert sorted(turns) == [[(t, 0), (t, 1), (t, 2)] for t in range(4)]   # each turn's records together and in order
    assert log.verify() == (True, []) and log.anchor == 'anchored by the checkpoint at #5'   # a turn is one record


def test_a_failed_group_transaction_is_an_error_in_every_thread_it_held(tmp_path, monkeypatch):
    "Turns that wait for their own records (no window) and queue behind the write lock."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False, window=0)
    log.append({'kind': 'reply', 'text': 'first'})
    log.db = counting = _CountingDb(log.db)
    counting.fail_commit = True
    errors, _ = _queued_turns(log, 3)
    assert [str(e) for e in errors] == ['disk I/O error'] * 3 and len(log) == 1
    log.append({'kind': 'reply', 'text': 'after'})                    # the log goes on
    assert len(log) == 2 and log.verify() == (True, [])


def test_records_interrupted_while_they_wait_are_not_written_later(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False)
    log.append({'kind': 'reply', 'text': 'first'})
    class Interrupted:
        def __enter__(self): raise KeyboardInterrupt
        def __exit__(self, *exc): return False
    real, log.lock = log.lock, Interrupted()
    with pytest.raises(KeyboardInterrupt): log.append({'kind': 'reply', 'text': 'interrupted'})
    log.lock = real
    assert log.waiting == []
    log.append({'kind': 'reply', 'text': 'next'})
    assert [r['data']['text'] for r in log.recent(5)] == ['first', 'next'] and log.verify() == (True, [])


# -- a turn is one record: logs of the previous format, tampering with one step, every kind still shown ---------------

def _log_of_the_previous_format(path, key_file, head_file):
    "A log exactly as the code before turn records wrote it (plain sqlite3): one record a step, MACs, a checkpoint at its head."
    from passepartout.audit import create_key, load_key, record_mac, write_head
    create_key(key_file); key = load_key(key_file)
    act = {'kind': 'tool', 'tool': 'shell', 'args': {'command': 'rm x'}, 'call_id': 'c1'}
    steps = [('message', {'sensor': 'user-input', 'source': 'cli', 'sender': 'cli', 'owner': True, 'payload': {'text': 'clean up'}}),
             ('verdict', {'action': act, 'attempt': 1, 'provider': 'openai', 'decision': 'ask', 'trace': ['paths', ['shell', 'ask', 'rm deletes files']]}),
             ('pending', {'action': act, 'token': 'k7m2x9qa', 'reasons': ['shell: rm deletes files']}),
             ('approval', {'action': act, 'token': 'k7m2x9qa', 'always': False}),
             ('result', {'actuator': 'tool', 'action': act, 'output': '(no output)'}),
             ('verdict', {'action': {'kind': 'reply', 'text': 'done'}, 'attempt': 1, 'provider': 'openai', 'decision': 'allow', 'trace': ['paths', 'shell'], 'text': 'done'})]
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE audit (seq INTEGER PRIMARY KEY, time REAL NOT NULL, kind TEXT NOT NULL, "
               "data TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, mac TEXT)")
    prev = GENESIS
    for seq, (kind, data) in enumerate(steps, 1):
        h = record_hash(seq, 1700000000.0 + seq, kind, data, prev)
        db.execute('INSERT INTO audit VALUES (?,?,?,?,?,?,?)', (seq, 1700000000.0 + seq, kind, canonical_json(data), prev, h, record_mac(key, h)))
        prev = h
    db.commit(); db.close()
    write_head(head_file, key, len(steps), record_mac(key, prev), 0)
    return [k for k, _ in steps]


def test_a_log_of_the_previous_format_verifies_reads_and_goes_on(tmp_path, monkeypatch):
    "An owner upgrades with their log: it verifies, reads as before, and turn records chain after it."
    from click.testing import CliRunner
    from passepartout.audit import anchor_files, audit_command
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    path = tmp_path / 'home' / 'data' / 'audit.db'; path.parent.mkdir(parents=True)
    old_kinds = _log_of_the_previous_format(path, *anchor_files(path))
    log = AuditLog(vault=False)
    assert log.verify() == (True, []) and log.anchor == 'anchored by the checkpoint at #6'
    assert [r['kind'] for r in log.recent(20)] == old_kinds and 'step' not in log.recent(1)[0]
    with log.batch():
        log.append({'kind': 'message', 'sensor': 'user-input', 'source': 'cli', 'sender': 'cli', 'owner': True, 'payload': {'text': 'again'}})
        log.append({'kind': 'verdict', 'action': {'kind': 'reply', 'text': 'ok'}, 'attempt': 1, 'decision': 'allow', 'trace': []})
        log.append({'kind': 'reply', 'text': 'ok'})
    assert log.verify() == (True, []) and len(log) == 7 and log.anchor == 'anchored by the checkpoint at #7'
    assert [(r['seq'], r['kind']) for r in log.recent(20)][-3:] == [(6, 'verdict'), (7, 'message'), (7, 'verdict')]
    assert [r['data']['payload']['text'] for r in log.recent(20, kind='message')] == ['clean up', 'again']
    assert [r['data']['text'] for r in log.recent(20, kind='reply')] == ['done', 'ok']          # old and new verdicts holding a reply
    out = CliRunner().invoke(audit_command, ['-n', '20']).output.splitlines()
    assert [line.split()[0] for line in out] == ['#1', '#2', '#3', '#4', '#5', '#6', '#7.1', '#7.2'] and 'cli via cli (owner): "again"' in out[-2]


@pytest.fixture
def turns(tmp_path, monkeypatch):
    "A log of three shipped-looking turns, one record each."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(tmp_path / 'audit.db', vault=False)
    act = {'kind': 'tool', 'tool': 'echo', 'args': {'text': 'hi'}, 'call_id': 'c1'}
    for n in range(3):
        with log.batch():
            log.append({'kind': 'message', 'sensor': 'user-input', 'source': 'cli', 'payload': {'text': f"go {n}"}})
            log.append({'kind': 'proposal', 'action': act, 'attempt': 1, 'provider': 'openai'})
            log.append({'kind': 'verdict', 'action': act, 'attempt': 1, 'decision': 'allow', 'trace': []})
            log.append({'kind': 'result', 'actuator': 'tool', 'action': act, 'output': f"said {n}"})
    log.close()
    assert [k for k, in sqlite3.connect(tmp_path / 'audit.db').execute('SELECT kind FROM audit')] == ['turn'] * 3
    return tmp_path / 'audit.db'


def test_editing_one_step_of_a_turn_record_is_detected(turns):
    attacker(turns, ("UPDATE audit SET data = replace(data, 'said 1', 'said X') WHERE seq = 2",))
    assert first_problem(turns) == 'record #2: content does not match its hash (edited)'


def test_a_step_removed_from_a_turn_record_and_the_chain_rehashed_is_detected(turns):
    "Dropping the message (who asked) from a turn and recomputing every hash: the MACs give it away."
    out, prev = [], GENESIS
    for seq, at, kind, data, _, _, _ in rows(turns):
        data = json.loads(data)
        if seq == 2: data['steps'] = data['steps'][1:]
        h = record_hash(seq, at, kind, data, prev)
        out.append(("UPDATE audit SET data = ?, prev_hash = ?, hash = ? WHERE seq = ?", (canonical_json(data), prev, h, seq))); prev = h
    attacker(turns, *out)
    assert first_problem(turns) == MAC_MISMATCH.format(2)


def test_a_turn_record_deleted_is_detected(turns):
    attacker(turns, ("DELETE FROM audit WHERE seq = 3",))
    assert 'records #3 to #3 are missing' in first_problem(turns)


def test_every_kind_of_a_real_turn_shows_in_passepartout_audit(tmp_path, monkeypatch):
    "Completeness: each kind of event of an approved turn is an entry `passepartout audit` prints and `--kind` finds."
    from click.testing import CliRunner
    from passepartout.approvals import ApprovalStore
    from passepartout.approval_flow import install_approvals, resolve_approval
    from passepartout.audit import audit_command
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def touch(name: str):  # file name
        "Create a file."
        return f"created {name}"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'touch' else None)
    log = AuditLog()
    agent = Agent(ScriptedProvider([tool_call('touch', {'name': 'x'}), reply('made x')]), gates=gates, tools=belt)
    agent.audit = log.append
    store = ApprovalStore(); install_approvals(agent, store)
    resolve_approval(agent, store, agent.send('make x').pending[0]['token'])
    kinds = {r['kind'] for r in log.recent(100)}
    assert {'message', 'verdict', 'pending', 'approval', 'last-mile', 'result', 'reply'} <= kinds
    shown = CliRunner().invoke(audit_command, ['-n', '100']).output
    for kind in kinds:
        assert f"  {kind:<10} " in shown, (kind, shown)
        listed = CliRunner().invoke(audit_command, ['-n', '100', '--kind', kind]).output.splitlines()
        assert len(listed) == len(log.recent(100, kind)) > 0 and all(f"  {kind:<10} " in line or '  verdict ' in line for line in listed), (kind, listed)
    assert log.verify() == (True, [])
