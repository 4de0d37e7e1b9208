"""Issue 14: under the daemon's worker threads the file watcher's process-wide `select.poll` object was polled by
two threads at once ("concurrent poll() invocation"), and the permissions gate turned that error into a deny of a
tool call that should run. Several threads hammer the watcher and the gate while another process keeps changing
the watched directory, so that events are queued most of the time."""
import subprocess, sys, threading
import pytest

from passepartout import watch


def _hammer(worker, threads=8, rounds=3000):
    errors = []
    def run():
        try:
            for _ in range(rounds): worker()
        except Exception as e: errors.append(repr(e))
    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool: t.start()
    for t in pool: t.join()
    return errors


@pytest.fixture
def busy_dir(tmp_path):
    "A directory another process touches without pause while the test runs."
    d = tmp_path / 'cfg'; d.mkdir()
    toucher = subprocess.Popen([sys.executable, '-c', f"import os, time\nt = time.time() + 30\nwhile time.time() < t:\n"
                                f"    open({str(d / 'noise')!r}, 'w').write('x')"])
    yield d
    toucher.kill(); toucher.wait()


def test_the_watcher_answers_many_threads_at_once(busy_dir):
    target = busy_dir / 'permissions.toml'
    target.write_text('')
    assert watch.watch(str(target)) is not None
    errors = _hammer(lambda: watch.generation(str(target)))
    errors += _hammer(lambda: watch.changes())
    assert errors == [], errors[:3]


def test_the_permissions_gate_never_refuses_for_a_race(busy_dir, monkeypatch):
    from passepartout.builtin_gates import permissions_gate
    from passepartout.signals import tool_call, Context
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(busy_dir.parent / 'home'))
    from passepartout import config
    rules = config.ensure_dirs().config / 'permissions.toml'
    rules.write_text('[[rule]]\ntool = "read_file"\ndecision = "allow"\n')
    action, verdicts = tool_call('read_file', {'path': 'a.txt'}), []
    toucher = subprocess.Popen([sys.executable, '-c', f"import os, time\nt = time.time() + 30\nwhile time.time() < t:\n"
                                f"    open({str(rules.parent / 'noise')!r}, 'w').write('x')"])
    try: errors = _hammer(lambda: verdicts.append(permissions_gate(action, Context())), rounds=1500)
    finally: toucher.kill(); toucher.wait()
    assert errors == [], errors[:3]
    assert {v.decision for v in verdicts} == {'allow'}, [v for v in verdicts if v.decision != 'allow'][:3]


def test_a_queue_refilled_faster_than_it_is_read_does_not_hold_the_watcher(tmp_path, monkeypatch):
    "A queue that never empties (another process renaming in a loop): `take_events` stops after MAX_READS and counts every path as changed."
    w = watch.Watcher()
    target = str(tmp_path / 'f'); (tmp_path / 'f').write_text('x')
    before = w.watch(target)
    reads = []
    def endless(fd, n):                     # the kernel always has one more event: a modify of the watched file
        reads.append(n)
        from inotify_simple import flags
        import struct
        return struct.pack('iIII', w.watched[target][0], flags.MODIFY, 0, 0)
    monkeypatch.setattr(watch.os, 'read', endless)
    done = threading.Thread(target=w.take_events, daemon=True); done.start(); done.join(60)   # a hang detector, generous on a loaded machine
    monkeypatch.undo()
    assert not done.is_alive(), "take_events never returned while events kept coming"
    assert len(reads) == watch.MAX_READS and w.generation(target, poll=False) != before   # every path counts as changed
