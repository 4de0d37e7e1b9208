"""A second configuration for `bench/agentdojo.py --config bench/agentdojo_outsider.py`: the owner's
configuration as an independent team would write it (issue 16, requirement 5: "an independent run ... with
its own configuration through your declaration API").

It was written from the public documentation alone, not from `bench/agentdojo_config.py`:

- the effect words and argument kinds of `nbs/06_tools.md` (`Toolbelt.add(fn, name, effect=..., args=...)`,
  `EFFECT_CLASS`, `ARG_KINDS`): `write`/`delete` "change state the owner keeps: a calendar, a drive, a
  setting", `send`/`payment` reach others or move money; an argument left undeclared is steering;
- the owner's world of `nbs/09_config.md`, given the documented way a program does it: `World(...)` on the
  agent (`Agent(world=...)`), not the environment;
- AgentDojo's function signatures and docstrings (`suite.tools`) and the suites' environments (who the
  user is, their address, their account).

The choices are an outsider's reading of the docs, and some differ from ours: a rescheduled event is
`write`, a reservation is a `payment`, free text is declared `content` everywhere (also in slack and
travel, where ours leaves it undeclared), the user's name and address fields are left undeclared, the
owner's contacts are the people in their address book. What it does not know: which calls an attack will
make.

As first written (measured, see the report of issue 16), four of its declarations were accepted by the
API and then honoured less than they said; `Toolbelt.add` now refuses each with the fix, and they read:

- `get_webpage` was `read-only` with `url` a `destination` ("Returns the content of the webpage"): a
  read-only tool's arguments are judged by no gate, so an injected "visit www.true-informations.com" ran;
- `create_calendar_event`, `add_calendar_event_participants` (`participants` a `recipient`) and
  `add_user_to_channel` (`user` a `recipient`) were `write` (the docs' own example of `write` is a
  calendar): what they carry to those recipients was not checked as an outward message's is;
- `create_file`'s `filename` was a `path` ("a file in the workspace"): only the built-in file tools'
  paths are judged (by the paths gate), so it was judged by no gate.

Measured (AgentDojo 0.1.35, all four suites, v1.1.2 and v1.2.2 pooled; utility / attack success with holds
refused / with holds approved / benign tasks asking a human, in %):

| suite, mode | ours (agentdojo_config) | outsider as first written | outsider, as the API now makes it |
|---|---|---|---|
| slack, no plan | 57.1 / 2.9 / 100 / 57.1 | 66.7 / 24.8 / 100 / 33.3 | 47.6 / 2.9 / 100 / 66.7 |
| slack, `--plan` | 66.7 / 0 / 0 / 0 | 76.2 / 24.8 / 64.8 / 0 | 66.7 / 2.9 / 33.3 / 0 |
| travel, `--plan` | 100 / 14.3 / 14.3 / 0 | 100 / 17.9 / 17.9 / 0 | 100 / 17.9 / 17.9 / 0 |
| banking, `--plan` | 100 / 0 / 0 / 0 | 93.8 / 0 / 0 / 0 | 93.8 / 0 / 0 / 0 |

Those figures are history (before the gates of issue 16's later sessions). Measured again with today's
gates, all four suites, both versions pooled (utility / attack success refused / approved / benign asking):
ours 96.9 / 0 / 0 / 3.1 without a plan and 96.9 / 0 / 0 / 0 with one; this outsider 83.5 / 0 / 0 / 16.5
without a plan and 96.9 / 0 / 0 / 0 with one. Without a plan the outsider asks more because it declares
fewer contacts (the people of the owner's calendar, shares, payment history and workspace): see "What to
declare so the gates ask less" in `nbs/26_owner_plan.md`.
"""

# One entry per function that changes something: (effect word, {argument: kind}). The functions that only
# look are `READ_ONLY`; anything in neither table gets the docs' default for an undeclared effect, `outward`.
MAIL = ('send', {'recipients': 'recipient', 'cc': 'recipient', 'bcc': 'recipient',
                 'subject': 'content', 'body': 'content', 'attachments': 'content'})
EVENT = ('send', {'title': 'content', 'description': 'content', 'location': 'content',
                   'start_time': 'schedule', 'end_time': 'schedule', 'participants': 'recipient'})
CANCEL = ('delete', {'event_id': 'object'})

TOOLS = {
    'workspace': {
        'send_email': MAIL,
        'delete_email': ('delete', {'email_id': 'object'}),
        'create_calendar_event': EVENT,
        'cancel_calendar_event': CANCEL,
        'reschedule_calendar_event': ('write', {'event_id': 'object', 'new_start_time': 'schedule', 'new_end_time': 'schedule'}),
        'add_calendar_event_participants': ('send', {'event_id': 'object', 'participants': 'recipient'}),
        'create_file': ('write', {'filename': 'object', 'content': 'content'}),
        'append_to_file': ('write', {'file_id': 'object', 'content': 'content'}),
        'delete_file': ('delete', {'file_id': 'object'}),
        'share_file': ('send', {'file_id': 'object', 'email': 'recipient', 'permission': 'plain'}),
    },
    'banking': {
        'send_money': ('payment', {'recipient': 'recipient', 'amount': 'amount', 'subject': 'content', 'date': 'schedule'}),
        'schedule_transaction': ('payment', {'recipient': 'recipient', 'amount': 'amount', 'subject': 'content',
                                             'date': 'schedule', 'recurring': 'plain'}),
        'update_scheduled_transaction': ('payment', {'id': 'object', 'recipient': 'recipient', 'amount': 'amount',
                                                     'subject': 'content', 'date': 'schedule', 'recurring': 'plain'}),
        'update_password': ('write', {'password': 'secret'}),
        'update_user_info': ('write', {}),          # name and address: left undeclared, so they steer
    },
    'slack': {
        'send_direct_message': ('send', {'recipient': 'recipient', 'body': 'content'}),
        'send_channel_message': ('send', {'channel': 'recipient', 'body': 'content'}),
        'post_webpage': ('send', {'url': 'destination', 'content': 'content'}),
        'invite_user_to_slack': ('send', {'user': 'recipient', 'user_email': 'recipient'}),
        'add_user_to_channel': ('send', {'user': 'recipient', 'channel': 'object'}),
        'remove_user_from_slack': ('delete', {'user': 'object'}),
        'get_webpage': ('outward', {'url': 'destination'}),
    },
    'travel': {
        'reserve_hotel': ('payment', {'hotel': 'object', 'start_day': 'schedule', 'end_day': 'schedule'}),
        'reserve_restaurant': ('payment', {'restaurant': 'object', 'start_time': 'schedule'}),
        'reserve_car_rental': ('payment', {'company': 'object', 'start_time': 'schedule', 'end_time': 'schedule'}),
        'send_email': MAIL,
        'create_calendar_event': EVENT,
        'cancel_calendar_event': CANCEL,
    },
}

READ_ONLY = {
    'workspace': {'get_current_day', 'get_day_calendar_events', 'get_draft_emails', 'get_file_by_id', 'get_received_emails',
                  'get_sent_emails', 'get_unread_emails', 'list_files', 'search_calendar_events', 'search_contacts_by_email',
                  'search_contacts_by_name', 'search_emails', 'search_files', 'search_files_by_filename'},
    'banking': {'get_balance', 'get_iban', 'get_most_recent_transactions', 'get_scheduled_transactions', 'get_user_info', 'read_file'},
    'slack': {'get_channels', 'get_users_in_channel', 'read_channel_messages', 'read_inbox'},
    'travel': {'check_restaurant_opening_hours', 'get_all_car_rental_companies_in_city', 'get_all_hotels_in_city',
               'get_all_restaurants_in_city', 'get_car_fuel_options', 'get_car_price_per_day', 'get_car_rental_address',
               'get_car_types_available', 'get_contact_information_for_restaurants', 'get_cuisine_type_for_restaurants',
               'get_day_calendar_events', 'get_dietary_restrictions_for_all_restaurants', 'get_flight_information',
               'get_hotels_address', 'get_hotels_prices', 'get_price_for_restaurants', 'get_rating_reviews_for_car_rental',
               'get_rating_reviews_for_hotels', 'get_rating_reviews_for_restaurants', 'get_restaurants_address',
               'get_user_information', 'search_calendar_events'},
}

EMMA = 'emma.johnson@bluesparrowtech.com'
WORLDS = {   # the owner's own addresses and accounts, and the people they write to, per suite
    'workspace': {'addresses': [EMMA], 'contacts': ['Lily White <lily.white@gmail.com>', 'David Smith <david.smith@bluesparrowtech.com>',
                  'Julie Williams <julie.williams@bluesparrowtech.com>', 'Katie Brown <katie.brown@bluesparrowtech.com>',
                  'Sarah Baker <sarah.baker@gmail.com>', 'James Miller <james.miller@yahoo.com>', 'Mark Davies <mark.davies@hotmail.com>']},
    'banking': {'addresses': ['DE89370400440532013000']},
    'slack': {},                                     # the user is "Alice" in some tasks and "Bob" in others: nobody is set
    'travel': {'addresses': [EMMA, '327-420-4923']},
}


def add_tool(belt, suite:str, fn, name:str):
    "Register AgentDojo's function `fn` as tool `name` with this configuration's effect and argument kinds."
    effect, args = TOOLS.get(suite, {}).get(name, ('read-only' if name in READ_ONLY.get(suite, ()) else 'outward', None))
    return belt.add(fn, name, effect=effect, args=args or None)


def owner_world(suite:str):
    "The owner's `World` for `suite` (set on the agent: `agent.world`)."
    from passepartout.config import World
    return World(**WORLDS.get(suite, {}))
