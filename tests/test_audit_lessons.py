"""The table behind a lesson of `nbs/33_audit.md`: `parse_data` refuses every text that is not a record's canonical data.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.audit import parse_data, compact_trace
from passepartout.gates import GateRecord


@pytest.mark.parametrize('text', ['{"a":1,"a":2}', '{"a":NaN}', '{"b":1,"a":2}', '{"a": 1}', '{"a":"\\u0041"}', '[1]', '{oops', b'{}'],
                         ids=['duplicate key', 'NaN', 'key order', 'spaces', 'escaped letter', 'not an object', 'not JSON', 'bytes'])
def test_parse_data_refuses(text):
    with pytest.raises(ValueError): parse_data(text)


def test_parse_data_reads_canonical_text():
    assert parse_data('{"a":1,"b":[true,null]}') == {'a': 1, 'b': [True, None]}


ALLOWED = {'gate': 'paths', 'decision': 'allow', 'reason': '', 'us': 2.4}

@pytest.mark.parametrize('trace, kept', [
    ([], []),
    ([ALLOWED], ['paths']),
    ([ALLOWED, {'gate': 'shell', 'decision': 'ask', 'reason': 'rm deletes files', 'us': 0.3}], ['paths', ['shell', 'ask', 'rm deletes files']]),
    ([{'gate': 'vault', 'decision': 'allow', 'reason': 'handle resolved', 'us': 1.0}], [['vault', 'allow', 'handle resolved']]),
    ([GateRecord('paths', 'allow', '', 1.0), GateRecord('policy', 'deny', 'not today', 0.5)], ['paths', ['policy', 'deny', 'not today']]),
    ([{'gate': 'paths'}], [{'gate': 'paths'}]),                                 # not a gate trace: kept as it came
    ([ALLOWED, 'paths'], [ALLOWED, 'paths']),                                   # mixed: kept
    (['allow'], ['allow']),                                                     # already compact: kept
    ([('paths', 'allow', '', 1.0)], [('paths', 'allow', '', 1.0)]),             # a plain tuple is not a GateRecord: kept
], ids=['empty', 'allowed', 'an objection', 'allow with a reason', 'gate records', 'not a trace', 'mixed', 'compact', 'plain tuple'])
def test_compact_trace(trace, kept):
    assert compact_trace(trace) == kept
