"""The package's layers only point down: no module imports one of a higher layer, and no import cycle.

Every `passepartout/*.py` is parsed with `ast`, imports inside functions included (a lazy import is still
a dependency: it is how the old circle app → daemon → approvals → app went unseen). An import under
`if TYPE_CHECKING:` never runs: it names a type for a hint (`Context.agent: 'Agent'`) and is not
counted. The layer table is the one `nbs/00_package.md` shows; a new module must be placed in it.

An import of the package's own modules inside a function is allowed only where `LAZY` lists it, with
its reason: a heavy third-party package kept off a light path, or the command line's start time. Any
other one fails `test_no_unlisted_lazy_import`.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'passepartout'

# rank: (layer, modules). A module may import modules of its own rank or lower, never higher.
LAYERS = {
    0: ('core', '__init__ errors basics signals perceive gates reason tools act loop config watch skills'),
    1: ('providers', 'providers cascade replay'),
    2: ('plug-ins', 'builtin_gates autorun validation_gates turn_gates path_gates self_protection_gates permission_gates '
                    'network_gates provenance_gates shell_gate shell_rules vault policy refusals_gate information_flow owner_plan reply_check '
                    'builtin_tools sandbox approvals approval_flow executed_files audit sessions memory_store recall embeddings foveal memory_loop scribe '
                    'instruction_skills mcp skill_guards skill_shell skill_files skill_web skill_messaging skill_approvals skill_memory'),
    3: ('app', 'app'),
    4: ('services', 'heartbeat repl skill_repl'),
    5: ('daemon', 'protocol daemon_client daemon'),
    5.5: ('gateways', 'telegram signal_gateway'),
    6: ('operations', 'doctor'),
    7: ('command line', 'cli __main__ approval_commands daemon_commands demo chat memory_commands tui skill_commands'),
}
RANK = {m: r for r, (_, names) in LAYERS.items() for m in names.split()}

# The package imports that may sit inside a function: (module, function, imported module) -> why.
START = 'start time'   # the command line: `passepartout --help` imports `cli` alone (60_cli), a command loads what it uses when used
LAZY = {
    ('cli', 'LazyGroup.invoke', 'errors'): f"{START}: `passepartout --help` imports passepartout.cli alone",
    ('cli', 'main', 'config'): f"{START}: `passepartout --help` imports passepartout.cli alone",
    ('cli', 'main', 'errors'): f"{START}: `passepartout --help` imports passepartout.cli alone",
    ('chat', '_send', 'app'): f"{START}: a chat with a running daemon never assembles an agent in this process",
    ('chat', 'new_session', 'sessions'): f"{START}: the session store (and its vault) loads when a session is made, not to draw the prompt",
    ('chat', '_model', 'cascade'): f"{START}: `/model` only",
    ('chat', '_cost', 'cascade'): f"{START}: the cost line only",
    ('chat', '_approvals', 'approvals'): f"{START}: `/approvals` only",
    ('chat', '_approvals', 'approval_commands'): f"{START}: `/approvals` only (approval_commands assembles the agent)",
    ('chat', '_sessions', 'sessions'): f"{START}: `/sessions` only",
    ('chat', 'chat_command', 'sessions'): f"{START}: `--continue` only",
    ('tui', 'status_line', 'cascade'): f"{START}: Textual draws the screen before the cascade loads",
    ('tui', 'models', 'cascade'): f"{START}: the model list only",
    ('tui', 'ensure_daemon', 'daemon_commands'): f"{START}: starting a daemon (daemon_commands assembles the agent) only when none runs",
    ('tui', 'refresh_approvals', 'approvals'): f"{START}: after the screen is up",
    ('tui', 'refresh_lists', 'sessions'): f"{START}: after the screen is up",
    ('tui', 'load_session', 'sessions'): f"{START}: after the screen is up",
    ('tui', 'action_new_session', 'sessions'): f"{START}: after the screen is up",
    ('tui', 'PassepartoutApp.__init__', 'sessions'): f"{START}: after Textual is imported",
    ('tui', 'tui_command', 'sessions'): f"{START}: `--continue` only",
}


def _type_only(tree) -> set:
    "The import nodes under `if TYPE_CHECKING:`: names for type hints, never imported when the program runs."
    tests = lambda t: (isinstance(t, ast.Name) and t.id == 'TYPE_CHECKING') or (isinstance(t, ast.Attribute) and t.attr == 'TYPE_CHECKING')
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and tests(node.test)
            for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}


def imports(path:Path, modules:set) -> list:
    "The package modules `path` imports, as (module, line), at any depth of the file (type-checking-only imports aside)."
    found, tree = [], ast.parse(path.read_text(), str(path))
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip: continue
        names = []
        if isinstance(node, ast.Import): names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ('passepartout.' if node.level else '') + (node.module or '')
            if node.level and not node.module: base = 'passepartout'
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split('.')
            if parts[0] == 'passepartout' and len(parts) > 1 and parts[1] in modules: found.append((parts[1], node.lineno)); break
    return found


def lazy_imports(path:Path, modules:set) -> list:
    "The package imports inside functions of `path`, as (function, module, line); `import passepartout` itself is module `__init__`."
    tree, found = ast.parse(path.read_text(), str(path)), []
    skip = _type_only(tree)
    def visit(node, names, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)): visit(child, names + [child.name], True)
            elif isinstance(child, ast.ClassDef): visit(child, names + [child.name], inside)
            else:
                if inside and isinstance(child, (ast.Import, ast.ImportFrom)) and id(child) not in skip:
                    found.extend(('.'.join(names), m, child.lineno) for m in _targets(child, modules))
                visit(child, names, inside)
    visit(tree, [], False)
    return found


def _targets(node, modules:set) -> list:
    "The package modules one import statement names (`__init__` for the package itself)."
    if isinstance(node, ast.Import): dotted = [a.name for a in node.names]
    else:
        base = 'passepartout' + (f".{node.module}" if node.module else '') if node.level else (node.module or '')
        dotted = [f"{base}.{a.name}" if base == 'passepartout' else base for a in node.names]
    parts = [d.split('.') for d in dotted if d.split('.')[0] == 'passepartout']
    return list(dict.fromkeys(p[1] if len(p) > 1 and p[1] in modules else '__init__' for p in parts))


def graph() -> dict:
    "module -> [(imported module, line)] for every module of the package."
    modules = {p.stem for p in PKG.glob('*.py')} - {'_modidx'}
    return {m: [(t, l) for t, l in imports(PKG / f'{m}.py', modules) if t != m] for m in sorted(modules)}


def cycles(g:dict) -> list:
    "The strongly connected components of more than one module (Tarjan)."
    index, low, stack, on, out = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w, _ in g.get(v, ()):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop(); on.discard(w); part.append(w)
                if w == v: break
            if len(part) > 1: out.append(sorted(part))
    for v in g:
        if v not in index: visit(v)
    return out


def test_every_module_has_a_layer():
    assert sorted(set(graph()) - set(RANK)) == []


def test_no_import_points_up():
    g = graph()
    up = [f"{m} ({LAYERS[RANK[m]][0]}) imports {t} ({LAYERS[RANK[t]][0]}) at line {l}"
          for m, deps in g.items() for t, l in deps if m in RANK and t in RANK and RANK[t] > RANK[m]]
    assert up == []


def test_no_cycle():
    g = graph()
    found = [(part, [f"{a} -> {b}:{l}" for a in part for b, l in g[a] if b in part]) for part in cycles(g)]
    assert found == []


def test_the_walker_sees_what_it_must(tmp_path):
    "The checks can fail: a function-level import, a relative one and a cycle are all found."
    probe = tmp_path / 'probe.py'
    probe.write_text("from . import config\ndef f():\n    from passepartout.daemon import x\n    import passepartout.app\n")
    found = imports(probe, {'config', 'daemon', 'app'})
    assert found == [('config', 1), ('daemon', 3), ('app', 4)]
    assert cycles({'a': [('b', 1)], 'b': [('a', 2)], 'c': [('a', 3)]}) == [['a', 'b']]


def test_no_unlisted_lazy_import():
    "A package import inside a function is one `LAZY` lists, with its reason; and `LAZY` lists none that is gone."
    modules = {p.stem for p in PKG.glob('*.py')} - {'_modidx'}
    found = {(m, fn, t): line for m in sorted(modules) for fn, t, line in lazy_imports(PKG / f'{m}.py', modules)}
    assert [f"{m}:{line} imports {t} inside {fn}" for (m, fn, t), line in found.items() if (m, fn, t) not in LAZY] == []
    assert [k for k in LAZY if k not in found] == []


def test_the_lazy_walker_sees_what_it_must(tmp_path):
    "Function-level imports are found with their function, in a method too; a module-level one and a type-only one are not."
    probe = tmp_path / 'probe.py'
    probe.write_text("from . import config\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING: from .loop import Agent\n"
                     "def f():\n    from passepartout.daemon import x\n    import passepartout\n"
                     "class C:\n    def m(self):\n        from . import app\n        import os\n")
    found = lazy_imports(probe, {'config', 'daemon', 'app', 'loop'})
    assert found == [('f', 'daemon', 5), ('f', '__init__', 6), ('C.m', 'app', 9)]


def test_the_package_notebook_shows_the_same_table():
    "nbs/00_package.md's layer table names every module in the layer this file gives it."
    text = (PKG.parent / 'nbs' / '00_package.md').read_text()
    rows = {line.split('|')[1].strip(): line for line in text.splitlines() if line.startswith('| ') and line.split('|')[1].strip()[:1].isdigit()}
    for rank, (layer, names) in LAYERS.items():
        row = rows.get(f"{rank} {layer}")
        assert row is not None, f"no row for layer {rank} {layer}"
        missing = [m for m in names.split() if m != '__init__' and m not in row]
        assert missing == [], (layer, missing)
