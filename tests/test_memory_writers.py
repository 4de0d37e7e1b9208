"""One process writes a memory store, with real processes.

- a second process that opens the store for writing gets one clear error naming the writer's pid;
- read-only, it sees what the writer saved and follows its later snapshots (`refresh`), and every
  change it tries is refused;
- `passepartout memory snapshot` (a real command line) is refused with the writer named, while
  `memory list` still works;
- the writer killed with SIGKILL leaves no stale lock: a new process writes at once;
- `build_agent` in a second process opens the memory read-only and still answers.
"""
import os, signal, subprocess, sys
from pathlib import Path
import pytest
from passepartout.memory_store import MemoryStore, MemoryInUse
import passepartout.recall  # noqa: F401  (store.recall)

ROOT = Path(__file__).resolve().parents[1]

HOLDER = r'''
import sys
from passepartout.memory_store import MemoryStore
store = MemoryStore(sys.argv[1])
store.remember('note:first', 'saved by the writer'); store.snapshot('first')
print('ready', flush=True)
for line in sys.stdin:                     # each line: remember it and snapshot
    store.remember('note:' + line.strip(), line.strip()); store.snapshot(line.strip())
    print('saved', flush=True)
'''


def env(home=None):
    e = {**os.environ, 'PYTHONPATH': str(ROOT)}
    if home: e['PASSEPARTOUT_HOME'] = str(home)
    return e


def python(code, *args, home=None):
    return subprocess.run([sys.executable, '-c', code, *map(str, args)], capture_output=True, text=True, env=env(home), timeout=120)


@pytest.fixture
def holder(tmp_path):
    path = tmp_path / 'home' / 'data' / 'memory.db'
    p = subprocess.Popen([sys.executable, '-c', HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env())
    assert p.stdout.readline() == 'ready\n'
    yield p, path
    if p.poll() is None: p.kill()
    p.wait()


def test_a_second_writer_is_refused_and_a_reader_follows(holder):
    p, path = holder
    second = python("from passepartout.memory_store import MemoryStore; import sys; MemoryStore(sys.argv[1])", path)
    assert second.returncode == 1
    last = second.stderr.strip().splitlines()[-1]
    assert last.startswith('passepartout.memory_store.MemoryInUse: memory ') and f'is being written by pid {p.pid}:' in last, last
    reader = MemoryStore(path, read_only=True)              # this process reads while the other writes
    assert reader['note:first'].content == 'saved by the writer'
    p.stdin.write('second\n'); p.stdin.flush(); assert p.stdout.readline() == 'saved\n'
    assert 'note:second' not in reader and reader.refresh().cause == 'second' and 'note:second' in reader
    for change in (lambda: reader.remember('x', 'y'), lambda: reader.forget('note:first'), reader.rollback):
        with pytest.raises(MemoryInUse, match=f'is open read-only here: pid {p.pid}'): change()
    assert reader.recall('second')[0].object.id == 'note:second'
    with pytest.raises(MemoryInUse, match=f'pid {p.pid}'): MemoryStore(path)   # this process too, while the other holds it


def test_the_command_line_refuses_writes_and_still_reads(holder):
    p, path = holder
    home = path.parents[1]
    cli = lambda *args: python("from passepartout.cli import main; main()", *args, home=home)
    refused = cli('memory', 'snapshot')
    assert refused.returncode == 1 and f'is being written by pid {p.pid}' in refused.stderr and 'list, show, search' in refused.stderr, refused.stderr
    listed = cli('memory', 'list')
    assert listed.returncode == 0 and 'note:first' in listed.stdout, listed.stderr


def test_a_killed_writer_leaves_no_stale_lock(holder):
    p, path = holder
    p.send_signal(signal.SIGKILL); p.wait()
    taken = python("from passepartout.memory_store import MemoryStore; import sys; s = MemoryStore(sys.argv[1]); "
                   "s.remember('note:after', 'x'); print(s.snapshot('after').cause, s.verify())", path)
    assert taken.returncode == 0 and taken.stdout.split() == ['after', '[]'], taken.stderr


def test_build_agent_in_a_second_process_reads_memory(holder, tmp_path):
    p, path = holder
    (tmp_path / 'ws').mkdir()
    code = ("from passepartout.app import build_agent; from passepartout.reason import ScriptedProvider; "
            "from passepartout.signals import reply, tool_call; "
            "a = build_agent(provider=ScriptedProvider([lambda req: reply(req.system), "
            "tool_call('remember', {'id': 'note:x', 'content': 'y'}, explanation='asked'), lambda req: reply(req.messages[-1]['content'])])); "
            "print(a.memory.writer is None); print('saved by the writer' in a.send('what was saved by the writer?').reply); "
            "print(a.send('remember x').reply)")
    e = {'PASSEPARTOUT_WORKSPACE': str(tmp_path / 'ws')}
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env={**env(path.parents[1]), **e}, timeout=120)
    lines = out.stdout.splitlines()
    assert lines[:2] == ['True', 'True'], out.stderr[-2000:]
    assert 'is open read-only here' in lines[2] and f'pid {p.pid}' in lines[2], lines


def test_stores_of_one_process_share_the_lock(tmp_path):
    a = MemoryStore(tmp_path / 'm.db'); b = MemoryStore(tmp_path / 'm.db')
    a.close()                                               # b still holds it for this process
    other = python("from passepartout.memory_store import MemoryStore; import sys; MemoryStore(sys.argv[1])", tmp_path / 'm.db')
    assert 'is being written by pid' in other.stderr
    b.close()
    assert python("from passepartout.memory_store import MemoryStore; import sys; MemoryStore(sys.argv[1])", tmp_path / 'm.db').returncode == 0


def test_a_reader_agent_takes_over_when_the_writer_ends(holder):
    from passepartout.memory_loop import open_memory, checkpoint
    p, path = holder
    store = open_memory(path)
    checkpoint(store)
    assert store.writer is None                                         # still written by the other process
    p.send_signal(signal.SIGKILL); p.wait()
    checkpoint(store)                                                   # the next chain's start
    assert store.writer is not None and store['note:first'].content == 'saved by the writer'
    store.remember('note:mine', 'now this process writes'); store.snapshot('mine')
    other = python("from passepartout.memory_store import MemoryStore; import sys; MemoryStore(sys.argv[1])", path)
    assert f'is being written by pid {os.getpid()}' in other.stderr
