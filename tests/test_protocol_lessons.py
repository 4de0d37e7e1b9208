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


# -- the shape check without strings (bare_json) and frames from chunks (FrameBuffer) ---------------------------

import json, random, re
from passepartout.protocol import FrameBuffer, bare_json, check_shape, json_depth, MAX_JSON_DEPTH

_REGEX_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)   # how strings were removed before: the reference


def _document(rng, depth=0):
    "A random JSON value whose strings hold quotes, backslashes, brackets and digits."
    kind = rng.choice('sns' if depth > 8 else 'snsld')
    if kind == 's': return ''.join(rng.choice('ab"\\[]{}0123456789\n é') for _ in range(rng.randrange(12)))
    if kind == 'n': return rng.choice([0, -1.5, 10 ** rng.randrange(30), None, True])
    if kind == 'l': return [_document(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_document(rng, 9): _document(rng, depth + 1) for _ in range(rng.randrange(4))}


def _true_depth(value) -> int:
    if isinstance(value, list): return 1 + max(map(_true_depth, value), default=0)
    if isinstance(value, dict): return 1 + max(map(_true_depth, value.values()), default=0)
    return 0


def test_bare_json_removes_exactly_the_strings_the_old_pattern_removed():
    rng = random.Random(14)
    for _ in range(2000):
        doc = {'x': _document(rng)}
        for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False)):
            assert bare_json(text) == _REGEX_STRING.sub('', text), text
            assert json_depth(bare_json(text)) == _true_depth(doc)


@pytest.mark.parametrize('text', ['"\\"\\"\\"' * 50, '"abc', '"a\\\\" : "[[["', '["\\\\\\"]"]', '{"k": "v\\u0022["}', '{"a": "\\\\", "b": "]]"}'])
def test_odd_strings_are_removed_as_before_or_refused_by_the_parser(text):
    "Valid JSON loses exactly its strings; on text that is not JSON the two ways may differ, and the frame is refused either way."
    from passepartout.protocol import decode_body
    try: json.loads(text)
    except ValueError:
        with pytest.raises(ProtocolError): decode_body(text.encode())
    else: assert bare_json(text) == _REGEX_STRING.sub('', text)


def test_the_shape_check_passes_deep_text_in_strings_and_refuses_deep_structure():
    check_shape(json.dumps({'t': '[' * 500 + '9' * 500, 'l': [[[1]]]}))
    with pytest.raises(ProtocolError, match='deeper than'): check_shape(json.dumps({'t': '"\\' * 40, 'l': _nest(MAX_JSON_DEPTH + 1)}))
    check_shape(json.dumps({'t': '"\\' * 40, 'l': _nest(MAX_JSON_DEPTH - 1)}))


def _nest(n): return [] if n <= 1 else [_nest(n - 1)]


def test_frames_cut_from_chunks_of_any_size_are_the_frames_sent():
    rng = random.Random(3)
    sent = [{'n': i, 'pad': 'x' * rng.randrange(300)} for i in range(200)]
    stream = b''.join(encode_frame(obj) for obj in sent)
    frames, got, at = FrameBuffer(), [], 0
    while at < len(stream):
        step = rng.choice([1, 2, 5, 6, 7, 100, 4096])
        got += [json.loads(body) for body in frames.feed(stream[at:at + step])]; at += step
    assert got == sent and not frames.data
