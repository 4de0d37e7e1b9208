"""Attacks on the audit log that the keyless chain let through (issue 12, class 10): a cut tail, an emptied or deleted
log, a record edited and every hash after it recomputed, a forged record appended, a duplicate JSON key, a non-canonical
or wrongly typed record, an extra column, an older copy of the database restored, the checkpoint deleted or forged, the
key replaced, deleted or MACs stripped. Each must be reported by `AuditLog().verify()` and by `passepartout audit verify`
(exit code 1, a message naming what is wrong). And the log must hold every message: who sent it, on which channel.

The attacker here has write access to the database file (a sandbox escape, another user, a restored backup); the key
and the checkpoint live in other directories (config, state) which the attacker does not get unless a test says so."""
import json, os, secrets, shutil, sqlite3

import pytest
from click.testing import CliRunner

from passepartout import config
from passepartout.audit import AuditLog, GENESIS, audit_command, canonical_json, record_hash


@pytest.fixture
def home(tmp_path, monkeypatch):
    "A home whose default audit log holds eight records, appended the way the agent appends them."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    log = AuditLog(vault=False)
    for i in range(1, 9): log.append({'kind': 'result', 'step': i, 'output': f"output {i}"})
    log.close()
    return tmp_path / 'home'


def db_path(): return config.paths().data / 'audit.db'
def key_path(): return config.paths().config / 'audit.key'
def head_path(): return config.paths().state / 'audit.head'


def attacker(*statements):
    "A separate connection writing the database file directly."
    db = sqlite3.connect(db_path())
    for sql, *args in statements: db.execute(sql, *args)
    db.commit(); db.close()


def rows():
    db = sqlite3.connect(db_path()); db.row_factory = sqlite3.Row
    out = [dict(r) for r in db.execute('SELECT * FROM audit ORDER BY seq')]
    db.close()
    return out


def insert(record):
    "Insert `record` (a dict) with the columns the table has (the starting code's table has no `mac`)."
    db = sqlite3.connect(db_path())
    cols = [c[1] for c in db.execute('PRAGMA table_info(audit)')]
    db.execute(f"INSERT INTO audit ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})", [record.get(c) for c in cols])
    db.commit(); db.close()


def detected(*expected):
    "Both the library and the command line report the tampering; every string of `expected` is in the problems."
    ok, problems = AuditLog(vault=False).verify()
    assert not ok, "verify() called a tampered log intact"
    for text in expected: assert any(text in p for p in problems), (text, problems)
    r = CliRunner().invoke(audit_command, ['verify'])
    assert r.exit_code == 1, r.output
    assert 'TAMPERED' in r.output and expected[0] in r.output, r.output
    return problems


def test_untouched_log_is_intact(home):
    ok, problems = AuditLog(vault=False).verify()
    assert (ok, problems) == (True, [])
    r = CliRunner().invoke(audit_command, ['verify'])
    assert r.exit_code == 0 and 'audit log intact: 8 records' in r.output


# -- cutting, emptying, deleting ------------------------------------------------------------------------------------

def test_tail_deleted(home):
    attacker(("DELETE FROM audit WHERE seq > 5",))
    detected('records #6 to #8 are missing')


def test_last_record_deleted(home):
    attacker(("DELETE FROM audit WHERE seq = 8",))
    detected('records #8 to #8 are missing')


def test_every_record_deleted(home):
    attacker(("DELETE FROM audit",))
    detected('records #1 to #8 are missing')


def test_database_file_deleted(home):
    for suffix in ('', '-wal', '-shm'): db_path().with_name('audit.db' + suffix).unlink(missing_ok=True)
    detected('records #1 to #8 are missing')


def test_table_dropped(home):
    attacker(("DROP TABLE audit",))
    detected('records #1 to #8 are missing')


# -- rewriting ------------------------------------------------------------------------------------------------------

def test_record_edited_and_every_hash_after_it_recomputed(home):
    "The keyless chain is consistent again after this; only a key the attacker does not have shows it."
    prev, statements = GENESIS, []
    for r in rows():
        data = json.loads(r['data'])
        if r['seq'] == 4: data['output'] = 'nothing happened'
        h = record_hash(r['seq'], r['time'], r['kind'], data, prev)
        statements.append(("UPDATE audit SET data = ?, prev_hash = ?, hash = ? WHERE seq = ?", (canonical_json(data), prev, h, r['seq'])))
        prev = h
    attacker(*statements)
    detected('record #4: its MAC does not match')


def test_tail_rewritten_from_scratch(home):
    "Records 5 to 8 replaced by a consistent keyless chain telling another story."
    old = rows()
    attacker(("DELETE FROM audit WHERE seq > 4",))
    prev = old[3]['hash']
    for seq in range(5, 9):
        data = {'step': seq, 'output': 'all fine'}
        h = record_hash(seq, old[seq - 1]['time'], 'result', data, prev)
        insert({'seq': seq, 'time': old[seq - 1]['time'], 'kind': 'result', 'data': canonical_json(data), 'prev_hash': prev, 'hash': h})
        prev = h
    detected('record #5: has no MAC')


@pytest.mark.parametrize('mac', [None, '0' * 64, 'copy'])
def test_forged_record_appended(home, mac):
    "A record that follows the chain perfectly, with no MAC, a made-up one, or the MAC of another record."
    last = rows()[-1]
    data = {'text': 'the owner approved everything'}
    h = record_hash(9, last['time'] + 1, 'approval', data, last['hash'])
    insert({'seq': 9, 'time': last['time'] + 1, 'kind': 'approval', 'data': canonical_json(data), 'prev_hash': last['hash'], 'hash': h,
            'mac': last.get('mac') if mac == 'copy' else mac})
    detected('record #9: ')


def has_macs(): return 'mac' in rows()[0]


def test_macs_stripped(home):
    if has_macs(): attacker(("UPDATE audit SET mac = NULL",))
    detected('record #1: has no MAC')


# -- strict records -------------------------------------------------------------------------------------------------

def test_duplicate_key(home):
    '''`{"output":"rm -rf /","output":"output 3"}` hashes like `{"output":"output 3"}`, but some readers show the first.'''
    r = rows()[2]
    attacker(("UPDATE audit SET data = ? WHERE seq = 3", ('{"output":"rm -rf /","output":"output 3","step":3}',)))
    assert json.loads(rows()[2]['data']) == json.loads(r['data'])            # the same value to Python's parser
    detected("record #3: invalid: data is not strictly valid (duplicate key 'output')")


@pytest.mark.parametrize('text', ['{"output": "output 3", "step": 3}',            # spaces
                                  '{"step":3,"output":"output 3"}',               # key order
                                  '{"output":"\\u006futput 3","step":3}',         # an escaped letter
                                  '{"output":"output\\u00203","step":3}'])          # an escaped space
def test_non_canonical_serialisation(home, text):
    attacker(("UPDATE audit SET data = ? WHERE seq = 3", (text,)))
    detected('record #3: invalid: data is not strictly valid')


def test_nan(home):
    "A record whose data holds NaN, chained with the starting code's own serialisation (which wrote NaN)."
    last = rows()[-1]
    text = '{"ratio":NaN}'
    h = record_hash(9, last['time'] + 1, 'result', {'ratio': float('nan')}, last['hash'])
    insert({'seq': 9, 'time': last['time'] + 1, 'kind': 'result', 'data': text, 'prev_hash': last['hash'], 'hash': h})
    detected('record #9: invalid: data is not strictly valid')


def test_data_stored_as_a_blob(home):
    "The same JSON bytes, typed BLOB instead of TEXT: another reader may treat it differently."
    attacker(("UPDATE audit SET data = CAST(data AS BLOB) WHERE seq = 2",))
    detected('record #2: invalid: data is not strictly valid (data is bytes, not text)')


def test_unexpected_column(home):
    attacker(("ALTER TABLE audit ADD COLUMN note TEXT",), ("UPDATE audit SET note = 'approved by the owner' WHERE seq = 2",))
    detected('the audit table has the columns')


def test_trigger_that_swallows_approvals(home):
    "A trigger deletes every approval as it is written; the records left verify as a chain."
    attacker(("CREATE TRIGGER hide AFTER INSERT ON audit WHEN NEW.kind = 'approval' BEGIN DELETE FROM audit WHERE seq = NEW.seq; END",))
    log = AuditLog(vault=False)
    log.append({'kind': 'approval', 'token': 'k7m2x9qa'})
    log.close()
    detected('the audit database holds trigger hide besides the audit table')


def test_view_that_hides_records(home):
    "The table renamed and a view in its place that shows only some records, renumbered nowhere."
    attacker(("ALTER TABLE audit RENAME TO audit_all",), ("CREATE VIEW audit AS SELECT * FROM audit_all WHERE seq <= 6",))
    detected('the audit database holds', 'records #7 to #8 are missing')


# -- rolling back ---------------------------------------------------------------------------------------------------

def backup(src, dst):
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b); a.close(); b.close()


def test_older_copy_restored(home, tmp_path):
    backup(db_path(), tmp_path / 'old.db')
    log = AuditLog(vault=False)
    for i in range(3): log.append({'kind': 'result', 'output': f"later {i}"})
    log.close()
    backup(tmp_path / 'old.db', db_path())
    detected('records #9 to #11 are missing')


def test_older_copy_restored_then_grown_past_the_checkpoint(home, tmp_path):
    "After the restore the agent goes on appending: the numbers catch up, the records at them are not the anchored ones."
    backup(db_path(), tmp_path / 'old.db')
    log = AuditLog(vault=False)
    for i in range(2): log.append({'kind': 'result', 'output': f"later {i}"})
    log.close()
    backup(tmp_path / 'old.db', db_path())
    log = AuditLog(vault=False)
    for i in range(5): log.append({'kind': 'result', 'output': f"after the restore {i}"})
    log.close()
    detected('record #10 is not the record the checkpoint anchored')


def test_data_directory_swapped_for_an_empty_one(home):
    "Issue 12 class 2: a renamed data directory and a fresh one in its place."
    config.paths().data.rename(home / 'data.old')
    log = AuditLog(vault=False)
    log.append({'kind': 'reply', 'text': 'a fresh start'})
    log.close()
    detected('records #2 to #8 are missing')


# -- the anchor itself ----------------------------------------------------------------------------------------------

def test_checkpoint_deleted(home):
    head_path().unlink(missing_ok=True)
    detected('is missing (deleted)')


def test_checkpoint_deleted_with_the_tail(home):
    attacker(("DELETE FROM audit WHERE seq > 5",))
    head_path().unlink(missing_ok=True)
    detected('is missing (deleted)')


def test_checkpoint_forged(home):
    "A checkpoint saying the log ends at #5, written without the key."
    attacker(("DELETE FROM audit WHERE seq > 5",))
    mac = rows()[-1].get('mac') or '0' * 64
    head_path().parent.mkdir(parents=True, exist_ok=True)
    head_path().write_text(canonical_json({'seq': 5, 'mac': mac, 'since': 0, 'check': secrets.token_hex(32)}).ljust(255) + '\n')
    detected("does not carry the key's MAC")


def test_key_replaced(home):
    key_path().parent.mkdir(parents=True, exist_ok=True)
    key_path().write_text(secrets.token_hex(32) + '\n')
    detected('record #1: its MAC does not match')


def test_key_replaced_and_everything_re_maced_but_the_checkpoint(home):
    "Someone with their own key re-MACs every record; the checkpoint, written with the real key, does not follow."
    import hmac, hashlib
    key = secrets.token_bytes(32)
    if has_macs():
        attacker(*[("UPDATE audit SET mac = ? WHERE seq = ?", (hmac.new(key, b'record:' + r['hash'].encode(), hashlib.sha256).hexdigest(), r['seq']))
                   for r in rows()])
    key_path().parent.mkdir(parents=True, exist_ok=True)
    key_path().write_text(key.hex() + '\n')
    detected("does not carry the key's MAC")


def test_key_readable_by_others(home):
    "A key anyone could have read proves nothing."
    os.chmod(key_path(), 0o644) if key_path().exists() else None
    detected('is readable by others')


def test_key_deleted(home):
    key_path().unlink(missing_ok=True)
    detected('is missing (deleted or moved)')


KILLED_WHILE_A_TOOL_RUNS = '''
import os
from passepartout.audit import AuditLog
from passepartout.loop import Agent
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call
from passepartout.tools import Toolbelt
belt = Toolbelt()
@belt.tool(effect='local-write')
def wipe():
    "Delete everything (the process dies while it runs)."
    os._exit(0)
agent = Agent(ScriptedProvider([tool_call('wipe')]), tools=belt)
agent.audit = AuditLog(vault=False).append
agent.send('wipe it all')
'''


def test_decision_cut_after_the_agent_was_killed_mid_turn(home):
    "The agent dies while a tool runs; the records of the decision that let it run are then deleted."
    import subprocess, sys
    r = subprocess.run([sys.executable, '-c', KILLED_WHILE_A_TOOL_RUNS], env={**os.environ}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [x['kind'] for x in rows()[8:]] == ['turn']                                  # the message, the proposal and its verdict: one record
    assert [s[1] for s in json.loads(rows()[8]['data'])['steps']] == ['message', 'verdict']
    attacker(("DELETE FROM audit WHERE seq > 8",))
    detected('records #9 to #9 are missing')


def test_everything_stripped_is_not_called_intact(home):
    "Key, checkpoint and MACs all removed: the log looks like one written before anchoring, which verify cannot call intact."
    key_path().unlink(missing_ok=True); head_path().unlink(missing_ok=True)
    if has_macs(): attacker(("UPDATE audit SET mac = NULL",))
    r = CliRunner().invoke(audit_command, ['verify'])
    assert r.exit_code == 2 and 'NOT ANCHORED' in r.output and 'no anchor yet: 8 records unanchored' in r.output, r.output


# -- every message and decision is recorded -------------------------------------------------------------------------

def test_every_message_and_decision_is_recorded(home, tmp_path):
    from passepartout.approvals import ApprovalStore
    from passepartout.approval_flow import install_approvals
    from passepartout.gates import GateEngine, ask
    from passepartout.loop import Agent
    from passepartout.reason import ScriptedProvider
    from passepartout.signals import reply, tool_call
    from passepartout.tools import Toolbelt
    from passepartout.vault import Vault
    belt = Toolbelt()
    @belt.tool(effect='read-only')
    def touch(name: str):  # file name
        "Pretend to create a file."
        return f"created {name}"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'touch' else None)
    vault = Vault(tmp_path / 'vault.enc', tmp_path / 'vault.key'); vault.add('BOT_TOKEN', '123456:ABCdef-secret')
    log = AuditLog(vault=vault)
    agent = Agent(ScriptedProvider([tool_call('touch', {'name': 'x'}), reply('hello mallory'), reply('done'),
                                    tool_call('touch', {'name': 'y'})]), gates=gates, tools=belt)
    agent.audit, agent.vault = log.append, vault
    sent = []
    agent.actuators.register('telegram', lambda action, ctx: sent.append(action.text), silent=True)   # a gateway's own actuator
    install_approvals(agent, ApprovalStore())
    token = agent.send('make x, my token is 123456:ABCdef-secret', source='cli').pending[0]['token']
    agent.send('hi there', source='telegram', owner=False, chat_id='666', sender='mallory', session='tg-666')
    agent.send(f'approve {token}', source='telegram', owner=False, chat_id='666', sender='mallory', session='tg-666')
    agent.send(f'approve {token}', source='cli')
    other = agent.send('make y', source='cli').pending[0]['token']
    agent.send(f'deny {other} not now', source='cli')

    records = log.recent(200)
    messages = [r['data'] for r in records if r['kind'] == 'message']
    assert [(m['source'], m['sender'], m['owner'], m['chat_id']) for m in messages][:4] == [
        ('cli', 'cli', True, None), ('telegram', 'mallory', False, '666'), ('telegram', 'mallory', False, '666'), ('cli', 'cli', True, None)]
    texts = [m['payload'].get('text') for m in messages]
    assert texts[0] == 'make x, my token is {{vault:BOT_TOKEN}}' and 'hi there' in texts and f'deny {other} not now' in texts
    kinds = [r['kind'] for r in records]
    for kind in ('message', 'verdict', 'pending', 'reply', 'approval-refused', 'approval', 'last-mile', 'result', 'denial'):
        assert kind in kinds, (kind, kinds)
    assert all(r['data']['provider'] == 'scripted' for r in records if r['kind'] == 'verdict' and 'action' in r['data'])   # each with its proposal
    assert 'hello mallory' in sent
    assert any(r['kind'] == 'reply' and r['data']['text'] == 'hello mallory' and r['data']['actuator'] == 'telegram' for r in records)
    assert b'ABCdef-secret' not in db_path().read_bytes() + db_path().with_name('audit.db-wal').read_bytes()
    assert log.verify() == (True, [])
