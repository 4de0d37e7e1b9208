"""Shared helpers for the daemon tests: a daemon served from a background thread, instant models."""
import asyncio, threading, time
from contextlib import contextmanager

from passepartout.daemon import Daemon, AsyncClient, state_files
from passepartout.loop import Agent
from passepartout.reason import Proposal
from passepartout.signals import reply


class InstantModel:
    "Answers every message at once with `<session>|<text>`, so a misrouted reply is visible."
    name = 'instant'
    def propose(self, request):
        return Proposal(reply(f"{request.signal.session}|{request.signal.text}"))


class ScriptModel:
    "Runs `behaviour(text, session)` to compute the reply (may sleep, block or raise)."
    name = 'script'
    def __init__(self, behaviour): self.behaviour = behaviour
    def propose(self, request):
        return Proposal(reply(self.behaviour(request.signal.text, request.signal.session)))


@contextmanager
def daemon_in_thread(agent=None, **kw):
    "A Daemon serving from its own event loop in a background thread; stopped and shut down on exit."
    kw.setdefault('port', 0)
    daemon = Daemon(agent if agent is not None else Agent(InstantModel()), **kw)
    loop, started, failed = asyncio.new_event_loop(), threading.Event(), []
    async def main():
        try: await daemon.start()
        except BaseException as e: failed.append(e); started.set(); return
        started.set()
        await daemon.stopping.wait()
        await daemon.shutdown()
    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert started.wait(120), "daemon did not start"
    if failed: raise failed[0]
    daemon.loop = loop
    try: yield daemon
    finally:
        loop.call_soon_threadsafe(daemon.stopping.set)
        thread.join(120)
        loop.close()


def token_of(daemon): return daemon.files['token'].read_text()


# -- daemons that hold actions for approval (tests/test_approvals.py) ---------------------------------------

import os, signal as _signal, subprocess, sys, textwrap
from pathlib import Path


class ApprovalModel:
    "`add LINE` proposes append(LINE); an outcome is answered 'model saw: …' (and noted in `log`); rejections are repeated."
    name = 'approval-model'
    def __init__(self, log=None): self.log, self.requests = log, []
    def propose(self, request):
        from passepartout.signals import tool_call
        self.requests.append(request)
        s = request.signal
        if request.rejections: return Proposal(reply('; '.join(request.rejections)))
        if s.sensor in ('tool-output', 'tool-error'):
            if self.log:
                with open(self.log, 'a') as f: f.write(f"{os.getpid()} {s.session} {s.payload.get('approval')} {s.text}\n")
            return Proposal(reply(f"model saw: {s.text}"))
        if (s.text or '').startswith('add '): return Proposal(tool_call('append', {'line': s.text[4:]}))
        return Proposal(reply('ok'))


def careful_agent(journal, provider):
    "An agent whose `append` tool writes a line to `journal`; the `careful` gate asks before it."
    from passepartout.gates import GateEngine, ask
    from passepartout.tools import Toolbelt
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def append(line: str):  # the line to add
        "Append a line to the journal."
        with open(journal, 'a') as f: f.write(line + '\n')
        return f"appended {line}"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('writes need approval') if a.tool == 'append' else None)
    return Agent(provider, gates=gates, tools=belt)


def approval_agent(journal, db, log=None):
    "`careful_agent` with the approval model, approvals kept in `db`."
    from passepartout.approvals import ApprovalStore
    from passepartout.approval_flow import install_approvals
    return install_approvals(careful_agent(journal, ApprovalModel(log)), ApprovalStore(db))


APPROVAL_DAEMON = textwrap.dedent('''
    import asyncio, sys
    sys.path.insert(0, {tests!r})
    from _daemon_support import approval_agent
    from passepartout.daemon import Daemon
    agent = approval_agent({journal!r}, {db!r}, {log!r})
    asyncio.run(Daemon(agent, port=0, state_dir={state!r}, approval_poll={poll}).serve(lambda d: print('ready', flush=True)))
''')


def start_approval_daemon(tmp_path, name, journal, db, log=None, poll=0.5):
    "A real daemon process serving `approval_agent`; returns (process, state directory, stderr file)."
    state, errors = Path(tmp_path) / name, Path(tmp_path) / f'{name}.stderr'
    code = APPROVAL_DAEMON.format(tests=os.path.dirname(__file__), journal=str(journal), db=str(db), log=str(log) if log else None,
                                  state=str(state), poll=poll)
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(Path(tmp_path) / 'home')}
    proc = subprocess.Popen([sys.executable, '-c', code], env=env, stdout=subprocess.PIPE, stderr=open(errors, 'w'), text=True)
    assert proc.stdout.readline().strip() == 'ready', errors.read_text()
    return proc, state, errors


def stop_daemon(proc, timeout=30):
    "SIGTERM the daemon process and wait for its graceful exit; its exit status."
    if proc.poll() is None: proc.send_signal(_signal.SIGTERM)
    try: return proc.wait(timeout)
    except subprocess.TimeoutExpired: proc.kill(); raise


def wait_for(predicate, timeout=60.0):
    """Poll `predicate` until it is true (True) or `timeout` seconds pass (False). The deadline is a hang detector,
    not a speed test: generous, since it costs nothing when the condition comes true (machines here are loaded)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate(): return True
        if time.monotonic() >= deadline: return False
        time.sleep(0.01)


def count_looks(daemon):
    "Count the approval watcher's finished looks at the store in `daemon.looks` (it calls `daemon._decisions` once a look)."
    if hasattr(daemon, 'looks'): return
    daemon.looks, look = 0, daemon._decisions
    def counted():
        try: return look()
        finally: daemon.looks += 1
    daemon._decisions = counted


def settled(daemon, looks=2, timeout=60.0) -> bool:
    """Wait until the approval watcher has looked at the store `looks` more times from now, and every turn queued
    by those looks has run: what 'nothing more happens' can be checked against, without a fixed sleep."""
    count_looks(daemon)
    target = daemon.looks + looks + 1   # the look under way now may have read the store before this call
    return wait_for(lambda: daemon.looks >= target and not daemon.workers and not daemon.queues, timeout)


def readable(sock, timeout:float=0) -> bool:
    "Has `sock` something to read (or hung up) within `timeout` seconds? `poll`, not `select`: a long test run holds descriptors above 1024."
    import select
    poller = select.poll(); poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(timeout * 1000))
