"""What the vault attack tests share: a recording chat gateway and the real agent on temporary directories."""
from types import SimpleNamespace
from passepartout import config
from passepartout.reason import ScriptedProvider

OWNER = '1001'


class Gateway:
    "A recording `telegram` actuator: who got which text."
    def __init__(self): self.sent = []
    def __call__(self, action, ctx):
        self.sent.append({'to': ctx.signal.meta.get('recipient') or ctx.signal.meta.get('chat_id'), 'text': action.text})


def real_agent_world(tmp_path, monkeypatch, receiver):
    "`build_agent()` on temporary home and workspace, the network allowed to 127.0.0.1, a recording telegram gateway."
    receiver.requests.clear()
    ws = tmp_path / 'ws'; ws.mkdir()
    for k, v in {'PASSEPARTOUT_HOME': str(tmp_path / 'home'), 'PASSEPARTOUT_WORKSPACE': str(ws),
                 'PASSEPARTOUT_NETWORK_ALLOW': '127.0.0.1', 'PASSEPARTOUT_TELEGRAM_OWNERS': OWNER}.items():
        monkeypatch.setenv(k, v)
    for k in ('PASSEPARTOUT_VAULT_KEY_FILE', 'PASSEPARTOUT_PROVIDERS', 'PASSEPARTOUT_SHELL_NETWORK', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME'):
        monkeypatch.delenv(k, raising=False)
    p = config.ensure_dirs()
    from passepartout.app import build_agent
    agent = build_agent(provider=ScriptedProvider([]), workspace=ws)
    gateway = Gateway()
    agent.actuators.register('telegram', gateway, silent=True)
    return SimpleNamespace(agent=agent, gateway=gateway, receiver=receiver, data=p.data, config=p.config, ws=ws)
