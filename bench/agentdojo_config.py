"""How `bench/agentdojo.py` configures Passepartout for each AgentDojo suite: the owner's configuration,
written once, as a careful owner would write it for their own tools. Nothing here knows which calls an
attack will make.

Two tables:

- `EFFECTS` and `READ_ONLY`: each AgentDojo function's effect in Passepartout's vocabulary (`read-only`,
  `local-write`, `outward`), through `Toolbelt.add(fn, name, effect)`; a function in neither is `outward`.
- `DECLARATIONS` (**the tool-semantics table**, issue 16 requirement 1): what each argument of each
  side-effecting function means (recipient, destination, amount, identifier, schedule, secret, body) and
  the tool's effect in the richer vocabulary. It is applied only when the installed Passepartout's
  `Toolbelt.add` takes an `args` parameter (feature detection, see `declares_arguments`); until that
  API exists the benchmark runs without it, which gives the baseline.
- `OWNER`: the owner's own world per suite (their addresses and accounts, their contacts) as settings, for
  the owner configuration of requirement 2; `apply_owner` sets only the settings this Passepartout knows.
"""
import inspect, os

EFFECTS = {
    'workspace': {
        'send_email': 'outward', 'delete_email': 'local-write',
        'create_calendar_event': 'outward',            # invitations go to the participants
        'cancel_calendar_event': 'outward',            # participants are told
        'reschedule_calendar_event': 'outward',
        'add_calendar_event_participants': 'outward',
        'append_to_file': 'local-write', 'create_file': 'local-write', 'delete_file': 'local-write',
        'share_file': 'outward',
    },
    'banking': {
        'send_money': 'outward', 'schedule_transaction': 'outward', 'update_scheduled_transaction': 'outward',
        'update_password': 'local-write', 'update_user_info': 'local-write',
    },
    'slack': {
        'send_direct_message': 'outward', 'send_channel_message': 'outward', 'post_webpage': 'outward',
        'invite_user_to_slack': 'outward', 'remove_user_from_slack': 'local-write', 'add_user_to_channel': 'outward',   # the user reads the channel from then on
        'get_webpage': 'outward',                      # fetching a URL reaches another machine
    },
    'travel': {
        'reserve_hotel': 'outward', 'reserve_restaurant': 'outward', 'reserve_car_rental': 'outward',
        'send_email': 'outward', 'create_calendar_event': 'outward', 'cancel_calendar_event': 'outward',
    },
}
"Function name -> effect of the functions that change something (the read-only ones are `READ_ONLY`)."

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
"""The functions that only look, per suite, said explicitly: a function in no table (one a later AgentDojo adds) is
`outward`, as the tool belt reads an effect nobody declared."""

# ---------------------------------------------------------------------------------------------------
# THE TOOL-SEMANTICS TABLE (applied only when `Toolbelt.add(..., args=...)` exists)
# Argument kinds and effect words as drafted on branch `decl` (passepartout.tools.ARG_KINDS, EFFECT_CLASS):
# recipient, destination, amount, object, schedule, secret, content, plain; send, write, delete, payment.
# ---------------------------------------------------------------------------------------------------
DECLARATIONS = {
    'workspace': {
        'send_email': {'effect': 'send', 'args': {'recipients': 'recipient', 'cc': 'recipient', 'bcc': 'recipient',
                                                  'subject': 'content', 'body': 'content', 'attachments': 'content'}},
        'delete_email': {'effect': 'delete', 'args': {'email_id': 'object'}},
        'create_calendar_event': {'effect': 'send', 'args': {'participants': 'recipient', 'start_time': 'schedule',
                                                             'end_time': 'schedule', 'title': 'content', 'description': 'content',
                                                             'location': 'content'}},
        'cancel_calendar_event': {'effect': 'delete', 'args': {'event_id': 'object'}},
        'reschedule_calendar_event': {'effect': 'send', 'args': {'event_id': 'object', 'new_start_time': 'schedule',
                                                                 'new_end_time': 'schedule'}},
        'add_calendar_event_participants': {'effect': 'send', 'args': {'event_id': 'object', 'participants': 'recipient'}},
        'append_to_file': {'effect': 'write', 'args': {'file_id': 'object', 'content': 'content'}},
        'create_file': {'effect': 'write', 'args': {'filename': 'object', 'content': 'content'}},
        'delete_file': {'effect': 'delete', 'args': {'file_id': 'object'}},
        'share_file': {'effect': 'send', 'args': {'file_id': 'object', 'email': 'recipient', 'permission': 'plain'}},
    },
    'banking': {
        'send_money': {'effect': 'payment', 'args': {'recipient': 'recipient', 'amount': 'amount', 'subject': 'content', 'date': 'schedule'}},
        'schedule_transaction': {'effect': 'payment', 'args': {'recipient': 'recipient', 'amount': 'amount', 'subject': 'content',
                                                               'date': 'schedule', 'recurring': 'plain'}},
        'update_scheduled_transaction': {'effect': 'payment', 'args': {'id': 'object', 'recipient': 'recipient', 'amount': 'amount',
                                                                       'subject': 'content', 'date': 'schedule', 'recurring': 'plain'}},
        'update_password': {'effect': 'write', 'args': {'password': 'secret'}},
        'update_user_info': {'effect': 'write', 'args': {'first_name': 'content', 'last_name': 'content',
                                                         'street': 'content', 'city': 'content'}},
    },
    'slack': {
        'send_direct_message': {'effect': 'send', 'args': {'recipient': 'recipient', 'body': 'content'}},
        'send_channel_message': {'effect': 'send', 'args': {'channel': 'recipient', 'body': 'content'}},   # everyone in it reads it
        'post_webpage': {'effect': 'send', 'args': {'url': 'destination', 'content': 'content'}},
        'get_webpage': {'effect': 'send', 'args': {'url': 'destination'}},                        # the URL itself reaches a server
        'invite_user_to_slack': {'effect': 'send', 'args': {'user': 'recipient', 'user_email': 'recipient'}},
        'add_user_to_channel': {'effect': 'send', 'args': {'user': 'recipient', 'channel': 'object'}},   # they will read the channel: outward
        'remove_user_from_slack': {'effect': 'delete', 'args': {'user': 'object'}},
    },
    'travel': {
        'reserve_hotel': {'effect': 'payment', 'args': {'hotel': 'object', 'start_day': 'schedule', 'end_day': 'schedule'}},
        'reserve_restaurant': {'effect': 'payment', 'args': {'restaurant': 'object', 'start_time': 'schedule'}},
        'reserve_car_rental': {'effect': 'payment', 'args': {'company': 'object', 'start_time': 'schedule', 'end_time': 'schedule'}},
        'send_email': {'effect': 'send', 'args': {'recipients': 'recipient', 'cc': 'recipient', 'bcc': 'recipient',
                                                  'subject': 'content', 'body': 'content', 'attachments': 'content'}},
        'create_calendar_event': {'effect': 'send', 'args': {'participants': 'recipient', 'start_time': 'schedule',
                                                             'end_time': 'schedule', 'title': 'content', 'description': 'content',
                                                             'location': 'content'}},
        'cancel_calendar_event': {'effect': 'delete', 'args': {'event_id': 'object'}},
    },
}

# The owner's contacts, as a careful owner would list them from their own world (the suite's environment before any
# attack): the people they have written to or paid, the people their files are shared with, the people on their own
# calendar's events, the members and channels of their own Slack workspace. Nobody an injection task names is here.
_COLLEAGUES = ['client@abcindustries.com', 'david.smith@bluesparrowtech.com', 'james.miller@yahoo.com',   # mail they sent
               'julie.williams@bluesparrowtech.com', 'katie.brown@bluesparrowtech.com', 'mark.davies@hotmail.com',
               'sarah.baker@gmail.com', 'support@bluesparrowtech.com',
               'alex.martin@bluesparrowtech.com', 'david.lee@bluesparrowtech.com', 'jane.smith@gmail.com',    # their files' shares
               'john.mitchell@gmail.com', 'linda.green@luesparrowtech.com', 'linda.jameson@bluesparrowtech.com',
               'mark.roberts@luesparrowtech.com', 'michael.brown@bluesparrowtech.com', 'robert.anderson@bluesparrowtech.com',
               'susan.lee@bluesparrowtech.com',
               'alex.williams@bluesparrowtech.com', 'alex.williams@mainsail-tech.com', 'board.members@bluesparrowtech.com',   # their meetings
               'conference.attendees@example.com', 'dew.johnson@bilgen-corp.com', 'family@johnsonclan.com',
               'info@data-backup-security.com', 'jane.maly@bluesparrowtech.com', 'john.doe@bilgen-corp.com', 'john.doe@clientcorp.com',
               'kate.sean@bilgen-corp.com', 'maintenance.team@bluesparrowtech.com', 'maria.garcia@bluesparrowtech.com',
               'mark.johnson@bluesparrowtech.com', 'martha.raynolds@gmail.com', 'michael.smith@bluesparrowtech.com',
               'networking.participants@industry-network.com', 'project.team@bluesparrowtech.com', 'sara.lee@bluesparrowtech.com',
               'sarah.connor@gmail.com', 'training.team@bluesparrowtech.com']

OWNER = {
    'workspace': {'PASSEPARTOUT_OWNER_ADDRESSES': 'emma.johnson@bluesparrowtech.com', 'PASSEPARTOUT_CONTACTS': ', '.join(_COLLEAGUES)},
    'banking': {'PASSEPARTOUT_OWNER_ADDRESSES': 'DE89370400440532013000',
                'PASSEPARTOUT_CONTACTS': 'CH9300762011623852957, GB29NWBK60161331926819, '   # accounts they paid or were paid from
                                         'SE3550000000054910000003, US122000000121212121212'},
    'slack': {'PASSEPARTOUT_CONTACTS': 'Alice, Bob, Charlie, Eve, general, random, private'},   # their workspace's members and channels
    'travel': {'PASSEPARTOUT_OWNER_ADDRESSES': 'emma.johnson@bluesparrowtech.com, 327-420-4923',
               'PASSEPARTOUT_CONTACTS': 'Lily White <lily.white@gmail.com>'},                  # their address book
}
"The owner's own world per suite, as settings (applied only when this Passepartout has them: `apply_owner`)."


def declares_arguments(belt) -> bool:
    "Does this Passepartout's `Toolbelt.add` take argument declarations (`args=`)?"
    try: return 'args' in inspect.signature(type(belt).add).parameters
    except (TypeError, ValueError): return False


def add_tool(belt, suite:str, fn, name:str):
    "Register `fn` as `name` on `belt` with the suite's effect, and its declarations when the API exists."
    effect = EFFECTS.get(suite, {}).get(name) or ('read-only' if name in READ_ONLY.get(suite, ()) else 'outward')
    decl = DECLARATIONS.get(suite, {}).get(name)
    if decl is None or not declares_arguments(belt): return belt.add(fn, name, effect)
    from passepartout import tools
    fine = decl['effect'] if decl['effect'] in getattr(tools, 'EFFECT_CLASS', {}) else effect   # the finer effect words, if known
    return belt.add(fn, name, fine, args=decl['args'])


def apply_owner(suite:str) -> list:
    "Set the owner's world for `suite` in the environment, for the settings this Passepartout knows; the names set. Call before `build_agent`."
    from passepartout import config
    done = []
    for name in {n for world in OWNER.values() for n in world}: os.environ.pop(name, None)   # not another suite's owner
    for name, value in OWNER.get(suite, {}).items():
        if name in config.SETTINGS: os.environ[name] = value; done.append(name)
    return done
