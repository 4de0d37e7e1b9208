"""Daemon throughput and memory: request/response pairs per second through a real daemon process
(loopback TCP, frames, handshake, sessions, the agent loop with an instant model), and its RSS.

The daemon runs in its own process; the client process opens C connections (one session each) and
keeps W requests in flight on each. Prints the median and spread over repeated runs, the ratio to the
5,000 pairs/s target, and the daemon's resident memory before and after.

    python bench/daemon_throughput.py [--clients 50] [--window 16] [--requests 20000] [--repeat 5]
"""
import argparse, asyncio, os, statistics, subprocess, sys, tempfile, textwrap, time
from pathlib import Path

from passepartout.daemon import AsyncClient, request, read_address, state_files, client_status

SERVER = textwrap.dedent('''
    import asyncio
    from passepartout.daemon import Daemon
    from passepartout.loop import Agent
    from passepartout.reason import Proposal
    from passepartout.signals import reply
    class Instant:
        name = 'instant'
        def propose(self, request): return Proposal(reply(request.signal.text))
    asyncio.run(Daemon(Agent(Instant()), port=0).serve(lambda d: print('ready', flush=True)))
''')


async def client(address, token, session, n, window):
    c = await AsyncClient.connect(address, token)
    sent = received = 0
    while sent < min(window, n): c.send(request('ping', session=session, id=sent)); sent += 1
    while received < n:
        answer = await c.receive()
        assert answer['meta']['id'] == received and answer['payload']['turn']['reply'] == 'ping', answer
        received += 1
        if sent < n: c.send(request('ping', session=session, id=sent)); sent += 1
    await c.close()


async def one_run(address, token, clients, window, total):
    per = total // clients
    t0 = time.perf_counter()
    await asyncio.gather(*(client(address, token, f"bench-{i}", per, window) for i in range(clients)))
    return per * clients / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--clients', type=int, default=50)
    ap.add_argument('--window', type=int, default=16)
    ap.add_argument('--requests', type=int, default=20000)
    ap.add_argument('--repeat', type=int, default=5)
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp())
    env = {**os.environ, 'PASSEPARTOUT_HOME': str(home)}
    script = home / 'server.py'; script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'ready'
        state = home / 'state'
        address, token = read_address(state), state_files(state)['token'].read_text()
        rss_idle = client_status(state_dir=state)['memory_kb']
        rates = [asyncio.run(one_run(address, token, a.clients, a.window, a.requests)) for _ in range(a.repeat)]
        st = client_status(state_dir=state)
        print(f"clients={a.clients} window={a.window} requests/run={a.requests} runs={a.repeat}")
        print(f"pairs/s: {statistics.median(rates):.0f}  (min {min(rates):.0f}, max {max(rates):.0f}, n={len(rates)})")
        print(f"ratio to target 5000 pairs/s: {statistics.median(rates) / 5000:.2f}")
        print(f"daemon RSS: idle {rss_idle} KiB, after {st['replies']} replies in {st['sessions']} sessions {st['memory_kb']} KiB")
    finally:
        proc.terminate(); proc.wait(30)


if __name__ == '__main__':
    main()
