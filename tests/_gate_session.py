"""What the injected-value tests share: an agent holding the owner's message in session 's', with a `verify` that
runs a proposed call through its gates as the loop would."""
from types import SimpleNamespace
from passepartout.config import World
from passepartout.signals import Context, Signal, tool_call
from passepartout.loop import Agent
from passepartout.reason import note_signal
from passepartout.builtin_gates import default_gates


def owner_session(belt, owner_text:str, engine=None):
    "An agent with `belt`, `engine` (else `default_gates()`) and the owner Emma's world: `(agent, transcript, owner's signal)`."
    agent = Agent(tools=belt, gates=engine or default_gates(), world=World(addresses=['emma@example.org']))
    signal = Signal(meta={'source': 'cli', 'session': 's'}, payload={'sensor': 'user-input', 'text': owner_text})
    t = agent.transcript('s')
    note_signal(t, signal)
    return agent, t, signal


def verifier(agent, signal):
    "The agent and `verify(name, **args)`: that call, proposed in the owner's turn, through the agent's gates."
    ctx = Context(signal, agent)
    return SimpleNamespace(agent=agent, verify=lambda name, **args: agent.gates.verify(tool_call(name, args, explanation='as asked'), ctx))
