"""The table behind a lesson of `nbs/33_audit.md`: `parse_data` refuses every text that is not a record's canonical data.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.audit import parse_data


@pytest.mark.parametrize('text', ['{"a":1,"a":2}', '{"a":NaN}', '{"b":1,"a":2}', '{"a": 1}', '{"a":"\\u0041"}', '[1]', '{oops', b'{}'],
                         ids=['duplicate key', 'NaN', 'key order', 'spaces', 'escaped letter', 'not an object', 'not JSON', 'bytes'])
def test_parse_data_refuses(text):
    with pytest.raises(ValueError): parse_data(text)


def test_parse_data_reads_canonical_text():
    assert parse_data('{"a":1,"b":[true,null]}') == {'a': 1, 'b': [True, None]}
