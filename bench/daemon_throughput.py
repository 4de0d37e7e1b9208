"""Daemon throughput with the shipped agent: one-tool turns per second through a real daemon process
(loopback TCP, frames, handshake, per-session workers) serving `build_agent()` (default gates,
built-in tools plus a read-only `echo`, approvals, audit log, vault; temporary PASSEPARTOUT_HOME and
workspace) with a model that builds the OpenAI wire body of every request (bench/_shipped.py).

The client process opens C connections (one session each) and keeps W requests in flight on each;
every request is a turn in which the model calls `echo` once and then replies. Each turn is the first
of a new conversation (the server gives each turn its own session, as the store keeps every session;
bench/history_cost.py measures long ones), which the daemon evicts from memory as it would any idle session
(beyond `max_sessions`, the least recently used). Prints the median turns per second over the runs, next to the 5,000 target as a
ratio; the median CPU time of a turn inside the daemon (`time.thread_time` around each turn in its
worker thread: without the writing of its records and messages, which the group-commit writer thread
does for several turns at once) and the daemon process's whole CPU time per turn (a mean over every
thread: the event loop, the protocol and the writer thread are not per turn; this is the honest
figure, and 1 / it is what one process can serve on one free core); the same split by thread from /proc
over the timed runs (the event loop thread, which every client waits on; the turn threads, which run each turn and
encode its reply; the group-commit writer of the audit log and the session store; any other), how many cores the
daemon got, and the client process's CPU per turn (it shares the machine); refusals (any turn whose tool did
not run); and the daemon's memory.

`--overhead` answers every request with one recorded turn of the shipped agent instead of running it: what
is left is the daemon's own cost per turn (frames, JSON, the hand-off to and from the turn threads).
The machine is shared: turns per second follow the CPU the daemon is given (`daemon busy`), so compare
the CPU figures, and turns per second only between runs made side by side.

Before it serves, the daemon's process runs the same turn `--reference` times 25, one at a time in its main thread,
each batch's stores synced (`time.process_time`, every thread of the process: the writer's share included, as
bench/loop_overhead.py measures it): the bench prints the daemon's CPU per turn as a ratio of that, which is what
serving many clients at once costs beyond the turn. `--where` samples, every 2 ms, the innermost Python line of each turn
thread (`sys._current_frames`, in a thread of the daemon's process: it costs the daemon some CPU, so compare CPU figures
only between runs without it) and prints where they spent their wall time: running, waiting for work (`_serve`), or
waiting for a lock or for the interpreter lock (the line that took it or released it).

`--processes N` starts N independent daemons (each in its own home) and spreads the clients over
them: an upper bound of what N worker processes sharing one home would serve on this machine.

    python bench/daemon_throughput.py [--clients 100] [--window 4] [--requests 6000] [--repeat 3] [--overhead] [--processes 1] [--reference 8] [--where]
"""
import argparse, asyncio, collections, json, os, statistics, subprocess, sys, tempfile, textwrap, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, show
from passepartout.daemon import AsyncClient, request, read_address, state_files, client_status

SERVER = textwrap.dedent('''
    import asyncio, collections, itertools, json, statistics, sys, time, threading
    sys.path.insert(0, {bench!r})
    from _shipped import shipped_agent
    from passepartout.daemon import Daemon
    from _shipped import sync_stores
    from passepartout.daemon import OWNER, request, _prepare_agent
    from passepartout.perceive import perceive
    from passepartout.app import tune_collector
    agent = _prepare_agent(shipped_agent(1))
    cpu, refused, lock = [], [0], threading.Lock()
    process, count = agent.process, itertools.count()
    tune_collector()   # as `serve` will: the reference below runs in the process the daemon will be
    reference, clock = [], time.process_time   # the same turn, one at a time in this thread, before serving
    for batch in range({reference}):
        t0 = clock()
        for i in range(25): process(perceive(request('go'), session=f"reference-{{batch}}-{{i}}", source='daemon', owner=OWNER))
        sync_stores(agent)
        reference.append((clock() - t0) / 25 * 1e6)
    agent.evict(0)   # the reference's sessions leave memory: the daemon starts with none
    samples = collections.Counter()   # --where: (file:line function) of each turn thread's innermost frame, sampled
    def where():
        turn_threads = set()
        for i in itertools.count():
            time.sleep(0.002)
            if i % 500 == 0: turn_threads = {{t.ident for t in threading.enumerate() if t.name.startswith('passepartout-turn')}}
            for ident, frame in sys._current_frames().items():
                if ident in turn_threads:
                    samples[f"{{frame.f_code.co_filename.rsplit('/', 1)[-1]}}:{{frame.f_lineno}} {{frame.f_code.co_name}}"] += 1
    if {where}: threading.Thread(target=where, daemon=True).start()
    if {overhead}:   # the daemon's own cost: every request answered with one recorded turn of the shipped agent
        recorded = process(perceive(request('go'), session='recorded', source='daemon', owner=OWNER))
        process = lambda signal, turn=None: recorded
    def timed(signal, turn=None):
        signal.meta['session'] = f"{{signal.session}}-{{next(count)}}"   # a new conversation per turn (the store keeps every session)
        me = threading.current_thread()
        if me.native_id not in names: names[me.native_id] = me.name   # the pool starts threads while it serves
        t0 = time.thread_time()
        out = process(signal, turn)
        dt = (time.thread_time() - t0) * 1e6
        with lock:
            cpu.append(dt)
            if signal.sensor == 'user-input' and len(out.of('result')) != 1: refused[0] += 1
        return out
    agent.process = timed
    started = [0.0]
    names = {{}}   # native thread id -> name, to split the daemon's CPU by thread
    def ready(d): names.update((t.native_id, t.name) for t in threading.enumerate()); started[0] = time.process_time(); print('ready', flush=True)
    asyncio.run(Daemon(agent, port=0, threads={threads}).serve(ready))
    names.update((t.native_id, t.name) for t in threading.enumerate())
    print(json.dumps({{'cpu': cpu, 'refused': refused[0], 'process': time.process_time() - started[0], 'threads': names, 'reference': reference, 'where': samples.most_common(12)}}), flush=True)
''')


async def client(address, token, session, n, window):
    c = await AsyncClient.connect(address, token)
    sent = received = 0
    while sent < min(window, n): c.send(request('go', session=session, id=sent)); sent += 1
    while received < n:
        answer = await c.receive()
        assert answer['meta']['id'] == received and answer['payload']['turn']['reply'] == 'done', answer
        received += 1
        if sent < n: c.send(request('go', session=session, id=sent)); sent += 1
    await c.close()


async def one_run(targets, clients, window, total, run):
    "Clients spread over the daemons `targets` ((address, token) each); turns per second over all of them."
    per = total // clients
    t0 = time.perf_counter()
    await asyncio.gather(*(client(*targets[i % len(targets)], f"bench-{run}-{i}", per, window) for i in range(clients)))
    return per * clients / (time.perf_counter() - t0)


def thread_cpu(pid:int) -> dict:
    "CPU seconds (user + system) of each thread of process `pid`, by thread id (Linux `/proc`; {} elsewhere)."
    out, tick = {}, os.sysconf('SC_CLK_TCK')
    for task in Path(f'/proc/{pid}/task').glob('*'):
        try: fields = task.joinpath('stat').read_text().rsplit(')', 1)[1].split()
        except OSError: continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def thread_switches(pid:int) -> dict:
    "Context switches (voluntary: the thread waited, for the interpreter lock among others) of each thread of process `pid`, by thread id (Linux `/proc`; {} elsewhere)."
    out = {}
    for task in Path(f'/proc/{pid}/task').glob('*'):
        try: lines = task.joinpath('status').read_text().splitlines()
        except OSError: continue
        out[int(task.name)] = sum(int(line.split()[1]) for line in lines if line.startswith('voluntary_ctxt_switches'))
    return out


THREAD_KINDS = ('event loop', 'turn threads', 'group-commit writer', 'other threads')

def thread_kind(tid:int, pid:int, name:str) -> str:
    "Which of `THREAD_KINDS` the daemon's thread `tid` is: the main thread runs the event loop; the rest by their Python names."
    if tid == pid: return 'event loop'
    if name.startswith('passepartout-turn'): return 'turn threads'
    return 'group-commit writer' if name == 'passepartout-group-commit' else 'other threads'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--clients', type=int, default=100)
    ap.add_argument('--window', type=int, default=4)
    ap.add_argument('--requests', type=int, default=6000)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--threads', type=int, default=16)
    ap.add_argument('--overhead', action='store_true', help="answer every request with one recorded turn: the daemon's own cost")
    ap.add_argument('--processes', type=int, default=1, help="independent daemons, the clients spread over them: what more processes would buy")
    ap.add_argument('--reference', type=int, default=8, help="batches of 25 turns run in the daemon's process, one at a time, before it serves: the in-process cost to compare with")
    ap.add_argument('--where', action='store_true', help="sample where the turn threads are (their innermost Python line) every 2 ms: what they wait on")
    a = ap.parse_args()
    procs, states = [], []
    try:
        for _ in range(a.processes):   # each in its own home (shipped_home sets the environment the process inherits)
            home, ws = shipped_home()
            script = home / 'server.py'; script.write_text(SERVER.format(bench=os.path.dirname(os.path.abspath(__file__)), threads=a.threads, overhead=a.overhead,
                                            reference=a.reference, where=a.where))
            procs.append(subprocess.Popen([sys.executable, str(script)], env=dict(os.environ), stdout=subprocess.PIPE, text=True))
            states.append(home / 'state')
        for proc in procs: assert proc.stdout.readline().strip() == 'ready'
        targets = [(read_address(state), state_files(state)['token'].read_text()) for state in states]
        rss_idle = sum(client_status(state_dir=state)['memory_kb'] for state in states)
        asyncio.run(one_run(targets, a.clients, a.window, a.clients * 5, 'warm'))
        before, client0, wall0 = [thread_cpu(p.pid) for p in procs], time.process_time(), time.perf_counter()
        switched0 = [thread_switches(p.pid) for p in procs]
        rates = [asyncio.run(one_run(targets, a.clients, a.window, a.requests, r)) for r in range(a.repeat)]
        after, client_cpu, wall = [thread_cpu(p.pid) for p in procs], time.process_time() - client0, time.perf_counter() - wall0
        switched = [thread_switches(p.pid) for p in procs]
        st = [client_status(state_dir=state) for state in states]
    finally:
        for proc in procs: proc.terminate()
        outs = [proc.communicate(timeout=60)[0] for proc in procs]
    stats = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    cpu = [x for one in stats for x in one['cpu']]
    print(f"clients={a.clients} window={a.window} requests/run={a.requests} runs={a.repeat} daemon threads={a.threads}"
          + (f" daemon processes={a.processes} (each its own home and stores: an upper bound for workers sharing one)" if a.processes > 1 else ''))
    print(show('shipped agent, one-tool turns per second', rates, unit='/s', target=5000, higher_is_better=True))
    print(show('CPU per turn in the daemon (thread time)', cpu))
    print(f"  its mean {statistics.mean(cpu):.0f} µs: the turn threads' CPU per turn below is this mean, plus encoding the reply and the hand-offs")
    print(f"the daemon process's CPU per turn, all threads (protocol, event loop, turns): {sum(one['process'] for one in stats) / len(cpu) * 1e6:.0f} µs (mean)")
    turns = a.requests // a.clients * a.clients * a.repeat
    split, waits = {}, {}   # CPU seconds and voluntary context switches over the timed runs, by kind of thread
    for p, bf, af, sw0, sw, one in zip(procs, before, after, switched0, switched, stats):
        for tid, seconds in af.items():
            kind = thread_kind(tid, p.pid, one['threads'].get(str(tid), ''))
            split[kind] = split.get(kind, 0) + seconds - bf.get(tid, 0)
            waits[kind] = waits.get(kind, 0) + sw.get(tid, 0) - sw0.get(tid, 0)
    print("per turn over the timed runs (/proc, 10 ms ticks): " + ', '.join(f"{kind} {split.get(kind, 0) / turns * 1e6:.0f} µs" for kind in THREAD_KINDS)
          + f"; daemon busy {sum(split.values()) / wall:.2f} cores; the client process {client_cpu / turns * 1e6:.0f} µs")
    print("voluntary context switches per turn (a thread waiting: for work, for the interpreter lock, in a system call): "
          + ', '.join(f"{kind} {waits.get(kind, 0) / turns:.2f}" for kind in THREAD_KINDS))
    reference = [x for one in stats for x in one['reference']]
    if reference and not a.overhead:
        whole = sum(one['process'] for one in stats) / len(cpu) * 1e6
        print(show('the same turn in that process, one at a time', reference)
              + f"  (every thread, its writing included): the daemon's CPU per turn is {whole / statistics.median(reference):.2f}x it")
    if a.where:
        where = collections.Counter()
        for one in stats: where.update(dict(one['where']))
        total = sum(where.values()) or 1
        print("where the turn threads were (wall time, sampled every 2 ms; the top lines of the 12 most seen):")
        for line, n in where.most_common(8): print(f"  {n / total * 100:5.1f} %  {line}")
    print(f"turns whose tool did not run: {sum(one['refused'] for one in stats)} of {len(cpu)}")
    print(f"daemon RSS: idle {rss_idle} KiB, after {sum(x['replies'] for x in st)} replies in {sum(x['sessions'] for x in st)} sessions {sum(x['memory_kb'] for x in st)} KiB")


if __name__ == '__main__':
    main()
