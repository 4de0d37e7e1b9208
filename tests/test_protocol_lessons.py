"""The table behind the lesson of `nbs/50_protocol.md` on reading frames: what a stream of bytes reads as.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import asyncio
import pytest
from passepartout.errors import ProtocolError
from passepartout.protocol import encode_frame, read_frame, BrokenStream

GOOD = encode_frame({'n': 1})


async def _read_all(data:bytes, **kw):
    "Every outcome of reading `data` frame by frame: objects, or the error that ended the reading."
    reader = asyncio.StreamReader(); reader.feed_data(data); reader.feed_eof()
    out = []
    while True:
        try: obj = await read_frame(reader, **kw)
        except BrokenStream as e: out.append(('broken', e.message)); return out
        except ProtocolError as e: out.append(('bad', e.message)); continue
        if obj is None: return out
        out.append(obj)


@pytest.mark.parametrize('data, kw, expected', [
    (GOOD + GOOD, {}, [{'n': 1}, {'n': 1}]),
    (GOOD + b'00000a{"n"', {}, [{'n': 1}, ('broken', 'truncated frame body: got 4 of 10 bytes')]),
    (b'zzzzzz{}', {}, [('broken', "frame header must be 6 hex digits, got b'zzzzzz'")]),
    (b'', {}, []),                                                  # an end of stream between frames is a clean leave
], ids=['two-frames', 'truncated-body', 'bad-header', 'empty'])
def test_a_stream_reads_as(data, kw, expected):
    assert asyncio.run(_read_all(data, **kw)) == expected


def test_a_bad_message_is_reported_and_the_stream_goes_on():
    out = asyncio.run(_read_all(b'000002[]' + GOOD))
    assert [o[0] if isinstance(o, tuple) else o for o in out] == ['bad', {'n': 1}]


def test_a_frame_over_the_limit_breaks_the_stream():
    assert asyncio.run(_read_all(b'100000' + GOOD, max_bytes=1024))[0][0] == 'broken'
