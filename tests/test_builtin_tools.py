"""The built-in tools, for real, in a temporary workspace; HTTP against a loopback server."""
import gc, os, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
import pytest
from passepartout.builtin_tools import (builtin_tools, confine, read_file, write_file, edit_file, list_dir, search_files,
                                        http_fetch, send_message, shell, tool_workspace, MAX_WRITE_BYTES, MAX_LIST)
from passepartout.sandbox import sandbox_available
from passepartout.signals import Context, Signal, tool_call, reply
from passepartout.loop import Agent
from passepartout.reason import ScriptedProvider

needs_sandbox = pytest.mark.skipif(not sandbox_available(), reason='no usable bubblewrap sandbox')


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'pphome'))
    w = tmp_path / 'ws'; w.mkdir()
    (tmp_path / 'outside').mkdir(); (tmp_path / 'outside' / 'secret.txt').write_text('TOP SECRET\n')
    return Path(os.path.realpath(w))


@pytest.fixture
def ctx(ws): return Context(agent=Agent(workspace=ws))


# ---- confinement -------------------------------------------------------------------------------

def test_workspace_from_agent_or_config(ws, monkeypatch, tmp_path):
    assert tool_workspace(Context(agent=Agent(workspace=ws))) == ws
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'outside'))
    assert tool_workspace(None) == Path(os.path.realpath(tmp_path / 'outside'))
    assert tool_workspace(Context(agent=Agent(workspace=None))) == Path(os.path.realpath(tmp_path / 'outside'))
    assert read_file('secret.txt') == 'TOP SECRET\n'   # no ctx at all: config.workspace()


@pytest.mark.parametrize('path', ['../outside/secret.txt', '/etc/passwd', '~/.bashrc', 'a/../../outside/secret.txt', '/'])
def test_paths_outside_are_refused(ctx, path):
    with pytest.raises(PermissionError, match='outside the workspace'): read_file(path, ctx=ctx)
    with pytest.raises(PermissionError, match='outside the workspace'): write_file(path, 'x', ctx=ctx)


def test_symlink_escapes_are_refused_by_the_tools(ws, ctx, tmp_path):
    os.symlink(tmp_path / 'outside', ws / 'dirlink')
    os.symlink(tmp_path / 'outside' / 'secret.txt', ws / 'filelink')
    os.symlink(tmp_path / 'outside' / 'new.txt', ws / 'dangling')
    for call in (lambda: read_file('dirlink/secret.txt', ctx=ctx), lambda: read_file('filelink', ctx=ctx),
                 lambda: write_file('dirlink/evil.txt', 'x', ctx=ctx), lambda: write_file('filelink', 'x', ctx=ctx),
                 lambda: write_file('dangling', 'x', ctx=ctx), lambda: edit_file('filelink', 'TOP', 'NO', ctx=ctx),
                 lambda: list_dir('dirlink', ctx=ctx), lambda: search_files('SECRET', path='dirlink', ctx=ctx)):
        with pytest.raises(PermissionError, match='outside the workspace'): call()
    assert (tmp_path / 'outside' / 'secret.txt').read_text() == 'TOP SECRET\n'
    assert sorted(os.listdir(tmp_path / 'outside')) == ['secret.txt']
    # a recursive search does not follow the links out either
    (ws / 'own.txt').write_text('SECRET of my own\n')
    assert search_files('SECRET', ctx=ctx) == 'own.txt:1: SECRET of my own'


def test_symlink_inside_the_workspace_is_fine(ws, ctx):
    (ws / 'real.txt').write_text('inside\n'); os.symlink('real.txt', ws / 'alias.txt')
    assert read_file('alias.txt', ctx=ctx) == 'inside\n'
    write_file('alias.txt', 'changed\n', ctx=ctx)
    assert (ws / 'real.txt').read_text() == 'changed\n' and (ws / 'alias.txt').is_symlink()


def test_protected_places_inside_the_workspace(ws, ctx, monkeypatch):
    (ws / '.ssh').mkdir(); (ws / '.ssh' / 'id_ed25519').write_text('PRIVATE KEY\n')
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(ws / '.pp'))
    (ws / '.pp' / 'config').mkdir(parents=True); (ws / '.pp' / 'config' / 'permissions.toml').write_text('rules\n')
    for path in ('.ssh/id_ed25519', '.ssh', '.pp/config/permissions.toml', '.pp/data/vault.db'):
        with pytest.raises(PermissionError, match='no tool may touch'): read_file(path, ctx=ctx)
        with pytest.raises(PermissionError, match='no tool may touch'): write_file(path, 'x', ctx=ctx)
    assert search_files('PRIVATE|rules', ctx=ctx).startswith('no matches')


def _relink(target, link):
    "Point `link` at `target` in one step (a new symlink renamed over the old), as a racing program would."
    os.symlink(target, f"{link}.new"); os.replace(f"{link}.new", link)


@pytest.mark.parametrize('watcher', [True, False])
def test_kept_protected_places_follow_every_link_change(ws, ctx, monkeypatch, watcher):
    "The protected paths are kept between calls; a link made or moved since must count at once, at any depth."
    from passepartout import sandbox, watch
    if not watcher: monkeypatch.setattr(watch, 'changes', lambda poll=True: None)
    for d in ('pub', 'cfg1/gcloud', 'cfg2/gcloud', 'd1/aws', 'd2/aws'): (ws / d).mkdir(parents=True)
    os.symlink('cfg1', ws / '.config'); os.symlink('lnk/aws', ws / '.aws'); os.symlink('d1', ws / 'lnk')
    for path in ('pub/a', 'cfg2/gcloud/a', 'd2/aws/a'): assert write_file(path, 'x', ctx=ctx).startswith('created')
    for path in ('cfg1/gcloud/a', 'd1/aws/a'):
        with pytest.raises(PermissionError, match='no tool may touch'): write_file(path, 'x', ctx=ctx)
    if watcher and watch.changes() is not None: assert any(k[0] == str(ws) for k in sandbox._protected)   # kept, not worked out each call
    os.symlink('pub', ws / '.ssh')                          # a new link: pub is now where the keys are
    _relink('cfg2', ws / '.config')                         # a link moved: cfg2/gcloud is protected, cfg1/gcloud no longer
    _relink('d2', ws / 'lnk')                               # a link in the middle of another link's target
    for path in ('pub/authorized_keys', 'cfg2/gcloud/b', 'd2/aws/b'):
        with pytest.raises(PermissionError, match='no tool may touch'): write_file(path, 'x', ctx=ctx)
        with pytest.raises(PermissionError, match='no tool may touch'): read_file(path.rsplit('/', 1)[0] + '/a' if 'pub' not in path else 'pub/a', ctx=ctx)
    assert write_file('cfg1/gcloud/b', 'x', ctx=ctx).startswith('created') and write_file('d1/aws/b', 'x', ctx=ctx).startswith('created')
    assert not (ws / 'pub' / 'authorized_keys').exists()


def test_links_inside_are_walked_beneath_the_workspace(ws, ctx):
    (ws / 'docs' / 'sub').mkdir(parents=True); (ws / 'docs' / 'x.txt').write_text('x in docs\n')
    (ws / 'docs' / 'sub' / 'y.txt').write_text('y\n')
    os.symlink('docs/sub', ws / 'rel'); os.symlink(ws / 'docs' / 'sub', ws / 'abs'); os.symlink('rel', ws / 'chain')
    assert read_file('rel/y.txt', ctx=ctx) == read_file('abs/y.txt', ctx=ctx) == read_file('chain/y.txt', ctx=ctx) == 'y\n'
    assert read_file('rel/../x.txt', ctx=ctx) == 'x in docs\n'       # `..` after a link is the target's parent, as the kernel has it
    assert list_dir('chain', ctx=ctx) == 'docs/sub/ (1 entry)\ny.txt  (2 bytes)'
    assert write_file('abs/z.txt', 'z', ctx=ctx) == 'created docs/sub/z.txt (1 bytes)'
    os.symlink('docs/new-target.txt', ws / 'dangling-inside')
    assert write_file('dangling-inside', 'made', ctx=ctx) == 'created docs/new-target.txt (4 bytes)'
    assert (ws / 'dangling-inside').is_symlink()
    os.symlink('loop-b', ws / 'loop-a'); os.symlink('loop-a', ws / 'loop-b')
    with pytest.raises(OSError, match='more than 40 symlinks'): read_file('loop-a', ctx=ctx)


@pytest.mark.parametrize('target', ['/proc/self/root/etc', '/proc/self/cwd', '/proc/self/fd', '/proc/1/root', '..', '../ws/../outside'])
def test_links_out_and_magic_links_are_refused(ws, ctx, target):
    os.symlink(target, ws / 'door')
    for call in (lambda: read_file('door/passwd', ctx=ctx), lambda: list_dir('door', ctx=ctx),
                 lambda: write_file('door/x.txt', 'x', ctx=ctx), lambda: search_files('root', path='door', ctx=ctx)):
        with pytest.raises(PermissionError, match='outside the workspace'): call()


def test_a_link_into_a_protected_place_is_refused(ws, ctx):
    (ws / '.ssh').mkdir(); (ws / '.ssh' / 'id_ed25519').write_text('PRIVATE KEY\n')
    os.symlink('.ssh', ws / 'keys'); os.symlink(ws / '.ssh' / 'id_ed25519', ws / 'key')
    for path in ('keys/id_ed25519', 'key', 'docs/../.ssh/id_ed25519', str(ws / '.ssh' / 'id_ed25519')):
        with pytest.raises(PermissionError, match="inside '.ssh', which no tool may touch"): read_file(path, ctx=ctx)
    with pytest.raises(PermissionError, match="inside '.ssh'"): write_file('keys/authorized_keys', 'ssh-ed25519 AAAA', ctx=ctx)
    with pytest.raises(PermissionError, match="inside '.ssh'"): list_dir('keys', ctx=ctx)
    assert search_files('PRIVATE', ctx=ctx).startswith('no matches')
    assert sorted(os.listdir(ws / '.ssh')) == ['id_ed25519']


def test_hard_link_to_a_file_outside_is_never_written(ws, ctx, tmp_path):
    outside = tmp_path / 'outside' / 'secret.txt'
    os.link(outside, ws / 'hard.txt')                     # made by the owner: the sandbox cannot make one
    assert read_file('hard.txt', ctx=ctx) == 'TOP SECRET\n'  # a read shows the file (documented)
    assert edit_file('hard.txt', 'TOP', 'NOT', ctx=ctx) == 'edited hard.txt at line 1'
    write_file('hard.txt', 'overwritten\n', ctx=ctx)
    assert outside.read_text() == 'TOP SECRET\n' and outside.stat().st_nlink == 1
    assert (ws / 'hard.txt').read_text() == 'overwritten\n'


def _without_hanging(call, fifo:Path, seconds=60):   # a hang detector: generous on a loaded machine
    "Run `call` in a thread; if it is still blocked (opening the pipe) after `seconds`, unblock it and say so."
    out = {}
    def run():
        try: out['result'] = call()
        except Exception as e: out['error'] = e
    t = threading.Thread(target=run, daemon=True); t.start(); t.join(seconds)
    if t.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)); t.join(5)   # a writer comes and goes: the reader gets EOF
        pytest.fail(f"the tool hung on the named pipe {fifo.name}")
    if 'error' in out: raise out['error']
    return out['result']


def test_special_files_do_not_hang_the_tools(ws, ctx):
    os.mkfifo(ws / 'pipe'); (ws / 'a.txt').write_text('found\n')
    wait = lambda call: _without_hanging(call, ws / 'pipe')
    assert wait(lambda: search_files('found', ctx=ctx)) == 'a.txt:1: found'
    assert wait(lambda: search_files('found', path='pipe', ctx=ctx)) == 'no matches for /found/ in pipe'
    with pytest.raises(FileNotFoundError, match='not a regular file'): wait(lambda: read_file('pipe', ctx=ctx))
    with pytest.raises(FileNotFoundError, match='not a regular file'): wait(lambda: edit_file('pipe', 'a', 'b', ctx=ctx))
    with pytest.raises(ValueError, match='not a regular file'): wait(lambda: write_file('pipe', 'x', ctx=ctx))


def test_tools_close_every_descriptor(ws, ctx):
    (ws / 'd').mkdir(); (ws / 'd' / 'f.txt').write_text('hello\n'); os.symlink('/etc', ws / 'out')
    calls = [lambda: read_file('d/f.txt', ctx=ctx), lambda: read_file('out/hostname', ctx=ctx), lambda: read_file('nope/x', ctx=ctx),
             lambda: write_file('d/g.txt', 'x', ctx=ctx), lambda: write_file('d', 'x', ctx=ctx), lambda: edit_file('d/f.txt', 'zz', 'y', ctx=ctx),
             lambda: list_dir('d', ctx=ctx), lambda: list_dir('d/f.txt', ctx=ctx), lambda: search_files('hello', ctx=ctx),
             lambda: search_files('hello', path='d/f.txt', ctx=ctx), lambda: search_files('(', ctx=ctx)]
    gc.collect(); gc.disable()   # earlier tests' dropped agents close their files when collected: not during the count
    try:
        before = len(os.listdir('/proc/self/fd'))
        for _ in range(20):
            for call in calls:
                try: call()
                except (OSError, ValueError): pass
        assert len(os.listdir('/proc/self/fd')) == before
    finally: gc.enable()


# ---- read_file ---------------------------------------------------------------------------------

def test_read_huge_file_is_capped(ws, ctx, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_MAX_OUTPUT_BYTES', '10000')
    (ws / 'one_line.txt').write_bytes(b'x' * 5_000_000)         # a single 5 MB line
    out = read_file('one_line.txt', ctx=ctx)
    assert out.startswith('x' * 10000) and 'x' * 10001 not in out and 'offset=1' in out
    with open(ws / 'many.txt', 'w') as f:
        for i in range(200_000): f.write(f"row {i}\n")
    out = read_file('many.txt', ctx=ctx)
    assert len(out.encode()) < 10_200 and out.startswith('row 0\n') and 'to read on' in out
    out = read_file('many.txt', offset=150_000, limit=3, ctx=ctx)
    assert out.startswith('row 150000\nrow 150001\nrow 150002\n') and 'offset=150003' in out


def test_read_binary_and_missing(ws, ctx):
    (ws / 'img.bin').write_bytes(b'\x89PNG\0\0\0')
    with pytest.raises(ValueError, match='binary file'): read_file('img.bin', ctx=ctx)
    with pytest.raises(FileNotFoundError, match='no file'): read_file('nope.txt', ctx=ctx)
    (ws / 'empty.txt').write_text('')
    assert read_file('empty.txt', ctx=ctx) == '(empty file)'


# ---- write_file and edit_file -----------------------------------------------------------------

def test_write_creates_parents_and_is_atomic(ws, ctx):
    assert write_file('a/b/c.txt', 'héllo', ctx=ctx) == 'created a/b/c.txt (6 bytes)'
    (ws / 'a/b/c.txt').chmod(0o640)
    assert write_file('a/b/c.txt', 'new', ctx=ctx) == 'replaced a/b/c.txt (3 bytes)'
    assert (ws / 'a/b/c.txt').read_text() == 'new' and oct((ws / 'a/b/c.txt').stat().st_mode & 0o777) == '0o640'
    assert sorted(os.listdir(ws / 'a/b')) == ['c.txt']        # no temporary file left behind
    with pytest.raises(IsADirectoryError): write_file('a', 'x', ctx=ctx)


def test_write_size_limit(ws, ctx):
    with pytest.raises(ValueError, match='at most'): write_file('big.txt', 'x' * (MAX_WRITE_BYTES + 1), ctx=ctx)
    assert not (ws / 'big.txt').exists()


def test_edit_file_exactly_once(ws, ctx):
    (ws / 'cfg.py').write_text('a = 1\nb = 1\nc = 2\n')
    with pytest.raises(ValueError, match="occurs 2 times in cfg.py"): edit_file('cfg.py', ' = 1', ' = 3', ctx=ctx)
    with pytest.raises(ValueError, match='does not occur'): edit_file('cfg.py', 'd = 4', 'd = 5', ctx=ctx)
    with pytest.raises(ValueError, match='is empty'): edit_file('cfg.py', '', 'x', ctx=ctx)
    with pytest.raises(FileNotFoundError): edit_file('missing.py', 'a', 'b', ctx=ctx)
    assert (ws / 'cfg.py').read_text() == 'a = 1\nb = 1\nc = 2\n'
    assert edit_file('cfg.py', 'b = 1', 'b = 10', ctx=ctx) == 'edited cfg.py at line 2'
    assert (ws / 'cfg.py').read_text() == 'a = 1\nb = 10\nc = 2\n'
    assert edit_file('cfg.py', 'c = 2\n', '', ctx=ctx) == 'edited cfg.py at line 3'
    assert (ws / 'cfg.py').read_text() == 'a = 1\nb = 10\n'


# ---- list_dir and search_files ----------------------------------------------------------------

def test_list_dir(ws, ctx):
    (ws / 'sub').mkdir(); (ws / 'f.txt').write_text('12345'); os.symlink('f.txt', ws / 'ln')
    assert list_dir(ctx=ctx) == './ (3 entries)\nf.txt  (5 bytes)\nln -> f.txt\nsub/'
    with pytest.raises(NotADirectoryError): list_dir('f.txt', ctx=ctx)
    for i in range(MAX_LIST + 50): (ws / 'sub' / f'{i:05}').touch()
    out = list_dir('sub', ctx=ctx)
    assert out.startswith(f'sub/ ({MAX_LIST + 50} entries)') and out.endswith('[... 50 more entries not shown]')


def test_search_files(ws, ctx):
    (ws / 'src').mkdir(); (ws / 'src' / 'a.py').write_text('def main():\n    return 42\n')
    (ws / 'src' / 'b.txt').write_text('main course\n')
    (ws / '.git').mkdir(); (ws / '.git' / 'config').write_text('main = branch\n')
    (ws / 'blob.bin').write_bytes(b'main\0\0')
    assert search_files(r'\bmain\b', ctx=ctx) == 'src/a.py:1: def main():\nsrc/b.txt:1: main course'
    assert search_files('main', glob='*.py', ctx=ctx) == 'src/a.py:1: def main():'
    assert search_files('return', path='src/a.py', ctx=ctx) == 'src/a.py:2:     return 42'
    with pytest.raises(ValueError, match='invalid regular expression'): search_files('[', ctx=ctx)


@pytest.mark.parametrize('pattern, why', [
    (r'(\w+) \1', 'invalid escape sequence'), (r'(?P<w>x)(?P=w)', 'invalid'), (r'foo(?=bar)', 'invalid perl operator: \(\?='),
    (r'(?<!x)y', 'invalid perl operator'), (r'a++', 'bad repetition operator'), (r'(?>a)', 'invalid perl operator'),
    (r'end\Z', 'invalid escape sequence'), (r'x{1001}', 'invalid repetition size')])
def test_search_refuses_what_re2_cannot_do_with_one_clear_error(ws, ctx, pattern, why):
    with pytest.raises(ValueError, match=f'invalid regular expression .*{why}.*search_files uses RE2 syntax'): search_files(pattern, ctx=ctx)


def test_search_refuses_patterns_too_large_to_match_cheaply(ws, ctx):
    with pytest.raises(ValueError, match='too large .* at most 5000'): search_files(r'(.*a){1000}x', ctx=ctx)
    with pytest.raises(ValueError, match='too large'): search_files('[a-q][^u-z]{1000}x', ctx=ctx)


def test_search_syntax_that_re2_shares_with_python(ws, ctx):
    (ws / 'a.txt').write_text('Café au lait\nend of line\nid: 12345\n')
    assert search_files(r'(?i)CAFÉ', ctx=ctx) == 'a.txt:1: Café au lait'
    assert search_files(r'\bline\z', ctx=ctx) == 'a.txt:2: end of line'
    assert search_files(r'(?P<key>\w+): \d{3,}', ctx=ctx) == 'a.txt:3: id: 12345'
    assert search_files(r'\pL+é', ctx=ctx) == 'a.txt:1: Café au lait'


def test_search_time_limit_covers_the_walk_itself(ws, ctx, monkeypatch):
    # directories of links that lead out: nothing to read, but walking them still counts against the limit
    from passepartout import builtin_tools
    monkeypatch.setattr(builtin_tools, 'SEARCH_SECONDS', 0)
    for i in range(100): (ws / f'd{i}').mkdir(); os.symlink('/etc/passwd', ws / f'd{i}' / 'link')
    assert search_files('root', ctx=ctx) == 'no matches for /root/ in .\n[... stopped at time limit of 0 s; narrow the pattern, path or glob]'


def test_edit_refuses_a_file_that_grew_too_large(ws, ctx, monkeypatch):
    from passepartout import builtin_tools
    monkeypatch.setattr(builtin_tools, 'MAX_WRITE_BYTES', 100)
    (ws / 'log.txt').write_text('x' * 101)
    with pytest.raises(ValueError, match='larger than 100 bytes'): edit_file('log.txt', 'x', 'y', ctx=ctx)
    assert (ws / 'log.txt').read_text() == 'x' * 101


def test_search_depth_is_bounded_and_said(ws, ctx, monkeypatch):
    from passepartout import builtin_tools
    monkeypatch.setattr(builtin_tools, 'SEARCH_DEPTH', 3)
    deep = ws.joinpath(*'abcdef'); deep.mkdir(parents=True); (deep / 'f.txt').write_text('needle\n')
    (ws / 'a' / 'top.txt').write_text('needle\n')
    assert search_files('needle', ctx=ctx) == 'a/top.txt:1: needle\n[... directories deeper than 3 levels not searched]'


def test_search_caps_matches(ws, ctx):
    (ws / 'log.txt').write_text('hit\n' * 1000)
    out = search_files('hit', ctx=ctx)
    assert out.count('\n') == 200 and out.endswith('stopped at 200 matches; narrow the pattern, path or glob]')


# ---- shell -------------------------------------------------------------------------------------

@needs_sandbox
def test_shell_runs_in_the_workspace(ws, ctx, tmp_path):
    out = shell('pwd; echo hi > out.txt; echo bad > ../outside/x.txt', ctx=ctx)
    assert out.startswith('[exit 1,') and str(ws) in out
    assert (ws / 'out.txt').read_text() == 'hi\n' and not (tmp_path / 'outside' / 'x.txt').exists()


@needs_sandbox
def test_shell_timeout_is_clamped_to_the_setting(ws, ctx, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_TIMEOUT', '1')
    out = shell('sleep 30', timeout=1000, ctx=ctx)
    assert 'timed out' in out, out        # under the asked 1000 s, the sleep would have ended: the setting's 1 s stopped it


# ---- http_fetch --------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    hits = []
    def log_message(self, *a): pass
    def _send(self, code, body=b'', ctype='text/plain; charset=utf-8', **headers):
        self.send_response(code); self.send_header('Content-Type', ctype); self.send_header('Content-Length', str(len(body)))
        for k, v in headers.items(): self.send_header(k, v)
        self.end_headers()
        if self.command != 'HEAD': self.wfile.write(body)
    def do_GET(self):
        Handler.hits.append(self.path)
        if self.path == '/hello': self._send(200, 'grüß dich\n'.encode())
        elif self.path == '/big': self._send(200, b'y' * 2_000_000)
        elif self.path == '/redirect': self._send(302, b'', Location='http://127.0.0.1:9/elsewhere')
        elif self.path == '/oddcharset': self._send(200, b'caf\xc3\xa9', 'text/plain; charset=no-such-charset')
        elif self.path == '/latin1': self._send(200, b'caf\xe9', 'text/plain; charset=iso-8859-1')
        elif self.path == '/drip': self._drip()
        elif self.path == '/bin': self._send(200, b'\x00\x01\x02' * 100, 'application/octet-stream')
        else: self._send(404, b'not here')
    do_HEAD = do_GET
    def _drip(self):
        self.send_response(200); self.send_header('Content-Type', 'text/plain'); self.end_headers()
        try:
            for _ in range(100): self.wfile.write(b'.'); self.wfile.flush(); time.sleep(0.05)   # part of the test: a slow server
        except OSError: pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length'] or 0))
        self._send(201, b'got ' + body, 'application/json')


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Handler.hits = []
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown(); srv.server_close()


def test_http_fetch_text(server, ctx):
    assert http_fetch(f'{server}/hello', ctx=ctx) == 'HTTP 200 OK · text/plain · 12 bytes\n\ngrüß dich\n'
    assert http_fetch(f'{server}/nothing', ctx=ctx) == 'HTTP 404 Not Found · text/plain · 8 bytes\n\nnot here'
    assert http_fetch(f'{server}/hello', method='head', ctx=ctx) == 'HTTP 200 OK · text/plain · 0 bytes'
    assert http_fetch(f'{server}/x', method='POST', body='{"a": 1}', ctx=ctx) == 'HTTP 201 Created · application/json · 12 bytes\n\ngot {"a": 1}'


def test_http_fetch_size_cap(server, ctx, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_MAX_OUTPUT_BYTES', '1000')
    out = http_fetch(f'{server}/big', ctx=ctx)
    assert out.startswith('HTTP 200 OK · text/plain · 1000 bytes (stopped at the size limit of 1000 bytes)')
    assert out.split('\n\n', 1)[1] == 'y' * 1000


def test_http_fetch_charsets(server, ctx):
    assert http_fetch(f'{server}/latin1', ctx=ctx).endswith('\n\ncafé')
    assert http_fetch(f'{server}/oddcharset', ctx=ctx).endswith('\n\ncafé')


def test_http_fetch_overall_time_limit(server, ctx, monkeypatch):
    from passepartout import builtin_tools
    monkeypatch.setattr(builtin_tools, 'FETCH_SECONDS', 0.5)
    out = http_fetch(f'{server}/drip', ctx=ctx)   # a server trickling one byte every 50 ms, never idle long enough to time out
    assert 'stopped at the time limit' in out and len(out.split('\n\n', 1)[1]) < 100, out   # cut before the 100th byte


def test_http_fetch_does_not_follow_redirects(server, ctx):
    out = http_fetch(f'{server}/redirect', ctx=ctx)
    assert out == "HTTP 302 Found: redirects to 'http://127.0.0.1:9/elsewhere', not followed (fetch that URL if you need it)"
    assert Handler.hits == ['/redirect']


def test_http_fetch_binary_and_errors(server, ctx):
    assert http_fetch(f'{server}/bin', ctx=ctx).endswith('(binary content, not shown)')
    with pytest.raises(ValueError, match='not an http'): http_fetch('ftp://127.0.0.1/x', ctx=ctx)
    with pytest.raises(ValueError, match='not an http'): http_fetch('http:///nohost', ctx=ctx)
    with pytest.raises(ConnectionError, match='ConnectError'): http_fetch('http://127.0.0.1:9/', ctx=ctx)


def test_http_fetch_ignores_proxy_environment(server, ctx, monkeypatch):
    monkeypatch.setenv('HTTP_PROXY', 'http://127.0.0.1:9'); monkeypatch.setenv('ALL_PROXY', 'http://127.0.0.1:9')
    assert http_fetch(f'{server}/hello', ctx=ctx).startswith('HTTP 200 OK')


def test_import_is_cheap():
    code = "import sys, passepartout.builtin_tools; assert 'httpx' not in sys.modules, 'httpx imported'"
    subprocess.run([sys.executable, '-c', code], check=True)


# ---- send_message ------------------------------------------------------------------------------

def test_send_message_through_a_gateway(ws):
    agent = Agent(ScriptedProvider([]), tools=builtin_tools(), workspace=ws)
    delivered = []
    agent.actuators.register('telegram', lambda a, c: delivered.append((a.kind, a.target, a.text, c.signal.meta)), silent=True)
    ctx = Context(Signal(meta={'source': 'cli', 'session': 's1', 'chat_id': 'owner-chat'}), agent)
    assert agent.tools.run('send_message', {'channel': 'telegram', 'recipient': '+4912345', 'text': 'Dinner at 8?'}, ctx) \
        == 'sent to +4912345 via telegram (12 characters)'
    kind, target, text, meta = delivered[0]
    assert (kind, target, text) == ('reply', 'telegram', 'Dinner at 8?')
    assert meta == {'source': 'telegram', 'recipient': '+4912345', 'session': 's1', 'outbound': True}
    with pytest.raises(ValueError, match="no gateway named 'signal'; available: cli, telegram"):
        send_message('signal', '+49', 'x', ctx=ctx)
    with pytest.raises(ValueError, match='must not be empty'): send_message('telegram', '', 'x', ctx=ctx)
    with pytest.raises(RuntimeError, match='needs an agent'): send_message('telegram', '1', 'x', ctx=None)


# ---- the belt and whole turns ------------------------------------------------------------------

def test_belt_names_and_effects():
    belt = builtin_tools()
    assert {t.name: t.effect for t in belt} == {
        'shell': 'local-write', 'read_file': 'read-only', 'write_file': 'local-write', 'edit_file': 'local-write',
        'list_dir': 'read-only', 'search_files': 'read-only', 'http_fetch': 'outward', 'send_message': 'outward'}
    props = {s['name']: list(s['parameters']['properties']) for s in belt.schemas()}
    assert props == {'shell': ['command', 'timeout', 'why'], 'read_file': ['path', 'offset', 'limit'], 'write_file': ['path', 'content', 'why'],
                     'edit_file': ['path', 'old', 'new', 'why'], 'list_dir': ['path'], 'search_files': ['pattern', 'path', 'glob'],
                     'http_fetch': ['url', 'method', 'body', 'why'], 'send_message': ['channel', 'recipient', 'text', 'why']}
    assert all(s['description'] for s in belt.schemas())


@needs_sandbox
def test_end_to_end_turn_writes_only_inside_the_workspace(ws, tmp_path, monkeypatch):
    elsewhere = tmp_path / 'cwd'; elsewhere.mkdir(); monkeypatch.chdir(elsewhere)
    agent = Agent(ScriptedProvider([tool_call('shell', {'command': 'echo hi > out.txt'}, call_id='c1'),
                                    lambda req: reply(f"done: {req.messages[-1]['content']}")]),
                  tools=builtin_tools(), workspace=ws)
    turn = agent.send('make a file')
    assert (ws / 'out.txt').read_text() == 'hi\n'
    assert not (elsewhere / 'out.txt').exists() and not (tmp_path / 'out.txt').exists()
    assert turn.reply.startswith('done: [exit 0,')
    assert [e['kind'] for e in turn.events] == ['proposal', 'verdict', 'result', 'proposal', 'verdict', 'reply']


def test_end_to_end_escape_becomes_a_tool_error(ws, tmp_path):
    agent = Agent(ScriptedProvider([tool_call('write_file', {'path': '../outside/pwned.txt', 'content': 'x'}),
                                    lambda req: reply(req.messages[-1]['content'])]),
                  tools=builtin_tools(), workspace=ws)
    turn = agent.send('try to escape')
    assert turn.reply.startswith("PermissionError: '../outside/pwned.txt' is outside the workspace")
    assert not (tmp_path / 'outside' / 'pwned.txt').exists()


# ---- shell without a sandbox: only what the owner approved runs, unconfined but limited --------

from passepartout import sandbox as sandbox_module
from passepartout.builtin_tools import released_by_owner
from passepartout.sandbox import SandboxUnavailable
from passepartout.signals import Turn


@pytest.fixture
def no_bwrap(monkeypatch):
    "bubblewrap off the PATH, as on a machine without it (the availability cache is reset around the test)."
    monkeypatch.setenv('PATH', '/nonexistent')
    sandbox_module.sandbox_problem.cache_clear()
    yield
    sandbox_module.sandbox_problem.cache_clear()


def test_shell_without_sandbox_refuses_an_unapproved_call(ws, ctx, no_bwrap):
    assert sandbox_module.sandbox_problem() == 'bubblewrap (bwrap) is not installed'
    with pytest.raises(SandboxUnavailable, match='only a command the owner approved'):
        shell('echo x > made.txt', ctx=ctx)
    assert not (ws / 'made.txt').exists()


def test_shell_without_sandbox_and_without_gates_still_refuses(ws, no_bwrap):
    # a gate bug (here: no gates at all) allows the call: the tool itself still refuses to run it unconfined
    agent = Agent(ScriptedProvider([tool_call('shell', {'command': 'echo x > made.txt'}), reply('done')]),
                  tools=builtin_tools(), workspace=ws)
    turn = agent.send('make a file')
    assert not (ws / 'made.txt').exists()
    errors = [m for m in agent.transcript('default') if m.get('role') == 'tool']
    assert errors and 'only a command the owner approved' in errors[0]['content'], turn.events


def _approved_ctx(ws, store, command, token, digest_of=None, event=True):
    "A context with every mark of an approval but the grant: the owner's approval signal, the turn's approval event, the store."
    action = tool_call('shell', {'command': command})
    sig = Signal(meta={'source': 'cli'}, payload={'sensor': 'approval-command', 'verb': 'approve', 'token': token},
                 status='handled', approved_action=action)
    turn = Turn()
    if event: turn.record('approval', token=token, digest=(digest_of or action).digest(), action=action.to_dict())
    return Context(sig, Agent(workspace=ws, approvals=store), turn)


def test_forged_approval_marks_are_refused(ws, tmp_path):
    "Only the grant Act hands the tool releases a command: the marks around it, even all true, do not."
    from passepartout.approvals import ApprovalStore
    from passepartout.gates import Decision
    store = ApprovalStore(tmp_path / 'approvals.db')
    held = tool_call('shell', {'command': 'echo ok'})
    token = store.hold(held, Decision('ask', held, []), None)
    assert not released_by_owner(_approved_ctx(ws, store, 'echo ok', token), 'echo ok')
    store.approve(token); store.claim(token)
    assert not released_by_owner(_approved_ctx(ws, store, 'echo ok', token), 'echo ok')   # a used token in the store: no grant
    assert not released_by_owner(Context(agent=Agent(workspace=ws)), 'echo ok')


def test_a_grant_releases_exactly_its_command(ws):
    from passepartout.signals import Grant
    held = tool_call('shell', {'command': 'echo ok'})
    ctx = Context(agent=Agent(workspace=ws), grant=Grant('k7m2p9qx', held.digest(), held, 'cli'))
    assert released_by_owner(ctx, 'echo ok')
    assert not released_by_owner(ctx, 'rm -rf .') and not released_by_owner(ctx, 'echo ok ')
    other = tool_call('write_file', {'command': 'echo ok'})   # a grant for another tool releases no shell command
    assert not released_by_owner(Context(agent=Agent(workspace=ws), grant=Grant('k7m2p9qx', other.digest(), other, 'cli')), 'echo ok')


def test_act_hands_the_grant_only_with_the_action_it_names(ws):
    from passepartout.signals import Grant
    from passepartout.act import act
    seen = []
    def peek(x:int=0, ctx=None):
        "Note the grant the call runs under."
        seen.append(ctx.grant)
    belt = builtin_tools(); belt.add(peek, effect='read-only')
    agent = Agent(tools=belt, workspace=ws)
    call = tool_call('peek')
    grant = Grant('k7m2p9qx', call.digest(), call, 'cli')
    run = lambda action, g, ctx=None: act(Signal(meta={'source': 'cli'}, payload={'sensor': 'approval-command'}, status='handled',
                                                  approved_action=action), ctx or Context(agent=agent, turn=Turn()), g)
    run(call, grant); run(tool_call('peek', {'x': 1}), grant); run(call, None, Context(agent=agent, turn=Turn(), grant=grant))
    assert seen == [grant, None, None]


def _app_agent(ws, script):
    from passepartout.app import build_agent
    return build_agent(provider=ScriptedProvider(list(script)), workspace=ws)


def test_approved_command_runs_unconfined_with_the_real_gates(ws, no_bwrap, monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-SECRET-in-the-agent-env')
    agent = _app_agent(ws, [tool_call('shell', {'command': 'echo hi > approved.txt; env | grep -c SECRET; pwd'}, explanation='make the file'), reply('waiting')])
    turn = agent.send('make a file', source='cli')
    assert turn.pending and not (ws / 'approved.txt').exists(), turn.events
    token = turn.pending[0]['token']
    asked = [r for e in turn.of('verdict') for r in e['trace'] if r['gate'] == 'sandbox']
    assert asked and asked[0]['decision'] == 'ask', turn.events   # the sandbox gate held it
    # a stranger cannot release it
    assert agent.send(f'approve {token}', source='telegram', owner=False).reply == "Only the owner can approve or deny actions."
    assert not (ws / 'approved.txt').exists()
    answer = agent.send(f'approve {token}', source='cli').replies[0]   # (then the model carries on)
    assert (ws / 'approved.txt').read_text() == 'hi\n', answer
    assert 'ran WITHOUT the sandbox, approved by the owner' in answer and f'\n0\n{ws}' in answer, answer
    # the token is spent: the same command needs a new approval
    assert 'already used' in agent.send(f'approve {token}', source='cli').reply


def test_approved_from_another_process(ws, tmp_path, no_bwrap):
    # hold in this process, approve with the real `passepartout approve` command in a second process without bwrap
    agent = _app_agent(ws, [tool_call('shell', {'command': 'echo from-cli > cli.txt'}, explanation='make the file'), reply('waiting')])
    token = agent.send('make a file', source='cli').pending[0]['token']
    env = {k: v for k, v in os.environ.items() if not k.startswith('PASSEPARTOUT_')}
    env.update(PATH='/nonexistent', PASSEPARTOUT_HOME=os.environ['PASSEPARTOUT_HOME'], PASSEPARTOUT_WORKSPACE=str(ws),
               PASSEPARTOUT_PROVIDERS='replay')
    r = subprocess.run([sys.executable, '-c', 'from passepartout.cli import main; main()', 'approve', token],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (ws / 'cli.txt').read_text() == 'from-cli\n' and 'ran WITHOUT the sandbox' in r.stdout


def test_approved_command_under_limits(ws, no_bwrap, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_SHELL_CPU_SECONDS', '1')
    agent = _app_agent(ws, [tool_call('shell', {'command': 'while :; do :; done'}, explanation='spin'), reply('waiting')])
    token = agent.send('spin', source='cli').pending[0]['token']
    answer = agent.send(f'approve {token}', source='cli').replies[0]   # (then the model carries on)
    assert 'stopped by the CPU time limit' in answer and 'ran WITHOUT the sandbox' in answer, answer
