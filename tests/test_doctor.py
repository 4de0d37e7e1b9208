"""`passepartout doctor` tells the truth: a table of broken setups, each run through the real command line
in a process of its own, must end in a failed check that names the path or setting and its fix, with exit
status 1 and no traceback; providers are ready only when a real request is answered (loopback servers
speaking each wire format, tests/llm_servers.py); `--fix` repairs modes and directories, and nothing
else; `--offline` sends nothing."""
import hashlib, os, shutil, socket, subprocess, sys
import httpx, pytest

from llm_servers import LLMServer
from passepartout import cli, sandbox

CLI = [sys.executable, '-c', 'from passepartout.cli import main; main()']
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SANDBOX_OK = sandbox.sandbox_problem() is None
PROVIDER_VARIABLES = ('OPENAI_', 'ANTHROPIC_', 'OLLAMA_', 'OPENROUTER_', 'PASSEPARTOUT_', 'NO_COLOR')


@pytest.fixture
def home(tmp_path):
    "A healthy setup: a home with its three directories (0700), a workspace, the replay provider."
    for d in ('config', 'data', 'state'): (tmp_path / 'home' / d).mkdir(parents=True, mode=0o700)
    (tmp_path / 'ws').mkdir()
    return {'PASSEPARTOUT_HOME': str(tmp_path / 'home'), 'PASSEPARTOUT_WORKSPACE': str(tmp_path / 'ws'), 'PASSEPARTOUT_PROVIDERS': 'replay',
            'PASSEPARTOUT_DAEMON_PORT': '0'}   # any free port: another daemon on this machine must not make this home look broken


def doctor(env, *args, prefix=(), cwd=None):
    "Run `passepartout doctor ARGS` with exactly the settings in `env` (none inherited); (exit status, output)."
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARIABLES)}
    r = subprocess.run([*prefix, *CLI, 'doctor', *args], env={**clean, **env}, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert 'Traceback' not in r.stdout + r.stderr, r.stdout + r.stderr
    return r.returncode, r.stdout


def lines(out, status, check=None):
    "The details of the findings with `status` (and `check`) in a report."
    found = [line.split(None, 2) for line in out.splitlines() if line.startswith(status + ' ')]
    return [f[2] for f in found if check is None or f[1] == check]


def failures(out):
    "Failed findings, leaving out the sandbox's on a machine without one (it is another check's truth)."
    return [f"{f.split(None, 2)[1]}: {f.split(None, 2)[2]}" for f in out.splitlines() if f.startswith('fail ')
            and (SANDBOX_OK or f.split()[1] != 'sandbox')]


def read_only(path):
    "Make `path` unwritable for the doctor's process: a mode for a user, a read-only bind mount for root (whom modes do not stop)."
    if os.geteuid() != 0: path.chmod(0o500); return []
    if not shutil.which('bwrap'): pytest.skip('running as root without bwrap: no way to make a directory read-only')
    return ['bwrap', '--dev-bind', '/', '/', '--ro-bind', str(path), str(path)]


# ---- the table: (name, arrange(tmp_path, env) -> (env, command prefix), failed check, what must be said) ----
def _home_is_a_file(t, env):
    (t / 'file').write_text('my notes\n'); return {**env, 'PASSEPARTOUT_HOME': str(t / 'file')}, []

def _home_not_writable(t, env):
    (t / 'ro').mkdir(); return {**env, 'PASSEPARTOUT_HOME': str(t / 'ro')}, read_only(t / 'ro')

def _data_missing(t, env):
    (t / 'home' / 'data').rmdir(); return env, []

def _state_wrong_mode(t, env):
    (t / 'home' / 'state').chmod(0o755); return env, []

def _config_is_a_file(t, env):
    (t / 'home' / 'config').rmdir(); (t / 'home' / 'config').write_text(''); return env, []

def _data_not_writable(t, env):
    return env, read_only(t / 'home' / 'data')

def _workspace_missing(t, env):
    return {**env, 'PASSEPARTOUT_WORKSPACE': str(t / 'no-such-project')}, []

def _workspace_is_a_file(t, env):
    (t / 'notes.txt').write_text(''); return {**env, 'PASSEPARTOUT_WORKSPACE': str(t / 'notes.txt')}, []

def _workspace_not_writable(t, env):
    return env, read_only(t / 'ws')

def _workspace_of_an_unknown_user(t, env):
    return {**env, 'PASSEPARTOUT_WORKSPACE': '~no-such-user-here/project'}, []

def _current_directory_deleted(t, env):
    (t / 'gone').mkdir(); env = {k: v for k, v in env.items() if k != 'PASSEPARTOUT_WORKSPACE'}
    return env, ['sh', '-c', 'cd "$0" && rmdir "$0" && exec "$@"', str(t / 'gone')]

def _port_out_of_range(t, env):
    return {**env, 'PASSEPARTOUT_DAEMON_PORT': '70000'}, []

def _unknown_provider(t, env):
    return {**env, 'PASSEPARTOUT_PROVIDERS': 'opneai'}, []

def _bad_number(t, env):
    return {**env, 'PASSEPARTOUT_MAX_DEPTH': 'ten'}, []

def _bad_number_in_env_file(t, env):
    (t / 'home' / 'config' / '.env').write_text('PASSEPARTOUT_TIMEOUT=soon\n'); (t / 'home' / 'config' / '.env').chmod(0o600); return env, []

def _env_file_is_a_directory(t, env):
    (t / 'home' / 'config' / '.env').mkdir(mode=0o700); return env, []

def _env_file_binary(t, env):
    (t / 'home' / 'config' / '.env').write_bytes(b'OPENAI_API_KEY=sk-\xff\xfe\x00\n'); (t / 'home' / 'config' / '.env').chmod(0o600); return env, []

def _env_file_bad_line(t, env):
    (t / 'home' / 'config' / '.env').write_text('OPENAI_API_KEY=sk-secret-value\nOPENAI_MODEL gpt-4o\n')
    (t / 'home' / 'config' / '.env').chmod(0o600); return env, []

def _replay_file_missing(t, env):
    return {**env, 'PASSEPARTOUT_REPLAY_FILE': str(t / 'no-session.jsonl')}, []

def _cloud_provider_without_key(t, env):
    return {**env, 'PASSEPARTOUT_PROVIDERS': 'anthropic'}, []

def _rules_writable_by_others(t, env):
    (t / 'home' / 'config' / 'permissions.toml').write_text('# my rules\n'); (t / 'home' / 'config' / 'permissions.toml').chmod(0o666); return env, []


def _port_taken(t, env):
    held = socket.socket(); held.bind(('127.0.0.1', 0)); held.listen(); _HELD.append(held)
    return {**env, 'PASSEPARTOUT_DAEMON_PORT': str(held.getsockname()[1])}, []

_HELD = []   # sockets held while the doctor runs


@pytest.fixture(autouse=True)
def _release_held_ports():
    yield
    while _HELD: _HELD.pop().close()


def _readable(relative, content=b'secret'):
    "A store or secret file the agent keeps, left readable by others."
    def arrange(t, env):
        f = t / 'home' / relative; f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        f.write_bytes(content); f.chmod(0o644); return env, []
    return arrange


CLI_READS_BROKEN_ENV = hasattr(cli, 'CHECKS')   # the command line lets `doctor` report a .env it cannot read itself
BROKEN = [
    ('home is a file', _home_is_a_file, 'home', ['file', 'is a file, not a directory', 'set PASSEPARTOUT_HOME to a directory']),
    ('home not writable', _home_not_writable, 'home', ['cannot be created', 'is not writable', 'set PASSEPARTOUT_HOME to a directory you can write']),
    ('state directory 0755', _state_wrong_mode, 'home', ['/home/state is 0755, not 0700', 'chmod 700']),
    ('config directory is a file', _config_is_a_file, 'home', ['/home/config is a file, not a directory', 'move that file away']),
    ('data directory not writable', _data_not_writable, 'home', ['/home/data', 'not writable']),
    ('workspace missing', _workspace_missing, 'workspace', ['no-such-project does not exist', 'mkdir -p', 'set PASSEPARTOUT_WORKSPACE']),
    ('workspace is a file', _workspace_is_a_file, 'workspace', ['notes.txt is a file, not a directory', 'set PASSEPARTOUT_WORKSPACE']),
    ('workspace not writable', _workspace_not_writable, 'workspace', ['/ws is not writable', 'set PASSEPARTOUT_WORKSPACE']),
    ('workspace of an unknown user', _workspace_of_an_unknown_user, 'workspace', ['~no-such-user-here/project cannot be used', 'set PASSEPARTOUT_WORKSPACE']),
    ('current directory deleted', _current_directory_deleted, 'workspace', ['the current directory no longer exists', 'set PASSEPARTOUT_WORKSPACE']),
    ('unknown provider', _unknown_provider, 'providers', ["unknown provider 'opneai'", "did you mean 'openai'?"]),
    ('bad number', _bad_number, 'config', ["PASSEPARTOUT_MAX_DEPTH='ten'", 'such as 10 (the default)']),
    ('bad number in .env', _bad_number_in_env_file, 'config', ["PASSEPARTOUT_TIMEOUT='soon'", 'such as 60.0 (the default)']),
    ('.env is a directory', _env_file_is_a_directory, 'config', ['/.env is a directory', 'move it away']),
    pytest.param('.env not text', _env_file_binary, 'config', ['/.env is not UTF-8 text', 'rewrite it'], id='.env not text',
                 marks=pytest.mark.skipif(not CLI_READS_BROKEN_ENV, reason='the command line stops at a .env it cannot read before doctor runs')),
    ('.env line does not parse', _env_file_bad_line, 'config', ['/.env: line 2 cannot be parsed', 'write NAME=VALUE']),
    ('replay session missing', _replay_file_missing, 'providers', ['no-session.jsonl', 'PASSEPARTOUT_REPLAY_FILE']),
    ('cloud provider without key', _cloud_provider_without_key, 'providers', ['anthropic: no API key: set ANTHROPIC_API_KEY']),
    ('daemon port out of range', _port_out_of_range, None, ['PASSEPARTOUT_DAEMON_PORT=', '70000', 'set it to']),   # the daemon's check, or the settings'
    ('daemon port taken', _port_taken, 'daemon', ['is taken by another program', 'set PASSEPARTOUT_DAEMON_PORT to 0 (any free port)']),
    ('rules writable by others', _rules_writable_by_others, 'permissions', ['permissions.toml is 0666: other users can change it', 'chmod 644']),
] + [(f"{name} readable by others", _readable(name), 'permissions', [f"/home/{name} is 0644: other users can read it", f"chmod 600 "])
     for name in ('config/.env', 'config/vault.key', 'config/audit.key', 'state/daemon.token', 'data/approvals.db', 'data/audit.db',
                  'data/vault.enc', 'data/approvals.db-wal', 'data/sessions.db')]


@pytest.mark.parametrize('name, arrange, check, says', [b if hasattr(b, 'marks') else pytest.param(*b, id=b[0]) for b in BROKEN])
def test_a_broken_setup_is_a_failed_check_with_its_fix(tmp_path, home, name, arrange, check, says):
    env, prefix = arrange(tmp_path, home)
    status, out = doctor(env, '--offline', prefix=prefix)
    failed = lines(out, 'fail', check)
    assert any(all(s in f for s in says) for f in failed), f"{name}: no failed {check} check saying {says}:\n{out}"
    assert status == 1, out
    assert 'Traceback' not in out and 'the check itself failed' not in out, out


def test_a_missing_directory_is_a_warning_created_on_first_use(tmp_path, home):
    env, _ = _data_missing(tmp_path, home)
    status, out = doctor(env, '--offline')
    assert any('/home/data is not created yet' in w and '`passepartout doctor --fix` creates it now' in w for w in lines(out, 'warn', 'home')), out
    assert failures(out) == [], out


def test_a_healthy_setup_is_clear(tmp_path, home):
    status, out = doctor(home, '--offline')
    assert failures(out) == [], out
    assert lines(out, 'ok', 'home') and lines(out, 'ok', 'providers'), out
    if SANDBOX_OK: assert status == 0 and out.splitlines()[-1].startswith('doctor: 0 failed'), out


# ---- providers: ready means a real request was answered ----
def test_a_model_list_that_answers_is_not_ready_when_chat_is_refused(tmp_path, home):
    server = LLMServer('openai').add({'status': 401, 'json': {'error': {'message': 'Incorrect API key provided: sk-wr****ong'}}})
    try:
        assert httpx.get(server.url + '/models').json()['data'][0]['id'] == 'test-model'   # the list answers
        env = {**home, 'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': server.url, 'OPENAI_API_KEY': 'sk-wrong'}
        status, out = doctor(env)
        [finding] = lines(out, 'fail', 'providers')
        assert 'HTTP 401' in finding and 'the key in OPENAI_API_KEY was refused' in finding, out
        assert status == 1
        chat = [r for r in server.requests if r['method'] == 'POST']
        assert [r['path'] for r in chat] == ['/v1/chat/completions'] and chat[0]['json']['max_tokens'] == 1
        assert chat[0]['headers']['authorization'] == 'Bearer sk-wrong' and 'sk-wrong' not in out
    finally: server.close()


@pytest.mark.parametrize('kind', ['openai', 'ollama', 'anthropic'])
def test_a_provider_that_answers_is_ready(tmp_path, home, kind):
    server = LLMServer(kind)
    variables = {'openai': {'OPENAI_BASE_URL': server.url, 'OPENAI_API_KEY': 'sk-test'}, 'ollama': {'OLLAMA_HOST': server.url},
                 'anthropic': {'ANTHROPIC_BASE_URL': server.url, 'ANTHROPIC_API_KEY': 'sk-ant-test'}}[kind]
    try:
        status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': kind, **variables})
        [ready] = lines(out, 'ok', 'providers')
        assert ready.startswith(f'{kind}: ready (') and 'answered a 1-token request' in ready, out
        body = server.requests[-1]['json']
        assert (body['options']['num_predict'] if kind == 'ollama' else body['max_tokens']) == 1
        assert failures(out) == [], out
        if SANDBOX_OK: assert status == 0, out
    finally: server.close()


@pytest.mark.parametrize('kind, response, says', [
    ('anthropic', {'status': 403, 'json': {'type': 'error', 'error': {'type': 'permission_error', 'message': 'key disabled'}}},
     ['HTTP 403', 'the key in ANTHROPIC_API_KEY was refused']),
    ('ollama', {'status': 404, 'json': {'error': 'model "llama3.2" not found, try pulling it first'}}, ['HTTP 404', 'check OLLAMA_MODEL', 'OLLAMA_HOST']),
    ('openai', {'status': 429, 'json': {'error': {'message': 'You exceeded your current quota'}}}, ['HTTP 429', 'rate limited or out of quota']),
    ('openai', {'status': 503, 'json': {'error': {'message': 'overloaded'}}}, ['HTTP 503', 'the server is up but failing']),
    ('openai', {'body': b'<html>a login page</html>'}, ['not JSON', 'check that OPENAI_BASE_URL points at the API itself']),
])
def test_a_refusal_names_what_to_change(tmp_path, home, kind, response, says):
    server = LLMServer(kind).add(response)
    variables = {'openai': {'OPENAI_BASE_URL': server.url, 'OPENAI_API_KEY': 'sk-test'}, 'ollama': {'OLLAMA_HOST': server.url},
                 'anthropic': {'ANTHROPIC_BASE_URL': server.url, 'ANTHROPIC_API_KEY': 'sk-ant-test'}}[kind]
    try:
        status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': kind, **variables})
        [finding] = lines(out, 'fail', 'providers')
        assert all(s in finding for s in says), out
        assert status == 1
    finally: server.close()


def test_nothing_listening_names_the_url_and_its_variable(tmp_path, home):
    server = LLMServer('ollama'); url = server.url; server.close()   # a port that was just free
    status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': 'ollama', 'OLLAMA_HOST': url})
    [finding] = lines(out, 'fail', 'providers')
    assert f'nothing answers at {url}' in finding and finding.endswith('start the server, or correct OLLAMA_HOST'), out
    assert status == 1


@pytest.mark.parametrize('url', ['127.0.0.1:8000/v1', 'http://[::1'])
def test_a_url_that_cannot_be_used_names_its_variable(tmp_path, home, url):
    status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': 'openai,replay', 'OPENAI_BASE_URL': url})
    [finding] = lines(out, 'fail', 'providers')
    assert finding.startswith('openai: ') and finding.endswith('check OPENAI_BASE_URL'), out
    assert lines(out, 'ok', 'providers'), out   # the other provider is still checked
    assert status == 1


def test_a_slow_provider_is_not_ready_within_the_timeout(tmp_path, home):
    server = LLMServer('openai').add({'delay': 3, 'json': {}})
    try:
        status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': server.url}, '--timeout', '0.5')
        [finding] = lines(out, 'fail', 'providers')
        assert 'within 0.5 s' in finding and '--timeout' in finding, out
        assert status == 1
    finally: server.close()


def test_offline_touches_no_network(tmp_path, home):
    server = LLMServer('openai')
    try:
        status, out = doctor({**home, 'PASSEPARTOUT_PROVIDERS': 'openai,replay', 'OPENAI_BASE_URL': server.url}, '--offline')
        assert server.requests == [], server.requests
        [skipped] = lines(out, 'skip', 'providers')
        assert skipped.startswith('openai: not asked (network checks skipped'), out
        assert lines(out, 'ok', 'providers')[0].startswith('replay: ready offline'), out   # the replay provider needs no network
        assert out.splitlines()[-1].endswith('1 skipped'), out
        if SANDBOX_OK: assert status == 0, out
    finally: server.close()


# ---- --fix ----
def _digest(root):
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(root.rglob('*')) if f.is_file()}


def test_fix_repairs_modes_and_directories_and_nothing_else(tmp_path, home):
    h = tmp_path / 'home'
    subprocess.run([*CLI, 'send', 'hello'], env={**{k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARIABLES)}, **home},
                   capture_output=True, timeout=120)   # real stores: approvals, audit log
    assert (h / 'data' / 'audit.db').exists()
    (h / 'config' / '.env').write_text('OPENAI_MODEL=gpt-4o\n'); (h / 'config' / 'vault.key').write_bytes(os.urandom(32))
    (h / 'config' / 'permissions.toml').write_text('# rules\n'); (h / 'config' / 'skills').mkdir(exist_ok=True)   # build_agent makes it, to watch it
    for f in h.rglob('*'): f.chmod(0o755 if f.is_dir() else 0o666)
    shutil.rmtree(h / 'state')
    before = _digest(h)

    status, out = doctor(home, '--offline')
    assert status == 1 and len(lines(out, 'fail', 'permissions')) >= 6 and lines(out, 'fail', 'home'), out

    status, out = doctor(home, '--fix', '--offline')
    fixed = lines(out, 'fixed')
    assert f"created {h}/state (mode 0700)" in fixed and f"chmod 700 {h}/data (was 0755)" in fixed, out
    assert f"chmod 600 {h}/data/audit.db (was 0666)" in fixed and f"chmod 600 {h}/config/.env (was 0666)" in fixed, out
    assert f"chmod 644 {h}/config/permissions.toml (was 0666)" in fixed and f"chmod 700 {h}/config/skills (was 0755)" in fixed, out
    assert failures(out) == [], out

    after = _digest(h)   # nothing deleted, moved or rewritten; new files are only SQLite's own (a reader of a WAL database makes them)
    assert {k: after.get(k) for k in before} == before and all(k.endswith(('-wal', '-shm')) for k in set(after) - set(before)), (before, after)
    for f in h.rglob('*'):   # stores, secrets and directories the owner's alone; the owner's rules readable, not writable
        mode = f.stat().st_mode & 0o777
        assert not mode & (0o022 if f.name == 'permissions.toml' else 0o077), (f, oct(mode))
    status, out = doctor(home, '--offline')
    assert failures(out) == [] and lines(out, 'fixed') == [], out
    if SANDBOX_OK: assert status == 0, out


def test_fix_does_not_touch_a_home_that_is_a_file(tmp_path, home):
    (tmp_path / 'file').write_text('my notes\n')
    status, out = doctor({**home, 'PASSEPARTOUT_HOME': str(tmp_path / 'file')}, '--fix', '--offline')
    assert status == 1 and lines(out, 'fixed') == [] and any('is a file, not a directory' in f for f in lines(out, 'fail', 'home')), out
    assert (tmp_path / 'file').read_text() == 'my notes\n'


def test_a_secret_in_a_line_that_does_not_parse_is_not_shown(tmp_path, home):
    (tmp_path / 'home' / 'config' / '.env').write_text('OPENAI_API_KEY sk-live-DO-NOT-SHOW\n'); (tmp_path / 'home' / 'config' / '.env').chmod(0o600)
    status, out = doctor(home, '--offline')
    assert 'sk-live-DO-NOT-SHOW' not in out and any('line 1 cannot be parsed' in f for f in lines(out, 'fail', 'config')), out


def _open_paths(prefix) -> list:
    "The files this process holds open whose path starts with `prefix`."
    fds = '/proc/self/fd'
    out = []
    for fd in os.listdir(fds):
        try: target = os.readlink(f'{fds}/{fd}')
        except OSError: continue
        if target.startswith(str(prefix)): out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir('/proc/self/fd'), reason='needs /proc')
def test_the_store_check_leaves_no_connection_open(tmp_path):
    "`daemon start` runs the checks in the daemon's process: a connection left open there hid the daemon's later writes from other processes."
    import contextlib, sqlite3
    from passepartout.doctor import check_stores
    with contextlib.closing(sqlite3.connect(tmp_path / 'sessions.db')) as db:
        db.execute('PRAGMA journal_mode=WAL'); db.execute('create table t(x)'); db.commit()
    assert [f.status for f in check_stores(tmp_path)] == ['ok']
    assert _open_paths(tmp_path) == []


def test_a_daemon_started_on_a_home_with_stores_keeps_its_sessions_visible(tmp_path):
    "The daemon's sessions stay readable by other processes however often they open and close the store (it once lost them)."
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PASSEPARTOUT_', 'OPENAI_'))}
    env.update(PASSEPARTOUT_HOME=str(tmp_path / 'home'), PASSEPARTOUT_WORKSPACE=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')]))
    run = lambda *a: subprocess.run([*CLI, *a], env=env, capture_output=True, text=True, timeout=120)
    run('send', '--session', 'before', 'hello')   # the stores exist before the daemon starts (the offline replay answers, or says why not)
    assert run('daemon', 'start', '--port', '0').returncode == 0
    try:
        for name in ('one', 'two', 'three'):
            run('send', '--session', name, 'hello')
            listed = run('sessions').stdout                                # opens and closes the store in another process
            assert name in listed, (name, listed)
    finally: run('daemon', 'stop')


# ---- gateways: checked when configured ----
def _vault_with(env, name, value):
    "Store secret `name` in the vault of the home `env` names (as `passepartout vault add` would)."
    r = subprocess.run([sys.executable, '-c', f"from passepartout.vault import Vault; Vault().add({name!r}, {value!r})"],
                       env={**os.environ, **env, 'PYTHONPATH': ROOT}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_gateways_that_are_not_configured_are_not_mentioned(tmp_path, home):
    status, out = doctor(home, '--offline')
    assert not lines(out, 'ok', 'telegram') + lines(out, 'fail', 'telegram') + lines(out, 'ok', 'signal') + lines(out, 'warn', 'signal'), out


def test_telegram_without_a_token_and_with_a_refused_one(tmp_path, home):
    from telegram_server import BotAPIServer
    with BotAPIServer() as server:
        env = {**home, 'PASSEPARTOUT_TELEGRAM_OWNERS': '1001', 'PASSEPARTOUT_TELEGRAM_API': server.url}
        status, out = doctor(env, '--offline')
        assert lines(out, 'fail', 'telegram') == ["no Telegram bot token: store it with `passepartout vault add TELEGRAM_TOKEN` (the vault has no secret TELEGRAM_TOKEN)"], out
        assert status == 1
        _vault_with(env, 'TELEGRAM_TOKEN', 'revoked:token')
        status, out = doctor(env)
        [refused] = lines(out, 'fail', 'telegram')
        assert refused.startswith('getMe: 401') and 'replace it with `passepartout vault add TELEGRAM_TOKEN`' in refused and 'revoked' not in out, out
        _vault_with(env, 'TELEGRAM_TOKEN', server.token)
        server._m_getMe = lambda body: (200, {'ok': True, 'result': {'id': 1, 'is_bot': True, 'username': 'my_agent_bot'}})
        status, out = doctor(env)
        assert lines(out, 'ok', 'telegram') == [f"the bot @my_agent_bot answers at {server.url}; 1 owner ids"], out


def test_signal_cli_missing_or_unreachable_is_said_clearly(tmp_path, home):
    from signal_server import SignalCLIServer, ACCOUNT
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    env = {**home, 'PASSEPARTOUT_SIGNAL_OWNERS': '+4915112345678', 'PASSEPARTOUT_SIGNAL_URL': f'http://127.0.0.1:{port}'}
    status, out = doctor(env, '--offline')
    assert lines(out, 'fail', 'signal')[0].startswith('no Signal account: store the agent\'s number with `passepartout vault add SIGNAL_ACCOUNT`'), out
    _vault_with(env, 'SIGNAL_ACCOUNT', ACCOUNT)
    no_program = {**env, 'PATH': str(tmp_path)}   # no signal-cli on PATH
    status, out = doctor(no_program, '--offline', prefix=())
    [warned] = lines(out, 'warn', 'signal')
    assert warned.startswith('signal-cli is not installed here (not on PATH)') and f'signal-cli -a {ACCOUNT} daemon --http 127.0.0.1:{port}' in warned, out
    status, out = doctor(no_program)
    [failed] = lines(out, 'fail', 'signal')
    assert failed.startswith(f'signal-cli is not installed (not on PATH) and nothing answers at http://127.0.0.1:{port} (ConnectError)'), out
    with SignalCLIServer(port=port):
        status, out = doctor(no_program)
        assert lines(out, 'ok', 'signal') == [f"signal-cli answers at http://127.0.0.1:{port}; 1 owners"], out
