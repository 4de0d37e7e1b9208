"""Load (bounded, loopback only): 100 concurrent clients x 100 turns each with an instant model.
Every reply must come back to the client that asked, for the request it answers: 0 lost, 0 misrouted.
LIMIT_S is a hang detector; throughput is measured by bench/daemon_throughput.py."""
import asyncio

from passepartout.daemon import AsyncClient, client_status, request
from _daemon_support import daemon_in_thread, token_of

CLIENTS, TURNS, LIMIT_S = 100, 100, 240


async def one_client(address, token, n):
    "Send TURNS requests one after another; return (lost, misrouted)."
    client = await AsyncClient.connect(address, token)
    session, lost, misrouted = f"client-{n}", 0, 0
    try:
        for i in range(TURNS):
            answer = await asyncio.wait_for(client.ask(request(f"m{i}", session=session, id=i)), 60)
            if answer is None: lost += TURNS - i; break
            ok = (answer['meta'] == {'id': i, 'session': session}
                  and answer['payload']['turn']['reply'] == f"{session}|m{i}")
            misrouted += not ok
    finally:
        await client.close()
    return lost, misrouted


async def run_load(address, token):
    results = await asyncio.wait_for(asyncio.gather(*(one_client(address, token, n) for n in range(CLIENTS))), LIMIT_S)
    return sum(l for l, _ in results), sum(m for _, m in results)


def test_100_clients_x_100_turns(tmp_path):
    with daemon_in_thread(state_dir=tmp_path) as daemon:
        lost, misrouted = asyncio.run(run_load(daemon.address, token_of(daemon)))
        status = client_status(timeout=120, state_dir=tmp_path)   # asked through the daemon's own loop
    assert (lost, misrouted) == (0, 0)
    assert status['replies'] == CLIENTS * TURNS and status['sessions'] == CLIENTS
