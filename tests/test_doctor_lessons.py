"""The tables behind two lessons of `nbs/54_doctor.md`: what the provider check says without asking the
network, and what `passepartout configure` writes or refuses.

The notebook keeps one showing example of each; the rows here are the rest of what it once asserted in place.
(Providers that answer, refuse or are down are asked for real in `tests/test_doctor.py`.)
"""
import os
import pytest
from click.testing import CliRunner
from dotenv import dotenv_values
from passepartout import config
from passepartout.doctor import check_providers, configure_command
from passepartout.cli import main


@pytest.mark.parametrize('env, status, detail', [
    ({'PASSEPARTOUT_PROVIDERS': 'openai', 'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1', 'OPENAI_API_KEY': 'sk-x'}, 'skip', None),  # no network: not asked
    ({'PASSEPARTOUT_PROVIDERS': 'openai'}, 'fail', 'openai: no API key: set OPENAI_API_KEY (`passepartout configure`)'),
    ({'PASSEPARTOUT_PROVIDERS': 'replay'}, 'ok', None),
], ids=['offline-skip', 'no-key', 'replay'])
def test_the_provider_check_without_network(env, status, detail):
    finding = check_providers(env)[0]
    assert finding.status == status and (detail is None or finding.detail == detail), finding


def test_a_misspelt_provider_is_offered_the_nearest_name():
    typo = check_providers({'PASSEPARTOUT_PROVIDERS': 'opneai'})[0].detail
    assert "unknown provider 'opneai'" in typo and typo.endswith("(did you mean 'openai'?)"), typo


@pytest.fixture
def home(tmp_path):
    "A fresh PASSEPARTOUT_HOME; `passepartout` loads its .env into the environment, so the environment is put back after."
    saved = dict(os.environ)
    os.environ['PASSEPARTOUT_HOME'] = str(tmp_path / 'pp')
    yield config.paths({'PASSEPARTOUT_HOME': str(tmp_path / 'pp')})
    os.environ.clear(); os.environ.update(saved)


def test_set_flags_are_written(home):
    r = CliRunner().invoke(configure_command, ['--set', 'PASSEPARTOUT_PROVIDERS=ollama', '--set', 'OLLAMA_MODEL=qwen3'])
    assert (r.exit_code, r.output) == (0, f"wrote 2 settings to {home.config / '.env'}\n")


def test_the_prompts_write_the_key_without_echoing_it(home):
    r = CliRunner().invoke(configure_command, input='openai\nsk-secret\ngpt-4.1\n/tmp\n')
    assert r.exit_code == 0 and 'sk-secret' not in r.output
    assert dotenv_values(home.config / '.env')['OPENAI_API_KEY'] == 'sk-secret'


@pytest.mark.parametrize('pair, says', [
    ('PASSEPARTOUT_TIMEOUT=soon', "Error: PASSEPARTOUT_TIMEOUT='soon' is not a valid float"),
    ('PASSEPARTOUT_PROVIDERS=opnai', "unknown provider 'opnai': use one or more of openai, openrouter, anthropic, ollama, replay"),
], ids=['bad-number', 'unknown-provider'])
def test_a_refused_value_is_one_line_status_2_and_env_unchanged(home, pair, says):
    CliRunner().invoke(configure_command, ['--set', 'OLLAMA_MODEL=qwen3'])
    before = (home.config / '.env').read_text()
    r = CliRunner().invoke(main, ['configure', '--set', pair])
    assert (r.exit_code, len(r.output.splitlines())) == (2, 1) and says in r.output, r.output
    assert (home.config / '.env').read_text() == before
