"""The sandbox, attacked for real: every test tries an escape and checks that it fails."""
import os, socket, threading, uuid
from pathlib import Path
import pytest
from passepartout import sandbox
from passepartout.sandbox import run_sandboxed, sandbox_available, scrubbed_env, ShellResult, SandboxUnavailable
from _daemon_support import wait_for

HANG = 60.0   # seconds: the bound of a hang detector (the commands left alone would run for an hour), not a speed test

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


NET_PROBE = ("python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), timeout=60); print(s.recv(100).decode())\"; "
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
    r = run(f'sleep {n} & nohup sleep {n} >/dev/null 2>&1 & setsid sleep {n} & (sleep {n} &) ; sleep {n}', ws, timeout=1)
    assert r.timed_out and r.exit_code is None and r.duration_s < HANG      # not held until the children end
    assert wait_for(lambda: _alive(f'sleep {n}') == [], HANG), _alive(f'sleep {n}')


def test_timeout_setting(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_TIMEOUT', '0.5')
    r = run_sandboxed('sleep 60', ws)
    assert r.timed_out and r.duration_s < 30       # the setting stopped it, not the default of 30 s


def test_background_process_does_not_outlive_command(ws):
    n = f"{5000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    r = run(f'nohup sleep {n} >/dev/null 2>&1 & echo started', ws)
    assert r.exit_code == 0 and r.stdout == 'started\n'
    assert wait_for(lambda: _alive(f'sleep {n}') == [], HANG), _alive(f'sleep {n}')


def test_output_is_capped(ws):
    r = run('yes', ws, max_output=10_000)
    assert r.truncated and not r.timed_out and len(r.stdout) == 10_000   # stopped by the cap, not by the timeout
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


def test_many_commands_in_a_row(ws):
    "Commands one after the other each get a fresh sandbox (what one costs: `python bench/sandbox_overhead.py`)."
    for i in range(5): assert run(f'echo {i} > n; cat n', ws).stdout == f'{i}\n'


# --- No setuid/setgid file survives a sandboxed command (the harness often runs as root) ---

def _setid(root: Path) -> list:
    "Every file or directory under `root` with the setuid or setgid bit."
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            if not p.is_symlink() and p.lstat().st_mode & 0o6000: out.append(str(p.relative_to(root)))
    return out


SETUID_BINARY = next((p for p in ('/usr/bin/passwd', '/usr/bin/su', '/usr/bin/mount', '/usr/bin/chsh')
                      if Path(p).exists() and Path(p).stat().st_mode & 0o4000), None)

SETID_ATTACKS = {
    'chmod u+s': 'cp /bin/sh ./x && chmod u+s ./x',
    'chmod g+s': 'cp /bin/sh ./x && chmod g+s ./x',
    'chmod 6755': 'cp /bin/sh ./x; chmod 6755 ./x',
    'chmod 4755 dir-relative': 'mkdir d && cp /bin/sh d/x && cd d && chmod 4755 x',
    'install -m 4755': 'install -m 4755 /bin/sh ./x',
    'install -m 2755': 'install -m 2755 /bin/sh ./x',
    'python os.chmod': "cp /bin/sh x; python3 -c \"import os; os.chmod('x', 0o4755)\"",
    'python fchmod': "cp /bin/sh x; python3 -c \"import os; fd = os.open('x', os.O_RDONLY); os.fchmod(fd, 0o4755)\"",
    'python fchmodat': "mkdir d; cp /bin/sh d/x; python3 -c \"import os; d = os.open('d', os.O_RDONLY); os.chmod('x', 0o4755, dir_fd=d)\"",
    'python open O_CREAT': "python3 -c \"import os; os.close(os.open('x', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
    'python openat O_CREAT': "mkdir d; python3 -c \"import os; d = os.open('d', os.O_RDONLY); os.close(os.open('x', os.O_CREAT | os.O_WRONLY, 0o6755, dir_fd=d))\"",
    'python mknod': "python3 -c \"import os, stat; os.mknod('x', stat.S_IFREG | 0o4755)\"",
    'chmod g+s on a directory': 'mkdir d && chmod g+s d',
    'mkdir -m 2775': 'mkdir -m 2775 d',
    'perl chmod': "cp /bin/sh x; perl -e 'chmod 04755, \"x\"'",
    'openat2 raw': ("python3 -c \"import ctypes, struct; libc = ctypes.CDLL(None, use_errno=True); "
                    "how = ctypes.create_string_buffer(struct.pack('QQQ', 0o101, 0o4755, 0), 24); "
                    "r = libc.syscall(437, -100, b'x', how, 24); print(r, ctypes.get_errno())\""),
    'copy, then chmod from a background child': 'cp /bin/sh x; (sleep 0.2; chmod u+s x) & wait',
}
if SETUID_BINARY:
    SETID_ATTACKS['cp -p of a setuid binary'] = f'cp -p {SETUID_BINARY} ./x'
    SETID_ATTACKS['cp -a of a setuid binary'] = f'cp -a {SETUID_BINARY} ./x'


@pytest.mark.parametrize('name', sorted(SETID_ATTACKS))
def test_no_setuid_file_survives(ws, name):
    r = run(SETID_ATTACKS[name], ws)
    assert _setid(ws) == [], (name, r)


def test_setuid_refusal_is_eperm(ws):
    r = run('cp /bin/sh x; chmod u+s x; echo rc=$?', ws)
    assert 'Operation not permitted' in r.stderr and 'rc=1' in r.stdout, r
    assert r.setid_removed == ()   # the filter stopped it: the sweep had nothing to do (and does not run)


def test_tar_extraction_of_a_setuid_member(ws, tmp_path):
    import tarfile, io
    archive = tmp_path / 'a.tar'
    with tarfile.open(archive, 'w') as t:
        for name, mode in (('evil', 0o4755), ('evil-g', 0o2755), ('ok.sh', 0o750)):
            info = tarfile.TarInfo(name); info.mode = mode; data = b'#!/bin/sh\necho hi\n'; info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    (ws / 'a.tar').write_bytes(archive.read_bytes())
    run('tar -xpf a.tar; tar --same-owner -xpf a.tar', ws)
    assert _setid(ws) == []
    assert (ws / 'ok.sh').stat().st_mode & 0o7777 == 0o750 and (ws / 'evil').exists()


def test_io_uring_is_unavailable(ws):
    # io_uring's OPENAT takes a mode and never passes through seccomp: io_uring_setup must fail (ENOSYS)
    r = run("python3 -c \"import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
            "print(libc.syscall(425, 4, ctypes.create_string_buffer(120)), ctypes.get_errno())\"", ws)
    assert r.stdout.split() == ['-1', '38'], r


@pytest.mark.skipif(sandbox.platform.machine() != 'x86_64' or not sandbox.shutil.which('gcc'), reason='needs gcc on x86-64')
def test_32bit_and_x32_system_calls_are_refused(ws, tmp_path):
    # i386 chmod (15) through int 0x80 has another number than x86-64's: the filter must refuse the whole table
    src = tmp_path / 'compat.c'
    src.write_text(r'''#include <stdio.h>
static char path[] = "compat.bin";
int main(void) {
    FILE *f = fopen(path, "w"); if (f) fclose(f);
    long ret;
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(15L), "b"(path), "c"(04755L) : "memory");
    printf("i386=%ld\n", ret);
    __asm__ volatile ("syscall" : "=a"(ret) : "a"(0x40000000L + 90), "D"(path), "S"(02755L) : "rcx", "r11", "memory");
    printf("x32=%ld\n", ret);
    return 0;
}''')
    subprocess_run = __import__('subprocess').run
    assert subprocess_run(['gcc', '-O0', '-no-pie', '-o', str(ws / 'compat'), str(src)], capture_output=True).returncode == 0
    r = run('./compat', ws)
    assert 'i386=-1\n' in r.stdout and 'x32=-1\n' in r.stdout, r   # -EPERM from the filter
    assert _setid(ws) == []


BENIGN = {
    'chmod +x': ('echo "echo hi" > s.sh && chmod +x s.sh && ./s.sh', {'s.sh': 0o755}),
    'chmod 640 and sticky dir': ('touch f && chmod 640 f && mkdir t && chmod 1777 t', {'f': 0o640, 't': 0o1777}),
    'cp -p keeps mode and time': ('touch -d 2001-01-01 src && chmod 750 src && cp -p src dst', {'dst': 0o750}),
    'mkdir -p and -m': ('mkdir -p a/b/c && mkdir -m 700 priv', {'a/b/c': 0o755, 'priv': 0o700}),
    'install -m 755': ('install -m 755 /bin/true ./t', {'t': 0o755}),
    'python open 0o600': ("python3 -c \"import os; os.close(os.open('k', os.O_CREAT | os.O_WRONLY, 0o600))\"", {'k': 0o600}),
    'tar round trip': ('mkdir src && echo x > src/f && chmod 751 src/f && tar -cf a.tar src && rm -r src && tar -xpf a.tar', {'src/f': 0o751}),
}


@pytest.mark.parametrize('name', sorted(BENIGN))
def test_ordinary_modes_still_work(ws, name):
    cmd, modes = BENIGN[name]
    r = run(f'umask 022; {cmd}', ws)
    assert r.exit_code == 0, (name, r)
    for path, mode in modes.items():
        assert (ws / path).stat().st_mode & 0o7777 == mode, (name, path, oct((ws / path).stat().st_mode))
    if name == 'cp -p keeps mode and time':
        assert (ws / 'dst').stat().st_mtime == (ws / 'src').stat().st_mtime


def test_sweep_where_no_filter_exists(ws, monkeypatch):
    # an architecture without a filter: the bits get set inside, and the sweep removes them afterwards
    monkeypatch.setattr(sandbox, 'seccomp_filter', lambda machine=None: None)
    r = run('cp /bin/sh x && chmod u+s x && mkdir -p deep/er && cp -p x deep/er/y && chmod 2755 deep/er/y && touch ok && chmod 755 ok', ws)
    assert r.exit_code == 0, r
    assert sorted(r.setid_removed) == ['deep/er/y', 'x'] and 'setuid/setgid bits removed' in r.for_model()
    assert _setid(ws) == [] and (ws / 'x').stat().st_mode & 0o7777 == 0o755


def test_filter_refused_for_unknown_arch():
    assert sandbox.seccomp_filter('riscv64') is None and sandbox.seccomp_filter('x86_64') and sandbox.seccomp_filter('aarch64')


# --- Resource limits ---

def test_memory_limit(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_MEMORY_MB', '200')
    r = run('python3 -c "x = bytearray(400 * 2**20)"', ws)
    assert r.exit_code not in (0, None) and 'MemoryError' in r.stderr
    assert 'ran out of memory (limit 200 MB' in r.for_model(), r.for_model()
    r = run('python3 -c "x = bytearray(50 * 2**20); print(len(x))"', ws)
    assert r.exit_code == 0 and r.stdout == f'{50 * 2**20}\n' and r.limit == ''
    r = run('x=$(head -c 300000000 /dev/zero | tr "\\0" a); echo ${#x}', ws)   # bash itself runs out (or the command's budget stops it)
    assert r.exit_code != 0 and ('ran out of memory' in r.for_model() or 'memory budget' in r.limit), r


def test_memory_limit_spares_address_space_reservations(ws):
    # RLIMIT_AS would break these at 2 GiB; RLIMIT_DATA does not
    if sandbox.shutil.which('java'):
        r = run('java -version', ws)
        assert r.exit_code == 0, r
    if sandbox.shutil.which('node'):
        r = run('node -e "new WebAssembly.Memory({initial: 1}); console.log(\'ok\')"', ws)
        assert r.stdout == 'ok\n', r


def test_tmp_is_capped_at_the_memory_limit(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_MEMORY_MB', '64')
    r = run('head -c 100000000 /dev/zero > /tmp/fill; echo rc=$?; df -m /tmp | tail -1', ws)
    # /tmp is full at 64 MB, or (its pages being charged to the command) the memory budget stops the command first
    assert ('rc=1' in r.stdout and 'No space left' in r.stderr) or 'memory budget (64 MB' in r.limit, r


def test_memory_limit_zero_disables(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_MEMORY_MB', '0'); monkeypatch.setenv('PASSEPARTOUT_SHELL_CPU_SECONDS', '0')
    assert run('ulimit -d; ulimit -t', ws).stdout == 'unlimited\nunlimited\n'


@pytest.mark.parametrize('spinner', ['while :; do :; done', 'python3 -c "while True: pass"'])
def test_cpu_limit_stops_a_spinner(ws, monkeypatch, spinner):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_CPU_SECONDS', '1')
    r = run(spinner, ws, timeout=30)
    # the process's own limit (SIGXCPU, exit 152) or the command's (killed) may come first: both say so
    assert not r.timed_out and r.exit_code in (152, None), r        # stopped by the CPU limit, before the timeout
    assert 'stopped by the CPU time limit (1 s' in r.for_model(), r


def test_cpu_limit_cannot_be_raised(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_CPU_SECONDS', '5')
    r = run('ulimit -St unlimited 2>&1; ulimit -Ht 100 2>&1; ulimit -St; ulimit -Ht', ws)
    assert r.stdout.splitlines()[-2:] == ['5', '6'], r


def test_big_file_write_is_stopped(ws, monkeypatch):
    monkeypatch.setattr(sandbox, 'MAX_FILE_BYTES', 1 << 20)
    r = run('python3 -c "open(\'big\', \'wb\').write(bytes(3 * 2**20))"', ws)
    assert r.exit_code != 0 and 'a file reached the size limit (1 MiB per file)' in r.for_model(), r
    r = run('head -c 3000000 /dev/zero > big2', ws)
    assert r.exit_code == 153 and 'size limit' in r.limit, r
    assert (ws / 'big2').stat().st_size == 1 << 20


def test_default_limits_are_in_force(ws):
    lines = run('ulimit -d; ulimit -St; ulimit -f; ulimit -c', ws).stdout.splitlines()
    assert lines == [str(2048 * 1024), '60', str(2**30 // 1024), '0'], lines


# --- Without the sandbox: run_unconfined (the shell tool calls it only for an owner-approved command) ---

def test_unconfined_environment_and_cwd(ws, monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-SECRET')
    r = sandbox.run_unconfined('pwd; echo "$HOME"; env | grep -c SECRET; test -d "$HOME" && echo home-exists', ws, timeout=10)
    lines = r.stdout.splitlines()
    assert lines[0] == str(ws.resolve()) and lines[2] == '0' and lines[3] == 'home-exists', r
    assert r.unconfined and 'ran WITHOUT the sandbox' in r.for_model()
    assert not Path(lines[1]).exists()   # the throw-away home is removed


def test_unconfined_background_does_not_outlive_or_hold(ws):
    n = f"{6000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    r = sandbox.run_unconfined(f'sleep {n} & echo started', ws, timeout=20)
    assert r.exit_code == 0 and r.stdout == 'started\n' and not r.timed_out, r     # the child did not hold the pipe until the timeout
    assert wait_for(lambda: _alive(f'sleep {n}') == [], HANG), _alive(f'sleep {n}')


def test_unconfined_timeout_kills_the_group(ws):
    n = f"{7000 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"
    r = sandbox.run_unconfined(f'sleep {n} & sleep {n}', ws, timeout=0.5)
    assert r.timed_out and r.exit_code is None
    assert wait_for(lambda: _alive(f'sleep {n}') == [], HANG), _alive(f'sleep {n}')


def test_unconfined_limits(ws, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_CPU_SECONDS', '1'); monkeypatch.setenv('PASSEPARTOUT_SHELL_MEMORY_MB', '200')
    r = sandbox.run_unconfined('while :; do :; done', ws, timeout=20)
    assert r.exit_code in (152, None) and 'CPU time limit' in r.for_model(), r   # the process's limit or the command's
    r = sandbox.run_unconfined('python3 -c "x = bytearray(400 * 2**20)"', ws, timeout=20)
    assert 'ran out of memory' in r.for_model(), r
    r = sandbox.run_unconfined('yes', ws, timeout=20, max_output=1000)
    assert r.truncated and len(r.stdout) == 1000
