"""The sandbox, attacked for real: every test tries an escape and checks that it fails."""
import os, socket, threading, time, uuid
from pathlib import Path
import pytest
from passepartout import sandbox
from passepartout.sandbox import run_sandboxed, sandbox_available, scrubbed_env, ShellResult, SandboxUnavailable

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no usable sandbox: {sandbox.sandbox_problem()}")


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'pphome'))
    w = tmp_path / 'ws'; w.mkdir()
    return w


def run(cmd, ws, **kw) -> ShellResult:
    return run_sandboxed(cmd, ws, timeout=kw.pop('timeout', 20), **kw)


def test_workspace_is_writable_and_cwd(ws):
    r = run('pwd && echo hi > out.txt && mkdir -p a/b && echo x > a/b/c && cat out.txt', ws)
    assert r.exit_code == 0, r
    assert r.stdout == f"{ws.resolve()}\nhi\n"
    assert (ws / 'out.txt').read_text() == 'hi\n' and (ws / 'a/b/c').read_text() == 'x\n'


@pytest.mark.parametrize('target', ['/etc/passwd', '/etc/pp-evil', '/usr/pp-evil', '/usr/bin/pp-evil', '/bin/pp-evil',
                                    '/root/pp-evil', '/home/pp-evil', '/pp-evil', '/var/pp-evil', '/work/pp-evil'])
def test_writes_outside_the_workspace_fail(ws, target):
    before = Path(target).read_bytes() if Path(target).is_file() else None
    r = run(f'echo pwned > {target}', ws)
    assert r.exit_code != 0, r
    if before is None: assert not Path(target).exists()
    else: assert Path(target).read_bytes() == before


def test_kernel_settings_are_the_sandbox_own(ws):
    before = Path('/proc/sys/kernel/hostname').read_text()
    run('echo pwned > /proc/sys/kernel/hostname; hostname pwned', ws)   # at most its own UTS namespace
    assert Path('/proc/sys/kernel/hostname').read_text() == before


def test_global_kernel_settings_are_read_only(ws):
    # as root, a writable /proc/sys/kernel/core_pattern is a host escape: writing back the same value must fail
    before = Path('/proc/sys/kernel/core_pattern').read_text()
    r = run('v=$(cat /proc/sys/kernel/core_pattern); printf "%s" "$v" > /proc/sys/kernel/core_pattern; echo rc=$?', ws)
    assert 'rc=1' in r.stdout and 'Read-only file system' in r.stderr, r
    assert Path('/proc/sys/kernel/core_pattern').read_text() == before


def test_no_nested_user_namespaces(ws):
    if '--disable-userns' not in sandbox._no_nested_userns(sandbox.shutil.which('bwrap')): pytest.skip('bubblewrap < 0.8')
    r = run('unshare -Ur true 2>&1; echo rc=$?; unshare -Urm mount -o remount,rw /usr 2>&1; touch /usr/pp-evil 2>&1', ws)
    assert 'rc=0' not in r.stdout and not Path('/usr/pp-evil').exists(), r


def test_tmp_is_private_and_not_persistent(ws, tmp_path):
    marker = f'/tmp/pp-{uuid.uuid4().hex}'
    assert run(f'echo x > {marker} && cat {marker}', ws).stdout == 'x\n'
    assert not Path(marker).exists()
    # the host's /tmp (outside the workspace) is not visible either
    (tmp_path / 'outside.txt').write_text('host secret')
    r = run(f'cat {tmp_path}/outside.txt', ws)
    assert r.exit_code != 0 and 'host secret' not in r.stdout


def test_remount_and_privileges_fail(ws):
    # as root, bubblewrap keeps capabilities unless told otherwise: a remount would make /usr writable
    r = run('mount -o remount,rw /usr 2>&1; touch /usr/pp-evil 2>&1; grep CapEff /proc/self/status', ws)
    assert not Path('/usr/pp-evil').exists()
    assert 'CapEff:\t0000000000000000' in r.stdout, r.stdout


def test_real_home_and_keys_are_invisible(ws):
    home = Path.home()
    r = run(f'ls -la {home} 2>&1; cat {home}/.ssh/* 2>&1; ls ~ 2>&1; cat /etc/shadow 2>&1; ls /etc', ws)
    assert 'No such file' in r.stdout
    assert 'BEGIN' not in r.stdout and 'root:' not in r.stdout.split('shadow')[-1][:50]
    etc = r.stdout.split()
    assert 'shadow' not in etc and 'sudoers' not in etc and 'pip.conf' not in etc and 'passwd' in etc


def test_secrets_inside_the_workspace_are_masked(ws, tmp_path, monkeypatch):
    (ws / '.ssh').mkdir(); (ws / '.ssh' / 'id_ed25519').write_text('PRIVATE KEY')
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(ws / 'pp'))
    (ws / 'pp' / 'config').mkdir(parents=True); (ws / 'pp' / 'config' / 'permissions.toml').write_text('allow all = false')
    r = run('cat .ssh/id_ed25519 pp/config/permissions.toml 2>&1; echo x > pp/config/permissions.toml; rm -rf .ssh pp 2>&1', ws)
    assert 'PRIVATE KEY' not in r.stdout and 'allow all' not in r.stdout
    assert (ws / '.ssh' / 'id_ed25519').read_text() == 'PRIVATE KEY'
    assert (ws / 'pp' / 'config' / 'permissions.toml').read_text() == 'allow all = false'


def test_env_secrets_are_not_visible(ws, monkeypatch):
    secrets = {'OPENAI_API_KEY': 'sk-openai-SECRET', 'ANTHROPIC_API_KEY': 'sk-ant-SECRET', 'AWS_SECRET_ACCESS_KEY': 'aws-SECRET',
               'GITHUB_TOKEN': 'ghp_SECRET', 'DB_PASSWORD': 'pw-SECRET', 'PASSEPARTOUT_TELEGRAM_TOKEN': 'tg-SECRET',
               'DATABASE_URL': 'postgres://u:SECRET@h/db'}
    for k, v in secrets.items(): monkeypatch.setenv(k, v)
    r = run('env; cat /proc/self/environ; cat /proc/1/environ', ws)
    assert r.exit_code == 0
    assert 'SECRET' not in r.stdout + r.stderr
    names = {line.split('=', 1)[0] for line in r.stdout.splitlines() if '=' in line}
    assert not names & set(secrets)
    assert 'PATH' in names and 'HOME' in names


def test_scrubbed_env_allowlist():
    env = scrubbed_env({'LANG': 'C.UTF-8', 'TERM': 'xterm', 'HF_TOKEN': 'x', 'MY_API_KEY': 'y', 'LD_PRELOAD': '/evil.so',
                        'PYTHONPATH': '/evil', 'BASH_ENV': '/evil.sh'})
    assert set(env) == {'LANG', 'TERM', 'PATH', 'HOME'}


@pytest.fixture
def loopback_server():
    srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(5)
    accepted = []
    def serve():
        while True:
            try: c, _ = srv.accept()
            except OSError: return
            accepted.append(1); c.sendall(b'hello from host\n'); c.close()
    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1], accepted
    srv.close()


NET_PROBE = ("python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), timeout=3); print(s.recv(100).decode())\"; "
             "exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3")


def test_network_is_unreachable_by_default(ws, loopback_server):
    port, accepted = loopback_server
    r = run(NET_PROBE.format(port=port), ws)
    assert 'hello from host' not in r.stdout and r.exit_code != 0
    assert 'refused' in r.stderr.lower() or 'unreachable' in r.stderr.lower(), r.stderr
    assert accepted == []
    # no interfaces but the sandbox's own loopback
    r = run('cat /proc/net/dev', ws)
    ifaces = {l.split(':')[0].strip() for l in r.stdout.splitlines()[2:]}
    assert ifaces <= {'lo'}, ifaces


def test_network_when_allowed(ws, loopback_server):
    port, accepted = loopback_server
    r = run(NET_PROBE.format(port=port), ws, network=True)
    assert r.stdout.count('hello from host') == 2, r
    assert len(accepted) == 2


def test_network_setting(ws, loopback_server, monkeypatch):
    port, accepted = loopback_server
    monkeypatch.setenv('PASSEPARTOUT_SHELL_NETWORK', '1')
    assert 'hello from host' in run(NET_PROBE.format(port=port), ws).stdout


def _alive(marker:str) -> list:
    "Pids of processes whose command line contains `marker`."
    pids = []
    for p in Path('/proc').iterdir():
        if not p.name.isdigit(): continue
        try: cmd = (p / 'cmdline').read_bytes().replace(b'\0', b' ').decode()
        except OSError: continue
        try: state = next(l for l in (p / 'status').read_text().splitlines() if l.startswith('State:'))
        except (OSError, StopIteration): continue
        if marker in cmd and 'zombie' not in state: pids.append(int(p.name))
    return pids


def test_timeout_kills_the_whole_tree(ws):
    n = f"{4000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"   # a unique sleep duration to find the processes
    t0 = time.monotonic()
    r = run(f'sleep {n} & nohup sleep {n} >/dev/null 2>&1 & setsid sleep {n} & (sleep {n} &) ; sleep {n}', ws, timeout=1)
    assert r.timed_out and r.exit_code is None
    assert time.monotonic() - t0 < 6
    time.sleep(0.3)
    assert _alive(f'sleep {n}') == []


def test_timeout_setting(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_TIMEOUT', '0.5')
    r = run_sandboxed('sleep 60', ws)
    assert r.timed_out and r.duration_s < 5


def test_background_process_does_not_outlive_command(ws):
    n = f"{5000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    r = run(f'nohup sleep {n} >/dev/null 2>&1 & echo started', ws)
    assert r.exit_code == 0 and r.stdout == 'started\n'
    time.sleep(0.3)
    assert _alive(f'sleep {n}') == []


def test_output_is_capped(ws):
    t0 = time.monotonic()
    r = run('yes', ws, max_output=10_000)
    assert r.truncated and not r.timed_out and len(r.stdout) == 10_000
    assert time.monotonic() - t0 < 5
    r = run('yes >&2', ws, max_output=500)
    assert r.truncated and len(r.stderr) == 500
    r = run('head -c 3000 /dev/zero | tr "\\0" a', ws, max_output=3000)
    assert not r.truncated and len(r.stdout) == 3000


def test_output_cap_setting(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_MAX_OUTPUT_BYTES', '100')
    r = run_sandboxed('yes', ws, timeout=10)
    assert r.truncated and len(r.stdout) == 100
    assert 'truncated' in r.for_model()


def test_resource_limits(ws, monkeypatch):
    monkeypatch.setattr(sandbox, 'MAX_FILE_BYTES', 1 << 20)
    r = run('ulimit -c; ulimit -Hf; ulimit -f unlimited 2>&1; head -c 3000000 /dev/zero > big; echo rc=$?', ws)
    lines = r.stdout.splitlines()
    assert lines[:2] == ['0', '1024'] and 'rc=0' not in r.stdout, r
    assert (ws / 'big').stat().st_size == 1 << 20


def test_cannot_signal_or_see_host_processes(ws):
    r = run(f'kill -0 {os.getpid()} 2>&1; ls /proc | grep -E "^[0-9]+$" | wc -l', ws)
    assert 'No such process' in r.stdout
    assert int(r.stdout.split()[-1]) < 10   # only the sandbox's own few processes


def test_no_terminal_injection_session(ws):
    r = run('ps -o sid= -p $$ 2>/dev/null || cat /proc/self/stat', ws)
    assert r.exit_code == 0   # runs in its own session (--new-session); mainly a smoke test of the flag


def test_binary_and_invalid_utf8_output(ws):
    r = run(r"printf '\xff\xfeok'", ws)
    assert r.stdout.endswith('ok') and '\ufffd' in r.stdout


def test_missing_bwrap_is_a_clear_error(ws, monkeypatch):
    monkeypatch.setattr(sandbox.shutil, 'which', lambda name: None)
    with pytest.raises(SandboxUnavailable, match='bubblewrap'):
        run_sandboxed('true', ws)


def test_bad_workspace(tmp_path):
    with pytest.raises(ValueError, match='not a directory'): run_sandboxed('true', tmp_path / 'nope')
    with pytest.raises(ValueError, match='root directory'): run_sandboxed('true', Path('/'))


def test_overhead(ws):
    "Per-command overhead stays small (a sanity bound, not a benchmark)."
    t0 = time.monotonic()
    for _ in range(5): assert run('true', ws).exit_code == 0
    assert (time.monotonic() - t0) / 5 < 1.0
