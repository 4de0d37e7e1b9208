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
