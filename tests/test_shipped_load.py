"""Load through the SHIPPED agent: `app.build_agent()` (audit log, vault, approvals, default gates, built-in
tools) served by a real daemon, 100 concurrent clients, each turn one read-only tool call then a reply.

Every tool call must run (0 refusals: no deny, no ask, no error), and every reply must come back to the
client that asked, for the request it answers, carrying what that client's own tool call read (0 lost,
0 misrouted). The daemon runs turns of different sessions on worker threads at once, so a shared structure
that a gate uses without a lock shows up here as a wrong refusal or a wrong answer.

The default run is 100 clients x 20 turns (bounded, part of `pytest tests`); set
`PASSEPARTOUT_LOAD_TURNS=100` for the full 100 x 100. Throughput is measured by bench/daemon_throughput.py.
"""
import asyncio, os, re, secrets, threading
from pathlib import Path

import pytest

from passepartout.daemon import AsyncClient, client_status, request
from passepartout.reason import Proposal
from passepartout.signals import reply, tool_call
from _daemon_support import daemon_in_thread, token_of

CLIENTS = 100
TURNS = int(os.environ.get('PASSEPARTOUT_LOAD_TURNS', '20'))
SHELL_EVERY = 10          # every 10th turn of a client runs `shell` (bubblewrap: a process per call, so not every turn)
LIMIT_S = 100             # the whole run, generous: a failure here is a hang, not slowness


class SessionModel:
    """A scripted model keyed by session: `turn I` proposes one read-only tool call on the session's own files;
    the tool's output is answered `SESSION#I|OUTPUT`. Anything else (a rejection, a tool error) is answered
    `REFUSED …`. Thread-safe: the daemon calls it from several worker threads at once."""
    name = 'session-model'
    def __init__(self): self.lock, self.turn_of = threading.Lock(), {}
    def action(self, session:str, i:int):
        "The tool call of turn `i` in `session`: read_file, list_dir, or now and then `shell`."
        n = session.split('-')[1]
        if i % SHELL_EVERY == SHELL_EVERY - 1:
            return tool_call('shell', {'command': f'cat client-{n}.txt'}, explanation='read the marker')
        if i % 2: return tool_call('list_dir', {'path': f'dir-{n}'})
        return tool_call('read_file', {'path': f'client-{n}.txt'})
    def propose(self, request):
        s = request.signal
        if request.rejections: return Proposal(reply(f"REFUSED {s.session}: {'; '.join(request.rejections)}"))
        if s.sensor == 'user-input':
            i = int(s.text.split()[1])
            with self.lock: self.turn_of[s.session] = i
            return Proposal(self.action(s.session, i))
        if s.sensor == 'tool-output':
            with self.lock: i = self.turn_of[s.session]
            return Proposal(reply(f"{s.session}#{i}|{s.text}"))
        return Proposal(reply(f"REFUSED {s.session}: {s.sensor}: {s.text}"))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    "A temp PASSEPARTOUT_HOME (a secret in the vault: redaction does its whole work) and workspace; each client has a file and a directory holding its own marker."
    home, workspace = tmp_path / 'home', tmp_path / 'workspace'
    workspace.mkdir()
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(home))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(workspace))
    for name in ('PASSEPARTOUT_VAULT_KEY_FILE', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME'): monkeypatch.delenv(name, raising=False)
    from passepartout.vault import Vault
    Vault().add('API_KEY', 'sk-load-test-0123456789abcdef', ['api.example.com'])
    markers = {}
    for n in range(CLIENTS):
        markers[n] = f"marker-{n}-{secrets.token_hex(4)}"
        (workspace / f'client-{n}.txt').write_text(markers[n] + '\n')
        (workspace / f'dir-{n}').mkdir(); (workspace / f'dir-{n}' / markers[n]).write_text('')
    return home, workspace, markers


def check(answer:dict, session:str, i:int, marker:str) -> str|None:
    "What is wrong with `answer` to turn `i` of `session` (None: nothing)."
    if answer['meta'] != {'id': i, 'session': session}: return f"misrouted: {answer['meta']}"
    if answer['payload'].get('sensor') != 'turn': return f"not a turn: {answer['payload']}"
    turn = answer['payload']['turn']
    refused = [v for v in turn['verdicts'] if v['decision'] != 'allow']
    if refused or turn['pending'] or turn['errors']:
        return f"refused: {[t for v in refused for t in v['trace'] if t['decision'] != 'allow']} {turn['pending']} {turn['errors']}"
    if len(turn['actions']) != 1: return f"ran {len(turn['actions'])} actions"
    text = turn['reply'] or ''
    if not text.startswith(f"{session}#{i}|") or marker not in text: return f"wrong reply: {text!r}"
    return None


async def one_client(address, token, n:int, marker:str, problems:list):
    "TURNS turns one after another; every problem is noted in `problems`."
    client = await AsyncClient.connect(address, token)
    session = f"client-{n}"
    try:
        for i in range(TURNS):
            answer = await asyncio.wait_for(client.ask(request(f"turn {i}", session=session, id=i)), LIMIT_S)
            if answer is None: problems.append((session, i, f"lost: {TURNS - i} replies")); break
            problem = check(answer, session, i, marker)
            if problem: problems.append((session, i, problem))
    finally:
        await client.close()


async def run_load(address, token, markers):
    problems = []
    await asyncio.wait_for(asyncio.gather(*(one_client(address, token, n, markers[n], problems) for n in range(CLIENTS))), LIMIT_S)
    return problems


def test_shipped_agent_under_100_clients(shipped, tmp_path):
    from passepartout.app import build_agent
    home, workspace, markers = shipped
    model = SessionModel()
    agents = []
    def make():   # as the daemon builds its agent (`default_agent`), with the scripted model
        agents.append(build_agent(provider=model)); return agents[-1]
    with daemon_in_thread(make, state_dir=tmp_path / 'state') as daemon:
        problems = asyncio.run(run_load(daemon.address, token_of(daemon), markers))
        status = client_status(timeout=120, state_dir=tmp_path / 'state')
    agent = agents[0]
    assert {'validator', 'paths', 'permissions', 'shell', 'vault', 'provenance'} <= {g.name for g in agent.gates.gates}
    assert agent.approvals is not None and agent.audit is not None and agent.vault is not None
    assert problems == [], f"{len(problems)} problems, e.g. {problems[:5]}"
    assert status['replies'] == CLIENTS * TURNS
    from passepartout.audit import AuditLog
    log = AuditLog()                                  # every turn's events, written from all the worker threads: one intact chain
    assert log.verify() == (True, [])
    assert len(log.recent(CLIENTS * TURNS * 20, kind='message')) == CLIENTS * TURNS
