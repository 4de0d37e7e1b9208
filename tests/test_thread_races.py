"""Issue 14: what the daemon's turn threads share. Each test stages one interleaving of two threads that the
shipped code allowed, and fails on the code before its fix.

Where the interleaving can be forced (a step of one thread placed between two steps of another), the test
forces it, so it does not depend on the scheduler; where it cannot, many threads run with a tiny switch
interval, which made the old code fail on every run tried."""
import os, subprocess, sys, threading, time

import pytest

from passepartout import watch


def in_another_thread(fn):
    "Run `fn` to completion in another thread (a concurrent gate doing its work); re-raise what it raised."
    failed = []
    def run():
        try: fn()
        except BaseException as e: failed.append(e)
    t = threading.Thread(target=run); t.start(); t.join()
    if failed: raise failed[0]


@pytest.fixture
def tiny_switch_interval():
    "Threads switch every microsecond: a race window of a few bytecodes is hit at once."
    old = sys.getswitchinterval(); sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


# -- owner refusals (nbs/32_approvals.md) ------------------------------------------------------------------

def test_refusals_carried_out_in_two_sessions_at_once(tiny_switch_interval):
    "`refuse` swept the dictionary while another turn thread added to it: 'dictionary changed size during iteration', refusal lost."
    from passepartout.refusals_gate import refuse
    from passepartout.loop import Agent
    agent = Agent(refused={(f's{i}', f'd{i}'): ('t', time.time() + 3600) for i in range(20000)})
    errors = []
    def carry_out_refusals(n):
        for i in range(200):
            record = {'meta': {'session': f'w{n}'}, 'digest': f'x{n}-{i}', 'token': f't{n}-{i}', 'expires': 600, 'created': 0,
                      'decided': time.time()}
            try: refuse(agent, record)
            except Exception as e: errors.append(repr(e))
    threads = [threading.Thread(target=carry_out_refusals, args=(n,)) for n in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert errors == [], errors[:3]
    assert all((f'w{n}', f'x{n}-{i}') in agent.refused for n in range(4) for i in range(200))


# -- the vault's redaction patterns (nbs/22_vault.md) -------------------------------------------------------

def test_a_secret_added_while_another_thread_redacts_is_redacted(tmp_path):
    """Thread A loads the old secrets; thread B loads the new file (clearing the patterns); A then builds and keeps
    patterns for the OLD secrets, which B (and every later caller) took for current: the new secret stayed in clear."""
    from passepartout.vault import Vault, redact
    path, key = tmp_path / 'vault.enc', tmp_path / 'vault.key'
    Vault(path, key).add('OLD', 'old-secret-1234')
    vault = Vault(path, key)
    assert redact('x old-secret-1234', vault) == 'x {{vault:OLD}}'
    real_load, a_loaded = vault._load, threading.Event()
    def load_in_a():   # thread A (this one) is preempted right after loading
        secrets = real_load()
        if not a_loaded.is_set():
            a_loaded.set()
            Vault(path, key).add('NEW', 'new-secret-5678')     # `passepartout vault add` in another process
            def thread_b():                                   # another turn thread loads the new file, then waits for A
                b_secrets = real_load()
                assert 'NEW' in b_secrets
            in_another_thread(thread_b)
        return secrets
    vault._load = load_in_a
    vault._redactor()                                         # A: builds patterns from what it loaded
    del vault._load
    assert redact('y new-secret-5678', vault) == 'y {{vault:NEW}}'


# -- the permission rules and the pinned home (nbs/20f_permission_gates.md, nbs/20e_self_protection_gates.md) 

def test_permission_rules_written_while_another_thread_counts_events(tmp_path, monkeypatch):
    """`load_rules` read the file, then recorded the watcher's change count. A turn thread that took in the event of
    a write made during the read raised that count first, so the old rules were kept for good (a deny rule ignored)."""
    from passepartout import permission_gates as bg
    rules = tmp_path / 'permissions.toml'
    rules.write_text('[[rule]]\ntool = "read_file"\ndecision = "allow"\n')
    real_parse, once = bg._parse_rules, []
    def parse_then_race(path):
        parsed = real_parse(path)
        if not once:
            once.append(1)
            with open(rules, 'a') as f: f.write('[[rule]]\ntool = "read_file"\ndecision = "deny"\n')   # `approve --always` elsewhere
            in_another_thread(watch.changes)          # a concurrent gate takes in (and counts) that write's events
        return parsed
    monkeypatch.setattr(bg, '_parse_rules', parse_then_race)
    assert [r.decision for r in bg.load_rules(rules)] == ['allow']
    assert [r.decision for r in bg.load_rules(rules)] == ['allow', 'deny']


def test_a_data_directory_swapped_while_the_pins_are_checked(tmp_path, monkeypatch):
    """`home_problem` looked at a directory, then watched it again and recorded the change count. A swap made just
    after the look, whose events another turn thread took in first, was then part of the new generation and of the
    count: the swapped directory passed for the pinned one from then on (self-protection defeated)."""
    from passepartout import self_protection_gates as bg, config
    home = tmp_path / 'home'
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(home))
    data = str(config.ensure_dirs().data)
    assert bg.home_problem() is None
    (home / 'noise').write_text('x')                # something changed next to the pinned directories: they are looked at
    real_identity, once = bg._identity, []
    def look_then_race(path):
        seen = real_identity(path)
        if path == data and not once:
            once.append(1)
            os.rename(data, data + '-old'); os.mkdir(data)    # the data directory is swapped just after the look
            in_another_thread(watch.changes)                  # a concurrent gate takes in (and counts) the swap's events
        return seen
    monkeypatch.setattr(bg, '_identity', look_then_race)
    bg.home_problem()                                 # the swap came after this check's look: it may pass this once
    monkeypatch.setattr(bg, '_identity', real_identity)
    assert 'no longer the directory it started with' in (bg.home_problem() or '')


# -- the sandbox probe (nbs/31_sandbox.md) ------------------------------------------------------------------

def test_turn_threads_asking_together_share_one_sandbox_probe(monkeypatch):
    """The first shell commands of the daemon's turn threads come together; each started its own bubblewrap probe
    (on a loaded machine one of them timing out made every shell command ask for a minute)."""
    from passepartout import sandbox
    from _daemon_support import wait_for
    calls = []
    def asking():
        "Every other turn thread is inside sandbox_problem, waiting for this probe (or all eight are probing: the old code)."
        frames, me = sys._current_frames(), threading.get_ident()
        return len(calls) == 8 or all(t.ident in frames and frames[t.ident].f_code.co_name == 'sandbox_problem' for t in threads if t.ident != me)
    def probe():
        calls.append(1)
        assert wait_for(asking)          # the probe lasts until the others have come: nothing left to chance
        return None
    monkeypatch.setattr(sandbox, '_probe_sandbox', probe)
    sandbox.sandbox_problem.cache_clear()
    barrier, answers = threading.Barrier(8), []
    def ask():
        barrier.wait(); answers.append(sandbox.sandbox_problem())
    try:
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
    finally: sandbox.sandbox_problem.cache_clear()   # the fake answer must not outlive the test
    assert answers == [None] * 8 and len(calls) == 1, len(calls)


# -- the shell gate's parse deadline (nbs/21_shell_gate.md) ---------------------------------------------------

DEADLINE_THEN_TEXT = '''
import resource, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))   # the old code's loop would take all the machine's memory
from passepartout.shell_gate import parse_within
tree, late = parse_within(b'echo hello world', seconds=0.05)
time.sleep(0.2)                                               # the walk goes on past the parse's deadline
print(late, tree.root_node.children[0].children[1].text.decode())
'''


def test_a_walk_that_outlives_the_parse_deadline_reads_the_command():
    """tree-sitter reads a node's text through the parse's read callback again. Once the parse deadline had passed
    the callback said 'end of input', and `Node.text` looped, growing without bound: under load, the analysis of a
    long script (parsed just in time, walked after the deadline) took 17 GB before it was stopped."""
    r = subprocess.run([sys.executable, '-c', DEADLINE_THEN_TEXT], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (0, 'False hello\n'), r.stderr[-500:]
