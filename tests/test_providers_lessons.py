"""The tables behind the lessons of `nbs/10_providers.md`: answers a model gives and the actions read from them.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.providers import Answer, ProviderError, answer_action, parse_text_action
from passepartout.reason import UnusableAnswer
from passepartout.signals import reply, tool_call

LIST_DIR = {'id': 'c1', 'name': 'list_dir', 'arguments': '{"path": "."}'}


@pytest.mark.parametrize('answer, action', [
    (Answer('Listing.', [LIST_DIR]), tool_call('list_dir', {'path': '.'}, explanation='Listing.', call_id='c1')),
    (Answer('', [LIST_DIR]), tool_call('list_dir', {'path': '.'}, call_id='c1')),      # no text: no explanation
    (Answer('Hello!'), reply('Hello!')),
], ids=['call with text', 'call without text', 'plain text'])
def test_answer_action(answer, action):
    got = answer_action(answer)
    assert got == action
    assert got.explanation == action.explanation


@pytest.mark.parametrize('answer, error, words', [
    (Answer('', [{'name': 'shell', 'arguments': '{"command": '}]), UnusableAnswer, 'not valid JSON'),
    (Answer('', [{'name': 'shell', 'arguments': '[1]'}]), UnusableAnswer, 'JSON object'),
    (Answer('  '), ProviderError, 'empty answer'),
], ids=['arguments not JSON', 'arguments not an object', 'empty'])
def test_answer_action_refuses(answer, error, words):
    with pytest.raises(error, match=words): answer_action(answer)


@pytest.mark.parametrize('text, action', [
    ('{"action": "reply", "text": "Hi!"}', reply('Hi!')),
    ('Sure:\n```json\n{"TOOL": "shell", "Args": {"command": "ls"}, "Explanation": "look"}\n```',
     tool_call('shell', {'command': 'ls'}, explanation='look')),
    ('{"Action": "LIST_DIR", "arguments": "{\\"path\\": \\".\\"}"}', tool_call('list_dir', {'path': '.'})),  # the action word is the tool
    ('{"action": "tool", "tool": "shell", "args": {"command": "ls", "why": "see the files"}}',
     tool_call('shell', {'command': 'ls', 'why': 'see the files'})),
    ('{"text": "just talking"}', reply('just talking')),
], ids=['reply', 'fenced, keys in any case', 'action names the tool', 'why stays an argument', 'text alone'])
def test_parse_text_action(text, action):
    got = parse_text_action(text)
    assert got == action
    assert got.args == action.args


@pytest.mark.parametrize('text, words', [
    ('I think you should run ls.', 'not one JSON object'),
    ('{"action": "reply", "text": 3}', '"text" string'),
    ('{"tool": "shell", "args": ["ls"]}', 'JSON object'),
], ids=['prose', 'reply text not a string', 'arguments not an object'])
def test_parse_text_action_refuses(text, words):
    with pytest.raises(UnusableAnswer, match=words): parse_text_action(text)


def _requests():
    "Requests as the loop makes them: the shipped belt's schemas, a transcript with a call, its result and text in several scripts."
    from passepartout.loop import Agent
    from passepartout.builtin_tools import builtin_tools
    from passepartout.reason import ProposalRequest
    from passepartout.perceive import perceive
    agent = Agent(tools=builtin_tools())
    msgs = [{'role': 'user', 'content': 'héllo "there"\n\u2028 ✓ \x00', 'owner': True},
            {'role': 'assistant', 'content': 'Looking.', 'tool_calls': [{'id': 'c1', 'name': 'read_file', 'args': {'path': 'a "b".txt'}}]},
            {'role': 'tool', 'call_id': 'c1', 'name': 'read_file', 'content': 'x' * 3000, 'is_error': False}]
    out = [ProposalRequest(agent, perceive('hi'), msgs[:n], rejections) for n in (0, 1, 3) for rejections in ([], ['policy: no "rm"'])]
    return agent, out


@pytest.mark.parametrize('kind', ['openai', 'ollama', 'anthropic'])
@pytest.mark.parametrize('stream', [False, True])
def test_body_bytes_is_json_dumps(kind, stream):
    "The kept tools and system prompt change nothing: every body is the very JSON `json.dumps` writes, request after request, also once the belt changes."
    import json
    from passepartout.providers import OpenAIProvider, OllamaProvider, AnthropicProvider, openai_messages, ollama_messages
    provider = {'openai': lambda: OpenAIProvider('m', base_url='http://127.0.0.1:9/v1'), 'ollama': lambda: OllamaProvider('m'),
                'anthropic': lambda: AnthropicProvider('m', base_url='http://127.0.0.1:9')}[kind]()
    agent, requests = _requests()
    reference = {'openai': openai_messages, 'ollama': ollama_messages, 'anthropic': None}[kind]
    for round in range(4):
        if round == 2: agent.tools.declare('read_file', effect='local-write')   # the schemas change (a `why`): sent as they are now
        if round == 3:                                                           # messages changed in place: sent as they are now
            msgs = requests[-1].messages
            msgs[0]['content'] += ' again'; msgs[1]['tool_calls'][0]['args']['path'] = 'c.txt'; msgs[2]['is_error'] = True
        for request in requests:
            body = provider.body(request, 'm', stream)
            assert provider._body_bytes(body) == json.dumps(body, ensure_ascii=False).encode()
            if reference is not None: assert body['messages'] == reference(request.system, request.messages)
            request._fixed = None
    sent = json.loads(provider._body_bytes(provider.body(requests[0], 'm', stream)))['tools']
    read_file = next(t.get('function', t) for t in sent if t.get('function', t)['name'] == 'read_file')
    assert 'why' in (read_file.get('parameters') or read_file.get('input_schema'))['properties']


@pytest.mark.parametrize('value', [
    {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c', 'function': {'arguments': '{"a": 1}'}}]},
    {'é': 'ü "quoted"\n\u2028\x00', 'n': [1, -2.5, 1e300, None, True, False]},
    [float('nan'), float('inf'), -float('inf')], {1: 'int key', 2.5: 'float key', None: 'null key', True: 'bool key'},
    (1, 'tuple'), 42, 3.25, None, '', 'plain',
], ids=['message', 'text and numbers', 'nan', 'keys', 'tuple', 'int', 'float', 'none', 'empty', 'str'])
def test_encode_is_json_dumps(value):
    "The encoder kept between calls writes the very text `json.dumps(value, ensure_ascii=False)` writes."
    import json
    from passepartout.providers import _encode
    assert _encode(value) == json.dumps(value, ensure_ascii=False)


def test_encode_fails_as_json_dumps_does():
    "What JSON cannot carry fails with `json.dumps`'s own error: an object of another type, a value that holds itself."
    import json
    from passepartout.providers import _encode
    cycle = {'a': []}; cycle['a'].append(cycle)
    for bad in ({'x': object()}, [b'bytes'], cycle):
        with pytest.raises(Exception) as ours: _encode(bad)
        with pytest.raises(Exception) as theirs: json.dumps(bad, ensure_ascii=False)
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


@pytest.mark.parametrize('text', [
    '{"a": [1, 2.5, null, true], "é": "\\u00e9\\ud800", "n": {"deep": {}}}', b'{"a": "\xc3\xa9"}', ' {"a": 1}', '{"a": 1}\n', '{"a": 1} x',
    '[1]', '"s"', '', '{', b'{"cut', '{"a": 1'.encode('utf-16'), '{"a": 1}'.encode('utf-8-sig'), b'{\x00"', b'{"a": "\xff"}', '{"a": NaN}',
    '{"a": 1, "a": 2}', '{' * 100000 + '}' * 100000,
], ids=lambda t: repr(t[:20]))
def test_loads_is_json_loads(text):
    "The answer's reader gives `json.loads`'s value, or fails with its error (type and message), for objects and everything else."
    import json
    from passepartout.providers import _loads
    try: expected = ('value', json.loads(text))
    except (ValueError, RecursionError) as e: expected = ('error', type(e), str(e))
    try: got = ('value', _loads(text))
    except (ValueError, RecursionError) as e: got = ('error', type(e), str(e))
    assert got == expected


MESSAGES = [
    {'role': 'user', 'content': 'héllo "there"\n\u2028 ✓ \x00 😀', 'owner': True}, {'role': 'user', 'content': ''},
    {'role': 'system', 'content': 'S'}, {'role': 'assistant', 'content': 'Done.'}, {'role': 'assistant', 'content': None},
    {'role': 'assistant', 'content': 'Looking.', 'tool_calls': [{'id': 'c1', 'name': 'read_file', 'args': {'path': 'a "b".txt', 'n': [1, 2.5, None, True], 'd': {'é': -0.0}}}]},
    {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c3', 'name': 'now', 'args': {}}, {'id': None, 'name': 'read_file', 'args': {'path': 'z'}}]},
    {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 7, 'name': 'n', 'args': {}}]}, {'role': 'assistant', 'content': 3, 'tool_calls': [{'name': 'n', 'args': {}}]},
    {'role': 'assistant', 'content': 'x', 'tool_calls': []}, {'role': 'assistant', 'content': 'x', 'tool_calls': [{'id': 'c', 'name': 5, 'args': {}}]},
    {'role': 'tool', 'call_id': 'c1', 'name': 'read_file', 'content': 'x' * 300, 'is_error': False},
    {'role': 'tool', 'call_id': 'c1', 'name': 'read_file', 'content': 'Permission denied', 'is_error': True},
    {'role': 'tool', 'call_id': None, 'name': None, 'content': 12, 'is_error': False, 'held': 'tok'}, {'role': 'tool'},
    {'role': 'tool', 'call_id': 5, 'name': 5, 'content': 'out'}, {'role': 5, 'content': 'odd'}, {'role': 'user', 'content': ['a', 1]},
]


@pytest.mark.parametrize('kind', ['openai', 'ollama'])
@pytest.mark.parametrize('message', MESSAGES, ids=lambda m: repr(m)[:40])
def test_a_message_written_at_once_is_the_message_converted_then_serialised(kind, message):
    "The JSON a provider writes at once for a message (`_openai_json`, `_ollama_json`) is the very JSON of the converted message."
    from passepartout.providers import _openai_json, _ollama_json, _openai_message, _ollama_message, _json_after_comma
    write, convert = {'openai': (_openai_json, _openai_message), 'ollama': (_ollama_json, _ollama_message)}[kind]
    assert write(message) == _json_after_comma(convert(message))


@pytest.mark.parametrize('kind', ['openai', 'ollama'])
def test_a_message_that_cannot_be_written_fails_as_its_conversion_does(kind):
    "A message without a role, a call without a name, arguments JSON cannot carry: the same error as converting, then serialising."
    from passepartout.providers import _openai_json, _ollama_json, _openai_message, _ollama_message, _json_after_comma
    write, convert = {'openai': (_openai_json, _openai_message), 'ollama': (_ollama_json, _ollama_message)}[kind]
    for bad in ({'content': 'no role'}, {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c', 'args': {}}]}, {'role': 'user', 'content': 'lone \ud800'},
                {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c', 'name': 'n', 'args': {'x': object()}}]}):
        with pytest.raises(Exception) as ours: write(bad)
        with pytest.raises(Exception) as theirs: _json_after_comma(convert(bad))
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))
