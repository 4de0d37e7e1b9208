"""The table behind a lesson of `nbs/08_loop.md`: what each recovery handler's choice does to a turn.

The notebook keeps one showing example (a fallback); the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.loop import Agent, SKIP, ABORT, fallback
from passepartout.reason import ScriptedProvider
from passepartout.signals import Signal, reply


def broken(req): raise RuntimeError("model backend exploded")


@pytest.mark.parametrize('handlers, replies, last_kinds', [
    ([(RuntimeError, lambda e, s: fallback("I'm having trouble thinking right now."))], ["I'm having trouble thinking right now."], ['recovery', 'reply']),
    ([(KeyError, lambda e, s: SKIP), (RuntimeError, lambda e, s: ABORT)], [], ['recovery', 'aborted']),
    ([(Exception, lambda e, s: SKIP)], [], ['error', 'recovery']),
    ([(RuntimeError, lambda e, s: None), (Exception, lambda e, s: SKIP)], [], ['error', 'recovery']),
], ids=['fallback', 'abort after a handler of another type', 'skip', 'a handler that declines passes on'])
def test_recovery_choices(handlers, replies, last_kinds):
    agent = Agent(ScriptedProvider([broken]))
    for error_type, handler in handlers: agent.on_error(error_type, handler)
    turn = agent.send('hi')
    assert turn.replies == replies
    assert [e['kind'] for e in turn.events][-len(last_kinds):] == last_kinds
    assert len(agent.provider.requests) == 1   # a handler's choice is final: no loop-error goes back to the model


@pytest.mark.parametrize('depth, dropped', [(0, False), (10, False), (11, True), (50, True)])
def test_depth_limit(depth, dropped):
    agent = Agent(ScriptedProvider([reply('fine')]))
    turn = agent.process(Signal(meta={'source': 'cli'}, payload={'sensor': 'user-input', 'text': 'x'}, depth=depth))
    assert bool(turn.of('dropped')) == dropped and turn.reply == (None if dropped else 'fine')


@pytest.mark.parametrize('n, expect', [(2, ['c', 'd']), (4, ['a', 'b', 'c', 'd']), (9, ['a', 'b', 'c', 'd']), (0, ['a', 'b', 'c', 'd']), (-1, ['b', 'c', 'd'])],
                         ids=['last two', 'all', 'more than held', 'zero: all, as a slice', 'negative: as a slice'])
def test_syslog_lines_are_the_last_n(n, expect):
    "`lines(n)` reads only the end of the ring, and means what `list(entries)[-n:]` means."
    from passepartout.loop import SystemLog
    log = SystemLog(size=4)
    for text in 'zabcd': log.log('INFO', text)
    assert [line.split(' ', 2)[2] for line in log.lines(n)] == expect


def test_syslog_lines_show_a_new_entry_and_its_own_time(monkeypatch):
    "A line is formatted once per entry: a new entry with the same message shows with its own time, and the cache changes nothing."
    import time
    from passepartout.loop import SystemLog
    log, now = SystemLog(), iter([1700000000.0, 1700003600.0])
    monkeypatch.setattr(time, 'time', lambda: next(now))
    log.log('INFO', 'same'); first = log.lines(1)
    log.log('INFO', 'same')
    assert log.lines(2)[0] == first[0] and log.lines(2)[1] != first[0]
    assert log.lines(2) == [f"{time.strftime('%H:%M:%S', time.localtime(t))} INFO same" for t in (1700000000.0, 1700003600.0)]
