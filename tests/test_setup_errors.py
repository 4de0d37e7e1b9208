"""A table of broken setups, each run through the real command line in a subprocess: every one ends in
ONE line on stderr naming the setting (or file) and the bad value, exit status 2, and no traceback;
`--debug` and PASSEPARTOUT_DEBUG=1 show the traceback. Then the daemon's port: any free port by
default, so two homes run a daemon each at once, and an explicit port in use is one sentence."""
import json, os, socket, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from passepartout.cli import main; main()']
ROOT_USER = os.geteuid() == 0


def _bwrap_works() -> bool:
    try: return subprocess.run(['bwrap', '--dev-bind', '/', '/', 'true'], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired): return False

BWRAP = _bwrap_works()


def read_only(path) -> list:
    "A command prefix under which `path` is read-only (a read-only mount: it holds even for root)."
    return ['bwrap', '--dev-bind', '/', '/', '--ro-bind', str(path), str(path)]


class Setup:
    "One broken setup in a temporary directory: a home, a workspace, the environment to run with."
    def __init__(self, tmp:Path):
        self.tmp, self.home, self.ws = tmp, tmp / 'home', tmp / 'ws'
        self.ws.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(('PASSEPARTOUT_', 'OPENAI_', 'ANTHROPIC_', 'OLLAMA_', 'OPENROUTER_'))}
        self.env.update(PYTHONPATH=str(ROOT), PASSEPARTOUT_HOME=str(self.home), PASSEPARTOUT_WORKSPACE=str(self.ws))
        self.prefix = []
    def dotenv(self, data:bytes|str):
        (self.home / 'config').mkdir(parents=True, exist_ok=True)
        f = self.home / 'config' / '.env'
        f.write_bytes(data if isinstance(data, bytes) else data.encode())
        return f


def run(setup:Setup, args, stdin='') -> subprocess.CompletedProcess:
    return subprocess.run(setup.prefix + CLI + list(args), input=stdin, capture_output=True, text=True, env=setup.env,
                          cwd=setup.ws, timeout=120)


# -- the broken setups: how to break it, then what the sentence must name ---------------------------------------

def env(**kw): return lambda s: s.env.update(kw)

def dotenv(data): return lambda s: s.dotenv(data)

def home_is_a_file(s): s.home.write_text('not a directory')

def home_under_a_file(s):
    (s.tmp / 'file').write_text('x'); s.env['PASSEPARTOUT_HOME'] = str(s.tmp / 'file' / 'home')

def home_read_only_empty(s):
    if not BWRAP: pytest.skip('bubblewrap cannot mount here')
    s.home.mkdir(); s.prefix = read_only(s.home)

def home_read_only(s):
    if not BWRAP: pytest.skip('bubblewrap cannot mount here')
    for d in ('config', 'data', 'state'): (s.home / d).mkdir(parents=True)
    s.prefix = read_only(s.home)

def dotenv_unreadable(s):
    if ROOT_USER: pytest.skip('root reads any file')
    s.dotenv('PASSEPARTOUT_MAX_DEPTH=3\n').chmod(0)

def dotenv_dangling(s):   # unreadable even for root: the same branch as a permission error
    (s.home / 'config').mkdir(parents=True); (s.home / 'config' / '.env').symlink_to(s.tmp / 'gone.env')

def dotenv_directory(s): (s.home / 'config' / '.env').mkdir(parents=True)

def workspace_missing(s): s.env['PASSEPARTOUT_WORKSPACE'] = str(s.tmp / 'nowhere')

def workspace_a_file(s):
    (s.tmp / 'ws.txt').write_text('x'); s.env['PASSEPARTOUT_WORKSPACE'] = str(s.tmp / 'ws.txt')

def workspace_read_only(s):
    if not BWRAP: pytest.skip('bubblewrap cannot mount here')
    s.prefix = read_only(s.ws)

ENV_FILE = '{home}/config/.env'
KNOWN = 'openai, openrouter, anthropic, ollama, replay'

CASES = [   # id, break, command, stdin, what the one line must contain
    ('provider-send', env(PASSEPARTOUT_PROVIDERS='opnai'), ['send', 'hi'], '', ['PASSEPARTOUT_PROVIDERS', "'opnai'", KNOWN]),
    ('provider-chat', env(PASSEPARTOUT_PROVIDERS='openai,opnai'), ['chat'], 'hi\n', ['PASSEPARTOUT_PROVIDERS', "'opnai'", KNOWN]),
    ('provider-mode', env(PASSEPARTOUT_PROVIDERS='ollama:txt'), ['send', 'hi'], '', ['PASSEPARTOUT_PROVIDERS', 'ollama:txt', 'text or native']),
    ('provider-in-dotenv', dotenv('PASSEPARTOUT_PROVIDERS=opnai\n'), ['approvals'], '', ['PASSEPARTOUT_PROVIDERS', "'opnai'", KNOWN]),
    ('provider-daemon', env(PASSEPARTOUT_PROVIDERS='opnai'), ['daemon', 'start'], '', ['PASSEPARTOUT_PROVIDERS', "'opnai'"]),
    ('configure-provider', None, ['configure', '--set', 'PASSEPARTOUT_PROVIDERS=opnai'], '', ['PASSEPARTOUT_PROVIDERS', "'opnai'", KNOWN]),
    ('configure-number', None, ['configure', '--set', 'PASSEPARTOUT_MAX_DEPTH=ten'], '', ['PASSEPARTOUT_MAX_DEPTH', "'ten'"]),
    ('configure-unknown-name', None, ['configure', '--set', 'PASSEPARTOUT_MAX_DEPHT=3'], '', ['PASSEPARTOUT_MAX_DEPHT', 'nothing was written']),
    ('number-send', env(PASSEPARTOUT_MAX_DEPTH='ten'), ['send', 'hi'], '', ['PASSEPARTOUT_MAX_DEPTH', "'ten'", 'whole number']),
    ('number-chat', env(PASSEPARTOUT_SHELL_TIMEOUT='-5'), ['chat'], 'hi\n', ['PASSEPARTOUT_SHELL_TIMEOUT', "'-5'"]),
    ('number-in-dotenv', dotenv('PASSEPARTOUT_TIMEOUT=soon\n'), ['approvals'], '', ['PASSEPARTOUT_TIMEOUT', "'soon'"]),
    ('number-daemon', env(PASSEPARTOUT_HEARTBEAT_INTERVAL='often'), ['daemon', 'start'], '', ['PASSEPARTOUT_HEARTBEAT_INTERVAL', "'often'"]),
    ('port-too-big', env(PASSEPARTOUT_DAEMON_PORT='70000'), ['daemon', 'start'], '', ['PASSEPARTOUT_DAEMON_PORT', "'70000'", '65535']),
    ('consensus', env(PASSEPARTOUT_PROVIDERS='replay', PASSEPARTOUT_CONSENSUS='2'), ['send', 'hi'], '', ['PASSEPARTOUT_CONSENSUS=2', 'PASSEPARTOUT_PROVIDERS']),
    ('selector', env(PASSEPARTOUT_MODEL_SELECTOR='no_such_module:pick'), ['send', 'hi'], '', ['PASSEPARTOUT_MODEL_SELECTOR', 'no_such_module:pick']),
    ('record-file', env(PASSEPARTOUT_RECORD_FILE='/proc/none/calls.jsonl'), ['send', 'hi'], '', ['PASSEPARTOUT_RECORD_FILE=/proc/none/calls.jsonl']),
    ('prices-file', env(PASSEPARTOUT_PRICES='/no/prices.json'), ['send', 'hi'], '', ['PASSEPARTOUT_PRICES', '/no/prices.json']),
    ('dotenv-binary', dotenv(b'PASSEPARTOUT_MAX_DEPTH=3\n\xff\xfe\x00\x01'), ['send', 'hi'], '', [ENV_FILE, 'not UTF-8']),
    ('dotenv-nul', dotenv(b'PASSEPARTOUT_MAX_DEPTH=3\x00\n'), ['chat'], 'hi\n', [ENV_FILE, 'NUL']),
    ('dotenv-garbage', dotenv('PASSEPARTOUT_MAX_DEPTH=3\nthis is not a setting\n'), ['approvals'], '', [ENV_FILE, 'line 2', 'this is not a setting']),
    ('dotenv-directory', dotenv_directory, ['approvals'], '', [ENV_FILE, 'is a directory']),
    ('dotenv-directory-configure', dotenv_directory, ['configure', '--set', 'PASSEPARTOUT_MAX_DEPTH=3'], '', [ENV_FILE, 'is a directory']),
    ('dotenv-unreadable', dotenv_unreadable, ['send', 'hi'], '', [ENV_FILE, 'Permission denied']),
    ('dotenv-dangling-link', dotenv_dangling, ['approvals'], '', [ENV_FILE, 'cannot be read (No such file or directory)']),
    ('home-file-send', home_is_a_file, ['send', 'hi'], '', ['PASSEPARTOUT_HOME={home}', 'is a file']),
    ('home-file-chat', home_is_a_file, ['chat'], 'hi\n', ['PASSEPARTOUT_HOME={home}', 'is a file']),
    ('home-file-approvals', home_is_a_file, ['approvals'], '', ['PASSEPARTOUT_HOME={home}', 'is a file']),
    ('home-file-configure', home_is_a_file, ['configure', '--set', 'PASSEPARTOUT_MAX_DEPTH=3'], '', ['PASSEPARTOUT_HOME={home}', 'is a file']),
    ('home-file-daemon', home_is_a_file, ['daemon', 'start'], '', ['PASSEPARTOUT_HOME={home}', 'is a file']),
    ('home-under-a-file', home_under_a_file, ['send', 'hi'], '', ['PASSEPARTOUT_HOME={tmp}/file/home', '{tmp}/file is a file']),
    ('home-no-user', env(PASSEPARTOUT_HOME='~no-such-user-here/pp'), ['approvals'], '', ['PASSEPARTOUT_HOME', '~no-such-user-here/pp']),
    ('home-read-only-empty', home_read_only_empty, ['send', 'hi'], '', ['PASSEPARTOUT_HOME={home}', 'cannot be created (Read-only file system)']),
    ('home-read-only-approvals', home_read_only, ['approvals'], '', ['PASSEPARTOUT_HOME={home}', 'is not writable']),
    ('home-read-only-daemon', home_read_only, ['daemon', 'start'], '', ['PASSEPARTOUT_HOME={home}', 'is not writable']),
    ('workspace-missing-send', workspace_missing, ['send', 'hi'], '', ['PASSEPARTOUT_WORKSPACE={tmp}/nowhere', 'does not exist']),
    ('workspace-missing-chat', workspace_missing, ['chat'], 'hi\n', ['PASSEPARTOUT_WORKSPACE={tmp}/nowhere', 'does not exist']),
    ('workspace-missing-daemon', workspace_missing, ['daemon', 'start'], '', ['PASSEPARTOUT_WORKSPACE={tmp}/nowhere', 'does not exist']),
    ('workspace-a-file', workspace_a_file, ['send', 'hi'], '', ['PASSEPARTOUT_WORKSPACE={tmp}/ws.txt', 'not a directory']),
    ('workspace-read-only', workspace_read_only, ['send', 'hi'], '', ['PASSEPARTOUT_WORKSPACE={tmp}/ws', 'not writable']),
]


@pytest.mark.parametrize('name,breaks,args,stdin,wanted', CASES, ids=[c[0] for c in CASES])
def test_broken_setup_is_one_sentence(tmp_path, name, breaks, args, stdin, wanted):
    s = Setup(tmp_path)
    if breaks: breaks(s)
    before = {p: p.read_bytes() for p in tmp_path.rglob('*') if p.is_file()}
    r = run(s, args, stdin)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith('Error: '), r.stderr
    assert 'Traceback' not in r.stdout + r.stderr
    for w in wanted: assert w.format(home=s.home, tmp=tmp_path) in lines[0], (w, lines[0])
    if args[0] == 'configure':   # a refused configure leaves what was there as it was
        assert {p: p.read_bytes() for p in tmp_path.rglob('*') if p.is_file()} == before


def test_debug_shows_the_traceback(tmp_path):
    s = Setup(tmp_path); s.env['PASSEPARTOUT_PROVIDERS'] = 'opnai'
    for args, extra in ((['--debug', 'send', 'hi'], {}), (['send', 'hi'], {'PASSEPARTOUT_DEBUG': '1'})):
        s.env.update(extra)
        r = run(s, args)
        assert r.returncode == 2, r.stderr
        assert 'Traceback (most recent call last)' in r.stderr and 'SetupError' in r.stderr, r.stderr
        assert r.stderr.splitlines()[-1].startswith("Error: PASSEPARTOUT_PROVIDERS='opnai' names an unknown provider"), r.stderr


def test_configure_still_fixes_a_bad_value(tmp_path):
    "A wrong number in .env stops every command but configure, which is how it gets fixed."
    s = Setup(tmp_path); s.dotenv('PASSEPARTOUT_MAX_DEPTH=ten\n')
    assert run(s, ['approvals']).returncode == 2
    r = run(s, ['configure', '--set', 'PASSEPARTOUT_MAX_DEPTH=12'])
    assert r.returncode == 0, r.stderr
    r = run(s, ['approvals'])
    assert r.returncode == 0 and r.stderr == '', r.stderr


# -- the daemon's port ---------------------------------------------------------------------------------------------

def _stop(s):
    return subprocess.run(CLI + ['daemon', 'stop'], capture_output=True, text=True, env=s.env, timeout=60)


def test_two_homes_each_start_a_daemon_at_once(tmp_path):
    "No port chosen: each daemon takes a free one, records it, and its clients find it there."
    homes = []
    for n in (1, 2):
        (tmp_path / str(n)).mkdir(); homes.append(Setup(tmp_path / str(n)))
    procs = [subprocess.Popen(CLI + ['daemon', 'start'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=s.env) for s in homes]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err), s in zip(procs, outs, homes):
            assert p.returncode == 0, err + (s.home / 'state' / 'daemon.log').read_text()
        ports = [int((s.home / 'state' / 'daemon.port').read_text().split()[1]) for s in homes]
        assert ports[0] != ports[1] and all(p > 0 for p in ports)
        for s, port, (out, _) in zip(homes, ports, outs):
            assert out.strip().endswith(f"listening on 127.0.0.1:{port}"), out
            st = subprocess.run(CLI + ['daemon', 'status', '--json'], capture_output=True, text=True, env=s.env, timeout=60)
            assert st.returncode == 0 and json.loads(st.stdout)['port'] == port, st.stderr
    finally:
        for s in homes: _stop(s)


def test_a_port_in_use_is_one_sentence(tmp_path):
    taken = socket.socket(); taken.bind(('127.0.0.1', 0)); taken.listen()
    port = taken.getsockname()[1]
    try:
        for how in ('setting', 'option'):
            (tmp_path / how).mkdir(); s = Setup(tmp_path / how)
            args = ['daemon', 'start']
            if how == 'setting': s.env['PASSEPARTOUT_DAEMON_PORT'] = str(port)
            else: args += ['--port', str(port)]
            r = run(s, args)
            try:
                assert r.returncode == 2, (r.stdout, r.stderr)
                lines = r.stderr.splitlines()
                assert len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr
                assert f"127.0.0.1:{port} (Address already in use)" in lines[0] and 'PASSEPARTOUT_DAEMON_PORT' in lines[0], lines[0]
            finally: _stop(s)
    finally: taken.close()


def test_help_works_with_a_broken_setup(tmp_path):
    "How to use a command is shown whatever the setup: `--help` runs no checks."
    s = Setup(tmp_path); home_is_a_file(s); s.env['PASSEPARTOUT_MAX_DEPTH'] = 'ten'
    for args in (['--help'], ['send', '--help'], ['daemon', 'start', '--help'], ['--version']):
        r = run(s, args)
        assert r.returncode == 0 and r.stderr == '' and r.stdout, (args, r.stderr)
