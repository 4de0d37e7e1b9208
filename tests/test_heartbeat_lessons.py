"""The tables behind the lessons of `nbs/52_heartbeat.md`: cron schedules, and when a job of `cron.toml` is due.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
"""
from datetime import datetime
import pytest
from passepartout.heartbeat import cron_signal, due, load_jobs, parse_schedule


@pytest.mark.parametrize('expr, when, matches', [
    ('*/30 8-9 * * 1-5', datetime(2025, 6, 2, 8, 30), True),    # a Monday
    ('*/30 8-9 * * 1-5', datetime(2025, 6, 1, 8, 30), False),   # a Sunday
    ('*/30 8-9 * * 1-5', datetime(2025, 6, 2, 10, 0), False),
    ('0 0 * * 7', datetime(2025, 6, 1, 0, 0), True),            # 7 = Sunday
    ('0 0 * * 0', datetime(2025, 6, 1, 0, 0), True),
    ('0 12 1 * 5', datetime(2025, 8, 1, 12), True),             # the 1st (a Friday)
    ('0 12 1 * 5', datetime(2025, 8, 2, 12), False),            # a Saturday, not the 1st
    ('0 12 1 * 5', datetime(2025, 8, 8, 12), True),             # a Friday: either day field may match
])
def test_schedule_matches(expr, when, matches):
    assert parse_schedule(expr).matches(when) is matches


@pytest.mark.parametrize('expr, minutes', [('*/30 * * * *', [0, 30]), ('5/20 * * * *', [5, 25, 45]), ('1,2,40-42 * * * *', [1, 2, 40, 41, 42])])
def test_schedule_minutes(expr, minutes):
    assert sorted(parse_schedule(expr).minutes) == minutes


@pytest.mark.parametrize('expr, message', [('* * *', '5 fields'), ('0 24 * * *', "hour: '24' is outside 0-23"),
                                           ('x * * * *', "minute: cannot read 'x'"), ('*/0 * * * *', "minute: '*/0' is outside 0-59")])
def test_bad_schedules(expr, message):
    with pytest.raises(ValueError, match=message.replace('*', r'\*')):
        parse_schedule(expr)


@pytest.fixture
def inbox(tmp_path):
    f = tmp_path / 'cron.toml'
    f.write_text('[[jobs]]\nname = "inbox"\nschedule = "0 8 * * 1-5"\ntext = "Summarise what came in overnight."\n')
    job, = load_jobs(f)
    return job


@pytest.mark.parametrize('after, until, fires', [
    (datetime(2025, 6, 2, 7, 59, 30), datetime(2025, 6, 2, 8, 0, 5), True),
    (datetime(2025, 6, 2, 8, 0, 5), datetime(2025, 6, 2, 8, 1, 5), False),     # already ran
    (datetime(2025, 6, 1, 7, 0), datetime(2025, 6, 1, 9, 0), False),           # Sunday
    (datetime(2025, 6, 1, 9, 0), datetime(2025, 6, 2, 9, 0), True),            # asleep for a day: it fires once
])
def test_due(inbox, after, until, fires):
    assert due(inbox, after, until) is fires


def test_a_job_is_a_cron_message_in_its_own_session(inbox):
    assert (inbox.session, cron_signal(inbox).sensor, cron_signal(inbox).session) == ('cron:inbox', 'cron', 'cron:inbox')


def test_a_bad_job_names_the_file_and_the_job(tmp_path):
    f = tmp_path / 'cron.toml'
    f.write_text('[[jobs]]\nname = "bad"\nschedule = "0 8 * *"\ntext = "x"\n')
    with pytest.raises(ValueError, match="cron job 'bad': a cron schedule has 5 fields"):
        load_jobs(f)
    f.write_text('[[jobs]]\nname = "mute"\nschedule = "0 8 * * *"\n')
    with pytest.raises(ValueError, match="cron job 'mute' needs a 'schedule' and a 'text'"):
        load_jobs(f)


def test_a_missing_file_is_no_jobs(tmp_path):
    assert load_jobs(tmp_path / 'none.toml') == []
