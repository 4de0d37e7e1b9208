"""Declarations an independent owner would reasonably write (issue 16: `bench/agentdojo_outsider.py`) that the API
used to accept and then honour less than they say. Each now fails safe: refused with the fix, or read as meant."""
import os
import pytest
from passepartout.tools import Toolbelt, ARG_KINDS, EFFECT_CLASS, BUILTIN_ARGS, load_declarations
from passepartout.config import World, owner_world
from passepartout.errors import SetupError
from passepartout.signals import tool_call, reply
from passepartout.information_flow import declared_kinds


def get_webpage(url:str): "Returns the content of the webpage at a given URL."
def create_calendar_event(title:str, start_time:str, participants:list|None=None): "Create an event."
def create_file(filename:str, content:str): "Create a file in the cloud drive."
def update_user_info(first_name:str|None=None, city:str|None=None): "Update the user information."


# A recipient or destination on a tool that is not outward: the effect would mean less than the argument says.
@pytest.mark.parametrize('fn, effect, args, says', [
    (get_webpage, 'read-only', {'url': 'destination'}, "is read-only, but its argument 'url' is declared a destination"),
    (create_calendar_event, 'write', {'participants': 'recipient'}, "is local-write, but its argument 'participants' is declared a recipient"),
    (create_calendar_event, 'delete', {'participants': 'recipient'}, "is local-write"),
    (create_calendar_event, 'local-write', {'participants': 'recipient', 'title': 'content'}, "is local-write"),
])
def test_reaching_argument_needs_an_outward_effect(fn, effect, args, says):
    with pytest.raises(ValueError, match="effect='send', 'payment' or 'outward'") as e: Toolbelt().add(fn, effect=effect, args=args)
    assert says in str(e.value)


@pytest.mark.parametrize('effect', ['send', 'payment', 'outward'])
def test_reaching_argument_on_an_outward_tool_is_fine(effect):
    t = Toolbelt().add(create_calendar_event, effect=effect, args={'participants': 'recipient', 'start_time': 'schedule'})
    assert (t.effect, t.args['participants']) == ('outward', 'recipient')


def test_a_later_declaration_is_checked_whole_and_leaves_the_tool_as_it_was():
    belt = Toolbelt()
    belt.add(create_calendar_event, effect='send', args={'participants': 'recipient'})
    with pytest.raises(ValueError, match='is local-write'): belt.declare('create_calendar_event', effect='write')
    assert (belt['create_calendar_event'].effect, belt['create_calendar_event'].operation) == ('outward', 'send')
    belt.add(get_webpage, effect='read-only')                        # read-only, no argument declared
    with pytest.raises(ValueError, match='is read-only'): belt.declare('get_webpage', {'url': 'destination'})
    assert belt['get_webpage'].args is None
    belt.declare('get_webpage', {'url': 'destination'}, effect='outward')   # both at once: coherent
    assert (belt['get_webpage'].effect, belt['get_webpage'].args) == ('outward', {'url': 'destination'})


def test_a_pending_declaration_that_contradicts_the_tool_is_refused_at_registration():
    belt = Toolbelt()
    belt.declare('get_webpage', {'url': 'destination'})              # the owner's file, before the tool arrives
    with pytest.raises(ValueError, match='is read-only'): belt.add(get_webpage, effect='read-only')
    assert 'get_webpage' not in belt
    assert belt.add(get_webpage, effect='outward').args == {'url': 'destination'}
    assert belt.pending == {}


def test_a_file_that_contradicts_itself_names_the_file(tmp_path):
    f = tmp_path / 'tools.toml'
    f.write_text('[create_calendar_event]\neffect = "write"\nargs = { participants = "recipient" }\n')
    with pytest.raises(SetupError, match="tool 'create_calendar_event' is local-write, but its argument 'participants'"): load_declarations(f)


# `path` hands an argument to the paths gate, which confines only the built-in file tools.
@pytest.mark.parametrize('fn, args', [(create_file, {'filename': 'path'}), (get_webpage, {'url': 'path'})])
def test_path_is_refused_outside_the_builtin_file_tools(fn, args):
    with pytest.raises(ValueError, match="cannot be a 'path'.*declare a file of this tool 'object'"):
        Toolbelt().add(fn, effect='write' if fn is create_file else 'read-only', args=args)


@pytest.mark.parametrize('name', sorted(n for n, a in BUILTIN_ARGS.items() if 'path' in a.values()))
def test_path_stays_for_the_builtin_file_tools(name):
    args = BUILTIN_ARGS[name]
    fn = lambda **kw: None
    assert Toolbelt().add(fn, name, 'read-only' if name in ('read_file', 'list_dir', 'search_files') else 'write', args=args).args == args


# Unknown words fail at once, whatever their spelling.
@pytest.mark.parametrize('kind', ['Recipient', 'recipients', 'body', 'text', 'id', 'url', 'email', 'date', 'money', 'free-text', 'harmless'])
def test_an_unknown_kind_is_refused_with_the_list(kind):
    assert kind not in ARG_KINDS
    with pytest.raises(ValueError, match=f"unknown argument kind .*{kind}.*kinds: recipient, destination"):
        Toolbelt().add(create_file, effect='write', args={'filename': kind})


@pytest.mark.parametrize('effect', ['Send', 'sending', 'network', 'external', 'read', 'readonly', 'local', 'pay', 'harmless'])
def test_an_unknown_effect_is_refused_with_the_list(effect):
    assert effect not in EFFECT_CLASS
    with pytest.raises(ValueError, match='effect must be one of'): Toolbelt().add(create_file, effect=effect)
    with pytest.raises(ValueError, match='effect must be one of'): Toolbelt().declare('create_file', effect=effect)


@pytest.mark.parametrize('table', [{'arguments': {'filename': 'object'}}, {'kinds': {'filename': 'object'}}, {'effect': 'write', 'type': 'x'}, ['object']])
def test_declare_all_refuses_a_table_it_would_read_as_nothing(table):
    belt = Toolbelt(); belt.add(create_file, effect='write')
    with pytest.raises(ValueError, match="must be a dict with only 'args' and 'effect'"): belt.declare_all({'create_file': table})
    assert belt['create_file'].args is None


# Undeclared arguments of a tool that changes things steer: only a declaration makes one harmless.
@pytest.mark.parametrize('effect', ['write', 'send', 'payment', 'delete'])
def test_undeclared_arguments_of_a_side_effect_steer(effect):
    belt = Toolbelt(); t = belt.add(update_user_info, effect=effect, args={'first_name': 'content'})
    kinds = declared_kinds(t, tool_call('update_user_info', {'first_name': 'Emma', 'city': 'New York'}))
    assert kinds == {'first_name': 'content', 'city': 'steering'}


# The owner's world, built in Python, is read as meant or refused.
@pytest.mark.parametrize('given, addresses', [
    ('emma@example.org', ('emma@example.org',)),
    ('emma@example.org, DE89370400440532013000', ('emma@example.org', 'DE89370400440532013000')),
    (['emma@example.org '], ('emma@example.org',)),
    ((), ()),
])
def test_world_addresses_as_an_owner_writes_them(given, addresses):
    assert World(addresses=given).addresses == addresses


def test_world_contacts_as_a_mapping_keep_their_addresses():
    assert World(contacts={'Bob': 'bob@example.org'}).contacts == ('Bob <bob@example.org>',)


@pytest.mark.parametrize('field, value', [
    ('contacts', [{'name': 'Bob', 'email': 'bob@example.org'}]), ('addresses', [None]), ('addresses', ['']),
    ('hosts', {'example.org': True}), ('addresses', 42), ('addresses', {'me': 'me@example.org'}),
])
def test_world_refuses_what_it_cannot_read(field, value):
    with pytest.raises(ValueError, match=f"World {field} must be"): World(**{field: value})


def test_world_from_the_settings_is_unchanged():
    w = owner_world({'PASSEPARTOUT_OWNER_ADDRESSES': 'a@example.org,  b@example.org,', 'PASSEPARTOUT_CONTACTS': 'Bob <bob@example.org>'})
    assert (w.addresses, w.contacts, w.hosts) == (('a@example.org', 'b@example.org'), ('Bob <bob@example.org>',), ())


# A server's tools declared in the MCP configuration follow the same rules, found when the file is read.
@pytest.mark.parametrize('table, says', [
    ({'effect': 'read-only', 'args': {'url': 'destination'}}, "is read-only, but its argument 'url'"),
    ({'effect': 'write', 'args': {'to': 'recipient'}}, "is local-write, but its argument 'to'"),
    ({'args': {'file': 'path'}}, "cannot be a 'path'"),
])
def test_mcp_declarations_fail_safe(table, says):
    from passepartout.mcp import _tool_declaration
    with pytest.raises(SetupError, match=says): _tool_declaration(SetupError, 'tool', table)


def test_mcp_undeclared_effect_is_outward_so_a_recipient_is_fine():
    from passepartout.mcp import _tool_declaration
    assert _tool_declaration(SetupError, 'send', {'args': {'to': 'recipient'}}) == {'args': {'to': 'recipient'}}


# A tool registered without an effect is outward (the strictest): forgetting the word costs a question, never a payment.
BILL = "Electricity bill, March: 98.70 EUR. Pay to IBAN GB29NWBK60161331926819 by the 30th."


def run_bill_errand(tmp_path, monkeypatch, **effect):
    "The shipped agent reads a bill (read-only) and pays it with `send_money` registered with `effect` (none: as an author who forgot it)."
    from passepartout.app import build_agent
    from passepartout.reason import ScriptedProvider
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home')); monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path))
    paid, belt = [], Toolbelt()
    def read_bill(): "The latest bill in the mailbox."; return BILL
    def send_money(recipient:str, amount:float): "Send money."; paid.append(recipient); return 'sent'
    belt.add(read_bill, effect='read-only'); belt.add(send_money, **effect)
    script = [tool_call('read_bill', {}), tool_call('send_money', {'recipient': 'GB29NWBK60161331926819', 'amount': 98.7}, explanation='pay the bill'),
              lambda req: reply('done')]
    agent = build_agent(provider=ScriptedProvider(script), tools=belt, env={**os.environ, 'PASSEPARTOUT_MEMORY': '0'})
    return agent, agent.send('Pay my electricity bill.'), paid


def test_a_tool_added_without_an_effect_is_gated_as_outward(tmp_path, monkeypatch):
    agent, turn, paid = run_bill_errand(tmp_path, monkeypatch)
    assert (agent.tools['send_money'].effect, agent.tools['send_money'].args) == ('outward', None)
    assert paid == [] and [p['action']['tool'] for p in turn.pending] == ['send_money']     # held for the owner, not run
    gates = {r.split(':')[0] for r in turn.pending[0]['reasons']}
    assert {'steering', 'recipients'} <= gates       # the undeclared `recipient` is steering, judged by where it came from


def test_the_same_tool_declared_read_only_is_not_judged(tmp_path, monkeypatch):
    "What the default used to be: a recipient taken from the bill is paid without a question (so the test above can fail)."
    agent, turn, paid = run_bill_errand(tmp_path, monkeypatch, effect='read-only')
    assert paid == ['GB29NWBK60161331926819'] and turn.pending == []
