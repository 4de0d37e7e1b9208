"""Conversations that continue in every process: `send --session`, `chat --resume`, `approve`/`deny` without a
daemon, a daemon restart, concurrent and killed writers, `sessions forget`, and a daemon's bounded memory.

The model is a loopback server speaking the OpenAI wire format (tests/llm_servers.py): what each process sent it
is recorded, so a test reads exactly the conversation the model was shown."""
import asyncio, json, os, signal, sqlite3, subprocess, sys, textwrap, time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from llm_servers import LLMServer, loopback_env, openai_text, openai_tool
from _daemon_support import daemon_in_thread, wait_for

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from passepartout.cli import main; main()']


@pytest.fixture
def model():
    server = LLMServer('openai')
    yield server
    server.close()


@pytest.fixture
def env(tmp_path, model):
    return loopback_env(tmp_path, model.url, PASSEPARTOUT_DAEMON_PORT='0')


def cli(env, *args, stdin=None):
    "`passepartout ARGS` in a fresh process."
    return subprocess.run(CLI + list(args), capture_output=True, text=True, env=env, input=stdin, timeout=120)


def shown(request):
    "The messages of a recorded request, as (role, content) pairs, tool calls as their command."
    out = []
    for m in request['json']['messages'][1:]:
        if m.get('tool_calls'): out.append((m['role'], 'call ' + json.loads(m['tool_calls'][0]['function']['arguments'])['command']))
        else: out.append((m['role'], m['content']))
    return out


def test_send_continues_the_session_in_a_second_process(env, model):
    model.add(openai_text('Noted: Friday.'), openai_text('On Friday.'), openai_text('Hello.'))
    first = cli(env, 'send', '--session', 'release', 'The release is on Friday.')
    second = cli(env, 'send', '--session', 'release', 'When is the release?')
    assert (first.returncode, first.stdout, second.stdout) == (0, 'Noted: Friday.\n', 'On Friday.\n'), first.stderr + second.stderr
    assert shown(model.requests[1]) == [('user', 'The release is on Friday.'), ('assistant', 'Noted: Friday.'),
                                        ('user', 'When is the release?')]
    cli(env, 'send', '--session', 'other', 'hi')
    assert shown(model.requests[2]) == [('user', 'hi')]   # another session sees nothing of it


def test_chat_resume_continues_the_last_terminal_conversation(env, model):
    model.add(openai_text('Blue, noted.'), openai_text('You said blue.'))
    cli(env, 'chat', stdin='My favourite colour is blue.\n')
    r = cli(env, 'chat', '--resume', stdin='What is my favourite colour?\n')
    assert r.stdout == 'You said blue.\n', r.stderr
    assert shown(model.requests[1])[:2] == [('user', 'My favourite colour is blue.'), ('assistant', 'Blue, noted.')]
    listed = cli(env, 'sessions').stdout
    assert listed.startswith('chat-') and '2 messages' not in listed and 'My favourite colour is blue.' in listed, listed


def hold_rm(env, model, session='work'):
    "A turn in `session` whose `rm notes.txt` waits for approval; its token."
    (Path(env['PASSEPARTOUT_WORKSPACE']) / 'notes.txt').write_text('old notes\n')
    model.add(openai_tool('shell', {'command': 'rm notes.txt'}, text='Removing the old notes as asked.'))
    r = cli(env, 'send', '--json', '--session', session, 'Delete notes.txt please.')
    turn = json.loads(r.stdout)
    assert turn['pending'], r.stdout + r.stderr
    return turn['pending'][0]['token']


def test_approve_without_a_daemon_continues_the_conversation(env, model):
    token = hold_rm(env, model)
    model.add(openai_text('Deleted notes.txt.'))
    r = cli(env, 'approve', token)
    assert r.returncode == 0 and r.stdout.rstrip().endswith('Deleted notes.txt.'), r.stdout + r.stderr
    assert not (Path(env['PASSEPARTOUT_WORKSPACE']) / 'notes.txt').exists()
    continued = shown(model.requests[1])   # what the model read after the approval: the held call, then its result, once
    assert continued[:2] == [('user', 'Delete notes.txt please.'), ('assistant', 'call rm notes.txt')], continued
    assert continued[2][0] == 'tool' and continued[2][1].startswith('approved by the owner') and len(continued) == 3, continued
    assert sum('approved by the owner' in (m.get('content') or '') for m in model.requests[1]['json']['messages']) == 1
    model.add(openai_text('You are welcome.'))
    cli(env, 'send', '--session', 'work', 'Thanks!')
    assert [c for _, c in shown(model.requests[2])][-3:] == [continued[2][1], 'Deleted notes.txt.', 'Thanks!']


HOLD_ELSEWHERE = textwrap.dedent('''
    from passepartout.approvals import ApprovalStore
    from passepartout.gates import Decision
    from passepartout.signals import Context, Signal, tool_call
    action = tool_call('shell', {'command': 'rm notes.txt'}, explanation='clean up')
    print(ApprovalStore().hold(action, Decision('ask', action, []), Context(Signal(meta={'source': 'cli', 'session': 'lost'}))))
''')


def test_approve_with_no_stored_conversation_tells_the_model_the_outcome_once(env, model):
    (Path(env['PASSEPARTOUT_WORKSPACE']) / 'notes.txt').write_text('old notes\n')
    token = subprocess.run([sys.executable, '-c', HOLD_ELSEWHERE], capture_output=True, text=True, env=env, timeout=60).stdout.strip()
    model.add(openai_text('The notes are gone.'))
    r = cli(env, 'approve', token)
    assert r.stdout.rstrip().endswith('The notes are gone.'), r.stdout + r.stderr
    told = [m['content'] for m in model.requests[0]['json']['messages'][1:]]
    assert len(told) == 1 and told[0].startswith("[outcome of your earlier call shell(command='rm notes.txt')] approved by the owner"), told


def test_deny_without_a_daemon_tells_the_model(env, model):
    token = hold_rm(env, model)
    model.add(openai_text('Understood, I left notes.txt alone.'))
    r = cli(env, 'deny', token, '--reason', 'keep them')
    assert r.stdout.splitlines() == [f"denied {token}: shell(command='rm notes.txt') will not run", 'Understood, I left notes.txt alone.'], r.stdout + r.stderr
    assert shown(model.requests[1])[2] == ('tool', 'Error: refused by the owner (keep them): it did not run. Do not propose it again; '
                                                   'tell the user it was not done.')
    assert (Path(env['PASSEPARTOUT_WORKSPACE']) / 'notes.txt').exists()


def test_a_daemon_restart_keeps_the_conversation(env, model):
    model.add(openai_text('Noted: the code is 4711.'), openai_text('It is 4711.'))
    try:
        assert cli(env, 'daemon', 'start').returncode == 0
        assert cli(env, 'send', '--session', 'desk', 'The door code is 4711.').stdout == 'Noted: the code is 4711.\n'
        assert cli(env, 'daemon', 'stop').returncode == 0
        assert cli(env, 'daemon', 'start').returncode == 0
        status = json.loads(cli(env, 'daemon', 'status', '--json').stdout)
        assert status['sessions'] == 0
        assert cli(env, 'send', '--session', 'desk', 'What is the door code?').stdout == 'It is 4711.\n'
    finally: cli(env, 'daemon', 'stop')
    assert shown(model.requests[1]) == [('user', 'The door code is 4711.'), ('assistant', 'Noted: the code is 4711.'),
                                        ('user', 'What is the door code?')]


def test_approve_after_a_daemon_restart_continues_the_conversation(env, model):
    try:
        assert cli(env, 'daemon', 'start').returncode == 0
        token = hold_rm(env, model)   # held in the daemon
        assert cli(env, 'daemon', 'stop').returncode == 0 and cli(env, 'daemon', 'start').returncode == 0
        model.add(openai_text('Deleted notes.txt.'))
        r = cli(env, 'approve', token)   # handed to the new daemon, which reads the session back
        assert r.stdout.rstrip().endswith('Deleted notes.txt.'), r.stdout + r.stderr
    finally: cli(env, 'daemon', 'stop')
    continued = shown(model.requests[1])
    assert continued[:2] == [('user', 'Delete notes.txt please.'), ('assistant', 'call rm notes.txt')], continued
    assert continued[2][0] == 'tool' and continued[2][1].startswith('approved by the owner') and len(continued) == 3, continued


def test_forget_deletes_the_conversation(env, model):
    model.add(openai_text('Noted.'), openai_text('I do not know.'))
    cli(env, 'send', '--session', 'secret-plans', 'The surprise party is on Sunday.')
    assert 'secret-plans' in cli(env, 'sessions').stdout
    assert 'The surprise party is on Sunday.' in cli(env, 'sessions', 'show', 'secret-plans').stdout
    assert cli(env, 'sessions', 'forget', 'secret-plans').stdout == 'forgot secret-plans\n'
    assert cli(env, 'sessions').stdout == 'no conversations are stored yet\n'
    cli(env, 'send', '--session', 'secret-plans', 'When is the party?')
    assert shown(model.requests[1]) == [('user', 'When is the party?')]
    db = sqlite3.connect(Path(env['PASSEPARTOUT_HOME']) / 'data' / 'sessions.db')
    assert 'surprise' not in json.dumps(db.execute('SELECT body FROM messages').fetchall())


WRITER = textwrap.dedent('''
    import sys
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.sessions import SessionStore
    from passepartout.signals import reply
    class Echo:
        name = 'echo'
        def propose(self, request): return Proposal(reply('re: ' + request.signal.text))
    agent = Agent(Echo(), sessions=SessionStore(sys.argv[1], vault=False))
    name, turns = sys.argv[2], int(sys.argv[3])
    for i in range(turns):
        agent.send(f"{name} {i}", session='shared')
        if i == 0: print('started', flush=True)
''')


def pairs_are_whole(messages):
    "Every user message is followed by its own reply, and the replies are nowhere else."
    return all(messages[i]['role'] == 'user' and messages[i + 1] == {'role': 'assistant', 'content': 're: ' + messages[i]['content']}
               for i in range(0, len(messages), 2)) and len(messages) % 2 == 0


def test_concurrent_writers_and_a_killed_one_leave_a_whole_conversation(tmp_path):
    from passepartout.sessions import SessionStore
    db = tmp_path / 'sessions.db'
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'PASSEPARTOUT_HOME': str(tmp_path / 'home')}
    writers = [subprocess.Popen([sys.executable, '-c', WRITER, str(db), f"w{n}", '60'], env=env, stdout=subprocess.PIPE, text=True)
               for n in range(3)]
    victim = subprocess.Popen([sys.executable, '-c', WRITER, str(db), 'victim', '100000'], env=env, stdout=subprocess.PIPE, text=True)
    assert victim.stdout.readline().strip() == 'started'
    for w in writers: assert w.wait(120) == 0
    victim.send_signal(signal.SIGKILL); victim.wait(120)
    store = SessionStore(db, vault=False)
    messages = store.messages('shared')
    assert store.db.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    assert pairs_are_whole(messages), [m['content'] for m in messages][:20]
    assert store.get('shared')['messages'] == len(messages)
    for n in range(3): assert [m['content'] for m in messages if m['content'].startswith(f"w{n} ")] == [f"w{n} {i}" for i in range(60)]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.glob('sessions.db*')} == \
           {'sessions.db': '0o600', 'sessions.db-wal': '0o600', 'sessions.db-shm': '0o600'}


def test_threads_waiting_for_the_store_share_one_transaction(tmp_path):
    "Turns saved while another save holds the connection are written by one transaction, each whole, each thread told its own outcome."
    import threading
    from passepartout.sessions import SessionStore
    store = SessionStore(tmp_path / 'sessions.db', vault=False, window=0)   # turns written as they end: each save waits for its own
    stale = store.load('shared'); stale.append({'role': 'user', 'content': 'first', 'owner': True}); store.save(stale)
    stale = store.load('shared'); other = store.load('shared')
    other.append({'role': 'user', 'content': 'moved it', 'owner': True}); store.save(other)   # `stale` is now behind
    commits, outcomes = [], {}
    commit = store._commit
    store._commit = lambda group: (commits.append(len(group)), commit(group))
    def save(name, t): outcomes[name] = store.save(t)
    turns = {f"s{n}": store.load(f"s{n}") for n in range(4)}
    for name, t in turns.items(): t += [{'role': 'user', 'content': f"{name} asks", 'owner': True}, {'role': 'assistant', 'content': f"{name} done"}]
    stale.append({'role': 'user', 'content': 'late', 'owner': True})
    turns['shared'] = stale
    with store.lock:                                            # a save in progress: the five turns wait behind it
        threads = [threading.Thread(target=save, args=item) for item in turns.items()]
        for th in threads: th.start()
        deadline = time.monotonic() + 180                       # a hang detector: the machine may be loaded
        while len(store.waiting) < 5 and time.monotonic() < deadline: time.sleep(0.001)
        assert len(store.waiting) >= 5, f"only {len(store.waiting)} of 5 saves queued behind the lock in 180 s"
    for th in threads: th.join(180)
    assert not any(th.is_alive() for th in threads), "a save still waits 180 s after the lock was released"
    assert commits == [5]                                       # one transaction for the five turns
    assert outcomes == {'s0': True, 's1': True, 's2': True, 's3': True, 'shared': False}   # the stale writer is told to read again
    assert [[m['content'] for m in store.messages(f"s{n}")] for n in range(4)] == [[f"s{n} asks", f"s{n} done"] for n in range(4)]
    assert [m['content'] for m in store.messages('shared')] == ['first', 'moved it', 'late']


def test_a_save_interrupted_while_it_waits_leaves_nothing_queued(tmp_path):
    "A save interrupted while it waits for the store is not written later by another: the next save writes the turn, once."
    from passepartout.sessions import SessionStore
    store = SessionStore(tmp_path / 'sessions.db', vault=False, window=0)   # turns written as they end: each save waits for its own
    t = store.load('s'); t += [{'role': 'user', 'content': 'hi', 'owner': True}, {'role': 'assistant', 'content': 'hello'}]
    class Interrupted:
        def __enter__(self): raise KeyboardInterrupt
        def __exit__(self, *exc): return False
    real, store.lock = store.lock, Interrupted()
    with pytest.raises(KeyboardInterrupt): store.save(t)
    store.lock = real
    assert store.waiting == [] and store.unwritten == {} and store.save(t) is True
    assert [m['content'] for m in store.messages('s')] == ['hi', 'hello'] and store.unwritten == {}


def test_a_turn_being_written_counts_as_unwritten_until_it_is_committed(tmp_path):
    "A turn the writer took from the queue is still its session's (so `load` waits for it) until its transaction commits, then no longer."
    from passepartout.sessions import SessionStore
    store = SessionStore(tmp_path / 'sessions.db', vault=False, window=1000)   # left to the writer: `sync` writes it here
    seen, commit = [], store._commit
    store._commit = lambda group: (seen.append((store.waiting, store._waits('a'), store._waits('b'))), commit(group))
    a, b = store.load('a'), store.load('b')
    for t in (a, a, b): t.append({'role': 'user', 'content': f"to {t.session}", 'owner': True}); store.save(t)   # two turns of `a`
    assert store.unwritten == {'a': 2, 'b': 1} and store.waiting and store._commit is not commit
    assert [m['content'] for m in store.load('a')] == ['to a', 'to a']   # its own turns first, through the write lock
    assert seen == [([], True, True)]                          # while writing: the queue empty, both sessions still unwritten
    assert store.unwritten == {} and store.waiting == []


def test_a_daemon_with_many_sessions_keeps_few_in_memory_and_restores_them(tmp_path):
    from passepartout.daemon import AsyncClient, request
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.sessions import SessionStore
    from passepartout.signals import reply

    class Count:
        name = 'count'
        def propose(self, req): return Proposal(reply(f"{len(req.messages)} messages"))

    agent, most = Agent(Count(), sessions=SessionStore(tmp_path / 'sessions.db', vault=False)), 0
    with daemon_in_thread(agent, state_dir=tmp_path / 'state', max_sessions=64) as d:
        async def flood():
            nonlocal most
            client = await AsyncClient.connect(d.address, d.files['token'].read_text())
            for batch in range(0, 2000, 100):
                for i in range(batch, batch + 100): client.send(request('hello', session=f"s{i}", id=i))
                for _ in range(100): assert (await client.receive())['payload']['turn']['reply'] == '1 messages'
                most = max(most, len(agent.transcripts))
            again = await client.ask(request('hello again', session='s0'))
            await client.close()
            return again['payload']['turn']['reply']
        assert asyncio.run_coroutine_threadsafe(flood(), d.loop).result(300) == '3 messages'   # s0 was evicted and read back
        assert most <= 64 + 100 and len(agent.transcripts) <= 64 + 1, (most, len(agent.transcripts))
        assert d.status()['evicted_sessions'] >= 2000 - 64 and d.status()['sessions'] <= 64 + 1


def test_an_idle_session_leaves_the_daemon_and_comes_back(tmp_path):
    from passepartout.daemon import client_send
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.sessions import SessionStore
    from passepartout.signals import reply

    class Recall:
        name = 'recall'
        def propose(self, req): return Proposal(reply(' / '.join(m['content'] for m in req.messages if m['role'] == 'user')))

    agent = Agent(Recall(), sessions=SessionStore(tmp_path / 'sessions.db', vault=False))
    with daemon_in_thread(agent, state_dir=tmp_path / 'state', session_idle=0.2) as d:
        client_send('first', session='idle', state_dir=tmp_path / 'state')
        assert wait_for(lambda: 'idle' not in agent.transcripts)   # a hang detector (60 s): the machine may be loaded
        assert client_send('second', session='idle', state_dir=tmp_path / 'state')['reply'] == 'first / second'


def test_secrets_are_redacted_before_they_are_stored(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    from passepartout.app import build_agent
    from passepartout.reason import ScriptedProvider
    from passepartout.signals import reply
    from passepartout.vault import Vault
    Vault().add('GITHUB_TOKEN', 'ghp_sessionSecret123456')
    agent = build_agent(provider=ScriptedProvider([reply('I will not repeat it.')]))
    agent.send('my token is ghp_sessionSecret123456, keep it safe', session='vaulted')
    agent.sessions.sync()                                      # the turn, left to the writer thread, on disk now
    raw = b''.join(p.read_bytes() for p in (tmp_path / 'home' / 'data').glob('sessions.db*'))
    assert b'ghp_sessionSecret' not in raw and b'{{vault:GITHUB_TOKEN}}' in raw


def test_a_session_forgotten_elsewhere_is_not_remembered_by_the_daemon(tmp_path):
    from passepartout.daemon import client_send
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.sessions import SessionStore
    from passepartout.signals import reply

    class Recall:
        name = 'recall'
        def propose(self, req): return Proposal(reply(' / '.join(m['content'] for m in req.messages if m['role'] == 'user')))

    agent, state = Agent(Recall(), sessions=SessionStore(tmp_path / 'sessions.db', vault=False)), tmp_path / 'state'
    with daemon_in_thread(agent, state_dir=state):
        assert client_send('my PIN is 1234', session='private', state_dir=state)['reply'] == 'my PIN is 1234'
        assert 'private' in agent.transcripts
        assert SessionStore(tmp_path / 'sessions.db', vault=False).forget('private')   # `passepartout sessions forget`, another process
        assert client_send('what do you know?', session='private', state_dir=state)['reply'] == 'what do you know?'
    assert [m['content'] for m in SessionStore(tmp_path / 'sessions.db', vault=False).messages('private')] == ['what do you know?', 'what do you know?']


def test_a_group_writes_what_its_turns_written_one_by_one_would(tmp_path):
    "Turns gathered into one group's inserts: a second turn of a session continues the first, and a replacement waits for the row it replaces."
    from passepartout.sessions import SessionStore
    kept, alone = SessionStore(tmp_path / 'group.db', vault=False, window=1000), SessionStore(tmp_path / 'alone.db', vault=False, window=0)
    for store in (kept, alone):
        t, other = store.load('a'), store.load('b')
        t += [{'role': 'user', 'content': 'tidy', 'owner': True}, {'role': 'assistant', 'content': 'on it'}, {'role': 'tool', 'content': 'running'}]
        store.save(t, 'cli')
        other.append({'role': 'user', 'content': 'b first', 'owner': True}); store.save(other, 'cli')
        t[2] = {'role': 'tool', 'content': 'done'}; t.append({'role': 'assistant', 'content': 'tidied'}); store.save(t, 'cli')   # replaces a message of the turn before
        other.append({'role': 'assistant', 'content': 'b second'}); store.save(other, 'cli')
    assert kept.deferred == 4 and len(kept.waiting) == 4
    kept.sync()
    for name in ('a', 'b'):
        assert [m['content'] for m in kept.messages(name)] == [m['content'] for m in alone.messages(name)]
        assert ({k: v for k, v in kept.get(name).items() if k not in ('created', 'used')}
                == {k: v for k, v in alone.get(name).items() if k not in ('created', 'used')})
    assert [m['content'] for m in kept.messages('a')] == ['tidy', 'on it', 'done', 'tidied']
    assert kept.db.execute("SELECT version FROM sessions WHERE id = 'a'").fetchone()[0] == 2
