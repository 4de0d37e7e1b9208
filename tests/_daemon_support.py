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
    assert started.wait(30), "daemon did not start"
    if failed: raise failed[0]
    daemon.loop = loop
    try: yield daemon
    finally:
        loop.call_soon_threadsafe(daemon.stopping.set)
        thread.join(30)
        loop.close()


def token_of(daemon): return daemon.files['token'].read_text()
