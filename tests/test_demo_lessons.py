"""The checks behind the lesson of `nbs/61_demo.md`: the recorded session, run through the real pipeline.

The notebook keeps one showing example; each turn's evidence is a row here. The session runs once, in
a scratch home, with the real gates, tools and sandbox; only the provider is a recording.
"""
import pytest
from passepartout.demo import run_demo


@pytest.fixture(scope='module')
def session():
    turns, done = run_demo(echo=lambda *a, **k: None)
    return dict(zip(['listing', 'cleanup', 'summary', 'archive', 'archived'], turns)), done


def exfil(turns): return [e for e in turns['summary'].of('verdict') if 'curl' in str(e['action'])][0]


@pytest.mark.parametrize('name, look, expected', [
    ('listing', lambda t: t.reply.splitlines(),
     ['Here is what your workspace holds:', './ (2 entries)', 'notes.txt  (215 bytes)', 'todo.md  (11 bytes)']),
    ('cleanup', lambda t: [e['decision'] for e in t.of('verdict')][:2], ['deny', 'allow']),      # rm -rf ~/* denied, du allowed
    ('cleanup', lambda t: 'deletes' in t.of('verdict')[0]['trace'][-1]['reason'], True),
    ('cleanup', lambda t: t.reply.startswith('I measured the workspace') and './notes.txt' in t.reply, True),  # the sizes it measured
    ('summary', lambda t: [r['action']['tool'] for r in t.of('result')], ['read_file']),        # the upload never ran
    ('archive', lambda t: len(t.pending), 1),
    ('archived', lambda t: t.reply, "Done: the notes are in archive/notes.txt."),              # the model carried on
], ids=['listing', 'rm-denied-du-allowed', 'deny-reason', 'measured', 'no-upload', 'held', 'carried-on'])
def test_each_turn_of_the_demo(session, name, look, expected):
    turns, _ = session
    assert look(turns[name]) == expected


def test_the_upload_is_denied_and_the_approved_action_ran(session):
    turns, done = session
    assert (exfil(turns)['decision'], done.ok) == ('deny', True)
