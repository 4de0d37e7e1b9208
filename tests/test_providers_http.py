"""Providers and the cascade against real HTTP servers on 127.0.0.1 (tests/llm_servers.py): normal replies,
tool calls, streams and faults for each wire format, asserting on the requests the servers received."""
import asyncio, json, socket, threading
import pytest

from llm_servers import LLMServer, TEXT, TOOL, STREAM, openai_text, openai_tool, openai_stream, ollama_text, ollama_tool, \
    ollama_stream, anthropic_text, anthropic_tool, anthropic_stream
from passepartout.errors import LLMError, BudgetError
from passepartout.loop import Agent
from passepartout.perceive import perceive
from passepartout.reason import ProposalRequest, UnusableAnswer
from passepartout.signals import reply, tool_call
from passepartout.tools import Toolbelt
from passepartout.providers import OpenAIProvider, OllamaProvider, AnthropicProvider, ProviderError
from passepartout.cascade import Cascade, Consensus, Budget, provider_from_env
from passepartout.replay import ReplayProvider

KEY = 'sk-test-SECRETKEY0123456789abcdef'
KINDS = ('openai', 'ollama', 'anthropic')


def belt():
    b = Toolbelt()
    @b.tool(effect='read-only')
    def list_dir(path: str = '.'):  # directory to list
        "List a directory."
        return ['notes.txt', 'todo.md']
    return b


def request(text='hello there, model', agent=None):
    agent = agent or Agent(None, tools=belt())
    return ProposalRequest(agent, perceive(text), [{'role': 'user', 'content': text}], [])


def make(kind, server, **kw):
    if kind == 'openai': return OpenAIProvider('gpt-4o-mini', server.url, KEY, **kw)
    if kind == 'ollama': return OllamaProvider('llama3.2', server.url, **kw)
    return AnthropicProvider('claude-3-5-haiku-latest', server.url, KEY, **kw)


@pytest.fixture
def servers():
    made = {k: LLMServer(k) for k in KINDS}
    yield made
    for s in made.values(): s.close()


def dead_port():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
    return port


def assert_key_only_in_auth(req, header):
    "The API key appears in exactly one place of the request: the auth header."
    assert KEY not in req['path'] and KEY.encode() not in req['body']
    lines = [l for l in req['raw_headers'].splitlines() if KEY in l]
    assert len(lines) == 1 and lines[0].lower().startswith(header), lines


# ---------------------------------------------------------------- normal replies, tool calls, schemas

@pytest.mark.parametrize('kind', KINDS)
def test_plain_reply_usage_and_request_shape(servers, kind):
    s = servers[kind].add(TEXT[kind]('Hello from ' + kind))
    p = make(kind, s).propose(request())
    assert p.action == reply('Hello from ' + kind) and p.provider == kind
    assert p.usage['input_tokens'] > 0 and p.usage['output_tokens'] > 0
    req = s.requests[0]
    assert req['headers']['content-type'] == 'application/json'
    body = req['json']
    if kind == 'openai':
        assert body['model'] == 'gpt-4o-mini' and body['messages'][0]['role'] == 'system'
        assert body['tools'] == [{'type': 'function', 'function': {'name': 'list_dir', 'description': 'List a directory.',
                                  'parameters': belt().schemas()[0]['parameters']}}]
        assert req['headers']['authorization'] == f'Bearer {KEY}'
        assert_key_only_in_auth(req, 'authorization')
    elif kind == 'ollama':
        assert body['stream'] is False and body['tools'][0]['function']['name'] == 'list_dir'
        assert 'authorization' not in req['headers'] and body['options']['num_predict'] == 1024
    else:
        assert req['headers']['x-api-key'] == KEY and req['headers']['anthropic-version'] == '2023-06-01'
        assert 'authorization' not in req['headers']
        assert body['tools'][0] == {'name': 'list_dir', 'description': 'List a directory.', 'input_schema': belt().schemas()[0]['parameters']}
        assert body['system'].startswith('You are Passepartout') and body['messages'] == [{'role': 'user', 'content': [{'type': 'text', 'text': 'hello there, model'}]}]
        assert_key_only_in_auth(req, 'x-api-key')


@pytest.mark.parametrize('kind', KINDS)
def test_native_tool_call(servers, kind):
    s = servers[kind]
    s.add(TOOL[kind]('list_dir', {'path': 'docs'}) if kind == 'ollama' else TOOL[kind]('list_dir', {'path': 'docs'}, text='Looking.'))
    a = make(kind, s).propose(request()).action
    assert (a.kind, a.tool, a.args) == ('tool', 'list_dir', {'path': 'docs'})
    if kind != 'ollama': assert a.explanation == 'Looking.' and a.call_id in ('call_1', 'toolu_1')


def test_tool_arguments_not_json_are_unusable(servers):
    s = servers['openai'].add(openai_tool('list_dir', None, raw_args='{"path": '))
    with pytest.raises(UnusableAnswer, match='not valid JSON'): make('openai', s).propose(request())


@pytest.mark.parametrize('kind', KINDS)
def test_text_mode_json_action(servers, kind):
    answer = 'Here you go:\n```json\n{"Action": "TOOL", "Tool": "list_dir", "ARGS": {"path": "src"}, "explanation": "look"}\n```'
    s = servers[kind].add(TEXT[kind](answer), TEXT[kind]('I would rather chat.'))
    provider = make(kind, s, text_mode=True)
    assert provider.propose(request()).action == tool_call('list_dir', {'path': 'src'}, explanation='look')
    body = s.requests[0]['json']
    assert 'tools' not in body
    system = body['system'] if kind == 'anthropic' else body['messages'][0]['content']
    assert 'exactly one JSON object' in system and '"path"' in system
    with pytest.raises(UnusableAnswer, match='not one JSON object'): provider.propose(request())


def test_whole_turn_with_tool_result_translated(servers):
    "A real agent turn over Anthropic: tool_use, then the tool_result block goes back with the right id."
    s = servers['anthropic'].add(anthropic_tool('list_dir', {'path': '.'}, text='Let me look.'), anthropic_text('Two files.'))
    agent = Agent(provider_from_env({'PASSEPARTOUT_PROVIDERS': 'anthropic', 'ANTHROPIC_BASE_URL': s.url, 'ANTHROPIC_API_KEY': KEY}), tools=belt())
    turn = agent.send('what is here?')
    assert turn.reply == 'Two files.'
    second = s.requests[1]['json']['messages']
    assert [m['role'] for m in second] == ['user', 'assistant', 'user']
    assert second[1]['content'][1] == {'type': 'tool_use', 'id': 'toolu_1', 'name': 'list_dir', 'input': {'path': '.'}}
    assert second[2]['content'][0]['type'] == 'tool_result' and second[2]['content'][0]['tool_use_id'] == 'toolu_1'
    assert 'notes.txt' in second[2]['content'][0]['content']
    assert turn.usage['input_tokens'] == 41 and turn.usage['cost_usd'] > 0


def test_openai_turn_tool_message_ids(servers):
    s = servers['openai'].add(openai_tool('list_dir', {'path': '.'}, call_id='call_9'), openai_text('Done.'))
    agent = Agent(provider_from_env({'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': s.url, 'OPENAI_API_KEY': KEY}), tools=belt())
    assert agent.send('list').reply == 'Done.'
    msgs = s.requests[1]['json']['messages']
    assert msgs[2]['tool_calls'][0]['id'] == 'call_9' and msgs[3] == {'role': 'tool', 'tool_call_id': 'call_9', 'content': '["notes.txt", "todo.md"]'}


# ---------------------------------------------------------------- streaming

@pytest.mark.parametrize('kind', KINDS)
def test_stream_is_delivered_incrementally(servers, kind):
    "The server holds the rest of the stream until the client has seen the first piece: a buffering client would time out."
    first_seen = threading.Event()
    s = servers[kind].add(STREAM[kind](['Hel', first_seen, 'lo', ' world']))
    pieces = []
    def on_token(t):
        pieces.append(t); first_seen.set()
    p = make(kind, s, timeout=30).propose(request(), on_token=on_token)   # a buffering client would raise its timeout here (the server holds 120 s)
    assert pieces == ['Hel', 'lo', ' world'] and p.action == reply('Hello world') and p.usage['output_tokens'] > 0
    body = s.requests[0]['json']
    assert body['stream'] is True
    if kind == 'openai': assert body['stream_options'] == {'include_usage': True}


@pytest.mark.parametrize('kind', ['openai', 'anthropic'])
def test_streamed_tool_call(servers, kind):
    s = servers[kind].add(STREAM[kind](['Checking.'], tool=('list_dir', {'path': 'a/b'})))
    pieces = []
    a = make(kind, s).propose(request(), on_token=pieces.append).action
    assert (a.tool, a.args, a.explanation, pieces) == ('list_dir', {'path': 'a/b'}, 'Checking.', ['Checking.'])


@pytest.mark.parametrize('kind', KINDS)
def test_truncated_stream_is_a_provider_error(servers, kind):
    s = servers[kind].add(STREAM[kind](['Hel', 'lo'], truncate=True))
    with pytest.raises(ProviderError, match='truncated'): make(kind, s).propose(request(), on_token=lambda t: None)


def test_async_propose_and_stream(servers):
    s = servers['openai'].add(openai_text('async hi'), openai_stream(['a', 'b']))
    provider = make('openai', s)
    async def go():
        pieces = []
        one = await provider.apropose(request())
        two = await provider.apropose(request(), on_token=pieces.append)
        return one, two, pieces
    one, two, pieces = asyncio.run(go())
    assert one.action == reply('async hi') and two.action == reply('ab') and pieces == ['a', 'b']


def test_agent_on_token_hook(servers):
    "A gateway streams by setting `agent.on_token`; the cascade passes it down."
    s = servers['ollama'].add(ollama_stream(['To', 'ken']))
    agent = Agent(provider_from_env({'PASSEPARTOUT_PROVIDERS': 'ollama', 'OLLAMA_HOST': s.url}))
    seen = []; agent.on_token = seen.append
    assert agent.send('hi').reply == 'Token' and seen == ['To', 'ken']


# ---------------------------------------------------------------- faults and the cascade

FAULTS = {
    'http 500': {'status': 500, 'json': {'error': {'message': 'upstream exploded'}}},
    'invalid json': {'body': b'{"choices": [', 'status': 200},
    'wrong schema': {'json': {'result': 'hello'}},
    'empty answer': openai_text(''),
    'slow headers': {'delay': 3, **openai_text('too late')},
    'truncated stream': openai_stream(['par'], truncate=True),
}
REASONS = {'http 500': 'server error (HTTP 500): upstream exploded', 'invalid json': 'malformed body: not JSON',
           'wrong schema': 'malformed body: unexpected shape', 'empty answer': 'empty answer',
           'slow headers': 'timed out after 1s', 'truncated stream': 'truncated'}


@pytest.mark.parametrize('fault', FAULTS)
def test_cascade_fails_over_on_fault(servers, fault):
    bad, good = servers['openai'].add(FAULTS[fault]), servers['ollama'].add(ollama_stream(['fine']) if 'stream' in fault else ollama_text('fine'))
    patience = 1 if fault == 'slow headers' else 30   # only the slow server is meant to time out; the rest answer on a loaded machine too
    cascade = Cascade([make('openai', bad, timeout=patience), make('ollama', good, timeout=30)])
    p = cascade.propose(request(), on_token=(lambda t: None) if 'stream' in fault else None)
    assert (p.action, p.provider) == (reply('fine'), 'ollama')
    assert len(bad.requests) == 1 and len(good.requests) == 1
    # alone, the same fault is one clear line naming the provider
    bad.add(FAULTS[fault])
    with pytest.raises(LLMError) as e: Cascade([make('openai', bad, timeout=patience)]).propose(request(), on_token=(lambda t: None) if 'stream' in fault else None)
    assert e.value.message.startswith('The model provider failed:\n- openai: ') and REASONS[fault] in e.value.message
    assert KEY not in e.value.message


def test_429_retry_after_within_bound_is_honoured(servers):
    s = servers['openai'].add({'status': 429, 'headers': {'Retry-After': '1'}, 'json': {'error': {'message': 'slow down'}}}, openai_text('after waiting'))
    other, waits = servers['ollama'], []
    p = Cascade([make('openai', s), make('ollama', other)], retry_after_max=2, sleep=waits.append).propose(request())
    assert (p.action, p.provider) == (reply('after waiting'), 'openai') and other.requests == []
    assert waits == [1] and len(s.requests) == 2          # the header's second, waited out before the one retry


def test_429_retry_after_beyond_bound_fails_over_at_once(servers):
    s = servers['openai'].add({'status': 429, 'headers': {'Retry-After': '30'}, 'json': {'error': {'message': 'slow down'}}})
    waits = []
    p = Cascade([make('openai', s), make('ollama', servers['ollama'].add(ollama_text('instead')))], retry_after_max=2,
                sleep=waits.append).propose(request())
    assert p.action == reply('instead') and waits == [] and len(s.requests) == 1      # no wait: on to the next provider


def test_every_provider_fails_one_message_through_the_agent(servers):
    "SYSTEM §9 configuration, every provider broken differently: one message, one line per provider, the turn ends with it."
    servers['openai'].add({'status': 503, 'json': {'error': {'message': 'overloaded'}}})
    servers['anthropic'].add({'status': 401, 'json': {'type': 'error', 'error': {'type': 'authentication_error', 'message': f'invalid x-api-key {KEY}'}}})
    env = {'PASSEPARTOUT_PROVIDERS': 'openai,anthropic,ollama', 'OPENAI_BASE_URL': servers['openai'].url, 'OPENAI_API_KEY': KEY,
           'ANTHROPIC_BASE_URL': servers['anthropic'].url, 'ANTHROPIC_API_KEY': KEY, 'OLLAMA_HOST': f'127.0.0.1:{dead_port()}',
           'PASSEPARTOUT_TIMEOUT': '2'}
    turn = Agent(provider_from_env(env)).send('hello')
    lines = turn.reply.splitlines()
    assert lines[0] == 'All 3 model providers failed:'
    assert lines[1] == '- openai: server error (HTTP 503): overloaded'
    assert lines[2] == '- anthropic: request refused (HTTP 401): invalid x-api-key [redacted]'
    assert lines[3].startswith('- ollama: cannot connect to http://127.0.0.1:')
    assert KEY not in turn.reply and turn.of('error')


def test_missing_key_for_hosted_api_is_a_clear_reason():
    with pytest.raises(LLMError, match='- openai: no API key \\(set OPENAI_API_KEY\\)'):
        provider_from_env({'PASSEPARTOUT_PROVIDERS': 'openai'}).propose(request())


def test_model_selector_from_env(servers):
    s = servers['openai'].add(openai_text('a'), openai_text('b'))
    p = provider_from_env({'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': s.url, 'OPENAI_MODEL': 'big-model',
                           'PASSEPARTOUT_MODEL_SELECTOR': 'llm_servers:pick_model'})
    p.propose(request('hi')); p.propose(request('a much longer question than that'))
    assert [r['json']['model'] for r in s.requests] == ['small-model', 'big-model']


# ---------------------------------------------------------------- usage, prices, budget

def test_cost_from_usage_and_price_override(servers, tmp_path):
    prices = tmp_path / 'prices.json'; prices.write_text(json.dumps({'gpt-4o-mini': [1.0, 2.0]}))
    s = servers['openai'].add(openai_text('x', usage=(1000, 500)))
    p = provider_from_env({'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': s.url, 'PASSEPARTOUT_PRICES': str(prices)})
    proposal = p.propose(request())
    assert proposal.usage == {'input_tokens': 1000, 'output_tokens': 500, 'cost_usd': pytest.approx(0.002)}
    assert p.budget.spent == pytest.approx(0.002) and p.budget.remaining == float('inf')


def test_budget_refuses_before_any_request(servers):
    s = servers['openai'].add(openai_text('x', usage=(100000, 1000)))
    env = {'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': s.url, 'OPENAI_MODEL': 'gpt-4o', 'PASSEPARTOUT_BUDGET_USD': '0.27'}
    p = provider_from_env(env)
    p.propose(request())                          # $0.25 + $0.01 spent
    assert p.budget.remaining == pytest.approx(0.01)
    with pytest.raises(BudgetError) as e: p.propose(request())
    assert e.value.remaining == pytest.approx(0.01) and e.value.requested > 0.01 and len(s.requests) == 1
    assert 'only $0.01 of the $0.27 budget remains' in e.value.message
    agent = Agent(p)
    assert 'budget remains' in agent.send('again').reply and len(s.requests) == 1


# ---------------------------------------------------------------- consensus

def test_consensus_over_http(servers):
    servers['openai'].add(openai_tool('list_dir', {'path': '.'}, text='look'), openai_tool('list_dir', {'path': '.'}))
    servers['anthropic'].add(anthropic_tool('list_dir', {'path': '.'}, text='listing'), anthropic_tool('list_dir', {'path': '/etc'}))
    env = {'PASSEPARTOUT_PROVIDERS': 'openai,anthropic', 'PASSEPARTOUT_CONSENSUS': '2', 'OPENAI_BASE_URL': servers['openai'].url,
           'ANTHROPIC_BASE_URL': servers['anthropic'].url, 'ANTHROPIC_API_KEY': KEY}
    p = provider_from_env(env)
    assert isinstance(p, Consensus)
    agreed = p.propose(request())
    assert agreed.action.args == {'path': '.'} and agreed.provider == 'consensus(openai, anthropic)'
    split = p.propose(request())
    assert split.action.kind == 'reply' and 'disagree' in split.action.text and "/etc" in split.action.text
    assert p.budget.spent > 0


# ---------------------------------------------------------------- recording and replay

def test_record_live_session_then_replay_it_offline(servers, tmp_path):
    s = servers['openai'].add(openai_tool('list_dir', {'path': '.'}, text=f'my key is {KEY}'), openai_text('Two files here.'))
    record = tmp_path / 'session.jsonl'
    env = {'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': s.url, 'OPENAI_API_KEY': KEY, 'PASSEPARTOUT_RECORD_FILE': str(record)}
    live = Agent(provider_from_env(env), tools=belt()).send('what is here?')
    text = record.read_text()
    assert KEY not in text and len(text.splitlines()) == 3
    s.close()  # offline from here
    replayed = Agent(provider_from_env({'PASSEPARTOUT_PROVIDERS': 'replay', 'PASSEPARTOUT_REPLAY_FILE': str(record)}), tools=belt()).send('what is here?')
    assert replayed.reply == live.reply == 'Two files here.'
    assert [e['kind'] for e in replayed.events] == [e['kind'] for e in live.events]
    diverged = Agent(ReplayProvider(record), tools=belt()).send('something else')
    assert 'replay diverged at call 1' in diverged.reply


def test_deeply_nested_json_from_a_model_is_an_unusable_answer_not_a_crash():
    "Python's JSON parser raises RecursionError (not ValueError) on deep nesting: a model's answer must never crash the turn with it."
    from passepartout.providers import _arguments, _json_object, UnusableAnswer
    deep = '{"a": ' + '[' * 100_000 + ']' * 100_000 + '}'
    with pytest.raises(UnusableAnswer): _arguments({'name': 'shell', 'arguments': deep}, 'p')
    with pytest.raises(UnusableAnswer): _json_object(deep, 'p')
