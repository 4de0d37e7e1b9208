"""Issue 12, class 5: an approval binds what a command runs, not only its text.

`bash build.sh` is held; another session rewrites build.sh before the owner's approval arrives; the
approval must not run the new script. `approve --always` must not be offered for a command that runs a
file or inline code, since a rule matches the text and cannot bind the file's future content.
Every release path is exercised: the chat command, `resolve_approval` on the real store, the CLI in
another process without a daemon, a daemon carrying out a decision written elsewhere and a command
handed to it."""
import json, os, subprocess, sys, textwrap, time, types

import pytest

from passepartout.approvals import ApprovalStore, ApprovalError
from passepartout import approval_flow
from passepartout.approval_flow import install_approvals, resolve_approval
from passepartout.gates import GateEngine, ask
from passepartout.loop import Agent
from passepartout.reason import Proposal, ScriptedProvider
from passepartout.signals import tool_call, reply
from passepartout.tools import Toolbelt

sys.path.insert(0, os.path.dirname(__file__))
from _daemon_support import wait_for  # noqa: E402


# -- an agent whose shell really runs bash in the workspace (no sandbox: the test is about what is released) ----

def shell_agent(ws, provider, ran):
    "An agent whose `shell` tool runs the command with bash in `ws` (noting it in `ran`); a gate asks before each one."
    belt = Toolbelt()
    @belt.tool(effect='local-write')
    def shell(command: str):  # the command line
        "Run a command in the workspace."
        ran.append(command)
        r = subprocess.run(['bash', '-c', command], cwd=ws, capture_output=True, text=True, timeout=60,
                           env={**os.environ, 'PATH': os.environ.get('PATH', '/usr/bin:/bin')})
        return (r.stdout + r.stderr).strip() or f"[exit {r.returncode}]"
    gates = GateEngine()
    gates.add('careful', lambda a, c: ask('shell commands need approval') if a.tool == 'shell' else None)
    return Agent(provider, gates=gates, tools=belt, workspace=str(ws))


class ShellModel:
    "`run CMD` proposes shell(CMD); an outcome is answered 'model saw: …'."
    name = 'shell-model'
    def __init__(self): self.requests = []
    def propose(self, request):
        self.requests.append(request)
        s = request.signal
        if s.sensor in ('tool-output', 'tool-error'): return Proposal(reply(f"model saw: {s.text}"))
        if (s.text or '').startswith('run '): return Proposal(tool_call('shell', {'command': s.text[4:]}, explanation='the user asked'))
        return Proposal(reply('ok'))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    return tmp_path / 'home'


@pytest.fixture
def ws(tmp_path, monkeypatch):
    w = tmp_path / 'ws'
    w.mkdir()
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(w))
    return w


@pytest.fixture(autouse=True)
def parse_in_time(monkeypatch):
    """What is bound is tested here, not the machine's speed: a loaded machine could cut a long script's parse
    short at the shell gate's 0.25 s deadline (that case is refused, see the test below)."""
    from passepartout import shell_gate
    monkeypatch.setattr(shell_gate.parse_within, '__defaults__', (60.0,))


def write(ws, name, text, mode=0o644):
    p = ws / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    os.chmod(p, mode)
    return p


def in_other_process(code):
    "Another session writing in the workspace: a separate process."
    subprocess.run([sys.executable, '-c', textwrap.dedent(code)], check=True, timeout=60)



def hold(agent, store, command):
    install_approvals(agent, store)
    turn = agent.send(f'run {command}', session='work')
    assert turn.pending, turn.events
    return turn.pending[0]['token']


# -- the race of the issue, through the real store and the chat release path --------------------------------------

def test_a_script_rewritten_before_the_approval_does_not_run(home, ws):
    write(ws, 'build.sh', 'echo built > built.txt\n')
    ran = []
    agent = shell_agent(ws, ShellModel(), ran)
    token = hold(agent, ApprovalStore(), 'bash build.sh')
    in_other_process(f"open({str(ws / 'build.sh')!r}, 'w').write('echo pwned > pwned.txt\\n')")
    turn = agent.send(f'approve {token}', session='work')
    assert ran == [] and not (ws / 'pwned.txt').exists(), turn.replies
    assert turn.replies[0].startswith(f"approval {token}: not run: build.sh changed after it was held"), turn.replies
    assert 'propose it again' in turn.replies[0]
    assert turn.replies[1].startswith('model saw: approved by the owner, but not run: build.sh changed'), turn.replies   # the model hears it
    assert ApprovalStore().get(token)['state'] == 'used'
    # a new approval can be asked for what the script holds now, and runs it
    again = agent.send('run bash build.sh', session='work').pending[0]['token']
    agent.send(f'approve {again}', session='work')
    assert ran == ['bash build.sh'] and (ws / 'pwned.txt').exists()


def test_an_unchanged_script_runs(home, ws):
    write(ws, 'build.sh', './step.sh\n'); write(ws, 'step.sh', 'echo built > built.txt\n', 0o755)
    ran = []
    agent = shell_agent(ws, ShellModel(), ran)
    token = hold(agent, ApprovalStore(), 'bash build.sh')
    write(ws, 'notes.txt', 'unrelated work elsewhere in the workspace\n')
    res = resolve_approval(agent, ApprovalStore(), token)
    assert res.ok and ran == ['bash build.sh'] and (ws / 'built.txt').read_text() == 'built\n'


# -- the variants: every way a command names a file it runs --------------------------------------------------------

PY_TOOL = {'tool.py': 'import helper, json\nhelper.main()\n', 'helper.py': 'def main(): open("built.txt", "w").write("ok")\n'}
VARIANTS = [  # (files before, command, the file another session changes, its new content)
    ({'build.sh': 'echo ok\n'}, 'bash build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'sh -e build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': '#!/bin/sh\necho ok\n'}, './build.sh', 'build.sh', '#!/bin/sh\ntouch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'source build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, '. ./build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, "bash -c 'bash build.sh'", 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, "sh -c 'cd . && ./build.sh'", 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'env CI=1 bash build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'timeout 30 bash build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'nice -n 5 nohup bash build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'echo | xargs bash build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, r'find . -maxdepth 0 -exec bash build.sh \;', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'cat build.sh | bash', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'bash < build.sh', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'ls && bash build.sh || true', 'build.sh', 'touch pwned\n'),
    ({'build.sh': './step.sh\n', 'step.sh': 'echo ok\n'}, 'bash build.sh', 'step.sh', 'touch pwned\n'),   # a script the script runs
    ({'sub/run.sh': 'echo ok\n'}, 'cd sub && bash run.sh', 'sub/run.sh', 'touch pwned\n'),
    ({}, 'bash gen.sh', 'gen.sh', 'touch pwned\n'),                                   # absent when held, planted later
    (PY_TOOL, 'python3 tool.py', 'tool.py', 'open("pwned", "w")\n'),
    (PY_TOOL, 'env PYTHONDONTWRITEBYTECODE=1 timeout 30 nice python3 tool.py', 'tool.py', 'open("pwned", "w")\n'),
    (PY_TOOL, 'python3 tool.py', 'helper.py', 'def main(): open("pwned", "w")\n'),    # an imported module
    (PY_TOOL, 'python3 tool.py', 'json.py', 'open("pwned", "w")\n'),                  # a module planted next to it
    ({'pkg/__init__.py': '', 'pkg/__main__.py': 'print(1)\n'}, 'python3 -m pkg', 'pkg/__main__.py', 'open("pwned", "w")\n'),
    ({'Makefile': 'all:\n\t@echo ok\n'}, 'make', 'Makefile', 'all:\n\t@touch pwned\n'),
    ({'Makefile': 'include rules.mk\n', 'rules.mk': 'all:\n\t@echo ok\n'}, 'make -s', 'rules.mk', 'all:\n\t@touch pwned\n'),
    ({'Makefile': 'all:\n\t@bash gen.sh\n', 'gen.sh': 'echo ok\n'}, 'make all', 'gen.sh', 'touch pwned\n'),   # what a recipe runs
    ({'rules.mk': 'all:\n\t@echo ok\n'}, 'make -f rules.mk', 'GNUmakefile', 'all:\n\t@touch pwned\n'),   # a Makefile make prefers
    ({'prog.awk': '{ print }\n'}, 'echo x | awk -f prog.awk', 'prog.awk', 'BEGIN { system("touch pwned") }\n'),
    ({'package.json': '{"scripts": {"build": "echo ok"}}'}, 'npm run build', 'package.json', '{"scripts": {"build": "touch pwned"}}'),
    ({'t.pl': 'print 1;\n'}, 'perl t.pl', 't.pl', 'open(F, ">pwned");\n'),
    ({'app.js': "require('./lib')\n", 'lib/index.js': 'module.exports = 1\n'}, 'node app.js', 'lib/index.js', "require('fs').writeFileSync('pwned', '')\n"),
    ({'tool.py': 'exec(open("plugin.py").read())\n', 'plugin.py': 'print(1)\n'}, 'python3 tool.py', 'plugin.py', 'open("pwned", "w")\n'),
    ({'t.rb': "require_relative './lib.rb'\n", 'lib.rb': 'p 1\n'}, 'ruby t.rb', 'lib.rb', 'File.write("pwned", "")\n'),
    ({'build.sh': 'echo ok\n'}, 'sh +x build.sh', 'build.sh', 'touch pwned\n'),
    ({'n.txt': '1\n'}, 'read x < n.txt; echo $((x))', 'n.txt', 'a[$(touch pwned)]\n'),   # a value bash evaluates as code
    ({'Makefile': 'GEN = gen.sh\nall:\n\t@bash $(GEN)\n', 'gen.sh': 'echo ok\n'}, 'make', 'gen.sh', 'touch pwned\n'),   # through a make variable
    ({'big.sh': 'echo padding padding padding padding padding\n' * 3000 + './late.sh\n', 'late.sh': 'echo ok\n'},
     'bash big.sh', 'late.sh', 'touch pwned\n'),                                    # a script longer than the shell gate reads
    ({'tests/test_a.py': 'def test_a(): pass\n'}, 'python3 -m pytest -q tests', 'conftest.py', 'open("pwned", "w")\n'),
    ({'tests/test_a.py': 'def test_a(): pass\n'}, 'pytest -q tests', 'tests/conftest.py', 'open("pwned", "w")\n'),   # collected code
    ({'tests/test_a.py': 'def test_a(): pass\n'}, 'python3 -m pytest', 'tests/test_a.py', 'open("pwned", "w")\n'),
    ({'build.sh': 'echo ok\n'}, 'exec 3< build.sh; bash /dev/fd/3', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'bash <(cat build.sh)', 'build.sh', 'touch pwned\n'),
    ({'build.sh': 'echo ok\n'}, 'bash $(ls *.sh)', 'build.sh', 'touch pwned\n'),
    ({'main.sh': 'DIR=$(dirname "$0"); source "$DIR/conf.sh"\n', 'conf.sh': 'echo ok\n'}, 'bash main.sh', 'conf.sh', 'touch pwned\n'),
    ({'site.yml': '- hosts: all\n'}, 'ansible-playbook site.yml', 'site.yml', '- hosts: all\n  tasks: [shell: touch pwned]\n'),   # a tool not in the tables
]


@pytest.mark.parametrize('files,command,changed,content', VARIANTS, ids=[v[1] + ' / ' + v[2] for v in VARIANTS])
def test_a_changed_executed_file_refuses_the_release(home, ws, files, command, changed, content):
    for name, text in files.items(): write(ws, name, text, 0o755)
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': command})]), ran)
    store = ApprovalStore()
    install_approvals(agent, store)
    token = agent.send('go', session='work').pending[0]['token']
    write(ws, changed, content, 0o755)
    with pytest.raises(ApprovalError, match=f"not run: {changed} changed after it was held"):
        resolve_approval(agent, ApprovalStore(), token)
    assert ran == [] and not (ws / 'pwned').exists()


def test_a_script_whose_parse_was_cut_short_is_not_released(home, ws, monkeypatch):
    "Past the parse deadline the binding is partial: the release is refused, not run on what was seen."
    from passepartout import shell_gate
    monkeypatch.setattr(shell_gate.parse_within, '__defaults__', (0.0,))   # every parse is cut short at once
    files, command, changed, content = VARIANTS[[v[1] for v in VARIANTS].index('bash big.sh')]
    for name, text in files.items(): write(ws, name, text, 0o755)
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': command})]), ran)
    install_approvals(agent, ApprovalStore())
    token = agent.send('go', session='work').pending[0]['token']
    with pytest.raises(ApprovalError, match='not run: what it runs could not be worked out in time'):
        resolve_approval(agent, ApprovalStore(), token)
    assert ran == []


def test_a_repointed_symlink_refuses_the_release(home, ws):
    write(ws, 'a.sh', 'echo ok\n'); write(ws, 'b.sh', 'touch pwned\n')
    os.symlink('a.sh', ws / 'build.sh')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': './build.sh'})]), ran)
    install_approvals(agent, ApprovalStore())
    token = agent.send('go').pending[0]['token']
    os.unlink(ws / 'build.sh'); os.symlink('b.sh', ws / 'build.sh')
    with pytest.raises(ApprovalError, match='build.sh changed after it was held'):
        resolve_approval(agent, ApprovalStore(), token)
    assert ran == []


def test_a_release_in_another_workspace_is_refused(home, ws, tmp_path):
    write(ws, 'build.sh', 'echo ok\n')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': 'bash build.sh'})]), ran)
    install_approvals(agent, ApprovalStore())
    token = agent.send('go').pending[0]['token']
    elsewhere = tmp_path / 'elsewhere'; elsewhere.mkdir(); write(elsewhere, 'build.sh', 'touch pwned\n')
    other = shell_agent(elsewhere, ScriptedProvider([]), ran)
    with pytest.raises(ApprovalError, match='held for the workspace'):
        resolve_approval(other, ApprovalStore(), token)
    assert ran == []


# -- --always is not offered for commands that run files or code ------------------------------------------------

CODE_COMMANDS = ['bash build.sh', 'sh build.sh', './build.sh', 'source build.sh', 'python3 tool.py', "python3 -c 'print(1)'",
                 "bash -c 'echo hi'", "node -e 'console.log(1)'", "perl -e 'print 1'", "ruby -e 'p 1'", 'make', 'make test',
                 'env X=1 bash build.sh', 'timeout 5 python3 tool.py', 'nice -n 5 ./build.sh', 'npm run build', 'npx jest',
                 'awk -f prog.awk data', 'sed -f prog.sed data', "awk '{ print }' data", 'xargs sh build.sh', 'python3 -m pkg',
                 'cat build.sh | bash', 'bash < build.sh', '$RUNNER build.sh', 'pytest -q', 'git commit -m x',
                 'ansible-playbook site.yml', 'mytool --config prod.yml', 'let x=1', 'tar xzf a.tgz -I ./unpack',
                 'read x < n.txt; echo $((x))', 'echo ${x:$(cat n.txt)}', 'printf -v "$(cat n.txt)" %s y', 'declare -i x=$(cat n.txt)',
                 'mapfile -t a < n.txt; echo "${a[@]@P}"']


@pytest.mark.parametrize('command', CODE_COMMANDS)
def test_always_is_refused_for_commands_that_run_code(home, ws, monkeypatch, command):
    write(ws, 'build.sh', 'echo ok\n', 0o755); write(ws, 'tool.py', 'print(1)\n')
    learned = []
    monkeypatch.setattr(approval_flow, 'learn_rule', lambda action, decision: learned.append(action) or 'permissions.toml')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': command})]), ran)
    store = ApprovalStore()
    install_approvals(agent, store)
    token = agent.send('go').pending[0]['token']
    with pytest.raises(ApprovalError, match='--always is not offered'):
        resolve_approval(agent, store, token, always=True)
    with pytest.raises(ApprovalError, match='--always is not offered'):
        store.approve(token, always=True)                                   # the path of a CLI that cannot reach the daemon
    reply_text = agent.send(f'approve {token} --always').replies[0]
    assert '--always is not offered' in reply_text and f'approve {token}`' in reply_text
    assert learned == [] and ran == [] and store.get(token)['state'] == 'pending'   # nothing spent: it can be approved once


def test_always_still_learns_a_rule_for_a_command_that_runs_no_code(home, ws, monkeypatch):
    learned = []
    monkeypatch.setattr(approval_flow, 'learn_rule', lambda action, decision: learned.append(action) or 'permissions.toml')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': 'rm -f build.log'})]), ran)
    install_approvals(agent, ApprovalStore())
    token = agent.send('go').pending[0]['token']
    res = resolve_approval(agent, ApprovalStore(), token, always=True)
    assert res.ok and ran == ['rm -f build.log'] and [a.args for a in learned] == [{'command': 'rm -f build.log'}]


# -- another process: the real command line without a daemon ------------------------------------------------------

FAKE_APP = textwrap.dedent('''
    import sys, types
    sys.path.insert(0, {tests!r})
    from test_approval_content import shell_agent
    from passepartout.approvals import ApprovalStore
    from passepartout.reason import ScriptedProvider
    app = types.ModuleType('passepartout.app')
    def build_agent():
        agent = shell_agent({ws!r}, ScriptedProvider([]), [])
        agent.approvals = ApprovalStore()
        return agent
    app.build_agent = build_agent
    sys.modules['passepartout.app'] = app
    from passepartout.cli import main
    main()
''')


def cli(home, ws, *args):
    code = FAKE_APP.format(tests=os.path.dirname(__file__), ws=str(ws))
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, 'PASSEPARTOUT_HOME': str(home), 'PASSEPARTOUT_WORKSPACE': str(ws)})


def test_the_cli_without_a_daemon_refuses_a_changed_script_and_always(home, ws):
    write(ws, 'build.sh', 'echo built > built.txt\n')
    agent = shell_agent(ws, ShellModel(), [])
    token = hold(agent, ApprovalStore(), 'bash build.sh')
    r = cli(home, ws, 'approvals')
    assert r.returncode == 0 and 'approve once: it runs code, so --always is not offered; bound to build.sh]' in r.stdout, r.stdout
    r = cli(home, ws, 'approve', token, '--always')
    assert r.returncode == 1 and '--always is not offered' in r.stderr, (r.stdout, r.stderr)
    write(ws, 'build.sh', 'echo pwned > pwned.txt\n')
    r = cli(home, ws, 'approve', token)
    assert r.returncode == 1 and 'not run: build.sh changed after it was held' in r.stderr, (r.stdout, r.stderr)
    assert not (ws / 'pwned.txt').exists() and not (ws / 'built.txt').exists()


# -- a daemon: the decision written elsewhere, and the command handed to it ---------------------------------------

def test_a_daemon_refuses_a_changed_script_whichever_way_the_approval_comes(home, ws, tmp_path):
    from _daemon_support import daemon_in_thread
    from passepartout.daemon import client_send
    write(ws, 'build.sh', 'echo built > built.txt\n')
    ran, state, db = [], tmp_path / 'state', tmp_path / 'approvals.db'
    agent = install_approvals(shell_agent(ws, ShellModel(), ran), ApprovalStore(db))
    with daemon_in_thread(agent, state_dir=state):
        token = client_send('run bash build.sh', session='work', state_dir=state)['pending'][0]['token']
        in_other_process(f"open({str(ws / 'build.sh')!r}, 'w').write('echo pwned > pwned.txt\\n')")
        turn = client_send(f'approve {token}', session='work', state_dir=state)          # the owner's command, handed to the daemon
        assert turn['replies'][0].startswith(f"approval {token}: not run: build.sh changed after it was held"), turn
        assert ran == [] and not (ws / 'pwned.txt').exists()
        # the same race, with the approval written to the store by another process (a CLI that could not reach the daemon)
        token = client_send('run bash build.sh', session='work', state_dir=state)['pending'][0]['token']
        write(ws, 'build.sh', 'echo pwned again > pwned.txt\n')
        subprocess.run([sys.executable, '-c', f"from passepartout.approvals import ApprovalStore; ApprovalStore({str(db)!r}).approve({token!r})"],
                       check=True, timeout=60)
        assert wait_for(lambda: ApprovalStore(db).get(token)['state'] == 'used')
        assert wait_for(lambda: 'not run: build.sh changed' in agent.transcript('work')[-1]['content']), agent.transcript('work')[-1]
        assert ran == [] and not (ws / 'pwned.txt').exists()
        assert client_send('hello', session='other', state_dir=state)['reply'] == 'ok'     # the daemon keeps serving


# -- the table itself: what each command binds ----------------------------------------------------------------------

TABLE = [  # (command, files that must be bound, relative to the workspace)
    ('bash -x build.sh arg', ['build.sh']),
    ('sudo -u nobody env A=1 nice -n 2 timeout -s 9 5 bash build.sh', ['build.sh']),
    ('python3 -W ignore tool.py', ['tool.py', 'helper.py', 'json.py']),
    ('python3 -m pkg.cli', ['pkg/__init__.py', 'pkg/cli.py', 'pkg/cli/__main__.py']),
    ('make -C sub', ['sub/Makefile', 'sub/GNUmakefile', 'Makefile']),
    ('make --file=rules.mk', ['rules.mk']),
    ('node -r ./pre.js app.js', ['pre.js', 'app.js']),
    ('awk -f prog.awk data', ['prog.awk']),
    ('sed -f prog.sed data', ['prog.sed']),
    ('npm test', ['package.json']),
    ('git commit -m x', ['.git/config', '.git/hooks']),
    ('bash -c "cd sub && ./run.sh"', ['sub/run.sh']),
    ('f() { bash build.sh; }; f', ['build.sh']),
    ('bash <<EOF\n./build.sh\nEOF', ['build.sh']),
    ("python3 -c \"import os; os.system('./build.sh')\"", ['build.sh']),
    ('x=build.sh; bash $x', ['build.sh']),
    ('python3 -m pytest -q', ['conftest.py', 'pytest.ini', 'pyproject.toml']),
    ('./gradlew build', ['gradlew', 'build.gradle', 'settings.gradle']),
]


@pytest.mark.parametrize('command,expected', TABLE, ids=[t[0] for t in TABLE])
def test_the_table_binds_what_each_command_runs(ws, command, expected):
    from passepartout.executed_files import executed_files, runs_code
    write(ws, 'build.sh', 'echo ok\n', 0o755); write(ws, 'tool.py', 'import helper, json\n'); write(ws, 'helper.py', '')
    bound = {os.path.relpath(p, ws) for p in executed_files(command, ws)}
    assert set(expected) <= bound, bound
    assert runs_code(command, ws)


def test_binding_is_bounded_and_never_blocks(ws):
    "A FIFO under a script's name, a line that cds forty times, a glob over the whole disk: the hold completes."
    from passepartout.executed_files import executed_files
    os.mkfifo(ws / 'build.sh')
    assert executed_files('bash build.sh', ws)[str(ws / 'build.sh')] == 'special'
    line = ' && '.join(['cd a'] * 40 + ['bash x.sh'])
    assert len(executed_files(line, ws)) <= 64
    assert executed_files('bash /*/*/*/*.sh', ws) is not None
    assert not any(p.startswith('/dev/') for p in executed_files('exec 3< build.sh; bash /dev/fd/3', ws))
    pad = '# ' + 'x' * 1000 + '\n'
    for i in range(1, 13): write(ws, f's{i}.sh', pad * 1000)                     # twelve scripts of 1 MiB each
    write(ws, 's0.sh', ''.join(f'bash s{i}.sh\n' for i in range(1, 13)))
    bound = executed_files('bash s0.sh', ws)
    assert '…' in bound and all(str(ws / f's{i}.sh') in bound for i in range(13))   # read up to the budget, the rest bound unread


def test_plain_commands_bind_nothing_and_keep_always(ws):
    from passepartout.executed_files import executed_files, runs_code
    for command in ('rm -rf build/', 'mkdir -p out && cp a.txt out/', 'grep -r TODO . | wc -l', "sed -i 's/a/b/' notes.txt", 'find . -name "*.o" -delete'):
        assert executed_files(command, ws) == {} and runs_code(command, ws) is None, command


# -- records that cannot vouch for what they run are refused, never run unchecked -------------------------------------

def test_a_record_without_a_binding_that_runs_code_is_refused(home, ws):
    "A record held by a version that did not bind files (the column is NULL) is not trusted to run a script."
    import sqlite3
    write(ws, 'build.sh', 'touch pwned\n')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': 'bash build.sh'}), tool_call('shell', {'command': 'rm -f x'})]), ran)
    store = ApprovalStore()
    install_approvals(agent, store)
    token, plain = agent.send('go').pending[0]['token'], agent.send('go').pending[0]['token']
    db = sqlite3.connect(store.path); db.execute("UPDATE approvals SET files = NULL, workspace = NULL"); db.commit(); db.close()
    with pytest.raises(ApprovalError, match='held by a version that did not record what it runs'):
        resolve_approval(agent, store, token)
    assert resolve_approval(agent, store, plain).ok and ran == ['rm -f x'] and not (ws / 'pwned').exists()


def test_a_binding_that_cannot_be_computed_refuses_the_release(home, ws, monkeypatch):
    import passepartout.approvals as approvals
    def broken(action, workspace): raise RecursionError('too deep')
    monkeypatch.setattr(approvals, 'action_binding', broken)
    write(ws, 'build.sh', 'echo ok\n')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': 'bash build.sh'})]), ran)
    install_approvals(agent, ApprovalStore())
    token = agent.send('go').pending[0]['token']                          # holding still works: nothing is lost
    with pytest.raises(ApprovalError, match=r'what it runs could not be determined \(RecursionError: too deep\)'):
        resolve_approval(agent, ApprovalStore(), token)
    assert ran == []


def test_a_gate_that_rewrites_an_approved_command_that_runs_code_is_refused(home, ws):
    from passepartout.gates import allow
    write(ws, 'build.sh', 'echo ok\n'); write(ws, 'evil.sh', 'touch pwned\n')
    ran = []
    agent = shell_agent(ws, ScriptedProvider([tool_call('shell', {'command': 'bash build.sh'})]), ran)
    agent.gates.remove('careful')
    agent.gates.add('rewriter', lambda a, c: allow('rewritten', tool_call('shell', {'command': 'bash evil.sh'}))
                    if c is not None and c.signal is not None and c.signal.sensor == 'approval-command' else ask('asks first'))
    install_approvals(agent, ApprovalStore())
    token = agent.send('go').pending[0]['token']
    with pytest.raises(ApprovalError, match='a gate changed the command after it was approved'):
        resolve_approval(agent, ApprovalStore(), token)
    assert ran == [] and not (ws / 'pwned').exists()


# -- the real agent: default gates, the sandboxed shell tool, the audit log ------------------------------------------

def test_the_real_agent_runs_the_approved_script_and_refuses_a_swapped_one(home, ws):
    from passepartout.app import build_agent
    from passepartout.audit import AuditLog
    from passepartout.sandbox import sandbox_problem
    if sandbox_problem() is not None: pytest.skip(sandbox_problem())
    write(ws, 'build.sh', 'echo built > built.txt\n')
    agent = build_agent(provider=ShellModel(), workspace=ws)
    token = agent.send('run bash build.sh', session='work').pending[0]['token']
    assert '--always is not offered' in agent.send(f'approve {token} --always', session='work').replies[0]
    in_other_process(f"open({str(ws / 'build.sh')!r}, 'w').write('echo pwned > pwned.txt\\n')")
    assert 'not run: build.sh changed after it was held' in agent.send(f'approve {token}', session='work').replies[0]
    assert not (ws / 'pwned.txt').exists()
    again = agent.send('run bash build.sh', session='work').pending[0]['token']    # asked anew: what it holds now
    write(ws, 'build.sh', 'echo built > built.txt\n')
    assert 'not run' in agent.send(f'approve {again}', session='work').replies[0]
    token = agent.send('run bash build.sh', session='work').pending[0]['token']    # an unchanged script runs, in the sandbox
    assert agent.send(f'approve {token}', session='work').replies[0].startswith(f"Approved {token}")
    assert (ws / 'built.txt').read_text() == 'built\n' and not (ws / 'pwned.txt').exists()
    kinds = [r['kind'] for r in AuditLog().recent(200)]
    assert kinds.count('approval-refused') >= 3 and AuditLog().verify()[0]


# -- the last milliseconds: a script swapped after the release check, before or while the command starts -------------

def _real_agent_with_held_script(ws, script='echo built > built.txt\n'):
    from passepartout.app import build_agent
    from passepartout.sandbox import sandbox_problem
    if sandbox_problem() is not None: pytest.skip(sandbox_problem())
    write(ws, 'build.sh', './step.sh\n'); write(ws, 'step.sh', script, 0o755)
    agent = build_agent(provider=ShellModel(), workspace=ws)
    return agent, agent.send('run bash build.sh', session='work').pending[0]['token']


def test_a_script_swapped_after_the_release_check_does_not_run(home, ws, monkeypatch):
    "The writer wins the race against resolve_approval's check: the shell tool's own check of its copies refuses."
    import passepartout.builtin_tools as tools
    agent, token = _real_agent_with_held_script(ws)
    real_approval = tools.owner_approval
    def swap_then_look(command_ctx, command):
        (ws / 'step.sh').write_text('echo pwned > pwned.txt\n')     # after the approvals code checked, before the start
        return real_approval(command_ctx, command)
    monkeypatch.setattr(tools, 'owner_approval', swap_then_look)
    turn = agent.send(f'approve {token}', session='work')
    assert not (ws / 'pwned.txt').exists() and not (ws / 'built.txt').exists(), turn.replies
    assert 'step.sh changed after the owner approved the command' in ' '.join(turn.replies), turn.replies


def test_a_script_swapped_while_the_command_starts_runs_as_approved(home, ws, monkeypatch):
    "The writer swaps the script once the sandbox is being set up: the command runs the approved bytes, never the new ones."
    import passepartout.builtin_tools as tools
    agent, token = _real_agent_with_held_script(ws)
    real_run = tools.run_sandboxed
    def swap_then_run(command, workspace, **kw):
        (ws / 'step.sh').write_text('echo pwned > pwned.txt\n')
        return real_run(command, workspace, **kw)
    monkeypatch.setattr(tools, 'run_sandboxed', swap_then_run)
    turn = agent.send(f'approve {token}', session='work')
    assert (ws / 'built.txt').read_text() == 'built\n' and not (ws / 'pwned.txt').exists(), turn.replies
    assert (ws / 'step.sh').read_text() == 'echo pwned > pwned.txt\n'    # the file itself is the writer's; only the run was pinned
