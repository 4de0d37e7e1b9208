"""The package's layers only point down: no module imports one of a higher layer, and no import cycle.

Every `passepartout/*.py` is parsed with `ast`, imports inside functions included (a lazy import is still
a dependency: it is how the old circle app → daemon → approvals → app went unseen). An import under
`if TYPE_CHECKING:` never runs: it names a type for a hint (`Context.agent: 'Agent'`) and is not
counted. The layer table is the one `nbs/00_package.md` shows; a new module must be placed in it.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'passepartout'

# rank: (layer, modules). A module may import modules of its own rank or lower, never higher.
LAYERS = {
    0: ('core', '__init__ errors basics signals perceive gates reason tools act loop config watch'),
    1: ('providers', 'providers cascade replay'),
    2: ('plug-ins', 'builtin_gates autorun validation_gates turn_gates path_gates self_protection_gates permission_gates '
                    'network_gates provenance_gates shell_gate shell_rules vault policy refusals_gate information_flow owner_plan '
                    'builtin_tools sandbox approvals approval_flow executed_files audit sessions memory_store recall embeddings foveal memory_loop scribe'),
    3: ('app', 'app'),
    4: ('services', 'heartbeat repl'),
    5: ('daemon', 'protocol daemon'),
    5.5: ('gateways', 'telegram'),
    6: ('operations', 'doctor'),
    7: ('command line', 'cli approval_commands daemon_commands demo chat memory_commands tui'),
}
RANK = {m: r for r, (_, names) in LAYERS.items() for m in names.split()}


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


def test_the_package_notebook_shows_the_same_table():
    "nbs/00_package.md's layer table names every module in the layer this file gives it."
    text = (PKG.parent / 'nbs' / '00_package.md').read_text()
    rows = {line.split('|')[1].strip(): line for line in text.splitlines() if line.startswith('| ') and line.split('|')[1].strip()[:1].isdigit()}
    for rank, (layer, names) in LAYERS.items():
        row = rows.get(f"{rank} {layer}")
        assert row is not None, f"no row for layer {rank} {layer}"
        missing = [m for m in names.split() if m != '__init__' and m not in row]
        assert missing == [], (layer, missing)
