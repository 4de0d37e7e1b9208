"""Telegram and Signal hosted together by one daemon (issue 19, requirements 4 and 5).

Both gateways run as the daemon's background services against their loopback servers
(`tests/telegram_server.py`, `tests/signal_server.py`), with the shipped agent and a scripted model.

What must hold: an action held from one gateway is answered from another (Signal, Telegram, the CLI's
`passepartout approve`), the model carries on in the chat the action was held in, and the audit log names
the channel that decided; a gateway that fails (a revoked token, signal-cli down) is reported in
`daemon status`, retried with backoff, and the other gateway and the daemon keep serving.
"""
import os, socket, subprocess, sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from passepartout.app import build_agent
from passepartout.audit import AuditLog
from passepartout.approvals import ApprovalStore
from passepartout.reason import ScriptedProvider
from passepartout.signals import reply, tool_call
from passepartout.vault import Vault
from passepartout.telegram import telegram_service
from passepartout.signal_gateway import signal_service

from telegram_server import BotAPIServer
from signal_server import SignalCLIServer, ACCOUNT
from _daemon_support import daemon_in_thread

ROOT = Path(__file__).resolve().parents[1]
TG_OWNER, SIG_OWNER = 1001, '+4915112345678'
echo = lambda req: reply(f"{req.signal.session}|{req.signal.text}")
done = lambda req: reply(f"Done in {req.signal.session}: {req.messages[-1]['content'][:24]}")
rm_build = tool_call('shell', {'command': 'rm -r build'}, explanation='clean up')


def _free_port() -> int:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


class Servers:
    "The Bot API and signal-cli on loopback, and the workspace both agents act in."
    def __init__(self, telegram, signal, workspace): self.telegram, self.signal, self.workspace = telegram, signal, workspace


@pytest.fixture
def servers(tmp_path, monkeypatch):
    "A home with both gateways configured (owners, the token and the account in the vault), both servers running."
    for k in list(os.environ):
        if k.startswith(('PASSEPARTOUT_', 'OPENAI_', 'ANTHROPIC_')): monkeypatch.delenv(k)
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    (tmp_path / 'ws').mkdir()
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', str(TG_OWNER))
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_OWNERS', SIG_OWNER)
    signal = SignalCLIServer(port=_free_port())
    monkeypatch.setenv('PASSEPARTOUT_SIGNAL_URL', signal.url)
    with BotAPIServer() as telegram:
        monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_API', telegram.url)
        Vault().add('TELEGRAM_TOKEN', telegram.token)
        Vault().add('SIGNAL_ACCOUNT', ACCOUNT)
        yield Servers(telegram, signal, tmp_path / 'ws')
        signal.stop()


@contextmanager
def both_hosted(agent, **kw):
    "One daemon hosting both gateways, polling quickly and backing off briefly."
    services = [lambda d: telegram_service(d, poll_timeout=1, backoff=(0.02, 0.2)), lambda d: signal_service(d, backoff=(0.02, 0.2))]
    with daemon_in_thread(agent, background=services, approval_poll=0.05, **kw) as daemon:
        yield daemon


def gateway_state(daemon, name):
    return (daemon.status()['gateways'].get(name) or {}).get('state')


def agent_with(*script): return build_agent(provider=ScriptedProvider(list(script)))


def held_in_telegram(servers, agent) -> str:
    "The Telegram owner asks; the gates hold `rm -r build`; the chat gets the buttons. The token."
    (servers.workspace / 'build').mkdir(exist_ok=True)
    servers.telegram.message('clean up the build directory', chat=TG_OWNER)
    servers.telegram.wait_for(lambda: [m for m in servers.telegram.sent if m.get('reply_markup')])
    return agent.approvals.pending()[0]['token']


def held_in_signal(servers, agent) -> str:
    (servers.workspace / 'build').mkdir(exist_ok=True)
    servers.signal.message('clean up the build directory', number=SIG_OWNER)
    servers.signal.wait_for(lambda: [m for m in servers.signal.sent if 'React 👍' in m['message']])
    return agent.approvals.pending()[0]['token']


def decided_by(kind='approval') -> list:
    return [(a['data']['channel'], a['data'].get('token')) for a in AuditLog().recent(50, kind=kind)]


def test_held_in_telegram_approved_from_signal_continues_in_telegram(servers):
    agent = agent_with(rm_build, done)
    with both_hosted(agent) as daemon:
        servers.signal.start()
        servers.signal.wait_for(lambda: gateway_state(daemon, 'signal') == 'running' and gateway_state(daemon, 'telegram') == 'running')
        token = held_in_telegram(servers, agent)
        servers.signal.message(f'approve {token}', number=SIG_OWNER)
        servers.telegram.wait_for(lambda: any(t.startswith('Done in') for t in servers.telegram.texts(TG_OWNER)))
    assert not (servers.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'used'
    assert servers.signal.texts(SIG_OWNER)[0].startswith(f'Approved {token}')              # the answer goes to who typed it
    assert servers.telegram.texts(TG_OWNER)[-1].startswith('Done in telegram-1001: approved by the owner')   # the model carries on in the chat
    assert not any(t.startswith('Done') for t in servers.signal.texts())
    assert decided_by() == [('signal', token)]


def test_held_in_signal_approved_from_telegram_continues_in_signal(servers):
    agent = agent_with(rm_build, done)
    with both_hosted(agent) as daemon:
        servers.signal.start()
        servers.signal.wait_for(lambda: gateway_state(daemon, 'signal') == 'running' and gateway_state(daemon, 'telegram') == 'running')
        token = held_in_signal(servers, agent)
        servers.telegram.message(f'approve {token}', chat=TG_OWNER)
        servers.signal.wait_for(lambda: any(t.startswith('Done in') for t in servers.signal.texts(SIG_OWNER)))
    assert not (servers.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'used'
    assert servers.telegram.texts(TG_OWNER)[0].startswith(f'Approved {token}')
    assert servers.signal.texts(SIG_OWNER)[-1].startswith(f'Done in signal-{SIG_OWNER}: approved by the owner')
    assert not any(t.startswith('Done') for t in servers.telegram.texts())
    assert decided_by() == [('telegram', token)]


def test_held_in_telegram_denied_with_the_cli_continues_in_telegram(servers):
    "`passepartout deny TOKEN` in another terminal hands the answer to the daemon; the chat hears the model's answer."
    agent = agent_with(rm_build, done)
    with both_hosted(agent) as daemon:
        servers.telegram.wait_for(lambda: gateway_state(daemon, 'telegram') == 'running')
        token = held_in_telegram(servers, agent)
        cli = subprocess.run([sys.executable, '-m', 'passepartout', 'deny', token], env={**os.environ, 'PYTHONPATH': str(ROOT)},
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0 and f'Denied {token}' in cli.stdout, cli.stdout + cli.stderr
        servers.telegram.wait_for(lambda: any(t.startswith('Done in') for t in servers.telegram.texts(TG_OWNER)))
    assert (servers.workspace / 'build').exists() and ApprovalStore().get(token)['state'] == 'denied'
    assert servers.telegram.texts(TG_OWNER)[-1].startswith('Done in telegram-1001: refused by the owner')
    assert decided_by('denial') == [('cli', token)]


def test_held_in_telegram_approved_with_the_cli_continues_in_telegram(servers):
    agent = agent_with(rm_build, done)
    with both_hosted(agent) as daemon:
        servers.telegram.wait_for(lambda: gateway_state(daemon, 'telegram') == 'running')
        token = held_in_telegram(servers, agent)
        cli = subprocess.run([sys.executable, '-m', 'passepartout', 'approve', token], env={**os.environ, 'PYTHONPATH': str(ROOT)},
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0 and f'Approved {token}' in cli.stdout, cli.stdout + cli.stderr
        servers.telegram.wait_for(lambda: any(t.startswith('Done in') for t in servers.telegram.texts(TG_OWNER)))
    assert not (servers.workspace / 'build').exists()
    assert servers.telegram.texts(TG_OWNER)[-1].startswith('Done in telegram-1001: approved by the owner')
    assert decided_by() == [('cli', token)]


def test_a_revoked_telegram_token_leaves_signal_and_the_daemon_serving(servers):
    "Telegram answers 401 to every poll: reported, retried with growing waits; Signal and the daemon go on; then it recovers."
    real, servers.telegram.token = servers.telegram.token, 'revoked'
    agent = agent_with(*[echo] * 3)
    with both_hosted(agent) as daemon:
        servers.signal.start()
        servers.telegram.wait_for(lambda: daemon.gateways.get('telegram') is not None and daemon.gateways['telegram'].failures >= 3)
        status = daemon.status()['gateways']
        assert status['telegram']['state'] == 'failing' and '401' in status['telegram']['error'], status
        servers.signal.wait_for(lambda: gateway_state(daemon, 'signal') == 'running')
        servers.signal.message('are you there?', number=SIG_OWNER)
        servers.signal.wait_for(lambda: servers.signal.texts(SIG_OWNER))
        assert gateway_state(daemon, 'telegram') == 'failing'
        servers.telegram.token = real                                        # a new token: the next retry gets through
        servers.telegram.wait_for(lambda: gateway_state(daemon, 'telegram') == 'running')
        servers.telegram.message('and you?', chat=TG_OWNER)
        servers.telegram.wait_for(lambda: servers.telegram.texts(TG_OWNER))
    assert servers.signal.texts(SIG_OWNER) == [f'signal-{SIG_OWNER}|are you there?']
    assert servers.telegram.texts(TG_OWNER) == ['telegram-1001|and you?']
    assert len([line for line in agent.syslog.lines(500) if 'telegram: polling failed' in line]) == 1   # reported once, not per retry


def test_signal_cli_down_leaves_telegram_serving_and_daemon_status_shows_both(servers):
    "signal-cli never starts: the daemon's status says so; `passepartout daemon status` prints each gateway's state."
    agent = agent_with(echo)
    with both_hosted(agent) as daemon:
        servers.telegram.wait_for(lambda: gateway_state(daemon, 'telegram') == 'running' and gateway_state(daemon, 'signal') == 'failing')
        servers.telegram.message('hello', chat=TG_OWNER)
        servers.telegram.wait_for(lambda: servers.telegram.texts(TG_OWNER))
        servers.telegram.wait_for(lambda: daemon.gateways['signal'].failures >= 3)
        shown = subprocess.run([sys.executable, '-m', 'passepartout', 'daemon', 'status'], env={**os.environ, 'PYTHONPATH': str(ROOT)},
                               capture_output=True, text=True, timeout=120).stdout
    lines = shown.splitlines()
    assert lines[0].startswith('running: pid') and 'telegram: running' in lines, shown
    assert any(line.startswith('signal: failing (') and 'cannot reach signal-cli' in line for line in lines), shown
    assert servers.telegram.texts(TG_OWNER) == ['telegram-1001|hello']


def test_a_gateway_that_cannot_start_is_shown_and_the_other_serves(servers):
    "No Signal account in the vault: the Signal gateway cannot start; the daemon says why and Telegram serves."
    Vault().remove('SIGNAL_ACCOUNT')
    agent = agent_with(echo)
    with both_hosted(agent) as daemon:
        servers.telegram.wait_for(lambda: gateway_state(daemon, 'signal') == 'cannot start' and gateway_state(daemon, 'telegram') == 'running')
        assert 'vault add SIGNAL_ACCOUNT' in daemon.status()['gateways']['signal']['error']
        servers.telegram.message('hello', chat=TG_OWNER)
        servers.telegram.wait_for(lambda: servers.telegram.texts(TG_OWNER))
    assert servers.telegram.texts(TG_OWNER) == ['telegram-1001|hello']


@pytest.mark.parametrize('kind', ['telegram', 'signal'])
def test_the_wait_between_retries_doubles_up_to_the_ceiling_and_is_logged_once(servers, kind):
    "Each failure in a row doubles the wait (1, 2, 4, … up to the ceiling); the same reason is logged once; Telegram's 429 waits at least retry_after."
    from passepartout.telegram import TelegramGateway, BotAPI, TelegramError
    from passepartout.signal_gateway import SignalGateway, SignalCLI, SignalError
    agent = agent_with()
    if kind == 'telegram': gw, error = TelegramGateway(agent, BotAPI('1:x', 'http://127.0.0.1:9'), {'1001'}, backoff=(1, 60)), TelegramError('getUpdates: 502 Bad Gateway', 502)
    else: gw, error = SignalGateway(agent, SignalCLI(ACCOUNT, 'http://127.0.0.1:9'), {SIG_OWNER}, backoff=(1, 60)), SignalError('cannot reach signal-cli')
    waits = [gw._failed(error) for _ in range(9)]
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60] and gw.status()['state'] == 'failing' and gw.status()['failures'] == 9
    assert len([line for line in agent.syslog.lines(100) if 'failed' in line or 'cannot reach' in line]) == 1
    if kind == 'telegram':
        assert gw._failed(TelegramError('getUpdates: 429 Too Many Requests', 429, retry_after=90)) == 90
