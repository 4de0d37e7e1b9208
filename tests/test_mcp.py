"""MCP servers' tools (`nbs/47_mcp.md`) against a small server the tests start (`tests/mcp_server.py`):
over stdio and streamable HTTP, through the gates, a dead server reported and restarted, a bad file one error."""
import importlib.util, json, os, signal, socket, subprocess, sys, time
import pytest
from pathlib import Path
from passepartout.errors import SetupError
from passepartout.mcp import load_mcp_config, install_mcp, McpServers
from passepartout.loop import Agent
from passepartout.builtin_gates import default_gates
from passepartout.reason import ScriptedProvider
from passepartout.signals import tool_call, reply

SERVER = Path(__file__).with_name('mcp_server.py')
needs_sdk = pytest.mark.skipif(importlib.util.find_spec('mcp') is None,
                               reason="the MCP SDK is not installed (pip install 'passepartout[mcp]')")
FAST = dict(startup_timeout=60, ping_interval=0.2, backoff=(0.05, 0.5))


def stdio_toml(name='t', extra='') -> str:
    return f'[{name}]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n' + extra


def wait_for(predicate, what, seconds=60):
    "Poll `predicate` until it holds (the servers are real processes on a shared machine)."
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline: raise AssertionError(f"still waiting for {what}")
        time.sleep(0.05)


def agent_with(tmp_path, toml, script=(), **options):
    (tmp_path / 'mcp.toml').write_text(toml)
    agent = Agent(ScriptedProvider(list(script)), gates=default_gates(), workspace=tmp_path)
    servers = install_mcp(agent, tmp_path / 'mcp.toml', errlog_dir=tmp_path, **{**FAST, **options})
    return agent, servers


def logged(agent, text) -> list:
    return [(level, line) for _, level, line in agent.syslog.entries if text in line]


@needs_sdk
def test_stdio_tools_listed_called_and_gated(tmp_path):
    script = [tool_call('t__add', {'a': 2, 'b': 40}), reply('42'),
              tool_call('t__send_note', {'to': 'bob@example.org', 'text': 'hi'}, explanation='the owner asked'), reply('unused')]
    agent, servers = agent_with(tmp_path, stdio_toml(extra='[t.tools.add]\neffect = "read-only"\n'), script)
    try:
        assert {t.name for t in agent.tools} == {'t__add', 't__send_note', 't__pid', 't__fail'}
        assert [(agent.tools[n].effect, agent.tools[n].asks_why) for n in ('t__add', 't__send_note', 't__pid')] == [
            ('read-only', False), ('outward', True), ('outward', True)]   # undeclared: outward
        assert agent.tools['t__add'].schema['required'] == ['a', 'b']
        turn = agent.send('what is 2 + 40?')
        assert turn.of('result')[0]['output'] == '42' and turn.reply == '42'
        held = agent.send('send bob a note')
        assert len(held.pending) == 1 and held.of('result') == []   # asked, not run
        with pytest.raises(RuntimeError, match='the reason given'): agent.tools.run('t__fail', {'reason': 'the reason given'})
    finally: servers.close()
    assert servers['t'].status == 'stopped'


@needs_sdk
def test_the_owners_tools_file_declarations_apply(tmp_path):
    agent = Agent(gates=default_gates(), workspace=tmp_path)
    agent.tools.declare('t__send_note', {'to': 'recipient', 'text': 'content'}, effect='send')   # what build_agent does with tools.toml
    (tmp_path / 'mcp.toml').write_text(stdio_toml())
    servers = install_mcp(agent, tmp_path / 'mcp.toml', errlog_dir=tmp_path, **FAST)
    try:
        t = agent.tools['t__send_note']
        assert (t.effect, t.operation, t.args) == ('outward', 'send', {'to': 'recipient', 'text': 'content'})
    finally: servers.close()


@needs_sdk
def test_a_dead_server_is_reported_and_restarted(tmp_path):
    agent, servers = agent_with(tmp_path, stdio_toml())
    try:
        first = int(agent.tools.run('t__pid', {}))
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: logged(agent, "MCP server 't' stopped"), 'the death to be reported')
        wait_for(lambda: servers['t'].status == 'up' and servers['t'].restarts >= 1, 'the restart')
        assert int(agent.tools.run('t__pid', {})) != first
        assert logged(agent, "MCP server 't' stopped")[0][0] == 'WARNING' and logged(agent, "is up again (restart 1)")
        assert sorted(t.name for t in agent.tools) == ['t__add', 't__fail', 't__pid', 't__send_note']   # not registered twice
    finally: servers.close()


@needs_sdk
def test_a_server_that_never_starts_is_given_up(tmp_path):
    toml = f'[gone]\ncommand = {json.dumps(str(tmp_path / "no-such-program"))}\n'
    agent, servers = agent_with(tmp_path, toml, max_restarts=2)
    try:
        wait_for(lambda: servers['gone'].status == 'failed', 'giving up')
        assert [level for level, _ in logged(agent, "MCP server 'gone'")] == ['WARNING', 'WARNING', 'ERROR']
        assert 'given up after 2 restarts' in logged(agent, "MCP server 'gone'")[-1][1]
        assert not any(t.name.startswith('gone__') for t in agent.tools)
    finally: servers.close()


@needs_sdk
def test_a_slow_server_joins_the_agents_current_tools_after_a_swap(tmp_path):
    "A server up after startup_timeout registers on the belt the agent has then, not on one a skill reload replaced."
    from passepartout.skills import Skill, add_skill
    agent, servers = agent_with(tmp_path, stdio_toml(), startup_timeout=0)
    try:
        add_skill(agent, Skill('other', origin='mcp'))   # new parts, as a reload of the skills folder makes
        wait_for(lambda: servers['t'].status == 'up', 'the server')
        assert 't__add' in agent.tools and agent.tools.run('t__add', {'a': 1, 'b': 2}) == '3'
    finally: servers.close()


@needs_sdk
def test_status_names_the_servers_down_and_given_up(tmp_path):
    "What `daemon status` shows (skills_status over the mcp skill): up, or failed with why and what to do."
    from passepartout.mcp import mcp_skill
    from passepartout.skills import skills_status, SkillSet
    (tmp_path / 'mcp.toml').write_text(stdio_toml() + f'[gone]\ncommand = {json.dumps(str(tmp_path / "no-such-program"))}\n')
    skill = mcp_skill(tmp_path / 'mcp.toml', errlog_dir=tmp_path, **{**FAST, 'max_restarts': 1})
    servers = skill.install(Agent(gates=default_gates(), workspace=tmp_path))
    try:
        wait_for(lambda: 'gone failed' in skill.status() and 't up' in skill.status(), 'one up, one given up')
        line = skills_status(SkillSet([skill]))['mcp']
        assert line.startswith('t up (4 tools); gone failed (') and 'given up after 1 restarts: restart the daemon' in line
    finally: servers.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def http_server(port):
    proc = subprocess.Popen([sys.executable, str(SERVER), '--http', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def listening():
        try: socket.create_connection(('127.0.0.1', port), 0.2).close(); return True
        except OSError: assert proc.poll() is None, 'the HTTP server exited'; return False
    wait_for(listening, 'the HTTP server to listen')
    return proc


@needs_sdk
def test_streamable_http_listed_called_and_restarted(tmp_path):
    port = free_port()
    proc = http_server(port)
    try:
        agent, servers = agent_with(tmp_path, f'[web]\nurl = "http://127.0.0.1:{port}/mcp"\n[web.tools.add]\neffect = "read-only"\n',
                                    backoff=(0.2, 2.0), max_restarts=30)   # room for the server to start again
        try:
            assert servers['web'].status == 'up' and agent.tools['web__add'].effect == 'read-only'
            assert agent.tools.run('web__add', {'a': 1, 'b': 2}) == '3'
            proc.kill(); proc.wait()
            wait_for(lambda: logged(agent, "MCP server 'web' stopped"), 'the death to be reported')
            proc = http_server(port)
            wait_for(lambda: servers['web'].status == 'up' and servers['web'].restarts >= 1, 'the reconnection')
            assert agent.tools.run('web__add', {'a': 2, 'b': 2}) == '4'
        finally: servers.close()
    finally: proc.kill(); proc.wait()


@pytest.mark.parametrize('toml, mistake', [
    ('[t\ncommand = "x"\n', 'does not parse'),
    ('[t]\nargs = ["x"]\n', "needs exactly one of `command`"),
    ('[t]\ncommand = "x"\nurl = "http://127.0.0.1/mcp"\n', "needs exactly one of `command`"),
    ('[t]\nurl = "file:///etc/passwd"\n', "use an http:// or https:// address"),
    ('[t]\ncommand = "x"\ncomand = "y"\n', "has unknown keys ['comand']"),
    ('[t]\ncommand = "x"\nargs = "--flag"\n', "`args` that is not a list of strings"),
    ('[t]\ncommand = "x"\nenv = { TOKEN = 1 }\n', "`env` that is not a table of strings"),
    ('[t]\ncommand = "x"\ntimeout = -1\n', "has timeout -1"),
    ('[T]\ncommand = "x"\n', "needs a name of lowercase letters"),
    ('t = "x"\n', "must be a table"),
    ('[t]\ncommand = "x"\n[t.tools.send]\neffect = "harmless"\n', "tool 'send' has effect 'harmless'"),
    ('[t]\ncommand = "x"\n[t.tools.send]\nargs = { to = "recipeint" }\n', "tool 'send' declares unknown argument kinds {'to': 'recipeint'}"),
    ('[t]\ncommand = "x"\n[t.tools.send]\neffects = "send"\n', "tool 'send' must be a table with only `effect` and `args`"),
], ids=['toml', 'neither', 'both', 'scheme', 'unknown-key', 'args', 'env', 'timeout', 'name', 'not-table', 'effect', 'kind', 'tool-key'])
def test_a_malformed_file_is_one_clear_error(tmp_path, toml, mistake):
    (tmp_path / 'mcp.toml').write_text(toml)
    with pytest.raises(SetupError) as e: install_mcp(Agent(), tmp_path / 'mcp.toml')
    assert mistake in str(e.value) and str(tmp_path / 'mcp.toml') in str(e.value) and '\n' not in str(e.value).strip()


def test_no_file_no_servers_and_no_sdk_needed(tmp_path):
    agent = Agent()
    assert install_mcp(agent, tmp_path / 'mcp.toml') is None and len(agent.tools) == 0


def test_servers_without_the_sdk_say_how_to_install_it(tmp_path, monkeypatch):
    (tmp_path / 'mcp.toml').write_text('[t]\ncommand = "x"\n')
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'mcp' else real(name, *a))
    with pytest.raises(SetupError, match=r"lists MCP servers \(t\) but the MCP SDK is not installed: pip install 'passepartout\[mcp\]'"):
        install_mcp(Agent(), tmp_path / 'mcp.toml')


def test_the_app_imports_neither_the_sdk_nor_yaml():
    "The SDK (and PyYAML, for SKILL.md) load only when a server or a skill is configured."
    code = "import sys, passepartout.app; loaded = [m for m in ('mcp', 'mcp_types', 'anyio', 'yaml') if m in sys.modules]; assert not loaded, loaded"
    subprocess.run([sys.executable, '-c', code], check=True, env={**os.environ, 'PYTHONPATH': str(Path(__file__).resolve().parents[1])})


@needs_sdk
def test_build_agent_gets_the_servers_and_the_skills_of_the_config(tmp_path, monkeypatch):
    "The two lines of `build_agent`: `$config/mcp.toml` and `$config/skills/*/SKILL.md`."
    from passepartout import config
    from passepartout.app import build_agent
    ws = tmp_path / 'ws'; ws.mkdir()
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home')); monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(ws))
    for k in ('PASSEPARTOUT_VAULT_KEY_FILE', 'PASSEPARTOUT_PROVIDERS', 'PASSEPARTOUT_TOOLS_FILE', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME'):
        monkeypatch.delenv(k, raising=False)
    conf = config.ensure_dirs().config
    (conf / 'mcp.toml').write_text(stdio_toml(extra='[t.tools.add]\neffect = "read-only"\n'))
    (conf / 'skills' / 'notes').mkdir(parents=True)
    (conf / 'skills' / 'notes' / 'SKILL.md').write_text('---\nname: notes\ndescription: Keep notes tidy.\n---\nSort them.\n')
    agent = build_agent(provider=ScriptedProvider([tool_call('t__add', {'a': 1, 'b': 1}), lambda req: reply(req.system)]))
    turn = agent.send('1 + 1?')
    assert turn.of('result')[0]['output'] == '2' and '- notes: Keep notes tidy.' in turn.reply and '- t__add: Add two numbers.' in turn.reply


@needs_sdk
def test_inside_the_daemon_a_dead_server_is_restarted_and_status_says_so(tmp_path, monkeypatch):
    "Issue 18.6 in a served agent: the built agent's server dies, is reported, comes back; `daemon status` and `doctor` name one down."
    from _daemon_support import daemon_in_thread
    from passepartout import config
    from passepartout.app import build_agent
    from passepartout.daemon import Client, request
    from passepartout.doctor import check_mcp
    ws = tmp_path / 'ws'; ws.mkdir()
    for k, v in {'PASSEPARTOUT_HOME': tmp_path / 'home', 'PASSEPARTOUT_WORKSPACE': ws, 'PASSEPARTOUT_MEMORY': '0'}.items(): monkeypatch.setenv(k, str(v))
    for k in ('PASSEPARTOUT_VAULT_KEY_FILE', 'PASSEPARTOUT_PROVIDERS', 'PASSEPARTOUT_TOOLS_FILE', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME'):
        monkeypatch.delenv(k, raising=False)
    (config.ensure_dirs().config / 'mcp.toml').write_text(stdio_toml(extra='[t.tools.pid]\neffect = "read-only"\n') +
                                                         f'[gone]\ncommand = {json.dumps(str(tmp_path / "no-such-program"))}\n')
    agent = build_agent(provider=ScriptedProvider([tool_call('t__pid', {}), reply('a')] * 3))
    mcp = agent.skills.by_name['mcp']
    servers = next(c.cell_contents for c in mcp.status.__closure__ if isinstance(c.cell_contents, list))[-1]   # what its install started
    try:
        state = config.paths().state   # where doctor looks for a running daemon
        with daemon_in_thread(agent, state_dir=state) as d, Client(state) as c:
            outputs = lambda text: [e.get('output', e.get('error')) for e in c.ask(request(text))['turn']['events'] if e['kind'] == 'result']
            assert d.status()['skills']['mcp'].startswith("t up (4 tools); gone ")   # down, between restarts, or given up: never up
            [ok, down] = check_mcp(config.paths())
            assert ok.status == 'ok' and down.status == 'warn' and "MCP servers not up: gone (t up (4 tools); gone " in down.detail
            [first] = outputs('which pid?')
            os.kill(int(first), signal.SIGKILL)
            wait_for(lambda: logged(agent, "MCP server 't' stopped"), 'the death to be reported')
            wait_for(lambda: d.status()['skills']['mcp'].startswith('t up (4 tools); ') and servers['t'].restarts >= 1, 'the restart')
            [second] = outputs('and now?')
            assert second != first and logged(agent, "is up again (restart 1)")
    finally: servers.close()
