"""Two sessions running at once on one agent (`build_agent`, one memory store), each in its own thread as the
daemon runs them. A provider that waits on events puts their steps in a chosen order; nothing sleeps.

- session B crashes after session A wrote (unsaved) and B wrote: B's rollback undoes B's write only, A's stays;
- session A crashes after B overwrote an id A had changed: A's other change is undone, the id B wrote is left as B
  wrote it, and the log names it;
- what the crashed chain wrote is still one `rollback()` away (`before rollback`).
"""
import threading
import pytest
from passepartout.app import build_agent
from passepartout.reason import Proposal
from passepartout.signals import Action, reply, tool_call

WAIT = 60   # seconds an event may take at most on a loaded machine (a hang fails instead of blocking the suite)


@pytest.fixture
def home(tmp_path, monkeypatch):
    (tmp_path / 'ws').mkdir()
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    for k in ('PASSEPARTOUT_PROVIDERS', 'PASSEPARTOUT_VAULT_KEY_FILE', 'PASSEPARTOUT_RECORD_FILE', 'PASSEPARTOUT_MEMORY',
              'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME'):
        monkeypatch.delenv(k, raising=False)


class PerSession:
    "A provider with one script per session; an item is an action, an exception, or a callable returning one of them."
    name = 'per-session'
    def __init__(self, scripts): self.scripts = scripts
    def propose(self, request):
        item = self.scripts[request.signal.session].pop(0)
        if callable(item) and not isinstance(item, Action): item = item()
        if isinstance(item, BaseException): raise item
        return Proposal(item, provider=self.name)


def after(wait:threading.Event|None, then, signal:threading.Event|None=None):
    "A script step: set `signal`, wait for `wait`, then answer `then`."
    def step():
        if signal is not None: signal.set()
        if wait is not None: assert wait.wait(WAIT), "the other session never got there"
        return then
    return step


def remember(id, content): return tool_call('remember', {'id': id, 'content': content}, explanation='asked')


def run_both(agent, a_text, b_text):
    threads = [threading.Thread(target=agent.send, args=(text,), kwargs={'session': s}) for s, text in (('A', a_text), ('B', b_text))]
    for t in threads: t.start()
    for t in threads: t.join(WAIT)
    assert not any(t.is_alive() for t in threads)


def test_a_crash_in_one_session_keeps_the_other_sessions_writes(home):
    b_began, a_wrote, b_done = threading.Event(), threading.Event(), threading.Event()
    provider = PerSession({
        'A': [after(b_began, remember('note:a', 'written by session A')),      # A writes once B's chain has begun
              after(b_done, reply('A done'), signal=a_wrote)],                   # and ends after B crashed and rolled back
        'B': [after(a_wrote, remember('note:b', 'written by session B'), signal=b_began),
              RuntimeError('the model broke'),
              after(None, reply('sorry'), signal=b_done)]})                       # the loop-error turn: after the rollback
    agent = build_agent(provider=provider)
    store = agent.memory
    run_both(agent, 'remember a', 'remember b')
    assert 'note:a' in store and 'note:b' not in store                           # before: both were unsaved, both undone
    assert [s.cause for s in store.history(2)] == ['rollback of a crashed turn', 'before rollback']
    store.rollback()
    assert 'note:b' in store and 'note:a' in store                               # the crashed chain's write, one rollback away


def test_an_id_another_session_changed_since_is_left_and_logged(home):
    a_wrote, b_wrote = threading.Event(), threading.Event()
    provider = PerSession({
        'A': [remember('note:a2', 'A, undone on the crash'), remember('fact:x', 'x as A wrote it'),
              after(b_wrote, RuntimeError('the model broke'), signal=a_wrote), reply('sorry')],
        'B': [after(a_wrote, remember('fact:x', 'x as B wrote it')), after(None, reply('B done'), signal=b_wrote)]})
    agent = build_agent(provider=provider)
    agent.memory.remember('fact:x', 'x as the owner wrote it'); agent.memory.snapshot('start')
    run_both(agent, 'remember two things', 'change x')
    store = agent.memory
    assert 'note:a2' not in store and store['fact:x'].content == 'x as B wrote it'
    warnings = [m for _, level, m in agent.syslog.entries if level == 'WARNING' and 'memory rollback' in m]
    assert warnings == ["memory rollback of a crashed turn left 'fact:x' (changed by another writer since) as they are"]
    assert store.verify() == []
