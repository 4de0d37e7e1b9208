"""The tables behind lessons of `nbs/05_reason.md`: signals the model never sees, and streaming through `reason`.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.loop import Agent
from passepartout.perceive import perceive
from passepartout.reason import ScriptedProvider, reason
from passepartout.signals import Signal, Context, Turn, reply


@pytest.mark.parametrize('signal, status', [
    (perceive('approve abcd1234'), 'handled'),
    (perceive('{"broken'), 'handled'),
    (Signal(payload={'sensor': 'heartbeat'}), 'ignored'),
], ids=['approval command', 'protocol error', 'heartbeat without a handler'])
def test_never_reaches_the_model(signal, status):
    agent = Agent(ScriptedProvider([]))
    assert reason(signal, Context(agent=agent)).status == status
    assert agent.provider.requests == []


def test_on_token_streams_through_reason():
    pieces = []
    agent = Agent(ScriptedProvider([reply('Hello there.')]))
    sig = reason(perceive('hi'), Context(agent=agent, turn=Turn(on_token=pieces.append)))
    assert (sig.approved_action.text, pieces) == ('Hello there.', ['Hello there.'])


def test_memory_is_asked_once_per_step_and_shown_to_every_attempt():
    "Each step asks memory once (recorded in the turn); each attempt's prompt shows that text; a step after a tool's output asks again."
    from types import SimpleNamespace
    from passepartout.gates import GateEngine, deny
    from passepartout.loop import Agent
    from passepartout.reason import ScriptedProvider
    from passepartout.signals import tool_call, reply
    from passepartout.tools import Toolbelt
    belt = Toolbelt()
    @belt.tool
    def look(path: str):  # where
        "Look."
        return 'a.txt'
    gates = GateEngine()
    gates.add('no-root', lambda a, c: deny('not the root') if a.kind == 'tool' and a.args.get('path') == '/' else None)
    recalls = iter(['Memory (data): first', 'Memory (data): second'])
    asked = []
    agent = Agent(ScriptedProvider([tool_call('look', {'path': '/'}), tool_call('look', {'path': '.'}), reply('one file')]), gates=gates, tools=belt)
    agent.memory = SimpleNamespace(context_for=lambda agent, signal, turn: asked.append(signal.sensor) or next(recalls))
    assert agent.send('look around').reply == 'one file'
    assert asked == ['user-input', 'tool-output']
    shown = [[p for p in r.system.split('\n\n') if p.startswith('Memory (data)')] for r in agent.provider.requests]
    assert shown == [['Memory (data): first'], ['Memory (data): first'], ['Memory (data): second']]
