"""The vault file is looked at once a turn (`current_turn()`): a secret another process adds before a
turn is still caught in that turn by every stage (secrets gate, Act's redaction, the session store),
and the file is not looked at again within the turn."""
import json, os, subprocess, sys, threading
from types import SimpleNamespace
from pathlib import Path
import pytest
sys.path.insert(0, os.path.dirname(__file__))
from _vault_support import real_agent_world
from passepartout import vault as vault_mod
from passepartout.gates import turn_scope, current_turn
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply

ROOT = Path(__file__).resolve().parents[1]
LATE = 'late-secret-Hq4Zr8Wm2Kx'


@pytest.fixture
def world(tmp_path, monkeypatch):
    return real_agent_world(tmp_path, monkeypatch, SimpleNamespace(requests=[]))


def add_in_another_process(vault, name, value):
    "`Vault.add` run by another Python process on the same files (as `passepartout vault add` would)."
    code = f"from passepartout.vault import Vault; Vault({str(vault.path)!r}, {str(vault.key_path)!r}).add({name!r}, {value!r})"
    env = {**os.environ, 'PYTHONPATH': str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', '')}
    subprocess.run([sys.executable, '-c', code], check=True, env=env, timeout=120)


def test_a_secret_added_by_another_process_before_a_turn_is_caught_in_that_turn(world):
    agent = world.agent
    agent.provider = ScriptedProvider([reply('hello')])
    assert agent.send('hi', session='owner').reply == 'hello'     # the vault looked at (missing) in a turn before
    assert agent.vault._looked.turn > 0 and agent.vault._secrets == {}   # marked with that turn, which has ended
    add_in_another_process(agent.vault, 'LATE_TOKEN', LATE)
    (world.ws / 'notes.txt').write_text(f"the token: {LATE}\n")
    agent.provider = ScriptedProvider([tool_call('read_file', {'path': 'notes.txt'}, explanation='reading'),
                                       reply(f"The token is {LATE}"), reply('I cannot show it.')])
    turn = agent.send('what is in notes.txt?', session='owner')
    outputs = [e.get('output') or '' for e in turn.of('result')]
    assert outputs and all(LATE not in o for o in outputs) and any('{{vault:LATE_TOKEN}}' in o for o in outputs), outputs
    denied = [t['reason'] for e in turn.of('verdict') for t in e.get('trace', []) if t['gate'] == 'secrets' and t['decision'] == 'deny']
    assert any('holds the value of secret LATE_TOKEN' in r for r in denied), denied
    assert turn.reply == 'I cannot show it.'
    agent.sessions.sync(); agent.audit.__self__.sync()
    stored = json.dumps(list(agent.sessions.load('owner')), default=str)
    assert 'LATE_TOKEN' in stored and LATE not in stored, stored   # the session store redacted what it wrote
    files = {p.name: p.read_bytes() for p in world.data.rglob('*') if p.is_file() and not p.name.startswith('vault.')}
    assert 'sessions.db' in files and not [n for n, b in files.items() if LATE.encode() in b]


def test_a_turn_looks_at_the_vault_file_once(world, monkeypatch):
    agent, looks, stat = world.agent, [], os.stat
    path = str(agent.vault.path)
    def counting(p, *a, **k):
        if os.fspath(p) == path: looks.append(threading.get_ident())
        return stat(p, *a, **k)
    agent.provider = ScriptedProvider([tool_call('list_dir', {'path': '.'}, explanation='looking'), reply('done')])
    monkeypatch.setattr(vault_mod.os, 'stat', counting)
    turn = agent.send('look', session='once')
    monkeypatch.setattr(vault_mod.os, 'stat', stat)
    assert turn.reply == 'done' and len(turn.of('result')) == 1
    assert looks.count(threading.get_ident()) == 1, looks   # the secrets gate twice, Act and the session store: one look


def test_a_vault_this_object_writes_is_read_again_within_the_turn(tmp_path):
    v = vault_mod.Vault(tmp_path / 'v.enc', tmp_path / 'v.key')
    with turn_scope():
        assert v._load() == {}
        v.add('MINE', 'written-in-the-turn-123')
        assert v.names() == ['MINE']
        seen = []
        t = threading.Thread(target=lambda: seen.append((current_turn(), v.names())))
        t.start(); t.join()
        assert seen == [(0, ['MINE'])]
    assert current_turn() == 0


def test_turns_on_two_threads_each_take_their_own_look(tmp_path):
    "A thread whose turn began after another process wrote sees the secret, whatever a thread in an older turn holds."
    mine, other = vault_mod.Vault(tmp_path / 'v.enc', tmp_path / 'v.key'), vault_mod.Vault(tmp_path / 'v.enc', tmp_path / 'v.key')
    started, written, out = threading.Event(), threading.Event(), {}
    def old_turn():
        with turn_scope():
            out['old-before'] = dict(mine._load()); started.set(); written.wait(60)
            out['old-after'] = dict(mine._load())
    t = threading.Thread(target=old_turn); t.start()
    assert started.wait(60)
    other.add('K', 'another-process-value-1')
    with turn_scope(): out['new'] = dict(mine._load())
    written.set(); t.join(60)
    assert out['old-before'] == {} and out['new'] == {'K': 'another-process-value-1'}
