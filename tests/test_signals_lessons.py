"""The tables behind the lessons of `nbs/02_signals.md`: who counts as the owner.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.signals import Signal, from_owner


class _Mark(str):
    "Stands for the daemon's OWNER mark: a `str` subclass JSON can write but never produce."


@pytest.mark.parametrize('meta, owner', [
    ({'source': 'cli'}, True), ({}, True), ({'source': 'telegram'}, False), ({'source': 'telegram', 'owner': True}, True),
    ({'source': 'cli', 'owner': False}, False), ({'source': 'cli', 'owner': 'owner'}, False), ({'owner': _Mark('owner')}, True),
    ({'source': 'telegram', 'owner': 'yes'}, False),
], ids=['local channel', 'no source', 'gateway says nothing', 'gateway says owner', 'gateway says stranger',
        'a plain string cannot forge the mark', 'the daemon mark', 'any other value'])
def test_from_owner(meta, owner):
    assert from_owner(Signal(meta=meta)) is owner


def test_feedback_of_a_stranger_stays_the_strangers():
    stranger = Signal(meta={'source': 'telegram', 'owner': False}, payload={'sensor': 'chat-message'})
    assert from_owner(stranger.child('tool-output', 'x')) is False
