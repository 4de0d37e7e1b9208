"""Skills (nbs/44_skills.md): what loading the owner's skills and matching their triggers cost.

- loading 50 skills from `$config/skills/` (each file with a tool, a gate and a trigger): the import check,
  the module run, and the whole reload of an agent's parts (order, add, one re2.Set), against <= 50 ms;
- trigger matching per cycle: `SkillSet.prompt_for` on an owner's message and on a tool-output cycle (which
  looks the last user message up in the transcript), against <= 5 µs; and what it adds to the system prompt
  of a cycle: `system_prompt` with 50 triggered skills minus without skills (the same agent otherwise);
- what the check before each turn costs when nothing changed, with 20 `SKILL.md` folders watched.

    python bench/skills.py [--repeat 15] [--skills 50]
"""
import argparse, os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import show

SKILL = '''from passepartout.skills import Skill, tool
from passepartout.gates import Gate, deny
import re

def {ident}_lookup(query:str) -> str:
    "Look something up for skill {n}."
    return query[::-1]

def {ident}_gate(action, ctx):
    "Refuse one exact phrase."
    if action.kind == 'reply' and action.text == 'forbidden {n}': return deny('no')

skill = Skill({name!r}, version='1.{n}', priority={n}, trigger=[{word!r}, {word2!r}], prompt='When asked about {word}, use {ident}_lookup.',
              tools=[tool({ident}_lookup, effect='read-only')], gates=[Gate({name!r}, {ident}_gate, 10)])
'''
MESSAGE = ("Could you look at the build logs from last night and tell me why the deploy of the website failed, "
           "and whether the database migration ran before it? Keep it short.")


def write_skills(folder:Path, n:int):
    for i in range(n):
        name = f"skill{i:02d}"
        (folder / f"{name}.py").write_text(SKILL.format(name=name, ident=name, n=i, word=f"topic{i}", word2=f"subject{i}"))


def per_call_us(fn, number:int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(number): fn()
    return (time.perf_counter_ns() - t0) / number / 1000


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=15)
    ap.add_argument('--skills', type=int, default=50)
    a = ap.parse_args()
    os.environ['PASSEPARTOUT_HOME'] = tempfile.mkdtemp(prefix='pp-home-')
    os.environ['PASSEPARTOUT_WORKSPACE'] = tempfile.mkdtemp(prefix='pp-ws-')
    os.environ['PASSEPARTOUT_MEMORY'] = '0'
    from passepartout.app import build_agent, skills_dir
    from passepartout.reason import ScriptedProvider, system_prompt
    from passepartout.signals import Signal
    from passepartout.skills import load_user_skills
    folder = skills_dir()
    write_skills(folder, a.skills)
    agent = build_agent(provider=ScriptedProvider([]))
    assert len([s for s in agent.skills.skills if s.origin == 'user']) == a.skills and not agent.skills.failed, agent.skills.failed

    load = [per_call_us(lambda: load_user_skills(folder), 1) / 1000 for _ in range(a.repeat)]
    print(show(f"load {a.skills} skill files (check, run)", load, 'ms', target=50))
    reload = [per_call_us(lambda: agent.parts.skills.refresh(agent, force=True), 1) / 1000 for _ in range(a.repeat)]
    print(show(f"reload {a.skills} skills into an agent (load, order, add)", reload, 'ms', target=50))

    owner = Signal(meta={'source': 'cli', 'session': 'bench'}, payload={'sensor': 'user-input', 'text': MESSAGE + ' topic37'})
    transcript = agent.transcript('bench')
    transcript += [{'role': 'user', 'content': owner.text, 'owner': True},
                   {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c1', 'name': 'list_dir', 'args': {}}]}]
    feedback = Signal(meta={'source': 'cli', 'session': 'bench'}, payload={'sensor': 'tool-output', 'text': 'a.txt\nb.txt'}, depth=1)
    skills = agent.skills
    assert skills.prompt_for(agent, owner) == 'When asked about topic37, use skill37_lookup.' == skills.prompt_for(agent, feedback)
    n = 20000
    matched = [per_call_us(lambda: skills.prompt_for(agent, owner), n) for _ in range(a.repeat)]
    print(show(f"trigger match, owner's message ({len(owner.text)} chars)", matched, 'µs', target=5))
    followed = [per_call_us(lambda: skills.prompt_for(agent, feedback), n) for _ in range(a.repeat)]
    print(show("trigger match, tool-output cycle (transcript)", followed, 'µs', target=5))

    bare = build_agent(provider=ScriptedProvider([]))   # the same agent without the owner's skills
    for f in folder.glob('*.py'): f.unlink()
    bare.parts.skills.refresh(bare, force=True)
    assert not [s for s in bare.skills.skills if s.origin == 'user']
    bare.transcript('bench').extend(transcript)
    n = 5000
    with_skills = [per_call_us(lambda: system_prompt(agent, owner, []), n) for _ in range(a.repeat)]
    without = [per_call_us(lambda: system_prompt(bare, owner, []), n) for _ in range(a.repeat)]
    added = [w - b for w, b in zip(with_skills, without)]
    print(show("system prompt, no skills of the owner's", without, 'µs'))
    print(show(f"system prompt, {a.skills} skills with triggers", with_skills, 'µs'))
    print(show("added per cycle by the triggers", added, 'µs', target=5))

    for i in range(20):   # instruction skills: each SKILL.md is watched on its own (one folder down)
        (folder / f"md{i:02d}").mkdir()
        (folder / f"md{i:02d}" / 'SKILL.md').write_text(f"---\nname: md{i:02d}\ndescription: Instructions {i}.\n---\nDo {i}.\n")
    agent.parts.skills.refresh(agent, force=True)
    assert agent.parts.skills.refresh(agent) is False and '- md19: Instructions 19.' in agent.tools['read_skill'].description
    unchanged = [per_call_us(lambda: agent.parts.skills.refresh(agent), 2000) for _ in range(a.repeat)]
    print(show("refresh before a turn, nothing changed (20 SKILL.md)", unchanged, 'µs'))
