"""`passepartout chat` as a person uses it (issue 13, requirement 3): the real command in a subprocess, a
pseudo-terminal for the interactive cases (pexpect), a pipe for the plain one, and the loopback OpenAI
server of `llm_servers.py` speaking the real wire format (streamed on a terminal, whole when piped).

Each test can fail: the streaming test holds the model's stream open until it has seen the first words
on the screen, the approval test judges the file system, the local-command tests count the requests
the model server received.
"""
import importlib.util, io, os, re, signal, subprocess, sys, threading, time
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from llm_servers import LLMServer, loopback_env, openai_stream, openai_text, openai_tool
from _daemon_support import wait_for

pexpect = pytest.importorskip('pexpect')
ROOT = Path(__file__).resolve().parent.parent
CHAT = [sys.executable, '-c', 'import sys; from passepartout.cli import main; sys.argv[0] = "passepartout"; main()', 'chat']
SGR = re.compile(r'\x1b\[[0-9;]*m')   # a colour or style escape


@pytest.fixture
def server():
    srv = LLMServer('openai')
    yield srv
    srv.close()


@pytest.fixture
def env(tmp_path, server):
    "A fresh home and workspace (no daemon), the loopback server as the only provider."
    return loopback_env(tmp_path, server.url, TERM='xterm-256color')


def _keys_interrupt():
    """In the child: Ctrl-C and Ctrl-\\ do what they do at a terminal, even when the tests run with them ignored (a
    non-interactive shell ignores both in what it starts with `&`, and a Python started so never raises KeyboardInterrupt)."""
    for sig in (signal.SIGINT, signal.SIGQUIT): signal.signal(sig, signal.SIG_DFL)


def spawn(env, **extra):
    child = pexpect.spawn(CHAT[0], CHAT[1:], env={**env, **extra}, encoding='utf-8', timeout=60, dimensions=(40, 140),   # each expect's hang detector
                          preexec_fn=_keys_interrupt)
    child.logfile_read = io.StringIO()   # everything the screen received
    child.expect('you> ')
    return child


def quit_chat(child):
    child.sendcontrol('d')
    child.expect(pexpect.EOF)
    child.wait()
    return child.exitstatus


def test_piped_chat_is_plain_and_keeps_the_conversation(env, server):
    (Path(env['PASSEPARTOUT_WORKSPACE']) / 'notes.txt').write_text('hi\n')
    server.add(openai_text('Hello, piped.'),
               openai_tool('shell', {'command': 'ls'}, text='Looking first.'),
               openai_text('One file: notes.txt.'))
    r = subprocess.run(CHAT, input='hello\n/help\n/cost\nwhat is here?\n/quit\nnever sent\n', env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert '\x1b' not in r.stdout and '⠋' not in r.stdout
    lines = r.stdout.splitlines()
    assert 'Hello, piped.' in lines and 'One file: notes.txt.' in lines
    assert "→ shell(command='ls') ✓" in lines
    assert any(l.startswith('  ⎿ [exit 0') and 'notes.txt' in l for l in lines), lines
    assert any(l.startswith('1 turn: 10 tokens in, 5 out') for l in lines), lines
    assert len(server.requests) == 3                                  # /help, /cost, /quit and what follows never reached it
    assert not any(r['json'].get('stream') for r in server.requests)  # piped: whole answers, no streaming
    second = server.requests[1]['json']['messages']                   # the conversation continues between lines
    assert [m['content'] for m in second if m['role'] == 'user'] == ['hello', 'what is here?']


def test_tokens_reach_the_screen_before_the_turn_ends(env, server):
    release = threading.Event()
    server.add(openai_stream(['Streaming ', 'works ', release, 'and ends here.']))
    child = spawn(env)
    try:
        child.sendline('hi')
        child.expect('Streaming works ')          # on screen while the server still holds the rest of the answer
        assert not release.is_set() and server.requests[0]['json']['stream'] is True
        child.send('typed ahead')                  # not echoed into the answer: it waits for the next prompt
        time.sleep(0.3)                            # part of the test: the owner types while the answer is held (no flake:
        release.set()                              # keys that arrive after the release only make the check weaker)
        child.expect('and ends here.')
        assert 'typed ahead' not in child.before
        child.expect('you> typed ahead')
        child.sendcontrol('u')
        assert quit_chat(child) == 0
    finally: release.set(); child.close(force=True)


def test_approval_answered_in_place_runs_the_action(env, server):
    build = Path(env['PASSEPARTOUT_WORKSPACE']) / 'build'; build.mkdir(); (build / 'out.o').write_text('x')
    server.add(openai_stream(['I will remove the build directory.'], tool=('shell', {'command': 'rm -r build'})),
               openai_stream(['Done, build is gone.']))
    child = spawn(env)
    try:
        child.sendline('remove the build directory')
        child.expect(r'needs approval')
        child.expect(r'approve ([a-z0-9]+)')       # the token is printed for the other channels
        child.expect(re.escape('[y]es / [n]o / [a]lways / [s]how'))
        assert build.exists()
        child.sendline('s')
        child.expect('"command": "rm -r build"')
        child.expect(re.escape('[y]es / [n]o / [a]lways / [s]how'))
        child.sendline('y')
        child.expect('Done, build is gone.')
        child.expect('you> ')
        assert not build.exists()
        assert quit_chat(child) == 0
    finally: child.close(force=True)
    assert server.requests[1]['json']['messages'][-1]['role'] == 'tool'   # the model read the outcome next to its call


def test_slash_commands_stay_local(env, server):
    child = spawn(env)
    try:
        for command, answer in [('/help', '/approvals'), ('/cost', '0 turns'), ('/model', "model='test-model'"),
                                ('/approvals', 'no actions are waiting'), ('/sessions', 'no conversations are stored yet'), ('/nope', 'unknown command /nope')]:
            child.sendline(command)
            child.expect(re.escape(answer))
            child.expect('you> ')
        child.sendline('/quit')
        child.expect(pexpect.EOF)
    finally: child.close(force=True)
    assert server.requests == []


def test_ctrl_c_stops_the_turn_and_twice_quits(env, server):
    never = threading.Event()
    server.add(openai_stream(['A long ', 'story ', never, 'never told.']), openai_stream(['Still here.']))
    child = spawn(env)
    try:
        child.sendline('tell me a story')
        child.expect('A long story ')
        child.sendintr()
        child.expect('stopped')
        child.expect('you> ')
        never.set()                                # the model goes on writing: the stopped turn ends at that piece
        child.sendline('are you there?')
        child.expect('Still here.')
        assert 'never told' not in child.logfile_read.getvalue()
        child.expect('you> ')
        child.sendintr()
        child.expect('Ctrl-C again to quit')
        child.sendintr()
        child.expect(pexpect.EOF)
        child.wait()
        assert child.exitstatus == 0
    finally: never.set(); child.close(force=True)
    assert len(server.requests) == 2


@pytest.mark.parametrize('no_color', [False, True])
def test_colour_on_a_terminal_unless_no_color(env, server, no_color):
    server.add(openai_stream(['Looking.'], tool=('shell', {'command': 'ls'})), openai_stream(['Nothing here.']))
    child = spawn(env, **({'NO_COLOR': '1'} if no_color else {}))
    try:
        child.sendline('what is here?')
        child.expect('Nothing here.')
        child.expect('you> ')
        seen = child.logfile_read.getvalue()
        assert quit_chat(child) == 0
    finally: child.close(force=True)
    coloured = [c for c in SGR.findall(seen) if c not in ('\x1b[0m', '\x1b[m')]
    assert bool(coloured) is not no_color, coloured


def test_through_the_daemon_it_streams_and_ctrl_c_stops_the_turn_there(env, server):
    "With a daemon serving the home, the chat talks to it: progress frames stream, and Ctrl-C stops the daemon's turn."
    cli = CHAT[:-1]
    release, never = threading.Event(), threading.Event()
    server.add(openai_stream(['Through ', 'the daemon ', release, 'it streams.']), openai_stream(['Endless ', never, 'story.']),
               openai_stream(['After the stop.']))
    out = subprocess.run(cli + ['daemon', 'start', '--port', '0'], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    audit = lambda: subprocess.run(cli + ['audit'], capture_output=True, text=True, env=env, timeout=60).stdout
    try:
        child = spawn(env)
        try:
            child.sendline('hi')
            child.expect('Through the daemon ')
            assert not release.is_set()
            release.set()
            child.expect('it streams.')
            child.expect('you> ')
            child.sendline('a story please')
            child.expect('Endless ')
            child.sendintr()
            child.expect('stopped')
            child.expect('you> ')
            never.set()                            # the model goes on: the daemon, its client gone, stops the turn there
            assert wait_for(lambda: 'stopped' in audit()), audit()
            assert 'story.' not in (seen := audit()), seen
            child.sendline('still there?')
            child.expect('After the stop.')
            child.expect('you> ')
            assert 'story.' not in child.logfile_read.getvalue()
            assert quit_chat(child) == 0
        finally: release.set(); never.set(); child.close(force=True)
    finally:
        subprocess.run(cli + ['daemon', 'stop'], capture_output=True, text=True, env=env, timeout=60)


def test_piped_chat_never_asks_and_prints_the_token(env, server):
    build = Path(env['PASSEPARTOUT_WORKSPACE']) / 'build'; build.mkdir()
    server.add(openai_tool('shell', {'command': 'rm -r build'}, text='Removing build.'))
    r = subprocess.run(CHAT + ['--resume'], input='remove build\ny\n', env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r'Approve with `approve [a-z0-9]+`', r.stdout) and 'Approve?' not in r.stdout, r.stdout
    assert build.exists() and len(server.requests) == 2      # the 'y' was an ordinary message, not an approval
    if importlib.util.find_spec('passepartout.sessions') is None: assert 'keeps no sessions' in r.stderr, r.stderr


def test_enter_leaves_the_approval_waiting_for_another_channel(env, server):
    build = Path(env['PASSEPARTOUT_WORKSPACE']) / 'build'; build.mkdir()
    server.add(openai_stream(['Removing build.'], tool=('shell', {'command': 'rm -r build'})))
    child = spawn(env)
    try:
        child.sendline('remove build')
        child.expect(r'approve ([a-z0-9]+)`')
        token = child.match.group(1)
        child.expect(re.escape('[y]es / [n]o / [a]lways / [s]how'))
        child.sendline('')
        child.expect('left waiting')
        child.expect('you> ')
        child.sendline('/approvals')
        child.expect(token + r'\s+expires in')
        child.expect('you> ')
        assert quit_chat(child) == 0
    finally: child.close(force=True)
    assert build.exists() and len(server.requests) == 1
