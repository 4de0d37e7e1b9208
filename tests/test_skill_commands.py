"""`passepartout skills list|show|enable|disable|new NAME` (`nbs/66_skill_commands.md`): the skeleton `new` writes
passes its own tests and loads; what list and show print; enable and disable, live for an owner's skill."""
import os, subprocess, sys
from pathlib import Path
import pytest
from click.testing import CliRunner
from passepartout.cli import main
from passepartout.reason import ScriptedProvider

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path))
    monkeypatch.setenv('PASSEPARTOUT_MEMORY', '0')
    return tmp_path / 'home' / 'config' / 'skills'


def run(*args):
    result = CliRunner().invoke(main, ['skills', *args])
    return result.exit_code, result.output


def test_new_writes_a_skeleton_that_passes_its_own_tests_and_loads(home):
    status, out = run('new', 'morning-news')
    path = home / 'morning-news.py'
    assert status == 0 and f"wrote {path}" in out and path.exists()
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    tests = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', str(path)], capture_output=True, text=True, env=env, cwd=home)
    assert tests.returncode == 0 and '3 passed' in tests.stdout, tests.stdout + tests.stderr
    from passepartout.app import build_agent
    agent = build_agent(provider=ScriptedProvider([]))
    assert agent.skills.failed == () and agent.skills.by_name['morning-news'].origin == 'user'
    assert 'morning_news_greet' in agent.tools and 'morning-news-no-shouting' in [g.name for g in agent.gates.gates]
    assert agent.skills.triggered('hello there').name == 'morning-news'


def test_new_never_overwrites_and_checks_the_name(home):
    assert run('new', 'mine')[0] == 0
    assert run('new', 'mine') == (1, f"Error: {home / 'mine.py'} exists already: edit it, or choose another name\n")
    assert run('new', 'shell') == (1, "Error: a skill named 'shell' exists already\n")
    assert run('new', 'Bad Name')[0] == 1 and not list(home.glob('Bad*'))


def test_list_shows_skills_hashes_and_failures(home):
    run('new', 'mine')
    (home / 'net.py').write_text('import socket\n')
    status, out = run('list')
    lines = out.splitlines()
    assert status == 0 and lines[0].split()[:4] == ['guards', lines[0].split()[1], 'builtin', 'on']
    mine = next(l for l in lines if l.startswith('mine '))
    assert mine.split()[2:4] == ['user', 'on'] and 'sha256:' in mine
    assert any(l.startswith('FAILED net.py: line 1: imports socket') for l in lines)
    assert run() == (status, out)   # `skills` alone lists


def test_show_prints_the_declaration_and_an_unknown_name_is_an_error(home):
    status, out = run('show', 'shell')
    assert status == 0 and 'gates        shell@60, sandbox@55' in out and 'tools        shell' in out
    assert run('show', 'nothing') == (1, "Error: no skill named 'nothing' (see `passepartout skills list`)\n")


def test_disable_and_enable_an_owners_skill_take_effect_at_the_next_turn(home):
    run('new', 'mine')
    from passepartout.app import build_agent
    agent = build_agent(provider=ScriptedProvider([]))
    assert 'mine_greet' in agent.tools
    status, out = run('disable', 'mine')
    assert status == 0 and "at the daemon's next turn" in out
    agent.parts.skills.refresh(agent)
    assert 'mine_greet' not in agent.tools and 'mine' in agent.skills.disabled
    assert 'mine' in [l.split()[0] for l in run('list')[1].splitlines() if l.split()[3:4] == ['off']]
    run('enable', 'mine'); agent.parts.skills.refresh(agent)
    assert 'mine_greet' in agent.tools


def test_a_builtin_can_be_disabled_but_not_a_required_one(home):
    status, out = run('disable', 'web')
    assert status == 0 and 'when the agent next starts' in out
    from passepartout.app import build_agent
    assert 'http_fetch' not in build_agent(provider=ScriptedProvider([])).tools
    assert run('disable', 'guards') == (1, "Error: guards is required: every agent has it\n")
    assert run('disable', 'nothing')[0] == 1
    run('enable', 'web')
    assert 'http_fetch' in build_agent(provider=ScriptedProvider([])).tools


def test_send_starts_the_agent_with_broken_skills_present_and_doctor_names_them(home, tmp_path):
    "Issue 18.2: skills that fail to load are skipped, the agent still answers (`send`, offline default), `doctor` says why."
    home.mkdir(parents=True, exist_ok=True)
    (home / 'net.py').write_text('import socket\nfrom passepartout.skills import Skill\nskill = Skill("net")\n')
    (home / 'typo.py').write_text('def oops(:\n')
    (home / 'loop-a.py').write_text('from passepartout.skills import Skill\nskill = Skill("loop-a", depends=["loop-b"])\n')
    (home / 'loop-b.py').write_text('from passepartout.skills import Skill\nskill = Skill("loop-b", depends=["loop-a"])\n')
    (home / 'boom.py').write_text('from passepartout.skills import Skill\nraise RuntimeError("at load")\n')
    (home / 'notes').mkdir(); (home / 'notes' / 'SKILL.md').write_text('---\nname: notes\ndescription: [x\n---\n')
    run('new', 'fine')
    env = {k: v for k, v in os.environ.items() if k not in ('PASSEPARTOUT_PROVIDERS', 'PYTHONPATH')}
    sent = subprocess.run([sys.executable, '-m', 'passepartout', 'send', 'What is in my workspace?'], capture_output=True, text=True,
                          env={**env, 'PYTHONPATH': str(ROOT)}, cwd=tmp_path, timeout=300)
    assert sent.returncode == 0 and 'Here is what your workspace holds' in sent.stdout, sent.stdout + sent.stderr
    doctor = subprocess.run([sys.executable, '-m', 'passepartout', 'doctor'], capture_output=True, text=True,
                            env={**env, 'PYTHONPATH': str(ROOT)}, cwd=tmp_path, timeout=300).stdout
    warned = [line for line in doctor.splitlines() if line.startswith('warn') and ('skills' in line or 'skill-md' in line)]
    for why in ('net.py: line 1: imports socket', 'typo.py: line 1', 'loop-a.py', 'loop-b.py', 'boom.py: RuntimeError: at load', 'notes/SKILL.md'):
        assert any(why in line for line in warned), (why, doctor)
    assert any(line.startswith('ok') and 'fine 0.1 sha256:' in line for line in doctor.splitlines()), doctor


def test_a_skill_md_folder_is_listed_shown_and_switched_at_the_next_turn(home):
    "Issue 18.7 for instruction skills: `skills list|show|disable|enable` know SKILL.md folders; a running agent follows."
    (home / 'notes').mkdir(parents=True)
    (home / 'notes' / 'SKILL.md').write_text('---\nname: notes\ndescription: Keep notes tidy.\n---\nSort them.\n')
    from passepartout.app import build_agent
    agent = build_agent(provider=ScriptedProvider([]))
    assert '- notes: Keep notes tidy.' in agent.tools['read_skill'].description
    assert ['notes', '-', 'skill-md', 'on'] in [l.split() for l in run('list')[1].splitlines()]
    assert 'description  Keep notes tidy.' in run('show', 'notes')[1]
    status, out = run('disable', 'notes')
    assert status == 0 and "at the daemon's next turn" in out
    assert ['notes', '-', 'skill-md', 'off'] in [l.split() for l in run('list')[1].splitlines()]
    assert agent.parts.skills.refresh(agent) and 'read_skill' not in agent.tools
    run('enable', 'notes'); agent.parts.skills.refresh(agent)
    assert '- notes: Keep notes tidy.' in agent.tools['read_skill'].description
