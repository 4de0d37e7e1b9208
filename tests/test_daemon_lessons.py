"""The table behind the lesson of `nbs/51_daemon.md` on turns as sent: a verdict's gate trace goes out compact
(`sent_event`) and comes back as the turn held it (`full_event`), and what is not a gate trace is sent as it is.
"""
import json
import pytest
from passepartout.daemon import sent_event, sent_trace, sent_turn
from passepartout.daemon_client import full_event, full_turn
from passepartout.signals import Turn

ALLOWED = {'gate': 'paths', 'decision': 'allow', 'reason': '', 'us': 1.5}


@pytest.mark.parametrize('event, sent', [
    ({'decision': 'allow', 'trace': [ALLOWED], 'kind': 'verdict'}, {'decision': 'allow', 'gates': [['paths', 1.5]], 'kind': 'verdict'}),
    ({'trace': [{**ALLOWED, 'reason': 'read-only'}], 'kind': 'verdict'}, {'gates': [['paths', 'allow', 'read-only', 1.5]], 'kind': 'verdict'}),
    ({'trace': [{**ALLOWED, 'decision': 'deny', 'reason': 'no'}], 'kind': 'verdict'}, {'gates': [['paths', 'deny', 'no', 1.5]], 'kind': 'verdict'}),
    ({'trace': [{**ALLOWED, 'reason': None}], 'kind': 'verdict'}, {'gates': [['paths', 'allow', None, 1.5]], 'kind': 'verdict'}),
    ({'trace': [], 'kind': 'verdict'}, {'gates': [], 'kind': 'verdict'}),
    ({'trace': [{**ALLOWED, 'extra': 1}], 'kind': 'verdict'}, None),           # not a gate dict: as it is
    ({'trace': [{'gate': 'paths'}], 'kind': 'verdict'}, None),
    ({'trace': [['paths', 'allow', '', 1.5]], 'kind': 'verdict'}, None),
    ({'trace': 'none', 'kind': 'verdict'}, None),
    ({'kind': 'verdict'}, None),
    ({'trace': [ALLOWED], 'gates': 3, 'kind': 'verdict'}, None),               # its own `gates`: as it is
    ({'trace': [ALLOWED], 'kind': 'result'}, None),                            # only verdicts
], ids=['silent-allow', 'allow-with-reason', 'deny', 'reason-none', 'empty', 'extra-key', 'missing-keys', 'lists', 'not-a-list',
        'no-trace', 'own-gates', 'not-a-verdict'])
def test_a_trace_goes_out_compact_and_comes_back_whole(event, sent):
    out = sent_event(event)
    assert out == (event if sent is None else sent)
    back = full_event(json.loads(json.dumps(out)))
    assert back == json.loads(json.dumps(event)) and list(back) == list(event)


def test_a_trace_of_records_is_not_compacted():
    assert sent_trace([('paths', 'allow', '', 1.5)]) is None


def test_a_whole_turn_comes_back_as_to_dict_says():
    t = Turn()
    t.record('verdict', decision='ask', action={'kind': 'tool'}, trace=[ALLOWED, {**ALLOWED, 'gate': 'shell', 'decision': 'ask', 'reason': 'rm'}], attempt=1)
    t.record('verdict', decision='allow', action={'kind': 'reply'}, trace=[ALLOWED], attempt=2)
    wire = json.loads(json.dumps(sent_turn(t)))
    assert full_turn(wire) == json.loads(json.dumps(t.to_dict()))
    assert json.dumps(full_turn(wire)) == json.dumps(json.loads(json.dumps(t.to_dict())))   # to the byte
