"""Approvals across processes and restarts: a held action is released once, by the owner only, from another
process (the real `passepartout approve` command), never twice under concurrency, never when altered."""
import json, multiprocessing, os, sqlite3, subprocess, sys, textwrap, time, types

import pytest

from passepartout.approvals import ApprovalStore, ApprovalError, TOKEN_ALPHABET
from passepartout import approval_flow
from passepartout.approval_flow import install_approvals, resolve_approval, deny_approval
from passepartout.audit import AuditLog
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply


def make_agent(journal, script=()):
    "An agent whose `append` tool writes a line to `journal`; the `careful` gate asks before it."
    from _daemon_support import careful_agent
    return careful_agent(journal, ScriptedProvider(list(script)))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    return tmp_path / 'home'


def hold_one(agent, store, line, **meta):
    agent.provider.script[:] = [tool_call('append', {'line': line})]
    install_approvals(agent, store)
    turn = agent.send(f'add {line}', **meta)
    assert turn.pending, turn.events
    return turn.pending[0]['token']


def test_token_shape(home, tmp_path):
    agent, store = make_agent(tmp_path / 'j'), ApprovalStore()
    tokens = {hold_one(agent, store, str(i)) for i in range(50)}
    assert len(tokens) == 50 and all(len(t) == 8 and set(t) <= set(TOKEN_ALPHABET) for t in tokens)


# -- concurrency: two processes approving the same tokens at the same time ---------------------------------

def _race(db, journal, tokens, barrier, results):
    agent, store = make_agent(journal), ApprovalStore(db)
    barrier.wait()
    won = []
    for t in tokens:
        try: resolve_approval(agent, store, t); won.append(t)
        except ApprovalError as e: assert 'already used' in e.message, e.message
    results.put(won)


def test_only_one_process_runs_a_token(home, tmp_path):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    tokens = [hold_one(agent, store, f"line {i}") for i in range(40)]
    ctx = multiprocessing.get_context('fork')
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(store.path, journal, order, barrier, results))
             for order in (tokens, tokens[::-1], tokens[20:] + tokens[:20])]
    for p in procs: p.start()
    won = [results.get(timeout=180) for _ in procs]            # hang detectors: the machine may be loaded
    for p in procs: p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert sorted(t for w in won for t in w) == sorted(tokens)          # every token won exactly once
    lines = journal.read_text().splitlines()
    assert sorted(lines) == sorted(f"line {i}" for i in range(40))      # every action ran exactly once
    assert all(store.get(t)['state'] == 'used' for t in tokens)


# -- restart and a second process: the real command line ------------------------------------------------------

FAKE_APP = textwrap.dedent('''
    import sys, types
    sys.path.insert(0, {tests!r})
    from test_approvals import make_agent
    from passepartout.approvals import ApprovalStore
    from passepartout.audit import AuditLog
    app = types.ModuleType('passepartout.app')
    def build_agent():
        agent = make_agent({journal!r})
        agent.approvals, agent.audit = ApprovalStore(), AuditLog().append
        return agent
    app.build_agent = build_agent
    sys.modules['passepartout.app'] = app
    from passepartout.cli import main
    main()
''')


def cli(home, journal, *args):
    "`passepartout ARGS` in a fresh process, with `build_agent` giving the test's tools (the real app may not exist yet)."
    code = FAKE_APP.format(tests=os.path.dirname(__file__), journal=str(journal))
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True,
                          env={**os.environ, 'PASSEPARTOUT_HOME': str(home)}, timeout=60)


def test_approve_from_another_process_after_a_restart(home, tmp_path):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'hello')
    other = hold_one(agent, store, 'not this one')
    store.close(); del agent                                   # the holding process is gone
    r = cli(home, journal, 'approvals')
    assert r.returncode == 0 and token in r.stdout and other in r.stdout and "append(line='hello')" in r.stdout
    r = cli(home, journal, 'approve', token.upper())           # tokens are case-insensitive
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"Approved {token}: append(line='hello') output: appended hello",   # this process's model has
        "The owner's decision was carried out, but the model could not be asked to continue: the script has no more answers"]  # no answers
    assert journal.read_text() == 'hello\n'
    r = cli(home, journal, 'approve', token)
    assert r.returncode == 1 and r.stderr.strip() == f"Error: approval {token} was already used: a token releases its action once"
    r = cli(home, journal, 'deny', other, '--reason', 'changed my mind')
    assert r.returncode == 0 and r.stdout.strip() == f"denied {other}: append(line='not this one') will not run"
    r = cli(home, journal, 'approve', other)
    assert r.returncode == 1 and 'was denied (changed my mind)' in r.stderr
    r = cli(home, journal, 'approve', 'nosuchtk')
    assert r.returncode == 1 and "no approval with token 'nosuchtk'" in r.stderr
    assert journal.read_text() == 'hello\n'
    log = AuditLog()
    kinds = [r['kind'] for r in log.recent(50)]
    assert kinds.count('approval') == 1 and kinds.count('denial') == 1 and kinds.count('approval-refused') == 3
    assert log.verify() == (True, [])


def test_expired_token(home, tmp_path, monkeypatch):
    journal = tmp_path / 'journal'
    monkeypatch.setenv('PASSEPARTOUT_APPROVAL_TTL', '1')
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'late')
    assert wait_for(lambda: store.get(token)['state'] == 'expired'), store.get(token)   # the clock must pass the 1 s lifetime
    assert store.pending() == []
    r = cli(home, journal, 'approve', token)
    assert r.returncode == 1 and f"approval {token} expired" in r.stderr
    assert not journal.exists()


def test_altered_action_or_digest_is_refused(home, tmp_path):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    t1, t2 = hold_one(agent, store, 'safe'), hold_one(agent, store, 'safe too')
    db = sqlite3.connect(store.path)
    db.execute("UPDATE approvals SET action = ? WHERE token = ?", (json.dumps(tool_call('append', {'line': 'evil'}).to_dict()), t1))
    db.execute("UPDATE approvals SET digest = ? WHERE token = ?", ('0' * 64, t2))
    db.commit(); db.close()
    for t in (t1, t2):
        with pytest.raises(ApprovalError, match='changed after it was held'):
            resolve_approval(agent, store, t)
        with pytest.raises(ApprovalError, match='changed after it was held'):
            store.approve(t)
    assert not journal.exists()


def test_owner_only(home, tmp_path):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'x')
    for meta in ({'source': 'telegram'}, {'source': 'chat-message'}, {'source': 'cli', 'owner': False}, {'source': 'signal', 'owner': 'yes'}):
        assert agent.send(f'approve {token}', **meta).reply == "Only the owner can approve or deny actions."
        assert agent.send(f'deny {token}', **meta).reply == "Only the owner can approve or deny actions."
    assert store.get(token)['state'] == 'pending' and not journal.exists()
    assert agent.send(f'/approve {token}', source='telegram', owner=True).replies[0] == f"Approved {token}: append(line='x') output: appended x"
    assert journal.read_text() == 'x\n'
    assert agent.send('approve zzzzzzzz', source='tui').reply.startswith("no approval with token 'zzzzzzzz'")


def test_always_learns_a_rule(home, tmp_path, monkeypatch):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    learned = []
    monkeypatch.setattr(approval_flow, 'learn_rule', lambda action, decision: learned.append((action, decision)) or f"allow {action.tool} line={action.args['line']}")
    token = hold_one(agent, store, 'again')
    res = resolve_approval(agent, store, token, always=True)
    assert [(a.digest(), d) for a, d in learned] == [(tool_call('append', {'line': 'again'}).digest(), 'allow')]
    assert res.rule == "Remembered: append(line='again') is allowed from now on (rule added to allow append line=again)."
    assert res.rule in res.message
    def unwritable(action, decision): raise PermissionError('permissions.toml is read-only')
    monkeypatch.setattr(approval_flow, 'learn_rule', unwritable)                 # the rule cannot be written: the action still runs
    token = hold_one(agent, store, 'once')
    reply_text = agent.send(f'approve {token} --always').replies[0]
    assert 'appended once' in reply_text and 'Not remembered' in reply_text and 'PermissionError: permissions.toml is read-only' in reply_text


def test_a_failing_action_is_reported_and_the_token_is_spent(home, tmp_path):
    journal = tmp_path / 'no-such-dir' / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'x')
    res = resolve_approval(agent, store, token)
    assert not res.ok and res.error.startswith('FileNotFoundError') and 'failed: FileNotFoundError' in res.message
    assert store.get(token)['state'] == 'used'
    r = cli(home, journal, 'approve', hold_one(agent, store, 'y'))
    assert r.returncode == 1 and 'failed: FileNotFoundError' in r.stdout


def test_the_model_hears_the_outcome(home, tmp_path):
    agent, store = make_agent(tmp_path / 'journal'), ApprovalStore()
    token = hold_one(agent, store, 'z')
    agent.send(f'approve {token}')
    agent.provider.script[:] = [lambda req: reply(json.dumps([m for m in req.messages if m['role'] == 'tool']))]
    tool_messages = json.loads(agent.send('what happened?').reply)
    assert [(m['content'], m['is_error']) for m in tool_messages] == [("approved by the owner: appended z", False)]


def test_a_strangers_held_action_reaches_the_owner_not_the_stranger(home, tmp_path, monkeypatch):
    "A stranger's request is held: the stranger gets no token and no arguments, the owner's chat gets both, another process approves it."
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '1001')
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    chats = []
    agent.actuators.register('telegram', lambda a, c: chats.append((c.signal.meta.get('recipient') or c.signal.meta.get('chat_id'), a.text)), silent=True)
    token = hold_one(agent, store, 'secret-ish line', source='telegram', owner=False, chat_id='666', session='tg-666')
    to_owner = [t for who, t in chats if who == '1001']
    assert chats[-1] == ('666', "This needs my owner's approval.") and all(token not in t and 'secret-ish' not in t for who, t in chats if who == '666')
    assert len(to_owner) == 1 and f"approve {token}" in to_owner[0] and "append(line='secret-ish line')" in to_owner[0]
    assert all(token not in m['content'] for m in agent.transcript('tg-666'))
    assert agent.send(f'approve {token}', source='telegram', owner=False, chat_id='666').reply is None   # answered in the chat:
    assert chats[-1] == ('666', "Only the owner can approve or deny actions.") and not journal.exists()
    store.close(); del agent
    r = cli(home, journal, 'approvals')
    assert token in r.stdout and 'secret-ish line' in r.stdout, r.stdout
    r = cli(home, journal, 'approve', token)
    assert r.returncode == 0 and journal.read_text() == 'secret-ish line\n', (r.stdout, r.stderr)


def test_no_owner_channel_still_persists_and_audits(home, tmp_path):
    "Without any owner channel the notice still lands in the audit log and the store lists the held action."
    agent, store = make_agent(tmp_path / 'journal'), ApprovalStore()
    events = []
    agent.audit = events.append
    token = hold_one(agent, store, 'x', source='telegram', owner=False, chat_id='666')
    notice = [e for e in events if e['kind'] == 'owner-notice']
    assert len(notice) == 1 and notice[0]['delivered'] == [] and f"approve {token}" in notice[0]['text']
    assert [r['token'] for r in store.pending()] == [token]


def test_the_daemons_owner_mark_may_approve_but_its_string_may_not(home, tmp_path):
    "Daemon clients carry the OWNER mark (a str subclass): they are the owner; the plain string 'owner' from JSON is not."
    from passepartout.daemon import OWNER
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'via daemon', source='daemon', owner=OWNER)
    assert agent.send(f'approve {token}', source='daemon', owner='owner').reply == "Only the owner can approve or deny actions."
    assert agent.send(f'approve {token}', source='daemon', owner=OWNER).replies[0] == f"Approved {token}: append(line='via daemon') output: appended via daemon"
    assert journal.read_text() == 'via daemon\n'


# -- the model carries on after the owner decides -------------------------------------------------------------

def saw(prefix='model saw'):
    "A scripted model turn that answers with the last message it was shown (so a test sees what it read)."
    return lambda req: reply(f"{prefix}: {req.messages[-1]['content']}")


def test_approve_the_model_continues_with_the_output(home, tmp_path):
    "approve -> the action runs -> the model is called again with its output, one level deeper, and its reply reaches the user."
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'build/')
    agent.provider.script[:] = [saw('Freed')]
    turn = agent.send(f'approve {token}')
    assert turn.replies == [f"Approved {token}: append(line='build/') output: appended build/", "Freed: approved by the owner: appended build/"]
    request = agent.provider.requests[-1]
    assert (request.signal.sensor, request.signal.depth, request.signal.payload['approval']) == ('tool-output', 1, token)
    call, result = request.messages[-3:-1]                              # (the transcript, which now ends with the reply)
    assert call['tool_calls'][0]['id'] == result['call_id'] and result['role'] == 'tool' and not result['is_error']
    assert journal.read_text() == 'build/\n'
    assert [e['kind'] for e in turn.events][-3:] == ['proposal', 'verdict', 'reply']       # the gates judged the continuation


def test_deny_the_model_hears_the_refusal_and_does_not_retry(home, tmp_path):
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'rm everything')
    agent.provider.script[:] = [tool_call('append', {'line': 'rm everything'}, explanation='try again'), saw('Understood')]
    turn = agent.send(f'deny {token} too risky')
    assert turn.replies[0] == f"Denied {token}: append(line='rm everything') will not run."
    first, second = agent.provider.requests[-2:]
    refusal = agent.transcript('default')[-2]                            # what both attempts read last (then came the reply)
    assert refusal['content'] == "refused by the owner (too risky): it did not run. Do not propose it again; tell the user it was not done."
    assert refusal['is_error'] and refusal['role'] == 'tool' and first.signal.sensor == 'tool-error' and first.signal.depth == 1
    assert second.rejections == [f"owner-refusals: the owner refused this exact action (deny {token}): do not propose it again"]
    assert turn.replies[1].startswith("Understood: refused by the owner (too risky)")
    assert not journal.exists() and store.pending() == []                 # the retry was denied, not held again


def test_the_model_cannot_continue(home, tmp_path):
    "The proposing model is gone (its script or recording ended): the owner has the result and one clear message."
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    token = hold_one(agent, store, 'x')
    turn = agent.send(f'approve {token}')
    assert turn.replies == [f"Approved {token}: append(line='x') output: appended x",
                            "The owner's decision was carried out, but the model could not be asked to continue: the script has no more answers"]
    assert agent.send(f'approve {token}').reply.endswith('was already used: a token releases its action once')


def test_a_strangers_continuation_keeps_the_strangers_authority(home, tmp_path, monkeypatch):
    "The owner releases one action of a stranger's turn; the model continues in the stranger's session, and its next tool call asks."
    from passepartout.builtin_gates import authority_gate
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '1001')
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal), ApprovalStore()
    agent.gates.add('authority', authority_gate, 88)
    chats = []
    agent.actuators.register('telegram', lambda a, c: chats.append((c.signal.meta.get('recipient') or c.signal.meta.get('chat_id'), a.text)), silent=True)
    token = hold_one(agent, store, 'first', source='telegram', owner=False, chat_id='666', session='tg-666')
    chats.clear()
    agent.provider.script[:] = [tool_call('append', {'line': 'second'})]
    turn = agent.send(f'approve {token}', source='telegram', owner=True, chat_id='1001', session='owner')
    assert journal.read_text() == 'first\n'                                 # only the approved action ran
    held = [r for r in store.pending()]
    assert [json.loads(r['action'])['args'] for r in held] == [{'line': 'second'}] and held[0]['owner'] == 0
    assert any('requested by telegram chat 666' in reason for reason in held[0]['reasons'])   # the authority gate asked
    assert ('666', "This needs my owner's approval.") in chats and all(token not in t for who, t in chats if who == '666')
    cont = agent.provider.requests[-1]
    assert cont.signal.session == 'tg-666' and cont.signal.meta['owner'] is False and cont.signal.meta['chat_id'] == '666'
    # and the owner's 'approve' turn gave the stranger's session nothing of the owner's: its transcript has no owner message
    assert not any(m.get('owner') for m in agent.transcript('tg-666') if m['role'] == 'user')


def test_a_restored_daemon_meta_is_not_trusted_but_the_recorded_owner_bit_is(home, tmp_path):
    "The daemon's OWNER mark becomes a plain string in the store; the continuation's authority comes from the recorded bit."
    from passepartout.daemon import OWNER
    agent, store = make_agent(tmp_path / 'journal'), ApprovalStore()
    token = hold_one(agent, store, 'mine', source='daemon', owner=OWNER, session='d1')
    record = store.get(token)
    assert record['meta']['owner'] == 'owner' and record['owner'] == 1
    agent.provider.script[:] = [saw()]
    agent.send(f'approve {token}', source='daemon', owner=OWNER, session='d1')
    assert agent.provider.requests[-1].signal.meta['owner'] is True


def test_an_old_store_gains_the_new_columns(home, tmp_path):
    db = tmp_path / 'old.db'
    con = sqlite3.connect(db)
    con.execute("""CREATE TABLE approvals (token TEXT PRIMARY KEY, digest TEXT NOT NULL, action TEXT NOT NULL, reasons TEXT NOT NULL,
        meta TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL, state TEXT NOT NULL, decided REAL,
        note TEXT NOT NULL DEFAULT '', always INTEGER NOT NULL DEFAULT 0)""")
    a = tool_call('append', {'line': 'old'})
    con.execute("INSERT INTO approvals VALUES (?,?,?,?,?,?,?,?,NULL,'',0)", ('abcdefgh', a.digest(), json.dumps(a.to_dict()), '[]',
                                                                          '{"source": "cli"}', time.time(), time.time() + 600, 'pending'))
    con.commit(); con.close()
    record = ApprovalStore(db).get('abcdefgh')
    assert (record['depth'], record['owner'], record['state']) == (0, 0, 'pending')   # an old record reads as a stranger's


# -- another process, while the daemon runs ------------------------------------------------------------------

def test_approval_from_another_process_continues_in_the_daemon(home, tmp_path):
    "The daemon holds the session; `passepartout approve` in another process hands it the command; the model continues in the daemon."
    sys.path.insert(0, os.path.dirname(__file__))
    from _daemon_support import daemon_in_thread
    from passepartout import config
    from passepartout.daemon import client_send
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal, [tool_call('append', {'line': 'build/'}, explanation='clean up')]), ApprovalStore()
    install_approvals(agent, store)
    with daemon_in_thread(agent, state_dir=config.paths().state):
        turn = client_send('clean up build/ and tell me what you freed', session='work')
        token = turn['pending'][0]['token']
        assert token in turn['reply'] and not journal.exists()
        agent.provider.script[:] = [saw('Freed')]
        r = cli(home, tmp_path / 'not-the-daemons-journal', 'approve', token)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert r.stdout.splitlines() == [f"Approved {token}: append(line='build/') output: appended build/",
                                         "Freed: approved by the owner: appended build/"]
        assert journal.read_text() == 'build/\n'                        # it ran in the daemon, not in the approving process
        assert not (tmp_path / 'not-the-daemons-journal').exists()
        cont = agent.provider.requests[-1]
        assert (cont.signal.session, cont.signal.sensor, cont.signal.depth) == ('work', 'tool-output', 1)
        # a denial from another process reaches the daemon's model too
        agent.provider.script[:] = [tool_call('append', {'line': 'cache/'})]
        token = client_send('and cache/', session='work')['pending'][0]['token']
        agent.provider.script[:] = [saw('OK')]
        r = cli(home, journal, 'deny', token, '--reason', 'keep the cache')
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == "OK: refused by the owner (keep the cache): it did not run. Do not propose it again; tell the user it was not done."
        assert journal.read_text() == 'build/\n'


def test_approval_in_another_session_is_queued_on_the_held_session(home, tmp_path):
    "In the daemon, an approval typed in another session runs the action at once and continues on the held session's own worker."
    sys.path.insert(0, os.path.dirname(__file__))
    from _daemon_support import daemon_in_thread
    from passepartout import config
    from passepartout.daemon import client_send
    journal = tmp_path / 'journal'
    agent, store = make_agent(journal, [tool_call('append', {'line': 'a'})]), ApprovalStore()
    install_approvals(agent, store)
    with daemon_in_thread(agent, state_dir=config.paths().state) as daemon:
        token = client_send('add a', session='held')['pending'][0]['token']
        agent.provider.script[:] = [saw()]
        turn = client_send(f'approve {token}', session='elsewhere')
        assert turn['replies'] == [f"Approved {token}: append(line='a') output: appended a"]
        assert wait_for(lambda: agent.transcript('held')[-1] == {'role': 'assistant', 'content': 'model saw: approved by the owner: appended a'}), \
            agent.transcript('held')[-1]                                       # the reply is noted after the model was asked
        cont = agent.provider.requests[-1]
        assert (cont.signal.session, cont.signal.payload['approval']) == ('held', token)


# -- decisions written to the store by another process, while a daemon runs or before it starts -----------------

sys.path.insert(0, os.path.dirname(__file__))
from _daemon_support import approval_agent, start_approval_daemon, stop_daemon, daemon_in_thread, wait_for, settled  # noqa: E402


def in_process(code, **values):
    "Run `code` (formatted with `values`) in a fresh Python process; its stdout."
    r = subprocess.run([sys.executable, '-c', textwrap.dedent(code).format(**values)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout



APPROVE_ELSEWHERE = '''
    from passepartout.approvals import ApprovalStore
    ApprovalStore({db!r}).{verb}({token!r}{extra})
'''


def test_a_store_approval_from_another_process_is_carried_out_by_the_running_daemon(home, tmp_path):
    "No command reaches the daemon: another process writes the approval; its watcher (a look every 0.5 s) runs it once, and the model goes on in its session."
    from passepartout.daemon import client_send
    journal, db = tmp_path / 'journal', tmp_path / 'approvals.db'
    agent = approval_agent(journal, db)
    with daemon_in_thread(agent, state_dir=tmp_path / 'state') as daemon:
        assert daemon.approval_poll == 0.5
        token = client_send('add build/', session='work', state_dir=tmp_path / 'state')['pending'][0]['token']
        in_process(APPROVE_ELSEWHERE, db=str(db), verb='approve', token=token, extra='')
        assert wait_for(lambda: journal.exists() and agent.transcript('work')[-1]['content'].startswith('model saw'))
        assert settled(daemon)                                                 # two more looks: nothing runs again
        assert journal.read_text() == 'build/\n'
        cont = [r.signal for r in agent.provider.requests if r.signal.sensor == 'tool-output']
        assert [(s.session, s.depth, s.payload['approval']) for s in cont] == [('work', 1, token)]
        assert agent.transcript('work')[-1] == {'role': 'assistant', 'content': 'model saw: approved by the owner: appended build/'}
        assert ApprovalStore(db).get(token)['state'] == 'used'
        assert any(lvl == 'INFO' and msg.startswith(f'carried out a decision made elsewhere: Approved {token}') for _, lvl, msg in agent.syslog.entries)
        # and the daemon still serves its clients
        assert client_send('hello', session='other', state_dir=tmp_path / 'state')['reply'] == 'ok'


def test_a_store_refusal_from_another_process_reaches_the_model_and_binds(home, tmp_path):
    from passepartout.daemon import client_send
    journal, db = tmp_path / 'journal', tmp_path / 'approvals.db'
    agent = approval_agent(journal, db)
    with daemon_in_thread(agent, state_dir=tmp_path / 'state') as daemon:
        token = client_send('add rm -rf cache/', session='work', state_dir=tmp_path / 'state')['pending'][0]['token']
        in_process(APPROVE_ELSEWHERE, db=str(db), verb='deny', token=token, extra=", 'keep the cache'")
        assert wait_for(lambda: agent.transcript('work')[-1]['content'].startswith('model saw'))
        assert agent.transcript('work')[-1]['content'] == ("model saw: refused by the owner (keep the cache): it did not run. "
                                                           "Do not propose it again; tell the user it was not done.")
        record = ApprovalStore(db).get(token)
        assert record['carried'] == 1 and agent.refused[('work', record['digest'])][0] == token
        turn = client_send('add rm -rf cache/', session='work', state_dir=tmp_path / 'state')   # the same action again: refused at once
        assert turn['pending'] == [] and turn['reply'] == f"owner-refusals: the owner refused this exact action (deny {token}): do not propose it again"
        assert settled(daemon)                                                 # more looks at the store:
        assert len([r for r in agent.provider.requests if r.signal.sensor == 'tool-error']) == 1   # told once
    assert not journal.exists()


def test_the_cli_writes_the_decision_when_the_daemon_does_not_answer(home, tmp_path):
    "`passepartout approve` finds a daemon that refuses it (here: a stale token file); the daemon still carries out the approval."
    from passepartout import config
    from passepartout.daemon import client_send
    journal = tmp_path / 'journal'
    agent = approval_agent(journal, config.paths().data / 'approvals.db')
    state = config.paths().state
    with daemon_in_thread(agent, state_dir=state) as daemon:
        token = client_send('add notes', session='work', state_dir=state)['pending'][0]['token']
        other = client_send('add other notes', session='work', state_dir=state)['pending'][0]['token']
        (state / 'daemon.token').write_text('stale')
        r = cli(home, tmp_path / 'cli-journal', 'approve', token)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"approved {token}: the daemon did not answer (ProtocolError: handshake refused")
        assert "carries on in session 'work'" in r.stdout
        from passepartout.audit import AuditLog
        recorded = AuditLog().recent(50, kind='approval-recorded')   # the owner's decision is in the audit log at once
        assert [e['data']['token'] for e in recorded] == [token], recorded
        assert wait_for(lambda: agent.transcript('work')[-1]['content'] == 'model saw: approved by the owner: appended notes')
        r = cli(home, tmp_path / 'cli-journal', 'deny', other, '--reason', 'enough')
        assert r.returncode == 0 and 'the daemon did not answer' in r.stdout, (r.stdout, r.stderr)
        assert wait_for(lambda: agent.transcript('work')[-1]['content'].startswith('model saw: refused by the owner (enough)'))
        (state / 'daemon.token').write_text(daemon.token)
    assert journal.read_text() == 'notes\n' and not (tmp_path / 'cli-journal').exists()


RACER = '''
    import json, sys
    sys.path.insert(0, {tests!r})
    from _daemon_support import approval_agent, wait_for
    from passepartout.approvals import ApprovalStore, ApprovalError
    from passepartout.approval_flow import resolve_approval
    agent, store = approval_agent({journal!r}, {db!r}), ApprovalStore({db!r})
    won = []
    for t in {tokens!r}:
        while store.get(t)['state'] == 'pending':          # read the record again only when the store changed
            seen = store.version()
            if store.get(t)['state'] != 'pending': break
            assert wait_for(lambda: store.version() != seen), 'no decision came'
        try: resolve_approval(agent, store, t); won.append(t)
        except ApprovalError as e: assert 'already used' in e.message, e.message
    print(json.dumps(won))
'''


def test_two_daemons_and_the_cli_race_for_approvals_made_elsewhere(home, tmp_path):
    "Two daemon processes watch one store, a third process resolves tokens like `passepartout approve`: every action runs once, continues once."
    journal, db, log = tmp_path / 'journal', tmp_path / 'approvals.db', tmp_path / 'continued'
    holder = approval_agent(tmp_path / 'unused', db)
    tokens = [holder.send(f'add line {i}', session='race').pending[0]['token'] for i in range(30)]
    daemons = [start_approval_daemon(tmp_path, name, journal, db, log, poll=0.01) for name in ('d1', 'd2')]
    try:
        code = textwrap.dedent(RACER).format(tests=os.path.dirname(__file__), journal=str(journal), db=str(db), tokens=tokens[::-1])
        racer = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        approver = ApprovalStore(db)                                            # the racer may start late: any split is valid
        for t in tokens: approver.approve(t)
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        won_by_cli = json.loads(out)
        assert wait_for(lambda: all(approver.get(t)['state'] == 'used' for t in tokens)), [approver.get(t)['state'] for t in tokens]
        continued_lines = lambda: log.read_text().splitlines() if log.exists() else []   # no file when the CLI won every token
        assert wait_for(lambda: len(continued_lines()) == len(tokens) - len(won_by_cli)), \
            (won_by_cli, continued_lines(), [e.read_text() for _, _, e in daemons])
    finally:
        codes = [stop_daemon(proc) for proc, _, _ in daemons]   # a graceful exit finishes every queued turn: the log below is final
    assert codes == [0, 0]
    assert sorted(journal.read_text().splitlines()) == sorted(f"line {i}" for i in range(30))   # each action ran exactly once
    continued = [line.split(' ', 3) for line in continued_lines()]
    by_daemon = [t for _, session, t, _ in continued]
    assert all(session == 'race' for _, session, _, _ in continued)
    assert sorted(by_daemon + won_by_cli) == sorted(tokens), (by_daemon, won_by_cli)   # each run by exactly one of the three, continued once
    for _, _, errors in daemons: assert 'ERROR' not in errors.read_text(), errors.read_text()   # losing a race is not an error
    print(f"cli won {len(won_by_cli)}, daemons {sorted({pid for pid, *_ in continued})} won {len(by_daemon)}")


def test_refusals_survive_a_daemon_restart_and_decisions_wait_for_the_next_daemon(home, tmp_path):
    from passepartout.daemon import client_send
    journal, db, log = tmp_path / 'journal', tmp_path / 'approvals.db', tmp_path / 'continued'
    proc, state, errors = start_approval_daemon(tmp_path, 'd', journal, db, log)
    try:
        refused = client_send('add forbidden', session='s', state_dir=state)['pending'][0]['token']
        turn = client_send(f'deny {refused} never', session='s', state_dir=state)
        assert turn['replies'][-1].startswith('model saw: refused by the owner (never)')
        later_no = client_send('add denied while down', session='s', state_dir=state)['pending'][0]['token']
        later_yes = client_send('add approved while down', session='s', state_dir=state)['pending'][0]['token']
    finally: assert stop_daemon(proc) == 0
    in_process(APPROVE_ELSEWHERE, db=str(db), verb='deny', token=later_no, extra=", 'not now'")    # decided while no daemon runs
    in_process(APPROVE_ELSEWHERE, db=str(db), verb='approve', token=later_yes, extra='')
    assert not journal.exists()
    proc, state, errors = start_approval_daemon(tmp_path, 'd', journal, db, log)
    try:
        assert wait_for(lambda: journal.exists() and len(log.read_text().splitlines()) == 3)   # carried out at start
        assert journal.read_text() == 'approved while down\n'
        lines = [line.split(' ', 3)[1:] for line in log.read_text().splitlines()]
        assert lines[1:] == [['s', later_no, 'refused by the owner (not now): it did not run. Do not propose it again; tell the user it was not done.'],
                             ['s', later_yes, 'approved by the owner: appended approved while down']] or \
               lines[1:] == [['s', later_yes, 'approved by the owner: appended approved while down'],
                             ['s', later_no, 'refused by the owner (not now): it did not run. Do not propose it again; tell the user it was not done.']]
        for text, token in (('add forbidden', refused), ('add denied while down', later_no)):   # the new process still refuses
            turn = client_send(text, session='s', state_dir=state)
            assert turn['pending'] == [] and turn['reply'] == f"owner-refusals: the owner refused this exact action (deny {token}): do not propose it again"
        assert client_send('add forbidden', session='elsewhere', state_dir=state)['pending']   # another session: asked, not refused
    finally: assert stop_daemon(proc) == 0
    assert journal.read_text() == 'approved while down\n'


def test_corrupted_and_altered_records_are_one_error_each_and_the_daemon_keeps_serving(home, tmp_path):
    from passepartout.daemon import client_send
    journal, db = tmp_path / 'journal', tmp_path / 'approvals.db'
    agent = approval_agent(journal, db)
    with daemon_in_thread(agent, state_dir=tmp_path / 'state', approval_poll=0.05) as daemon:
        altered = client_send('add safe', session='w', state_dir=tmp_path / 'state')['pending'][0]['token']
        broken = client_send('add also safe', session='w', state_dir=tmp_path / 'state')['pending'][0]['token']
        con = sqlite3.connect(db)
        con.execute("UPDATE approvals SET action = ?, state = 'approved' WHERE token = ?",
                    (json.dumps(tool_call('append', {'line': 'evil'}).to_dict()), altered))
        con.execute("UPDATE approvals SET meta = '{not json', state = 'approved' WHERE token = ?", (broken,))
        con.commit()
        assert wait_for(lambda: sum(1 for _, lvl, _ in agent.syslog.entries if lvl == 'ERROR') >= 2)
        for _ in range(5):                                                     # more changes, more looks: no new error
            con.execute("UPDATE approvals SET note = note WHERE token = ?", (altered,)); con.commit(); assert settled(daemon, looks=1)
        con.close()
        errors = [msg for _, lvl, msg in agent.syslog.entries if lvl == 'ERROR']
        assert len(errors) == 2, errors
        assert any(f"approval {altered}: the held action was changed after it was held" in e for e in errors)
        assert any(f"approval {broken}: its record is corrupted (JSONDecodeError" in e for e in errors)
        good = client_send('add fine', session='w', state_dir=tmp_path / 'state')['pending'][0]['token']   # still serving
        ApprovalStore(db).approve(good)
        assert wait_for(lambda: journal.exists())
    assert journal.read_text() == 'fine\n'
    with pytest.raises(ApprovalError, match=f"approval {broken}: its record is corrupted"): ApprovalStore(db).approve(broken)
    t = approval_agent(journal, db).send('add z').pending[0]['token']
    sqlite3.connect(db, isolation_level=None).execute("UPDATE approvals SET reasons = '[' WHERE token = ?", (t,))
    assert t not in [r['token'] for r in ApprovalStore(db).pending()]      # listing skips it instead of failing


def test_refusals_are_rebuilt_when_approvals_are_installed(home, tmp_path):
    "In-process: a new agent on the same store refuses in the session, not elsewhere; an expired refusal no longer binds; a corrupted one is logged."
    db = tmp_path / 'approvals.db'
    first = approval_agent(tmp_path / 'j', db)
    t = first.send('add x', session='s').pending[0]['token']
    first.send(f'deny {t}', session='s')
    second = approval_agent(tmp_path / 'j', db)
    assert list(second.refused) == [('s', tool_call('append', {'line': 'x'}).digest())]
    con = sqlite3.connect(db)
    con.execute("UPDATE approvals SET decided = decided - (expires - created) - 1 WHERE token = ?", (t,)); con.commit()
    assert approval_agent(tmp_path / 'j', db).refused == {}
    t2 = first.send('add y', session='s').pending[0]['token']
    ApprovalStore(db).deny(t2)
    con.execute("UPDATE approvals SET meta = 'garbage' WHERE token = ?", (t2,)); con.commit(); con.close()
    third = approval_agent(tmp_path / 'j', db)
    assert third.refused == {} and [m for _, lvl, m in third.syslog.entries if lvl == 'ERROR'] == [
        f"approval {t2}: its record is corrupted (its meta is not a JSON object); its refusal is not remembered"]
