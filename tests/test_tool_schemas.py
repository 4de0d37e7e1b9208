"""Every tool the shipped agent offers has a schema every provider's function calling accepts.

Providers validate the JSON schema of a tool's parameters before they answer: OpenAI's chat completions refuse
an array without `items` ("array schema missing items", strict mode or not), Gemini an object without
properties, and every strict mode both. The `plan` tool shipped with `steps: list` and no `items` (issue 16).
`schema_problems` is the check, written over any schema; the test runs it over every tool of `build_agent()`,
so a tool added later with a loose hint (`list`, `dict`, a type `json_type` does not know) fails here.

What it does not require: OpenAI's `strict: true` also wants every object closed and every property required,
which a tool with optional arguments cannot be; Passepartout does not send `strict` (`10_providers`)."""
import os
import pytest
from passepartout.tools import Toolbelt

JSON_TYPES = {'string', 'number', 'integer', 'boolean', 'array', 'object', 'null'}


def schema_problems(schema, where:str='parameters') -> list:
    "Where `schema` breaks what providers accept: no type, an unknown type, an array without items, an object without properties (or a schema for its values), a required name that is no property."
    if not isinstance(schema, dict): return [f"{where}: not a schema ({schema!r:.40})"]
    if 'anyOf' in schema:
        branches = schema['anyOf']
        if not isinstance(branches, list) or not branches: return [f"{where}: anyOf without branches"]
        return [p for i, s in enumerate(branches) for p in schema_problems(s, f"{where}|{i}")]
    if 'enum' in schema: return [] if isinstance(schema['enum'], list) and schema['enum'] else [f"{where}: an empty enum"]
    types = schema.get('type')
    types = types if isinstance(types, list) else [types]
    if types == [None]: return [f"{where}: no type"]
    out = [f"{where}: unknown type {t!r}" for t in types if t not in JSON_TYPES]
    if 'array' in types:
        out += schema_problems(schema['items'], f"{where}[]") if 'items' in schema else [f"{where}: an array without items"]
    if 'object' in types:
        props, extra = schema.get('properties'), schema.get('additionalProperties')
        if not isinstance(props, dict) and not isinstance(extra, dict): out.append(f"{where}: an object without properties")
        props = props if isinstance(props, dict) else {}
        out += [f"{where}: requires {r!r}, which is no property" for r in schema.get('required', ()) if r not in props]
        out += [p for k, s in props.items() for p in schema_problems(s, f"{where}.{k}")]
        if isinstance(extra, dict): out += schema_problems(extra, f"{where}.*")
    return out


@pytest.mark.parametrize('schema, problem', [
    ({'type': 'object', 'properties': {'steps': {'type': 'array'}}}, 'parameters.steps: an array without items'),
    ({'type': 'object'}, 'parameters: an object without properties'),
    ({'type': 'object', 'properties': {'x': {}}}, 'parameters.x: no type'),
    ({'type': 'object', 'properties': {}, 'required': ['x']}, "parameters: requires 'x', which is no property"),
    ({'type': 'object', 'properties': {'a': {'type': 'array', 'items': {'anyOf': [{'type': 'string'}, {'type': 'object'}]}}}},
     'parameters.a[]|1: an object without properties'),
    ({'type': 'object', 'additionalProperties': {'type': 'list'}}, "parameters.*: unknown type 'list'"),
])
def test_the_check_finds_what_providers_refuse(schema, problem):
    assert schema_problems(schema) == [problem]


def test_the_check_passes_what_providers_accept():
    assert schema_problems({'type': 'object', 'properties': {'a': {'type': 'array', 'items': {'type': 'string'}},
                                                             'm': {'type': 'object', 'additionalProperties': {'type': 'number'}},
                                                             'e': {'enum': ['x']}}, 'required': ['a']}) == []


def test_loose_hints_are_found():
    "A tool whose hints say only `list` or `dict` fails the check: the check would catch the next `plan`."
    belt = Toolbelt()
    def loose(items:list, options:dict): "A tool with loose hints."
    belt.add(loose)
    assert schema_problems(belt['loose'].schema) == ['parameters.items: an array without items', 'parameters.options: an object without properties']


def test_every_shipped_tool_has_a_schema_providers_accept(monkeypatch, tmp_path):
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home')); monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path))
    from passepartout.app import build_agent
    from passepartout.reason import ScriptedProvider
    agent = build_agent(provider=ScriptedProvider([]), env={**os.environ, 'PASSEPARTOUT_MEMORY': '1'})
    schemas = agent.tools.schemas()
    assert {'plan', 'shell', 'read_file', 'http_fetch', 'send_message'} <= {s['name'] for s in schemas}
    assert {s['name']: schema_problems(s['parameters']) for s in schemas if schema_problems(s['parameters'])} == {}
