"""The model is asked why, not guessed at: end to end against the real wire formats on loopback.

A model that sends native tool calls with no text at all (as real models do) gets its `ls` run, a file
written and, once the owner approves it, an `mv` that asked. A model that never gives a `why` is sent
back once and then gets its `ls` run all the same. The agent is the one `passepartout send` builds
(`build_agent`), its provider built from the environment (`provider_from_env`) and pointed at a
loopback server of `llm_servers.py` that speaks OpenAI chat completions, Ollama's /api/chat or
Anthropic Messages; PASSEPARTOUT_HOME and PASSEPARTOUT_WORKSPACE are temporary directories.
"""
import json
import pytest
from llm_servers import LLMServer, TOOL, TEXT, ollama_text
from passepartout.app import build_agent
from passepartout.approval_flow import resolve_approval, carry_on
from passepartout.builtin_gates import WHY_REQUEST
from passepartout.cascade import provider_from_env
from passepartout.sandbox import sandbox_available

needs_sandbox = pytest.mark.skipif(not sandbox_available(), reason='no usable bubblewrap sandbox: every shell command asks')
KINDS = ['openai', 'ollama', 'anthropic']
WHY_DESCRIPTION = "One short sentence: why this call, for the person who approves it."


@pytest.fixture
def ws(tmp_path, monkeypatch):
    "A temporary home and a workspace holding notes.txt; no provider settings from the caller's environment."
    ws = tmp_path / 'ws'
    ws.mkdir()
    (ws / 'notes.txt').write_text('ship v1 on Friday\n')
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(ws))
    for k in ('PASSEPARTOUT_PROVIDERS', 'PASSEPARTOUT_VAULT_KEY_FILE', 'PASSEPARTOUT_SHELL_NETWORK', 'PASSEPARTOUT_RECORD_FILE',
              'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME'):
        monkeypatch.delenv(k, raising=False)
    return ws


@pytest.fixture(params=KINDS)
def server(request):
    s = LLMServer(request.param)
    yield s
    s.close()


def provider_env(s, mode='') -> dict:
    "The settings a user would export to reach server `s`."
    env = {'PASSEPARTOUT_PROVIDERS': s.kind + mode, 'PASSEPARTOUT_TIMEOUT': '10'}
    if s.kind == 'openai': env.update(OPENAI_BASE_URL=s.url, OPENAI_API_KEY='sk-test-why')
    if s.kind == 'ollama': env.update(OLLAMA_HOST=s.url)
    if s.kind == 'anthropic': env.update(ANTHROPIC_BASE_URL=s.url, ANTHROPIC_API_KEY='sk-ant-test-why')
    return env


def agent_for(s, mode=''):
    return build_agent(provider=provider_from_env(provider_env(s, mode)))


def call(s, name, args):
    "A native tool call with no assistant text at all, in the server's wire format."
    return TOOL[s.kind](name, args)


def offered(kind, body) -> dict:
    "{tool name: parameters schema} as the request offered them on the wire."
    if kind == 'anthropic': return {t['name']: t['input_schema'] for t in body['tools']}
    return {t['function']['name']: t['function']['parameters'] for t in body['tools']}


def system_of(kind, body) -> str:
    return body['system'] if kind == 'anthropic' else body['messages'][0]['content']


def no_text(kind, response) -> bool:
    "The scripted tool-call response really carries no assistant text."
    j = response['json']
    if kind == 'anthropic': return all(b['type'] == 'tool_use' for b in j['content'])
    message = j['message'] if kind == 'ollama' else j['choices'][0]['message']
    return not message.get('content')


def sent_call_args(kind, body) -> dict:
    "The arguments of the last tool call the transcript sent back to the model."
    for m in reversed(body['messages']):
        if kind == 'anthropic' and m['role'] == 'assistant' and isinstance(m['content'], list):
            uses = [b for b in m['content'] if b.get('type') == 'tool_use']
            if uses: return uses[-1]['input']
        if kind != 'anthropic' and m.get('tool_calls'):
            args = m['tool_calls'][-1]['function']['arguments']
            return json.loads(args) if isinstance(args, str) else args
    raise AssertionError('no tool call in the transcript sent')


@needs_sandbox
def test_ls_runs_from_a_call_without_text(ws, server):
    ls = call(server, 'shell', {'command': 'ls', 'why': 'see what is in the workspace'})
    assert no_text(server.kind, ls)
    server.add(ls, TEXT[server.kind]('There is notes.txt.'))
    turn = agent_for(server).send('what is in my workspace?')
    assert turn.reply == 'There is notes.txt.', turn.to_dict()
    result = turn.of('result')[0]
    assert 'notes.txt' in result['output'] and result['action']['args'] == {'command': 'ls'}
    assert result['action']['explanation'] == 'see what is in the workspace'
    first, second = (r['json'] for r in server.requests)
    tools = offered(server.kind, first)
    assert tools['shell']['properties']['why'] == {'type': 'string', 'description': WHY_DESCRIPTION}
    assert 'why' not in tools['list_dir']['properties'] and 'why' not in tools['read_file']['properties']
    assert "give the `why` argument" in system_of(server.kind, first)
    assert sent_call_args(server.kind, second) == {'command': 'ls', 'why': 'see what is in the workspace'}   # the call as the model made it


def test_a_file_write_runs_from_a_call_without_text(ws, server):
    server.add(call(server, 'write_file', {'path': 'todo.txt', 'content': 'buy milk\n', 'why': 'keep the shopping list'}),
               TEXT[server.kind]('Saved todo.txt.'))
    turn = agent_for(server).send('note that I must buy milk, in todo.txt')
    assert turn.reply == 'Saved todo.txt.', turn.to_dict()
    assert (ws / 'todo.txt').read_text() == 'buy milk\n'
    verdict = turn.of('verdict')[0]
    assert (verdict['decision'], verdict['attempt'], verdict['action']['explanation']) == ('allow', 1, 'keep the shopping list')
    assert len(server.requests) == 2


@needs_sandbox
@pytest.mark.parametrize('route', ['chat', 'store'])
def test_an_mv_that_asks_runs_once_approved(ws, server, route):
    server.add(call(server, 'shell', {'command': 'mv notes.txt old-notes.txt', 'why': 'keep the old notes aside'}),
               TEXT[server.kind]('Renamed notes.txt to old-notes.txt.'))
    agent = agent_for(server)
    turn = agent.send('rename notes.txt to old-notes.txt')
    held = turn.pending[0]
    assert "The model's reason: 'keep the old notes aside'." in turn.reply   # what the owner reads before deciding
    assert held['action']['args'] == {'command': 'mv notes.txt old-notes.txt'} and held['action']['explanation'] == 'keep the old notes aside'
    assert (ws / 'notes.txt').exists() and not (ws / 'old-notes.txt').exists() and len(server.requests) == 1
    record = agent.approvals.get(held['token'])
    assert 'why' not in json.loads(record['action'])['args']
    if route == 'chat':
        turn = agent.send(f"approve {held['token']}")
        replies = turn.replies
    else:
        res = resolve_approval(agent, agent.approvals, held['token'])
        assert res.ok, res.error
        replies = carry_on(agent, res.feedback).replies
    assert (ws / 'old-notes.txt').read_text() == 'ship v1 on Friday\n' and not (ws / 'notes.txt').exists()
    assert replies[-1] == 'Renamed notes.txt to old-notes.txt.', replies
    assert len(server.requests) == 2


@needs_sandbox
def test_a_model_that_never_gives_a_why_is_asked_once(ws, server):
    ls = call(server, 'shell', {'command': 'ls'})
    server.add(ls, ls, TEXT[server.kind]('There is notes.txt.'))
    turn = agent_for(server).send('what is in my workspace?')
    assert turn.reply == 'There is notes.txt.', turn.to_dict()
    assert 'notes.txt' in turn.of('result')[0]['output']
    first, again = turn.of('verdict')[:2]
    assert first['decision'] == 'deny' and WHY_REQUEST in first['trace'][-1]['reason'] and first['trace'][-1]['gate'] == 'policy'
    assert again['decision'] == 'allow' and {'gate': 'policy', 'decision': 'allow', 'reason': 'no reason given (asked once in this step)'} \
        in [{k: r[k] for k in ('gate', 'decision', 'reason')} for r in again['trace']]
    assert len(server.requests) == 3
    assert WHY_REQUEST in system_of(server.kind, server.requests[1]['json'])   # the request the model could act on
    assert WHY_REQUEST not in system_of(server.kind, server.requests[2]['json'])


@needs_sandbox
def test_text_mode_model_gives_its_why_among_the_args(ws):
    s = LLMServer('ollama')
    try:
        s.add(ollama_text(json.dumps({'action': 'tool', 'tool': 'shell', 'args': {'command': 'ls', 'why': 'see the files'}})),
              ollama_text(json.dumps({'action': 'reply', 'text': 'There is notes.txt.'})))
        turn = agent_for(s, ':text').send('what is in my workspace?')
        assert turn.reply == 'There is notes.txt.', turn.to_dict()
        assert turn.of('result')[0]['action'] == {'kind': 'tool', 'tool': 'shell', 'args': {'command': 'ls'}, 'target': 'tool',
                                                  'explanation': 'see the files', 'call_id': turn.of('result')[0]['action']['call_id']}
        assert '"why"' in system_of('ollama', s.requests[0]['json']) and 'tools' not in s.requests[0]['json']
    finally: s.close()


@needs_sandbox
def test_a_held_call_without_a_why_still_runs_once_approved(ws, server):
    "Asked once, proposed again without a why, held: the owner's approval is not refused for the missing reason."
    mv = call(server, 'shell', {'command': 'mv notes.txt old-notes.txt'})
    server.add(mv, mv, TEXT[server.kind]('Renamed.'))
    agent = agent_for(server)
    held = agent.send('rename notes.txt to old-notes.txt').pending[0]
    assert 'explanation' not in held['action'] and len(server.requests) == 2
    res = resolve_approval(agent, agent.approvals, held['token'])
    assert res.ok and (ws / 'old-notes.txt').exists(), res.error
    last_mile = [e for e in res.turn.events if e['kind'] == 'last-mile'][0]
    assert ('policy', 'allow', 'no reason given') in [(r['gate'], r['decision'], r['reason']) for r in last_mile['trace']]
    assert carry_on(agent, res.feedback).reply == 'Renamed.'
