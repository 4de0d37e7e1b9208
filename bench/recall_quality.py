"""Recall quality on a small labelled set: full text (FTS5, BM25) against static embeddings and the hybrid of both.

A memory of 30 notes such as an assistant keeps (people, dates, places, chores, codes), with 30 questions, each
labelled with the one note that answers it. Half the questions share a word with their note ("lexical"), half say
it in other words ("paraphrase": "who fixes the pipes?" for "Bob is our plumber"). For each method it prints
recall@1, recall@3 and the mean reciprocal rank, per half and overall, and the median time of one query.

Embeddings need the `[embeddings]` extra (`pip install -e '.[embeddings]'`); without it only FTS5 is measured.

    python bench/recall_quality.py [--repeat 20] [--json]
"""
import argparse, json, statistics, sys, tempfile, time
from pathlib import Path

NOTES = {
    'person:bob': 'Bob is our plumber; he fixed the leaking sink last spring',
    'person:alice': 'Alice is my sister, she lives in Lyon with two cats',
    'person:dr-khan': 'Dr Khan is the family doctor at the Elm Street practice',
    'person:marta': 'Marta from accounting approves expense reports over 500 euros',
    'fact:release': 'The 0.2 release moved to Monday after the test failures',
    'fact:wifi': 'The wifi password is written on the back of the fridge calendar',
    'fact:car': 'The car is due for its inspection in March; the garage is on Rue Haute',
    'fact:insurance': 'Home insurance renews on 1 September, policy with Axa',
    'fact:allergy': 'Leo is allergic to peanuts; always check cake ingredients',
    'fact:parking': 'Visitor parking at the office is level -2, spots 40 to 55',
    'trip:lisbon': 'Flight to Lisbon on 3 June, seat 14A, hotel near Alfama',
    'trip:alps': 'Ski week in the Alps booked for February, chalet in Morzine',
    'task:taxes': 'File the tax return before the end of May',
    'task:passport': 'Renew the passport, it expires in August',
    'task:plants': 'Water the balcony plants twice a week in summer',
    'task:gift': 'Buy a birthday present for Alice, she likes pottery',
    'task:boiler': 'Book the yearly boiler service before winter',
    'decision:laptop': 'We chose the 14 inch laptop with 32 GB of memory for the new hire',
    'decision:vendor': 'The cloud backup stays with Backblaze; the contract was renewed',
    'decision:meeting': 'Weekly team meeting moves to Tuesday mornings at 10',
    'note:recipe': 'Grandma\'s lasagne: bake 45 minutes at 180 degrees',
    'note:bank': 'The joint account is at the Credit Mutuel branch downtown',
    'note:gym': 'Gym membership costs 39 euros a month, cancel with one month notice',
    'note:school': 'School pickup is at 16:30 on Wednesdays, 15:00 on Fridays',
    'note:dentist': 'Dentist appointment on Thursday at 9, bring the insurance card',
    'note:router': 'Restart the router by holding the reset button for ten seconds',
    'note:vet': 'The cat\'s vaccination is due in October at the vet on Main Street',
    'note:book': 'Reading club picked a novel by Ursula Le Guin for next month',
    'note:electricity': 'The electricity bill doubled in January because of the heater',
    'note:neighbour': 'The neighbour at number 12 keeps a spare key for emergencies',
}

QUESTIONS = [   # (question, the note that answers it, 'lexical' or 'paraphrase')
    ('who is our plumber', 'person:bob', 'lexical'), ('where does Alice live', 'person:alice', 'lexical'),
    ('when is the release', 'fact:release', 'lexical'), ('what is the wifi password', 'fact:wifi', 'lexical'),
    ('car inspection date', 'fact:car', 'lexical'), ('when does home insurance renew', 'fact:insurance', 'lexical'),
    ('flight to Lisbon seat', 'trip:lisbon', 'lexical'), ('tax return deadline', 'task:taxes', 'lexical'),
    ('passport expires', 'task:passport', 'lexical'), ('which laptop did we choose', 'decision:laptop', 'lexical'),
    ('lasagne baking time', 'note:recipe', 'lexical'), ('gym membership cost', 'note:gym', 'lexical'),
    ('school pickup time', 'note:school', 'lexical'), ('how to restart the router', 'note:router', 'lexical'),
    ('who keeps a spare key', 'note:neighbour', 'lexical'),
    ('who fixes the pipes', 'person:bob', 'paraphrase'), ('my sibling in France', 'person:alice', 'paraphrase'),
    ('our GP', 'person:dr-khan', 'paraphrase'), ('who signs off on my reimbursements', 'person:marta', 'paraphrase'),
    ('when do we ship the new version', 'fact:release', 'paraphrase'), ('internet access code', 'fact:wifi', 'paraphrase'),
    ('food Leo cannot eat', 'fact:allergy', 'paraphrase'), ('where do guests leave their vehicle', 'fact:parking', 'paraphrase'),
    ('holiday in Portugal', 'trip:lisbon', 'paraphrase'), ('skiing trip', 'trip:alps', 'paraphrase'),
    ('heating maintenance', 'task:boiler', 'paraphrase'), ('teeth checkup', 'note:dentist', 'paraphrase'),
    ('pet shots', 'note:vet', 'paraphrase'), ('why was the power bill so high', 'note:electricity', 'paraphrase'),
    ('present for my sister', 'task:gift', 'paraphrase'),
]


def measure(search, repeat:int) -> dict:
    "recall@1, recall@3 and MRR per kind of question, and the median seconds of one query."
    ranks, times = {'lexical': [], 'paraphrase': []}, []
    for q, want, kind in QUESTIONS:
        ids = [h.object.id for h in search(q)]
        ranks[kind].append(ids.index(want) + 1 if want in ids else None)
    for _ in range(repeat):
        for q, _, _ in QUESTIONS[::3]:
            t = time.perf_counter(); search(q); times.append(time.perf_counter() - t)
    def score(rs): return {'r@1': sum(r == 1 for r in rs) / len(rs), 'r@3': sum(r is not None and r <= 3 for r in rs) / len(rs),
                           'mrr': sum(1 / r for r in rs if r) / len(rs)}
    return {**{k: score(v) for k, v in ranks.items()}, 'all': score(ranks['lexical'] + ranks['paraphrase']),
            'median_ms': statistics.median(times) * 1000, 'p75_ms': statistics.quantiles(times, n=4)[2] * 1000}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeat', type=int, default=20)
    ap.add_argument('--json', action='store_true')
    args = ap.parse_args()
    from passepartout.memory_store import MemoryStore
    import passepartout.recall  # noqa: F401
    from passepartout.embeddings import EmbeddingsMissing, shipped_model
    store = MemoryStore(Path(tempfile.mkdtemp(prefix='pp-recall-')) / 'memory.db')
    for id, text in NOTES.items(): store.remember(id, text)
    store.snapshot('labelled set')
    methods = {'fts5': lambda q: store.recall(q, limit=3)}
    try:
        model = shipped_model()
        methods['embeddings'] = lambda q: store.recall_semantic(q, limit=3, embedder=model)
        methods['hybrid'] = lambda q: store.recall_hybrid(q, limit=3, embedder=model)
    except EmbeddingsMissing as e: print(f"({e}: only FTS5 measured)", file=sys.stderr)
    results = {name: measure(search, args.repeat) for name, search in methods.items()}
    if args.json: print(json.dumps(results, indent=1)); return
    print(f"{len(NOTES)} notes, {len(QUESTIONS)} questions (15 lexical, 15 paraphrase); recall@k and MRR, then one query's time")
    print(f"{'method':<11} {'lexical r@1/r@3/mrr':>21} {'paraphrase r@1/r@3/mrr':>24} {'all r@1/r@3/mrr':>18} {'median':>9} {'p75':>8}")
    for name, r in results.items():
        f = lambda d: f"{d['r@1']:.2f}/{d['r@3']:.2f}/{d['mrr']:.2f}"
        print(f"{name:<11} {f(r['lexical']):>21} {f(r['paraphrase']):>24} {f(r['all']):>18} {r['median_ms']:>7.2f}ms {r['p75_ms']:>6.2f}ms")


if __name__ == '__main__': main()
