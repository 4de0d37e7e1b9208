"""Does a turn cost more as the conversation grows? The shipped agent (`build_agent()`: audit log,
vault, approvals; temporary home and workspace) in ONE session: each turn the owner asks to read a
page and notify bob@example.org; the model calls `fetch_page` (read-only: a page of about 1.5 KB full
of addresses, links and amounts, different every turn: untrusted values for the provenance gate),
then `notify` (outward: the provenance and recipients gates read the session), then replies.

The model reads only the last message (what a provider pays to send a longer history is the
provider's, and the transcript is capped at `max_transcript` messages): the figures are the
harness's. Prints the median CPU time per turn (`time.process_time` around each, the audit log and the
session store synced at its end, so its writing is inside: no group commit across turns) near message 10,
near message 1,000 and, in another session, after twenty 100 KB tool outputs; the ratios to the
first must stay within 1.5.

    python bench/history_cost.py [--at 1000] [--sample 25]
"""
import argparse, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(__file__))
from _shipped import shipped_home, show, sync_stores


class Model:
    "fetch_page, then notify bob, then a reply, per owner message; reads only the last message."
    name = 'history'
    budget = None
    def propose(self, request):
        from passepartout.reason import Proposal
        from passepartout.signals import tool_call, reply
        s = request.signal
        if s.sensor == 'user-input': return Proposal(tool_call('fetch_page', {'n': int(s.text.split()[2])}, explanation='reading it'))
        if s.payload.get('tool') == 'fetch_page':
            return Proposal(tool_call('notify', {'to': 'bob@example.org', 'text': 'page read'}, explanation='as you asked'))
        return Proposal(reply('done'))


def page(n:int, size:int=1500) -> str:
    "A page with links, addresses and amounts of its own."
    line = (f"Offer {n}: pay {n}.{n % 100:02d} EUR to acct-{n} via https://shop{n}.example.com/pay?id={n} "
            f"or write to sales{n}@vendor{n}.example.net, call +1 555 {n:07d}.\n")
    return (line * (size // len(line) + 1))[:size]


def agent():
    from passepartout.app import build_agent
    from passepartout.builtin_gates import permissions_file
    a = build_agent(provider=Model())
    permissions_file().write_text('[[rule]]\ntool = "notify"\ndecision = "allow"\n')
    big = {'on': False}
    def fetch_page(n:int): # which page
        "Fetch a page."
        return page(n, 100_000 if big['on'] else 1500)
    def notify(to:str, text:str): # who, and what to tell them
        "Notify someone."
        return 'sent'
    a.tools.add(fetch_page, 'fetch_page', 'read-only'); a.tools.add(notify, 'notify', 'outward')
    return a, big


def turn(a, n, session):
    t0 = time.process_time()
    t = a.send(f"read page {n} and notify bob@example.org", session=session)
    sync_stores(a)                                  # its records and messages written now, inside the measured time (no group commit across turns)
    dt = (time.process_time() - t0) * 1e6
    assert t.reply == 'done' and len(t.of('result')) == 2 and not t.pending, t.events[-3:]
    return dt


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--at', type=int, default=1000)
    ap.add_argument('--sample', type=int, default=25)
    a_ = ap.parse_args()
    shipped_home()
    a, big = agent()
    per_turn = 6                                    # owner message, 2 calls and their outputs, the reply
    for i in range(3): turn(a, 10**6 + i, 'warm')
    early = []
    for i in range(a_.sample):                      # the second turn of a conversation: messages 6 to 11
        turn(a, 2 * i, f"short-{i}"); early.append(turn(a, 2 * i + 1, f"short-{i}"))
    n = 0
    while n * per_turn < a_.at: turn(a, n, 'long'); n += 1
    late = [turn(a, n + i, 'long') for i in range(a_.sample)]
    print(f"one session: {n + a_.sample} turns, {(n + a_.sample) * per_turn} messages (the transcript keeps the last {a.max_transcript})")
    print(show(f"a turn at message 6 to 11", early))
    print(show(f"a turn from message {n * per_turn}", late))
    print(f"ratio message {a_.at} / message 10: {statistics.median(late) / statistics.median(early):.2f} (target <= 1.5)")
    big['on'] = True
    for i in range(20): turn(a, 5000 + i, 'big')
    big['on'] = False
    after = [turn(a, 6000 + i, 'big') for i in range(a_.sample)]
    print(show('after twenty 100 KB tool outputs', after))
    print(f"ratio after twenty 100 KB outputs / message 10: {statistics.median(after) / statistics.median(early):.2f} (target <= 1.5)")
