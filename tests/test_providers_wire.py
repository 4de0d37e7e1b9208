"""The request bodies a provider sends, built from what it kept of earlier requests, are byte for byte the plain build.

`_prepare` keeps the JSON of the tool schemas, of the system prompt and of every transcript message it sent
(`_wire_messages`, `_body_bytes`, `nbs/10_providers.md`). Here a conversation grows, is trimmed, has messages
replaced, redacted and (against the rule) edited in place, is reloaded as the session store gives it back, and
after every step each wire format, with and without text mode and streaming, sends exactly
`json.dumps(<the body built from the public converters>, ensure_ascii=False).encode()`.
"""
import json
from types import SimpleNamespace

import pytest
from passepartout.providers import (AnthropicProvider, OllamaProvider, OpenAIProvider, anthropic_messages, anthropic_tools,
                                    ollama_messages, openai_messages, openai_tools, text_mode_messages, text_mode_prompt)
from passepartout.sessions import Transcript

TOOLS = [{'name': 'read_file', 'description': 'Read a file.', 'parameters': {'type': 'object', 'properties': {'path': {'type': 'string'}}}},
         {'name': 'now', 'description': 'The time.'}]
OTHER_TOOLS = [{'name': 'shell', 'description': 'Run «it».', 'parameters': {'type': 'object', 'properties': {'why': {'type': 'string'}}}}]


def plain(kind:str, provider, request, stream:bool) -> bytes:
    "The body as the public converters give it, serialised by `json.dumps`: no kept part."
    tm = provider.text_mode
    system = text_mode_prompt(request.system, request.tools) if tm else request.system
    msgs = text_mode_messages(request.messages) if tm else request.messages
    tools = request.tools and not tm
    if kind == 'anthropic':
        b = {'model': 'm', 'max_tokens': provider.max_tokens, 'system': system, 'messages': anthropic_messages(msgs)}
        if tools: b['tools'] = anthropic_tools(request.tools)
        if stream: b['stream'] = True
    elif kind == 'ollama':
        b = {'model': 'm', 'messages': ollama_messages(system, msgs), 'stream': stream, 'options': {'num_predict': provider.max_tokens}}
        if tools: b['tools'] = openai_tools(request.tools)
    else:
        b = {'model': 'm', 'messages': openai_messages(system, msgs), 'max_tokens': provider.max_tokens}
        if tools: b['tools'] = openai_tools(request.tools)
        if stream: b.update(stream=True, stream_options={'include_usage': True})
    return json.dumps(b, ensure_ascii=False).encode()


def providers():
    return {'openai': OpenAIProvider('m', base_url='http://127.0.0.1:9/v1'), 'ollama': OllamaProvider('m'),
            'anthropic': AnthropicProvider('m', base_url='http://127.0.0.1:9')}


def call(i, name='read_file', args=None, text='Looking.'):
    return {'role': 'assistant', 'content': text, 'tool_calls': [{'id': f'c{i}', 'name': name, 'args': args if args is not None else {'path': f'{i}.txt'}}]}

def result(i, content='out', error=False, name='read_file'):
    return {'role': 'tool', 'call_id': f'c{i}', 'name': name, 'content': content, 'is_error': error}


def steps(t:list, box:dict):
    "Change the conversation `t` one way after another (yielding a name after each); `box['t']` is the list to send, `box['tools']`, `box['system']`."
    t.append({'role': 'user', 'content': 'héllo "there"\n\u2028 ✓ \x00 😀', 'owner': True}); yield 'first message'
    t.append(call(1, args={'path': 'a "b".txt', 'n': [1, 2.5, None, True], 'deep': {'é': {'x': -0.0}}})); yield 'a call'
    t.append(result(1, 'x' * 3000)); yield 'its result'
    t.append(call(2)); t.append(result(2, 'Permission denied', error=True)); yield 'a tool error'
    t.append({'role': 'assistant', 'content': 'Done: ✓'}); yield 'a reply'
    t.append({'role': 'user', 'content': '[message from bob] call me', 'owner': False}); t.append({'role': 'user', 'content': 'and?', 'owner': True}); yield 'two user turns in a row'
    t.append({'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c3', 'name': 'now', 'args': {}}, {'id': None, 'name': 'read_file', 'args': {'path': 'z'}}]}); yield 'two calls, no text'
    t.append({'role': 'tool', 'call_id': 'c3', 'name': 'now', 'content': 12, 'is_error': False, 'held': 'tok'}); yield 'a held call, content not text'
    t[-1] = {'role': 'tool', 'call_id': 'c3', 'name': 'now', 'content': 'decided later', 'is_error': False, 'held': 'tok', 'released': True}; yield 'replaced (note_release)'
    t[2] = {**t[2], 'content': 'secret [redacted]'}; yield 'redacted: a new dict'
    t[2]['content'] = 'edited in place'; yield 'edited in place'
    t[1]['tool_calls'][0]['args']['deep']['é']['x'] = 3; yield 'arguments edited in place'
    del t[:3]; yield 'trimmed at the front'
    t.append(result(9)); del t[:1]; yield 'trimmed and grown'
    box['system'] = 'You are Passepartout.\n\nYour previous proposal was refused:\n- policy: no "rm"'; yield 'a rejection in the prompt'
    box['tools'] = OTHER_TOOLS; yield 'another tool belt'
    box['tools'] = []; yield 'no tools'
    box['tools'] = TOOLS
    reloaded = Transcript([json.loads(json.dumps(m).replace('Looking', 'Looking [redacted]')) for m in t], session='s', base=5)
    box['t'] = reloaded; yield 'reloaded from the store, redacted'
    reloaded.append({'role': 'user', 'content': 'again', 'owner': True}); yield 'the reloaded one grows'
    reloaded.clear(); reloaded.append({'role': 'user', 'content': 'new start', 'owner': True}); yield 'cleared and begun again'
    box['t'] = []; yield 'an empty conversation'


@pytest.mark.parametrize('text_mode', [False, True], ids=['native', 'text mode'])
def test_kept_bodies_are_the_plain_build(text_mode):
    "After every change, every wire format sends what the public converters and `json.dumps` give, also while another conversation is sent between."
    made = providers()
    for p in made.values(): p.text_mode = text_mode
    t, other, box = [], [{'role': 'user', 'content': 'other session', 'owner': True}], {'tools': TOOLS, 'system': 'You are Passepartout.'}
    box['t'] = t
    for name in steps(t, box):
        for kind, provider in made.items():
            for messages in (box['t'], other):
                request = SimpleNamespace(system=box['system'], messages=messages, tools=box['tools'], agent=None)
                for stream in (False, True):
                    sent = provider._prepare(request, None, stream)[2]
                    assert sent == plain(kind, provider, request, stream), (name, kind, stream)
        other.append(result(len(other), f'output {len(other)}'))


def test_a_message_json_cannot_carry_fails_as_it_always_did():
    "A message whose arguments JSON cannot carry fails with `json.dumps`'s error, and the conversation sends again once it is fixed."
    provider = OpenAIProvider('m', base_url='http://127.0.0.1:9/v1')
    t = [{'role': 'user', 'content': 'hi'}, call(1, args={'x': object()})]
    request = SimpleNamespace(system='S', messages=t, tools=[], agent=None)
    with pytest.raises(TypeError, match='not JSON serializable'): provider._prepare(request, None, False)
    t[1] = call(1)
    assert provider._prepare(request, None, False)[2] == plain('openai', provider, request, False)


def test_the_shipped_agent_sends_the_plain_build():
    "Requests as the loop makes them (`ProposalRequest`: the shipped belt, the built system prompt) over a ten-call turn."
    from passepartout.loop import Agent
    from passepartout.builtin_tools import builtin_tools
    from passepartout.reason import ProposalRequest, note_signal, note_action
    from passepartout.perceive import perceive
    from passepartout.signals import tool_call
    agent, signal, t = Agent(tools=builtin_tools()), perceive('list my files'), []
    note_signal(t, signal)
    made = providers()
    for i in range(11):
        for kind, provider in made.items():
            request = ProposalRequest(agent, signal, t, [])
            assert provider._prepare(request, None, False)[2] == plain(kind, provider, request, False), (kind, i)
        note_action(t, tool_call('list_dir', {'path': '.'}, explanation='Looking.', call_id=f'call_{i}'))
        t.append(result(i, '["a.txt", "b.txt"]', name='list_dir'))


def test_a_provider_keeps_a_bounded_number_of_conversations():
    "Seventy conversations sent in turn: the provider keeps the 64 most recent, and one let go is sent right when it comes back."
    provider = OpenAIProvider('m', base_url='http://127.0.0.1:9/v1')
    talks = [[{'role': 'user', 'content': f'conversation {i}', 'owner': True}] for i in range(70)]
    for talk in talks + talks[:1]:
        request = SimpleNamespace(system='S', messages=talk, tools=TOOLS, agent=None)
        assert provider._prepare(request, None, False)[2] == plain('openai', provider, request, False)
        talk.append(result(len(talk)))
    assert len(provider._sent) == 64


def test_a_frame_is_made_anew_whenever_what_it_was_made_from_changes():
    "The frame (`_frame`: the body less its messages) follows every change of the tools (in place too), prompt, model and settings; two conversations interleave."
    made = providers()
    tools, box = [dict(t) for t in TOOLS], {'model': None}
    talks = [[{'role': 'user', 'content': 'first', 'owner': True}], [{'role': 'user', 'content': 'second', 'owner': False}]]
    system = ['You are P.']
    def changes(p):
        tools[:], system[0] = [dict(t) for t in TOOLS], 'You are P.'
        yield 'as it is'
        tools.append(dict(OTHER_TOOLS[0])); yield 'a tool added in place'
        tools.pop(0); yield 'a tool removed in place'
        tools[0] = {'name': 'now', 'description': 'The time, in UTC.'}; yield 'a schema replaced in place'
        tools[:] = [dict(t) for t in TOOLS]; yield 'the same tools again, other objects'
        system[0] = 'You are Q.'; yield 'the prompt changed'
        box['model'] = 'other-model'; yield 'another model asked for'
        p.max_tokens = 77; yield 'max_tokens changed'
        p.text_mode = True; yield 'text mode on'
        p.text_mode = False; yield 'text mode off'
        talks[0][0]['content'] = 'first, edited'; yield 'a message edited in place'
        tools.clear(); yield 'no tools'
    for kind, p in made.items():
        for name in changes(p):
            for i in range(3):                                   # the two conversations in turn, each growing
                for talk in talks:
                    request = SimpleNamespace(system=system[0], messages=talk, tools=tools, agent=None)
                    for stream in (False, True):
                        sent = p._prepare(request, box['model'], stream)[2]
                        assert sent == plain(kind, p, request, stream).replace(b'"model": "m"', json.dumps({'model': box['model'] or 'm'})[1:-1].encode()), (kind, name, i)
                    talk.append(result(len(talk)) if talk[-1]['role'] != 'tool' else call(len(talk)))
            assert p._framed.before[0] == b'{', (kind, name)   # sent from a frame, not field by field
        box['model'] = None


def test_a_body_a_subclass_writes_is_sent_as_written():
    "A subclass that overrides `body` (reading more of the request than a frame is made from) is serialised from its `body()`, every call."
    class Tempered(OpenAIProvider):
        def body(self, request, model, stream):
            return {**super().body(request, model, stream), 'temperature': 0.1 * len(request.rejections)}
    p = Tempered('m', base_url='http://127.0.0.1:9/v1')
    for rejections in ([], ['no'], ['no', 'again']):
        request = SimpleNamespace(system='S', messages=[{'role': 'user', 'content': 'hi'}], tools=TOOLS, agent=None, rejections=rejections)
        assert json.loads(p._prepare(request, None, False)[2])['temperature'] == 0.1 * len(rejections)
    assert '_framed' not in p.__dict__
