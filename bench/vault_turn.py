"""What looking at the vault file once a turn saves (`Vault._load` under `current_turn()`, nbs/22_vault.md), on
the shipped agent's turns with an empty vault: the same agent, in one process, alternates batches of turns
with the vault looked at once a turn (as shipped) and at every question (`current_turn` read as 0, as
before: the secrets gate on every verification, Act on every output, the session store on every save).
Batches alternate so that both variants share the machine's load; the collector is tuned as the daemon's.
Prints the median CPU time per turn of each (`cpu_per_turn_batched`, see bench/loop_overhead.py) and the
difference, for 1-tool and 10-tool turns.

    python bench/vault_turn.py [--rounds 20]
"""
import argparse, itertools, os, statistics, sys
from unittest import mock
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, shipped_agent, cpu_per_turn_batched, show


def compare(calls:int, rounds:int, batch:int=25) -> tuple:
    "(once a turn, at every question): per-batch CPU µs per turn of `calls`-tool turns, batches alternating."
    from passepartout import vault as vault_mod
    agent, names = shipped_agent(calls), itertools.count()
    def one():
        name = f"vault-turn-{next(names)}"
        t = agent.send('go', session=name)
        agent.transcripts.pop(name, None); agent.used.pop(name, None)
        assert len(t.of('result')) == calls and t.reply == 'done', t.events[-3:]
    for _ in range(20): one()
    once, every = [], []
    for _ in range(rounds):
        once += cpu_per_turn_batched(one, batch, agent, batch)
        with mock.patch.object(vault_mod, 'current_turn', lambda: 0): every += cpu_per_turn_batched(one, batch, agent, batch)
    return once, every


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=20)
    a = ap.parse_args()
    shipped_home()
    from passepartout.app import tune_collector
    tune_collector()
    for calls, rounds in ((1, a.rounds), (10, max(2, a.rounds // 4))):
        once, every = compare(calls, rounds)
        print(show(f"{calls}-tool turn, the vault looked at once a turn", once))
        print(show(f"{calls}-tool turn, looked at at every question", every))
        print(f"{'  saved per turn':<50} {statistics.median(every) - statistics.median(once):10.1f} µs")
