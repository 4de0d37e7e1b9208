"""`SKILL.md` instruction skills (`nbs/46_instruction_skills.md`): what loads, what is skipped and why, what `read_skill` refuses."""
import os
import pytest
from pathlib import Path
from passepartout.instruction_skills import load_instruction_skills, parse_skill, skill_tools, install_instruction_skills, SkillError, MAX_FILE_BYTES
from passepartout.loop import Agent
from passepartout.reason import ScriptedProvider
from passepartout.signals import reply

GOOD = "---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n\nStep one.\n"


def skill(root:Path, folder:str, text:str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / 'SKILL.md').write_text(text)
    return root / folder / 'SKILL.md'


@pytest.mark.parametrize('text, reason', [
    ("# no front matter\n", "must start with front matter"),
    ("---\nname: x\ndescription: never closed\n", "must start with front matter"),
    ("---\nname: x\ndescription: [unclosed\n---\n", "front matter is not valid YAML"),
    ("---\n- a\n- b\n---\n", "must be a mapping"),
    ("---\ndescription: no name\n---\n", "its name must be lowercase"),
    ("---\nname: Bad_Name\ndescription: d\n---\n", "its name must be lowercase"),
    ("---\nname: other\ndescription: d\n---\n", "must be the name of its folder, 'x'"),
    ("---\nname: x\n---\n", "it needs a description"),
    ("---\nname: x\ndescription: '   '\n---\n", "it needs a description"),
    ("---\nname: x\ndescription: " + 'd' * 1025 + "\n---\n", "it needs a description"),
    ("---\nname: x\ndescription: !!python/object/apply:os.system ['true']\n---\n", "front matter is not valid YAML"),
], ids=['none', 'unclosed', 'yaml', 'list', 'no-name', 'bad-name', 'other-folder', 'no-description', 'blank', 'long', 'python-tag'])
def test_a_malformed_skill_is_skipped_with_one_reason_and_the_others_load(tmp_path, text, reason):
    bad = skill(tmp_path, 'x', text)
    skill(tmp_path, 'good', GOOD.format(name='good'))
    catalogue = load_instruction_skills(tmp_path)
    assert list(catalogue.skills) == ['good']
    [(path, why)] = catalogue.skipped
    assert path == bad and reason in why and str(bad) in why and '\n' not in why


def test_not_utf8_and_too_large_are_reasons_too(tmp_path):
    (tmp_path / 'bin').mkdir(); (tmp_path / 'bin' / 'SKILL.md').write_bytes(b'---\nname: bin\n\xff\xfe\n---\n')
    skill(tmp_path, 'big', GOOD.format(name='big') + 'x' * MAX_FILE_BYTES)
    reasons = sorted(why for _, why in load_instruction_skills(tmp_path).skipped)
    assert 'larger than' in reasons[0] and 'not a UTF-8 text file' in reasons[1]


def test_only_names_and_descriptions_reach_the_prompt(tmp_path):
    skill(tmp_path, 'deploy', GOOD.format(name='deploy').replace('Step one.', 'SECRET-STEP'))
    agent = Agent(ScriptedProvider([lambda req: reply(req.system)]))
    install_instruction_skills(agent, tmp_path)
    system = agent.send('hi').reply
    assert '- deploy: Does deploy things.' in system and 'SECRET-STEP' not in system
    assert agent.tools.run('read_skill', {'name': 'deploy'}).endswith('SECRET-STEP')


def test_no_skills_no_tool_and_skips_are_logged(tmp_path):
    agent = Agent()
    install_instruction_skills(agent, tmp_path / 'none')
    assert 'read_skill' not in agent.tools
    skill(tmp_path, 'x', "no front matter")
    install_instruction_skills(agent, tmp_path)
    assert 'read_skill' not in agent.tools and agent.syslog.entries[-1][1] == 'WARNING' and 'instruction skill skipped' in agent.syslog.entries[-1][2]


@pytest.mark.parametrize('file', ['../other/SKILL.md', '/etc/passwd', 'sub/../../other/SKILL.md', 'out-link', 'dir-link/SKILL.md', '.'])
def test_read_skill_stays_in_the_skill_folder(tmp_path, file):
    skill(tmp_path, 'one', GOOD.format(name='one'))
    skill(tmp_path, 'other', GOOD.format(name='other'))
    (tmp_path / 'one' / 'out-link').symlink_to(tmp_path / 'other' / 'SKILL.md')
    (tmp_path / 'one' / 'dir-link').symlink_to(tmp_path / 'other')
    belt = skill_tools(load_instruction_skills(tmp_path))
    with pytest.raises((RuntimeError,)) as e: belt.run('read_skill', {'name': 'one', 'file': file})
    assert "leads out of the skill's folder" in str(e.value) or 'not a regular file' in str(e.value)


def test_a_pipe_in_a_skill_does_not_block_the_turn(tmp_path):
    skill(tmp_path, 'one', GOOD.format(name='one'))
    os.mkfifo(tmp_path / 'one' / 'pipe')
    with pytest.raises(RuntimeError, match='not a regular file'): skill_tools(load_instruction_skills(tmp_path)).run('read_skill', {'name': 'one', 'file': 'pipe'})


def test_read_skill_lists_files_and_reads_them(tmp_path):
    skill(tmp_path, 'one', GOOD.format(name='one'))
    (tmp_path / 'one' / 'scripts').mkdir(); (tmp_path / 'one' / 'scripts' / 'run.sh').write_text('echo hi\n')
    os.chmod(tmp_path / 'one' / 'scripts' / 'run.sh', 0o755)
    belt = skill_tools(load_instruction_skills(tmp_path))
    body = belt.run('read_skill', {'name': 'one'})
    assert body.startswith('# one') and '- scripts/run.sh' in body
    assert belt.run('read_skill', {'name': 'one', 'file': 'scripts/run.sh'}) == 'echo hi\n'   # read as text; nothing here runs it
    with pytest.raises(RuntimeError, match='cannot be read'): belt.run('read_skill', {'name': 'one', 'file': 'missing.md'})
    with pytest.raises(RuntimeError, match="no skill named 'two'"): belt.run('read_skill', {'name': 'two'})


def test_a_skill_broken_after_loading_says_so(tmp_path):
    path = skill(tmp_path, 'one', GOOD.format(name='one'))
    belt = skill_tools(load_instruction_skills(tmp_path))
    path.write_text('front matter gone\n')
    with pytest.raises(RuntimeError, match='must start with front matter'): belt.run('read_skill', {'name': 'one'})


def test_parse_skill_names_the_file(tmp_path):
    with pytest.raises(SkillError, match='cannot be read'): parse_skill(tmp_path / 'x' / 'SKILL.md')


def test_a_skill_md_added_changed_or_broken_is_seen_at_the_next_turn(tmp_path, monkeypatch):
    "Issue 18.5 with 18.4: the catalogue follows the skills folder between turns, no restart."
    from click.testing import CliRunner
    from passepartout.app import build_agent
    from passepartout.skill_commands import skills_command
    for k, v in {'PASSEPARTOUT_HOME': tmp_path / 'home', 'PASSEPARTOUT_WORKSPACE': tmp_path, 'PASSEPARTOUT_MEMORY': '0'}.items(): monkeypatch.setenv(k, str(v))
    agent = build_agent(provider=ScriptedProvider([lambda req: reply(req.system)] * 5))
    root = tmp_path / 'home' / 'config' / 'skills'
    assert '- deploy:' not in agent.send('one').reply and 'read_skill' not in agent.tools
    skill(root, 'deploy', GOOD.format(name='deploy'))                                     # a new folder
    assert '- deploy: Does deploy things.' in agent.send('two').reply
    skill(root, 'deploy', GOOD.format(name='deploy').replace('Does deploy things.', 'Ships the site.'))   # edited in place
    assert '- deploy: Ships the site.' in agent.send('three').reply
    skill(root, 'deploy', "---\nname: deploy\ndescription: [unclosed\n---\n")            # broken: left out, and why
    assert '- deploy:' not in agent.send('four').reply
    why = dict(agent.skills.failed)['deploy/SKILL.md']
    assert why.startswith('its front matter is not valid YAML')
    assert any('deploy/SKILL.md' in line and 'not valid YAML' in line for line in agent.syslog.lines(50))
    assert 'FAILED deploy/SKILL.md: its front matter is not valid YAML' in CliRunner().invoke(skills_command, ['list']).output
    skill(root, 'deploy', GOOD.format(name='deploy'))                                     # fixed
    assert '- deploy: Does deploy things.' in agent.send('five').reply and agent.skills.failed == ()


def test_a_skill_md_written_into_a_folder_made_earlier_is_seen(tmp_path):
    "The folder comes first (a turn runs meanwhile), its SKILL.md later: the folder's own watch does not see inside it."
    from passepartout.skills import Skill, install_skills
    from passepartout.instruction_skills import instruction_skill
    root = tmp_path / 'skills'; root.mkdir()
    agent = install_skills(Agent(ScriptedProvider([])), [Skill('guards'), instruction_skill(root)], root)
    (root / 'later').mkdir()
    agent.skills.refresh(agent)                      # a turn between the two steps
    (root / 'later' / 'SKILL.md').write_text(GOOD.format(name='later'))
    assert agent.skills.refresh(agent) and '- later: Does later things.' in agent.tools['read_skill'].description
