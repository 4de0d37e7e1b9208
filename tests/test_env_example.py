"""The committed `.env.example` documents every setting: it must equal what `config.env_example()` generates."""
from pathlib import Path

from passepartout import config

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "python -c \"from passepartout.config import env_example; open('.env.example','w').write(env_example())\""


def test_env_example_is_current():
    committed = (ROOT / '.env.example').read_text()
    assert committed == config.env_example(), f".env.example is out of date; regenerate it with: {REGENERATE}"


def test_env_example_names_every_setting():
    text = (ROOT / '.env.example').read_text()
    missing = [n for n in [*config.SETTINGS, *config.PROVIDER_SETTINGS] if f"# {n}=" not in text]
    assert not missing, missing
