"""`passepartout tui` driven by Textual's own harness (`App.run_test()` and its pilot) against a real daemon
process and the loopback OpenAI server of `llm_servers.py` (issue 19, requirement 1).

Each test starts with no daemon: the app starts one (the real `daemon start`), and the test stops it. The
model server holds its stream on an `Event` where a test must see text on the screen before the turn ends
(streaming) or stop a turn in the middle (Ctrl-C). The file system judges the approval; the screenshot is
an SVG whose structure (panels, the folded call, the status bar) is checked, since its ids and times vary.
"""
import asyncio, html, os, re, subprocess, sys, threading, time
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from llm_servers import LLMServer, loopback_env, openai_stream, openai_tool

pytest.importorskip('textual')
ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, '-c', 'import sys; from passepartout.cli import main; sys.argv[0] = "passepartout"; main()']


@pytest.fixture
def server():
    srv = LLMServer('openai')
    yield srv
    srv.close()


@pytest.fixture
def home(tmp_path, server, monkeypatch):
    "A fresh home and workspace, the loopback server as the only provider; the daemon the app starts is stopped after."
    for k in list(os.environ):
        if k.startswith(('PASSEPARTOUT_', 'OPENAI_')): monkeypatch.delenv(k)
    for k, v in loopback_env(tmp_path, server.url).items(): monkeypatch.setenv(k, v)
    ws = tmp_path / 'ws'
    yield ws
    subprocess.run(CLI + ['daemon', 'stop'], capture_output=True, text=True, timeout=60)


async def until(pilot, predicate, timeout=60.0):
    "Let the app run until `predicate()` holds (a hang detector, not a timing: generous on a loaded machine)."
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def texts(app): return [b.text for b in app.conversation.blocks]


async def held_in(pilot, session) -> str:
    """Wait until the only pending action is the one held in `session` and the approvals panel highlights it (what
    `y` or `n` decides); its token. `app.pending` is set before the panel is redrawn: a key pressed in between is lost."""
    app = pilot.app
    def shown():
        item = app.query_one('#approvals').highlighted_child
        return [a['meta'].get('session') for a in app.pending] == [session] and item is not None and item.record['token'] == app.pending[0]['token']
    await until(pilot, shown)
    return app.pending[0]['token']


def svg_lines(svg:str) -> list:
    "The screen's lines as an SVG screenshot draws them (each `<text>` run is clipped to its line)."
    lines = {}
    for line, text in re.findall(r'<text [^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)</text>', svg):
        lines[int(line)] = lines.get(int(line), '') + html.unescape(text).replace('\xa0', ' ')
    return [lines[k].rstrip('\n') for k in sorted(lines)]


async def ready(pilot):
    app = pilot.app
    await until(pilot, lambda: app.daemon and app.busy == '')
    return app


async def say(pilot, text):
    pilot.app.query_one('#prompt').value = text
    pilot.app.query_one('#prompt').focus()
    await pilot.press('enter')


def run(coro): return asyncio.run(coro)


def test_starts_the_daemon_streams_and_folds_each_call(home, server):
    from passepartout.tui import PassepartoutApp
    from passepartout.daemon import daemon_running
    from textual.widgets import Collapsible
    (home / 'notes.txt').write_text('hi\n')
    release = threading.Event()
    server.add(openai_stream(['Let me ', 'look ', release, 'around.'], tool=('shell', {'command': 'ls'})),
               openai_stream(['One file: notes.txt.']))
    assert not daemon_running()
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot)
            assert app.daemon.endswith('(started)') and daemon_running()
            await say(pilot, 'what is here?')
            await until(pilot, lambda: 'Let me look' in texts(app))   # on the screen while the model still holds the rest
            assert not release.is_set() and app.busy == 'thinking…'
            release.set()
            await until(pilot, lambda: 'One file: notes.txt.' in texts(app) and app.busy == '')
            call = next(b for b in app.conversation.blocks if b.kind == 'call')
            assert call.text.startswith("→ shell(command='ls') ✓") and 'notes.txt' in call.text
            assert any(line.startswith('✓ shell') for line in call.detail) and 'notes.txt' in call.result
            widget = app.widgets[call]
            assert isinstance(widget, Collapsible) and widget.collapsed       # folded by default: its verdicts are not on the screen
            folded = svg_lines(app.export_screenshot())
            assert any("▶ → shell(command='ls') ✓" in l for l in folded) and not any('✓ validator' in l for l in folded), folded
            await pilot.click(widget.query_one('CollapsibleTitle'))
            await until(pilot, lambda: not widget.collapsed)
            assert texts(app).count('Let me look around.') == 1             # streamed, not repeated
            assert app.usage['input_tokens'] > 0 and 'openai: test-model' in app.model
            status = str(app.query_one('#status').content)
            assert 'openai: test-model' in status and f"{app.usage['input_tokens']} in" in status, status
            drawn = lambda: (lambda lines: any('you> what is here?' in l for l in lines) and any('✓ shell' in l for l in lines))(svg_lines(app.export_screenshot()))
            await until(pilot, drawn)   # the opened call redrawn (a loaded machine draws late), then the picture
            svg = app.export_screenshot()
        return svg
    svg = run(go())
    screen = svg_lines(svg)
    assert svg.startswith('<svg') and screen[0].lstrip().startswith('Sessions'), screen
    assert any('Pending approvals' in l for l in screen) and any('you> what is here?' in l for l in screen), screen
    assert any("▼ → shell(command='ls') ✓" in l for l in screen), screen          # the call, opened by the click
    assert any('✓ shell' in l for l in screen) and any('notes.txt' in l for l in screen), screen
    assert 'test-model' in screen[-2] and 'ready' in screen[-2], screen[-2:]      # the status bar above the footer
    assert server.requests[0]['json']['stream'] is True


def test_an_approval_answered_with_a_key_runs_the_action(home, server):
    from passepartout.tui import PassepartoutApp
    build = home / 'build'; build.mkdir(); (build / 'out.o').write_text('x')
    server.add(openai_stream(['I will remove the build directory.'], tool=('shell', {'command': 'rm -r build'})),
               openai_stream(['Done, build is gone.']))
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await ready(pilot)
            await say(pilot, 'remove the build directory')
            await until(pilot, lambda: app.pending and app.focused is app.query_one('#approvals') and app.busy == '')
            held = next(b for b in app.conversation.blocks if b.kind == 'held')
            token = app.pending[0]['token']
            assert token in held.text and build.exists()
            await until(pilot, lambda: app.query_one('#approvals').highlighted_child is not None)
            await pilot.press('s')
            assert '"command": "rm -r build"' in str(app.query_one('#detail').content)
            await pilot.press('y')
            await until(pilot, lambda: 'Done, build is gone.' in texts(app) and app.busy == '')
            assert f'approve {token}' in texts(app)
            call = next(b for b in app.conversation.blocks if b.kind == 'call')
            assert call.text.startswith("→ shell(command='rm -r build') ✓ approved") and call.result is not None, call.text
            assert str(app.widgets[call].title) == call.text   # the folded line on the screen, not only the model of it
            await until(pilot, lambda: not app.pending)
        return token
    token = run(go())
    assert not build.exists()
    assert server.requests[1]['json']['messages'][-1]['role'] == 'tool'   # the model read the outcome next to its call
    audit = subprocess.run(CLI + ['audit'], capture_output=True, text=True, timeout=60).stdout
    assert token in audit


def test_ctrl_c_stops_the_turn_in_the_daemon_and_the_tui_goes_on(home, server):
    from passepartout.tui import PassepartoutApp
    never = threading.Event()
    server.add(openai_stream(['A long ', 'story ', never, 'never told.']), openai_stream(['Still here.']))
    audit = lambda: subprocess.run(CLI + ['audit'], capture_output=True, text=True, timeout=60).stdout
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await ready(pilot)
            await say(pilot, 'tell me a story')
            await until(pilot, lambda: 'A long story' in texts(app))
            await pilot.press('ctrl+c')
            await until(pilot, lambda: 'stopped' in texts(app) and app.busy == '')
            # the model is still holding its answer: the daemon, its client gone, stops the turn without waiting for it
            await until(pilot, lambda: 'stopped' in audit(), timeout=60)
            assert 'timed out' not in audit()             # stopped at once, not after the provider's timeout
            await say(pilot, 'are you there?')
            await until(pilot, lambda: 'Still here.' in texts(app))
            never.set()                                   # the abandoned call ends; nothing of it is shown or recorded
            assert not any('never told' in t for t in texts(app))
            await pilot.press('ctrl+c')                   # at rest: once warns, twice quits
            assert app.is_running
            await pilot.press('ctrl+c')
            await until(pilot, lambda: not app.is_running)
    run(go())
    assert 'never told' not in audit()


def test_sessions_are_listed_and_switched(home, server):
    from passepartout.tui import PassepartoutApp
    server.add(openai_stream(['First answer.']))
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await ready(pilot)
            first = app.session
            await say(pilot, 'first question')
            await until(pilot, lambda: 'First answer.' in texts(app) and app.busy == '')
            await pilot.press('ctrl+n')
            await until(pilot, lambda: app.session != first)
            assert texts(app) == []
            sessions = app.query_one('#sessions')
            await until(pilot, lambda: any(getattr(i, 'session', None) == first for i in sessions.children))
            assert [i.session for i in sessions.children][:2] == [app.session, first]   # the new one (not stored yet) first
            await pilot.press('f2', 'enter')                                             # on the current one: nothing changes
            assert app.session != first and app.focused is app.query_one('#prompt')
            await pilot.press('f2', 'down', 'enter')
            await until(pilot, lambda: app.session == first and any('First answer.' in t for t in texts(app)))
            assert any('first question' in t for t in texts(app))
            assert app.focused is app.query_one('#prompt')
    run(go())


def test_an_action_held_elsewhere_appears_and_is_denied_in_its_own_session(home, server):
    "An action held from another channel (here `passepartout send`) shows up in the panel; `n` refuses it in the session it came from."
    from passepartout.tui import PassepartoutApp
    from passepartout.approvals import ApprovalStore
    logs = home / 'logs'; logs.mkdir()
    server.add(openai_tool('shell', {'command': 'rm -r logs'}, text='Removing the logs.'), openai_stream(['Understood, I leave them.']))
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await ready(pilot)
            sent = await asyncio.to_thread(subprocess.run, CLI + ['send', '--session', 'elsewhere', 'clean the logs'],
                                           capture_output=True, text=True, timeout=120)
            assert 'approve ' in sent.stdout, sent.stdout + sent.stderr
            token = await held_in(pilot, 'elsewhere')
            await pilot.press('f3', 'n')
            await until(pilot, lambda: 'Understood, I leave them.' in texts(app) and app.busy == '')
            assert 'in session elsewhere:' in texts(app) and f'deny {token}' in texts(app)
            await until(pilot, lambda: not app.pending)
        return token
    token = run(go())
    assert logs.exists() and ApprovalStore().get(token)['state'] == 'denied'


def test_a_failed_turn_is_shown_once_as_an_error(home, server):
    "The provider refuses the request: the error event is on the screen, the turn's reply (the same sentence) is not repeated."
    server.add({'status': 400, 'json': {'error': {'message': 'the model does not exist'}}})
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await ready(pilot)
            await say(pilot, 'hello')
            await until(pilot, lambda: any(b.style == 'error' for b in app.conversation.blocks) and app.busy == '')
            await pilot.pause(0.2)
            return [(b.kind, b.text) for b in app.conversation.blocks]
    from passepartout.tui import PassepartoutApp
    blocks = run(go())
    assert blocks[0] == ('you', 'hello') and len(blocks) == 2, blocks
    assert blocks[1][0] == 'note' and blocks[1][1].startswith('error: ') and 'the model does not exist' in blocks[1][1], blocks


def test_a_line_typed_while_the_session_loads_waits_in_the_prompt(home, server, monkeypatch):
    """Loading the session's stored messages replaces the conversation shown: a line sent before that is done would
    vanish from the screen while its turn ran (seen under CPU load). It waits in the prompt, and runs once loaded."""
    from passepartout.tui import PassepartoutApp
    server.add(openai_stream(['Hello there.']))
    gate, load = asyncio.Event(), PassepartoutApp.load_session
    async def held_load(self, session):
        await gate.wait(); await load(self, session)
    monkeypatch.setattr(PassepartoutApp, 'load_session', held_load)
    async def go():
        app = PassepartoutApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.daemon)
            await say(pilot, 'hello')
            early = (app.query_one('#prompt').value, app.in_turn, texts(app))
            gate.set(); await ready(pilot)
            await pilot.press('enter')
            await until(pilot, lambda: 'Hello there.' in texts(app) and not app.in_turn)
            return early, [(b.kind, b.text) for b in app.conversation.blocks]
    early, blocks = run(go())
    assert early == ('hello', False, []), early
    assert blocks[0] == ('you', 'hello') and ('answer', 'Hello there.') in blocks, blocks


def test_an_action_held_from_telegram_is_approved_with_a_key_and_the_chat_hears_the_rest(home, server, monkeypatch):
    """The daemon the TUI starts hosts the Telegram gateway: the owner's chat asks, the gates hold the action, `y` in the
    approvals panel approves it; the model carries on in the Telegram chat, and the audit log says the TUI decided."""
    from passepartout.tui import PassepartoutApp
    from passepartout.vault import Vault
    from passepartout.audit import AuditLog
    from passepartout.approvals import ApprovalStore
    from telegram_server import BotAPIServer
    build = home / 'build'; build.mkdir()
    server.add(openai_tool('shell', {'command': 'rm -r build'}, text='I will remove build.'), openai_stream(['Done, build is gone.']))
    with BotAPIServer() as telegram:
        monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_OWNERS', '1001')
        monkeypatch.setenv('PASSEPARTOUT_TELEGRAM_API', telegram.url)
        Vault().add('TELEGRAM_TOKEN', telegram.token)
        async def go():
            app = PassepartoutApp()
            async with app.run_test(size=(140, 40)) as pilot:
                await ready(pilot)
                telegram.message('clean up the build directory', chat=1001)
                token = await held_in(pilot, 'telegram-1001')
                assert any(m.get('reply_markup') for m in telegram.sent)          # the chat has its buttons too
                await pilot.press('f3', 'y')
                await until(pilot, lambda: any(t.startswith('Done') for t in telegram.texts(1001)))
                await until(pilot, lambda: not app.pending)
            return token
        token = run(go())
        chat = telegram.texts(1001)
    assert not build.exists() and ApprovalStore().get(token)['state'] == 'used'
    assert chat[-1] == 'Done, build is gone.', chat                               # the conversation went on where it began
    assert [(a['data']['channel'], a['data']['token']) for a in AuditLog().recent(50, kind='approval')] == [('tui', token)]
