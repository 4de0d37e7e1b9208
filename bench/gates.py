"""Gate-engine cost per action through `default_gates()`.

shell:     every command of the three corpora in /work/shared/corpora/shell, as `shell` tool calls
           (target <= 200 µs per command);
non-shell: a mix of read_file / write_file / edit_file / list_dir / search_files / http_fetch / send_message
           calls (target <= 20 µs per tool call); replies are reported apart.

Each action is verified `--repeat` times and its fastest run kept (the least disturbed by the other
processes on this shared machine); the figures are the median and p90 over actions. The session
holds a short transcript (an owner message and a tool output), so provenance does real work; the
values provenance (and the information-flow gate, when the engine has it) takes out of an argument are
remembered, so that memory is emptied before each shell verification: every command costs what a
command never seen before costs. The shipped engine has the owner's-plan gate (`owner-plan`, no plan in
force: the cost every turn pays). `--information-flow` measures the engine with the information-flow
gate in place of provenance, recipients and owner-plan (`with_information_flow`), `--plan` the stricter
composition (`with_owner_plan`: information flow, then the plan).

`--turn` measures instead what the gates cost a bare 1-tool turn (issue 14): in a session never seen
before, the owner's message, a call to a read-only tool, its output, then the reply, each verified as the
loop does (inside a turn scope); the CPU time (`time.process_time`) per turn over batches of 500 turns,
median and quartiles. A fresh session is the case `bench/loop_overhead.py` measures; its records are
built during the turn.

`--per-gate` says where a bare turn's gate time goes: the CPU time per turn of `bench/loop_overhead.py`'s bare
agent (`Agent`, default gates, one echo tool, an instant model), whole, then with each gate left out in
turn (the difference is that gate's share, its records and their dicts included), with every check replaced
by one that says nothing (the engine's own share: plan, clock, records, trace dicts), and with no gates; the
median of `--repeat` runs of 3,000 turns each.

What the file system says is remembered while inotify reports no change (see nbs/09a_watch.md), so
a path judged before costs less than one seen for the first time; `first sight` reports file actions
on paths never judged before (each verified once), for comparison: it is not what the target is about.

    python bench/gates.py [--repeat 5] [--corpora /work/shared/corpora/shell] [--information-flow | --plan] [--turn | --per-gate]
"""
import argparse, json, os, statistics, sys, tempfile, time
from pathlib import Path
from passepartout.signals import tool_call

SHELL_TARGET_US, OTHER_TARGET_US = 200.0, 20.0


def setup(tmp:Path):
    os.environ['PASSEPARTOUT_HOME'] = str(tmp / 'home')
    os.environ['PASSEPARTOUT_NETWORK_ALLOW'] = 'docs.python.org,*.example.org'
    ws = tmp / 'ws'; (ws / 'docs').mkdir(parents=True); (ws / 'docs' / 'a.txt').write_text('hello')
    from passepartout import config
    p = config.ensure_dirs()
    old = time.time() - 3600   # the config directory exists from before, as it does in use
    os.utime(p.config, (old, old))
    from passepartout.loop import Agent
    from passepartout.signals import Context, Signal
    from passepartout.reason import note_signal
    from passepartout.builtin_gates import default_gates
    from passepartout.builtin_tools import builtin_tools
    agent = Agent(tools=builtin_tools(), gates=default_gates(), workspace=ws)
    owner = Signal(meta={'source': 'cli', 'session': 'bench'}, payload={'sensor': 'user-input', 'text': 'Tidy docs/ and check https://docs.python.org/3/'})
    note_signal(agent.transcript('bench'), owner)
    note_signal(agent.transcript('bench'), owner.child('tool-output', 'a.txt b.txt notes.md (3 files, 4096 bytes)', tool='list_dir'))
    return agent, Context(owner, agent)


def non_shell_actions():
    from passepartout.signals import tool_call, reply
    e = 'benchmark'
    return [tool_call('read_file', {'path': 'docs/a.txt'}), tool_call('read_file', {'path': 'docs/a.txt', 'offset': 10, 'limit': 100}),
            tool_call('write_file', {'path': 'docs/b.txt', 'content': 'some notes\n' * 20}, explanation=e),
            tool_call('edit_file', {'path': 'docs/a.txt', 'old': 'hello', 'new': 'hi'}, explanation=e),
            tool_call('list_dir', {}), tool_call('list_dir', {'path': 'docs'}),
            tool_call('search_files', {'pattern': 'TODO', 'glob': '*.md'}),
            tool_call('http_fetch', {'url': 'https://docs.python.org/3/library/re.html'}, explanation=e),
            tool_call('send_message', {'channel': 'telegram', 'recipient': 'owner', 'text': 'done'}, explanation=e),
            reply('All done: three files tidied.'), reply('Here is the summary you asked for.')]


def shell_actions(corpora:Path):
    out = []
    for name in ('dangerous.jsonl', 'benign_readonly.jsonl', 'benign_mutating.jsonl'):
        for line in (corpora / name).read_text().splitlines():
            if line.strip(): out.append(tool_call('shell', {'command': json.loads(line)['command']}, explanation='benchmark'))
    return out


def per_action_us(engine, ctx, actions, repeat:int, before=None) -> list:
    "Fastest of `repeat` verifications per action, in µs (`before()` runs untimed before each one)."
    clock, times = time.perf_counter_ns, []
    for a in actions:
        best = None
        for _ in range(repeat):
            if before is not None: before()
            t0 = clock(); engine.verify(a, ctx); dt = clock() - t0
            best = dt if best is None or dt < best else best
        times.append(best / 1000)
    return times


def fresh_turn_us(agent, batches:int=40, batch:int=500) -> list:
    "CPU µs of the gates per bare 1-tool turn in a new session (a read-only call, its output, the reply), one figure per batch."
    from passepartout.signals import Signal, Context, reply
    from passepartout.gates import turn_scope
    agent.tools.add(lambda text: text, name='echo', effect='read-only', description='Echo the text.')
    engine, names = agent.gates, iter(range(10**9))
    def one():
        session = f"turn-{next(names)}"
        ctx = Context(Signal(meta={'source': 'cli', 'session': session}, payload={'sensor': 'user-input', 'text': 'go'}), agent)
        t = agent.transcript(session); t.append({'role': 'user', 'content': 'go', 'owner': True})
        with turn_scope():
            assert engine.verify(tool_call('echo', {'text': 'hi'}, explanation='benchmark', call_id='call_1'), ctx).decision == 'allow'
            t.append({'role': 'assistant', 'content': 'benchmark', 'tool_calls': [{'id': 'call_1', 'name': 'echo', 'args': {'text': 'hi'}}]})
            t.append({'role': 'tool', 'call_id': 'call_1', 'name': 'echo', 'content': 'hi', 'is_error': False})
            assert engine.verify(reply('done'), ctx).decision == 'allow'
        agent.transcripts.pop(session); agent.used.pop(session, None); agent.session_values.pop(session, None)
    for _ in range(batch): one()   # warm up
    out = []
    for _ in range(batches):
        t0 = time.process_time()
        for _ in range(batch): one()
        out.append((time.process_time() - t0) / batch * 1e6)
    return out


def per_gate_us(repeat:int, turns:int=3000) -> list:
    "`(label, µs)`: a bare 1-tool turn's CPU whole, less each gate, with do-nothing checks, and without gates (medians of `repeat` runs)."
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from loop_overhead import bare_agent
    from passepartout.gates import Gate
    agent, names = bare_agent(1), iter(range(10**9))
    def one():
        session = f"per-gate-{next(names)}"
        assert agent.send('go', session=session).reply == 'done'
        agent.transcripts.pop(session, None); agent.used.pop(session, None); agent.session_values.pop(session, None)
    def run() -> float:
        for _ in range(turns // 10): one()   # warm up
        runs = []
        for _ in range(repeat):
            t0 = time.process_time()
            for _ in range(turns): one()
            runs.append((time.process_time() - t0) / turns * 1e6)
        return statistics.median(runs)
    gates = agent.gates.gates
    rows = [('whole', run())]
    for g in gates:
        agent.gates._set(tuple(x for x in gates if x is not g)); rows.append((f"less {g.name}", run()))
    agent.gates._set(tuple(Gate(g.name, lambda a, c: None, g.priority, g.scope) for g in gates)); rows.append(('do-nothing checks', run()))
    agent.gates._set(()); rows.append(('no gates', run()))
    return rows


def p(q:float, xs:list) -> float: return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--corpora', default='/work/shared/corpora/shell')
    ap.add_argument('--information-flow', action='store_true', help='the information-flow gate in place of provenance and recipients')
    ap.add_argument('--plan', action='store_true', help="the stricter composition: the owner's plan gate with information flow in place of provenance, recipients and owner-plan")
    ap.add_argument('--turn', action='store_true', help="the gates' CPU per bare 1-tool turn in a new session (default gates only)")
    ap.add_argument('--per-gate', action='store_true', help="a bare 1-tool turn's CPU whole, less each gate, with do-nothing checks, without gates")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        agent, ctx = setup(Path(d))
        if args.per_gate:
            rows = per_gate_us(args.repeat)
            whole = rows[0][1]
            for label, us in rows:
                print(f"bare 1-tool turn, {label:28s} {us:6.1f} µs" + ('' if label == 'whole' else f"   (share {whole - us:5.1f} µs)"))
            return
        if args.turn:
            us = fresh_turn_us(agent)
            q1, m, q3 = statistics.quantiles(us, n=4)
            print(f"gates of a bare 1-tool turn (new session): median {m:.1f} µs CPU (p25 {q1:.1f}, p75 {q3:.1f}, n={len(us)} batches of 500 turns)")
            return
        if args.information_flow:
            from passepartout.information_flow import with_information_flow
            with_information_flow(agent.gates)
        if args.plan:
            from passepartout.owner_plan import with_owner_plan
            with_owner_plan(agent.gates, agent.tools)
        engine = agent.gates
        print(f"gates: {engine!r}", file=sys.stderr)
        others = non_shell_actions()
        shells = shell_actions(Path(args.corpora))
        per_action_us(engine, ctx, others + shells[:50], 2)                 # warm up: schemas, sandbox probe, caches
        calls = [a for a in others if a.kind == 'tool']
        other_us = per_action_us(engine, ctx, calls * 20, args.repeat)
        reply_us = per_action_us(engine, ctx, [a for a in others if a.kind != 'tool'] * 20, args.repeat)
        from passepartout.provenance_gates import _remembered_values
        from passepartout.information_flow import _remembered_forms
        forget = lambda: (_remembered_values.cache_clear(), _remembered_forms.cache_clear())
        shell_us = per_action_us(engine, ctx, shells, args.repeat, before=forget)   # each command as if new to provenance and information flow
        from passepartout.gates import GateEngine
        cold = [tool_call('read_file', {'path': f'docs/new-{i}/file-{i}.txt'}) for i in range(200)]
        cold_us = per_action_us(engine, ctx, cold, 1)
        floor = GateEngine()
        for i in range(len(engine)): floor.add(f"noop{i}", lambda a, c: None, i)
        floor_us = per_action_us(floor, ctx, others * 20, args.repeat)
        decisions = {}
        for a in shells: k = engine.verify(a, ctx).decision; decisions[k] = decisions.get(k, 0) + 1
    m_shell, m_other = statistics.median(shell_us), statistics.median(other_us)
    print("shell gate: " + ('passepartout.shell_gate' if sys.modules.get('passepartout.shell_gate') else 'FALLBACK (module missing): every command asks'))
    print(f"shell: {m_shell:.1f} µs (p90 {p(0.9, shell_us):.1f}, max {max(shell_us):.1f}) over {len(shell_us)} commands; "
          f"target {SHELL_TARGET_US:.0f} µs, ratio {m_shell / SHELL_TARGET_US:.2f}; decisions {decisions}")
    print(f"first sight: {statistics.median(cold_us):.1f} µs (p90 {p(0.9, cold_us):.1f}) over {len(cold_us)} reads of paths never judged before")
    m_floor = statistics.median(floor_us)
    print(f"non-shell: {m_other:.1f} µs (p90 {p(0.9, other_us):.1f}, max {max(other_us):.1f}) over {len(other_us)} tool calls; "
          f"target {OTHER_TARGET_US:.0f} µs, ratio {m_other / OTHER_TARGET_US:.2f}; replies {statistics.median(reply_us):.1f} µs")
    print(f"floor: {m_floor:.1f} µs for the same engine with {len(engine)} do-nothing gates; "
          f"gates' own cost: non-shell {m_other - m_floor:.1f} µs, shell {m_shell - m_floor:.1f} µs")


if __name__ == '__main__':
    main()
