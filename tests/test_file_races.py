"""Attack tests for the file tools' check-then-use races (issue 12, class 4) and for one read-only call that
freezes the process (class 7: a catastrophic regular expression in `search_files`).

The races: another process (standing for a shell command of another session, which may write the workspace)
swaps a directory of the workspace for a symlink to a directory outside, or a file for a symlink to a file
outside, as fast as it can, while the tools are called over and over. A tool that checks a path by name and then
opens it again by name sometimes acts on the swapped-in link: it reads the canary outside, lists it, searches it,
or writes beside it. The tools must act on what they checked, so nothing outside is ever read or written.
"""
import json, os, subprocess, sys, textwrap, time
from pathlib import Path
from types import SimpleNamespace
import pytest
from passepartout.builtin_tools import read_file, write_file, edit_file, list_dir, search_files
from passepartout.signals import Context
from passepartout.loop import Agent

CANARY = 'CANARY-7f3a outside the workspace'
SECONDS = 1.5   # how long each attack runs

# Swaps `ws/<name>` between what it really is and a symlink to `target` as fast as it can, and counts its swaps;
# stops when `stop` appears. A directory is exchanged atomically with a ready link (renameat2 RENAME_EXCHANGE, or
# renames in and out where the C library lacks it); a file is replaced by a fresh link, then by a fresh copy of
# itself, so a tool that replaces the name (as an atomic write does) does not end the attack.
FLIPPER = textwrap.dedent('''
    import ctypes, os, sys
    ws, name, target, stop = sys.argv[1:5]
    os.chdir(ws)
    libc = ctypes.CDLL(None, use_errno=True)
    exchange = getattr(libc, 'renameat2', None)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    def swap_dir():
        if exchange is not None and exchange(AT_FDCWD, name.encode(), AT_FDCWD, b'.flip-link', RENAME_EXCHANGE) == 0: return
        os.rename(name, '.flip-real'); os.rename('.flip-link', name); os.rename(name, '.flip-link'); os.rename('.flip-real', name)
    def swap_file():
        os.symlink(target, '.flip-new'); os.rename('.flip-new', name)
        with open('.flip-new', 'wb') as f: f.write(content)
        os.rename('.flip-new', name)
    if os.path.isdir(target): os.symlink(target, '.flip-link'); swap = swap_dir
    else: content = open(name, 'rb').read(); swap = swap_file
    n = 0
    print('ready', flush=True)
    while True:
        swap(); swap(); n += 2
        if n % 512 == 0 and os.path.exists(stop): break
    print(n, flush=True)
''')


@pytest.fixture
def place(tmp_path, monkeypatch):
    "A workspace with a directory `d` and a file `f.txt`; outside it, `evil/` with a canary file of the same names."
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'pphome'))
    ws = tmp_path / 'ws'; (ws / 'd').mkdir(parents=True)
    (ws / 'd' / 'f.txt').write_text('inside\n'); (ws / 'f.txt').write_text('inside\n')
    evil = tmp_path / 'evil'; evil.mkdir()
    (evil / 'f.txt').write_text(f'{CANARY}\n\ninside\n'); (evil / 'only-outside.txt').write_text(f'{CANARY}\n')
    ws = Path(os.path.realpath(ws))
    return SimpleNamespace(ws=ws, evil=evil, ctx=Context(agent=Agent(workspace=ws)),
                           before=_snapshot(evil), stop=tmp_path / 'stop')


def _snapshot(d:Path):
    "What must not change outside: each entry's name, inode and content."
    return sorted((p.name, p.lstat().st_ino, p.read_bytes()) for p in d.iterdir())


def _leaked(text:str) -> bool:
    "Does a tool's result or error show something of the outside: the canary, a name only there, its line 3?"
    return CANARY[:11] in text or 'only-outside' in text or 'at line 3' in text


def _attack(place, name:str, target:Path, call):
    "Run `call()` again and again for SECONDS while `ws/name` flips to a link to `target`; count results and escapes."
    flipper = subprocess.Popen([sys.executable, '-c', FLIPPER, str(place.ws), name, str(target), str(place.stop)],
                               stdout=subprocess.PIPE, text=True)
    counts = {'calls': 0, 'ok': 0, 'escaped': 0, 'errors': 0}
    try:
        assert flipper.stdout.readline().strip() == 'ready'          # the flipper is swapping from here on
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            counts['calls'] += 1
            try: out = call(); counts['ok'] += 1
            except (OSError, ValueError) as e: out = str(e); counts['errors'] += 1
            counts['escaped'] += _leaked(out)
    finally:
        place.stop.touch()
        swaps = int(flipper.communicate(timeout=30)[0] or 0)
    counts['swaps'] = swaps
    escaped_writes = _snapshot(place.evil) != place.before
    assert swaps > 100, f"the flipper hardly ran: {counts}"
    assert counts['ok'] > 0, f"the tool never succeeded, so this proves nothing: {counts}"
    assert counts['escaped'] == 0 and not escaped_writes, \
        f"{name} swapped for a link outside let the tool act outside the workspace: {counts}; outside now {_snapshot(place.evil)}"
    return counts


# A directory of the workspace swapped for a link to a directory outside -------------------------------------------

DIR_CALLS = {
    'read_file': lambda c: read_file('d/f.txt', ctx=c),
    'read_file with ..': lambda c: read_file('d/../d/f.txt', ctx=c),
    'list_dir': lambda c: list_dir('d', ctx=c),
    'search_files in d': lambda c: search_files('CANARY|inside', path='d', ctx=c),
    'search_files everywhere': lambda c: search_files('CANARY|inside', ctx=c),
    'write_file': lambda c: write_file('d/new.txt', 'written\n', ctx=c),
    'write_file deeper': lambda c: write_file('d/sub/new.txt', 'written\n', ctx=c),
    'edit_file': lambda c: edit_file('d/f.txt', 'inside', 'inside', ctx=c),
}


@pytest.mark.parametrize('tool', list(DIR_CALLS))
def test_directory_swapped_for_a_link_outside(place, tool):
    _attack(place, 'd', place.evil, lambda: DIR_CALLS[tool](place.ctx))


# The file itself swapped for a link to a file outside -------------------------------------------------------------

FILE_CALLS = {
    'read_file': lambda c: read_file('f.txt', ctx=c),
    'search_files on the file': lambda c: search_files('CANARY|inside', path='f.txt', ctx=c),
    'search_files everywhere': lambda c: search_files('CANARY|inside', ctx=c),
    'edit_file': lambda c: edit_file('f.txt', 'inside', 'inside', ctx=c),
}   # (write_file replaces the name itself by a rename, which never follows a link: no race to test there)


@pytest.mark.parametrize('tool', list(FILE_CALLS))
def test_file_swapped_for_a_link_outside(place, tool):
    _attack(place, 'f.txt', place.evil / 'f.txt', lambda: FILE_CALLS[tool](place.ctx))


# One read-only call must not freeze the process: a catastrophic regular expression --------------------------------

# In a child process (so that a frozen interpreter cannot hang the test run): search a file of lines built for
# catastrophic backtracking. How long another thread waits meanwhile is measured by bench/stall.py.
REDOS = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from passepartout.builtin_tools import search_files
    from passepartout.signals import Context
    from passepartout.loop import Agent
    ws, n = Path(sys.argv[1]), int(sys.argv[2]); ctx = Context(agent=Agent(workspace=ws))
    (ws / 'bait.txt').write_text(('a' * n + '!\\n' + 'x' * n + '\\n' + 'b' * (n + 9) + '!\\n') * (1 if n < 100 else 50))
    print(json.dumps({pattern: search_files(pattern, ctx=ctx) for pattern in sys.argv[3:]}))
''')


def _search(tmp_path, n:int, patterns:list, timeout:float):
    "Search the bait file with each of `patterns` in a child process: no match for any, within `timeout` (a hang detector)."
    ws = tmp_path / 'ws'; ws.mkdir()
    env = dict(os.environ, PASSEPARTOUT_HOME=str(tmp_path / 'pphome'))
    try: r = subprocess.run([sys.executable, '-c', REDOS, str(ws), str(n), *patterns], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired: pytest.fail(f"searches of one small file took over {timeout} s")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == {p: f'no matches for /{p}/ in .' for p in patterns}, got


def test_a_catastrophic_pattern_does_not_freeze_other_threads(tmp_path):
    "The patterns go to RE2 (linear in the line, whatever the pattern), never to Python's backtracking engine, which holds the lock."
    from passepartout.builtin_tools import _compile
    patterns = [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$']
    assert {type(_compile(p)).__module__ for p in patterns} == {'re2'}
    _search(tmp_path, 25, patterns, timeout=60)   # lines short enough that Python's engine gets through them in seconds


def test_catastrophic_patterns_over_long_lines_are_answered(tmp_path):
    # 150 lines of about 9000 characters: Python's engine would need longer than the age of the universe
    patterns = [r'(a+)+$', r'(x+x+)+y', r'(b|bb)+$', r'(.*a){20}$', r'^(([a-z])+.)+[A-Z]([a-z])+$']
    _search(tmp_path, 9000, patterns, timeout=30)     # the timeout is the hang detector
