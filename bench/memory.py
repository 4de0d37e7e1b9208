"""What memory costs as it grows: snapshot, rollback, context assembly, recall, verify.

A memory shaped like an assistant's: hubs (people, projects: 1 % of the objects), notes that link to
one or two hubs (90 %), and tasks that link to one to three notes (9 %); contents of 40 to 120 words.
It is built in a temporary SQLite file to 100, 1,000 and 10,000 objects (`--sizes`), and at each size:

- **snapshot of one change**: a note changes (`put`), then `snapshot` (timed alone, and with the put);
  the nodes it writes are counted. Target at 10,000 objects: <= 5 ms. For comparison, the first
  snapshot of the whole memory (every node new), once.
- **changing a hub**: a hub linked from ~1 % of the notes changes, so every note (and task) that links
  to it gets a new version: the price of an object's hash covering what it links to.
- **rollback**: `rollback()` back and forth between two snapshots, plus the first read after it.
- **context assembly** under a 4,000-token budget, focus on a random note (a few neighbours) and
  on one of the most linked hubs (hundreds of neighbours: the budget fills): over a plain dict
  (neighbours by scanning all objects) and over the store (neighbours from the link index).
  Target at 10,000 objects: <= 10 ms.
- **recall**: a selective query (a rare word) and a broad one (a word in most objects); by meaning too
  with the `[embeddings]` extra (the first search embeds every object).
- **purge** of one object: every snapshot holding it rewritten, the file vacuumed, once.
- **verify** of the head (every hash recomputed), once.

All figures are wall-clock medians over `--repeat` runs, with quartiles.

    python bench/memory.py [--sizes 100,1000,10000] [--repeat 30]
"""
import argparse, os, random, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import show

WORDS = ('release build test deploy invoice meeting garden travel budget report draft review dentist passport '
         'plumber contract server backup laptop router family birthday recipe flight hotel train ticket').split()


def text(rng, n):
    return ' '.join(rng.choice(WORDS) for _ in range(n))


def grow(store, rng, upto:int, made:dict):
    "Add hubs, notes and tasks (1 %, 90 %, 9 %) until the store holds `upto` objects."
    from passepartout.memory_store import MemoryObject
    while len(store) < upto:
        i = made['count'] = made.get('count', len(store)) + 1   # never an id used before (a purge makes len() smaller)
        if not made['hub'] or i % 100 == 0:
            kind, links = 'hub', ()
        elif i % 11 == 0 and len(made['note']) > 3:
            kind, links = 'task', tuple(rng.sample(made['note'], rng.randint(1, 3)))
        else:
            kind, links = 'note', tuple(rng.sample(made['hub'], min(len(made['hub']), rng.randint(1, 2))))
        id = f"{kind}:{i}"
        store.put(MemoryObject(id, f"{id} {text(rng, rng.randint(40, 120))} rare{i}", kind, {}, links))
        made[kind].append(id)


def timed(fn, repeat:int) -> list:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); out.append((time.perf_counter() - t0) * 1e6)
    return out


def semantic_recall(store, rng, made, repeat):
    "Recall by meaning (the `[embeddings]` extra): the first search embeds every version not cached yet; then one query's time."
    from passepartout.embeddings import EmbeddingsMissing, shipped_model
    try: model = shipped_model()
    except EmbeddingsMissing: print(f"{'recall by meaning':<50} (not measured: no [embeddings] extra)"); return
    t0 = time.perf_counter(); store.recall_semantic('warm up', embedder=model); first = (time.perf_counter() - t0) * 1000
    print(f"{'recall by meaning, first (embeds every object)':<50} {first:10.1f} ms")
    it = iter(range(repeat))
    print(show('recall by meaning, one query', timed(lambda: store.recall_semantic(f"{WORDS[next(it) % len(WORDS)]} plans", embedder=model), repeat), 'µs'))


def at_size(store, rng, made, repeat):
    from passepartout.foveal import assemble
    n = len(store)
    print(f"\n== {n} objects ==")
    t0 = time.perf_counter(); store.snapshot('grown'); full = (time.perf_counter() - t0) * 1000
    print(f"{'first snapshot of everything added (once)':<50} {full:10.1f} ms")
    nodes = lambda: store.db.execute('SELECT count(*) FROM nodes').fetchone()[0]
    snap, both, written = [], [], []
    for r in range(repeat):
        id = rng.choice([i for i in rng.sample(made['note'], 20) if not store.linked_from(i)] or made['note'][:1])
        t0 = time.perf_counter(); store.remember(id, f"changed {r} {text(rng, 50)}", 'note', store[id].links)
        t1 = time.perf_counter(); before = nodes(); store.snapshot('one change'); t2 = time.perf_counter()
        snap.append((t2 - t1) * 1e6); both.append((t2 - t0) * 1e6); written.append(nodes() - before)
    print(show('snapshot after changing 1 note', snap, 'µs', 5000 if n >= 10_000 else None))
    print(show('put + snapshot, 1 note', both, 'µs'))
    print(f"{'nodes written per snapshot of 1 change':<50} median {statistics.median(written):.0f}")
    hub = made['hub'][0]
    users = len(store.linked_from(hub))
    hubs = timed(lambda: (store.remember(hub, f"hub changed {rng.random()}", 'hub'), store.snapshot('hub')), max(3, repeat // 5))
    print(show(f'put + snapshot, 1 hub linked from {users} objects', [x / 1000 for x in hubs], 'ms'))
    a, b = store.history(2)[1].seq, store.head.seq
    probe = made['note'][-1]
    rb = timed(lambda: (store.rollback(a), store.get(probe)), repeat)
    print(show('rollback + first read', rb, 'µs'))
    memory = {id: store[id] for id in store}
    focus = [rng.choice(made['note']) for _ in range(repeat)]
    it = iter(focus * 2)
    plain = timed(lambda: assemble(memory, next(it), 4000), repeat)
    print(show('context assembly, 4000 tokens, dict (scan)', plain, 'µs', 10_000 if n >= 10_000 else None))
    it = iter(focus * 2)
    viastore = timed(lambda: store.context(next(it), 4000), repeat)
    print(show('context assembly, 4000 tokens, store (index)', viastore, 'µs', 10_000 if n >= 10_000 else None))
    ctx = store.context(focus[0], 4000)
    assert ctx.tokens <= 4000
    print(f"{'  (one of them)':<50} {ctx.tokens} tokens, {len(ctx.peripheral)} peripheral, {ctx.left_out} left out")
    hubs = [made['hub'][i % min(len(made['hub']), 5)] for i in range(repeat)]   # the most linked: the budget fills
    it = iter(hubs * 2)
    print(show('context, focus on a hub, dict (scan)', timed(lambda: assemble(memory, next(it), 4000), repeat), 'µs', 10_000 if n >= 10_000 else None))
    it = iter(hubs * 2)
    print(show('context, focus on a hub, store (index)', timed(lambda: store.context(next(it), 4000), repeat), 'µs', 10_000 if n >= 10_000 else None))
    ctx = store.context(hubs[0], 4000)
    assert ctx.tokens <= 4000
    print(f"{'  (one of them)':<50} {ctx.tokens} tokens, {len(ctx.peripheral)} peripheral, {ctx.left_out} left out")
    import passepartout.recall
    t0 = time.perf_counter(); store.recall('warm up'); catch_up = (time.perf_counter() - t0) * 1000
    print(f"{'recall index catch-up (new versions since last)':<50} {catch_up:10.1f} ms")
    rare = [f"rare{rng.choice(made['note']).split(':')[1]}" for _ in range(repeat)]
    it = iter(rare)
    print(show('recall, a rare word', timed(lambda: store.recall(next(it)), repeat), 'µs'))
    it = iter(range(repeat))
    print(show('recall, two common words (5 hits)', [x / 1000 for x in timed(lambda: store.recall(f"{WORDS[next(it) % len(WORDS)]} review"), repeat)], 'ms'))
    semantic_recall(store, rng, made, repeat)
    victim = made['task'].pop(0) if made['task'] else made['note'].pop()
    t0 = time.perf_counter(); cause = store.purge(victim); pg = (time.perf_counter() - t0) * 1000
    print(f"{'purge 1 object (rewrite history, VACUUM), once':<50} {pg:10.1f} ms  ({cause})")
    t0 = time.perf_counter(); problems = store.verify(); v = (time.perf_counter() - t0) * 1000
    assert problems == [], problems[:3]
    print(f"{'verify the head (every hash)':<50} {v:10.1f} ms")
    return statistics.median(snap), statistics.median(viastore)


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--sizes', default='100,1000,10000')
    ap.add_argument('--repeat', type=int, default=30)
    args = ap.parse_args()
    from passepartout.memory_store import MemoryStore
    rng = random.Random(7)
    store = MemoryStore(Path(tempfile.mkdtemp(prefix='pp-memory-')) / 'memory.db')
    made = {'hub': [], 'note': [], 'task': []}
    results = {}
    for size in (int(s) for s in args.sizes.split(',')):
        t0 = time.perf_counter(); grow(store, rng, size, made)
        print(f"\n(built to {size} objects in {time.perf_counter() - t0:.1f} s)")
        results[size] = at_size(store, rng, made, args.repeat)
    sizes = sorted(results)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"\nsnapshot of 1 change, {hi} / {lo} objects: {results[hi][0] / results[lo][0]:.2f}x for {hi // lo}x the objects")
