"""One rule per setting, whatever gave the value: flag, environment, settings file or PUT body."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.config.resolve import OPTIONS_BY_NAME, resolve_settings
from bridge.config.settings import BridgeSettings, SettingsError, parse_setting
from bridge.config.writes import IDENTITY_FIELDS, OPERATOR_ONLY_KEYS, WRITABLE, config_change

# (field, value as text, the value every source reads it as)
SAME_EVERYWHERE = [
    ("request_timeout_ms", "3e3", 3000),
    ("request_timeout_ms", " 2500 ", 2500),
    ("port", "8790", 8790),
    ("source_policy", "OPEN", "private-http"),
    ("runtime_adapter", "ACP", "deepagents-acp"),
    ("runtime_profile", "Open_AI-Compatible", "generic"),
    ("allowed_source_origins", "ftp://x.test, http://wiki.test:8765/", ("http://wiki.test:8765",)),
    ("allowed_origins", "https://A.test:443/x, null", ("https://a.test",)),
    ("io_log_mode", "jsonl", "file"),
    ("model", "  local-model ", "local-model"),
]

# (field, value, the phrase each source's message ends with)
REFUSED_EVERYWHERE = [
    ("request_timeout_ms", "0", "must be a positive integer."),
    ("fanout_concurrency", "99", "must be between 1 and 64."),
    ("port", "70000", "must be an integer port from 0 to 65535."),
    ("port", "eighty", "must be an integer port from 0 to 65535."),
    ("source_policy", "weird", "Unsupported LLMWiki Agent Bridge source policy: weird."),
    ("runtime_adapter", "telepathy", "Unsupported LLMWiki Agent Bridge runtime adapter: telepathy."),
]


def _env_name(field: str) -> str:
    return OPTIONS_BY_NAME[field].env


def _file_key(field: str) -> str:
    return OPTIONS_BY_NAME[field].file_keys[0]


def _read(field: str, value: Any, source: str) -> Any:
    """The value as each source would hand it to the bridge."""
    if source == "option":
        return parse_setting(field, value)
    if source == "env":
        return getattr(resolve_settings({}, {_env_name(field): value}), field)
    if source == "settings":
        return getattr(resolve_settings({}, {}, {_file_key(field): value}), field)
    change = config_change({_file_key(field): value}, BridgeSettings())
    return getattr(change.settings, field) if field not in ("host", "port") else change.persisted[field]


@pytest.mark.parametrize("source", ["option", "env", "settings", "http"])
@pytest.mark.parametrize(("field", "value", "expected"), SAME_EVERYWHERE)
def test_every_source_reads_a_value_alike(field: str, value: str, expected: Any, source: str) -> None:
    assert _read(field, value, source) == expected


@pytest.mark.parametrize(("field", "value", "phrase"), REFUSED_EVERYWHERE)
def test_every_source_refuses_a_value_alike_naming_where_it_came_from(
        field: str, value: str, phrase: str) -> None:
    whole = phrase.startswith("Unsupported")
    names = {"option": _camel(field), "env": _env_name(field),
             "settings": f"settings file config.{_file_key(field)}", "http": _file_key(field)}
    for source, name in names.items():
        with pytest.raises(SettingsError) as raised:
            _read(field, value, source)
        assert str(raised.value) == (phrase if whole else f"{name} {phrase}"), source


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@pytest.mark.parametrize(("value", "env", "settings", "http"), [
    (True, True, True, True),
    (False, False, False, False),
    ("yes", True, "must be a JSON boolean.", True),
    ("OFF", False, "must be a JSON boolean.", False),
    ("maybe", False, "must be a JSON boolean.", "must be a boolean."),  # contract 1.3 and 2.6.5
    (1, "n/a", "must be a JSON boolean.", "must be a boolean."),
])
def test_the_one_boolean_parser_keeps_each_sources_words(value: Any, env: Any, settings: Any,
                                                         http: Any) -> None:
    for source, expected in (("env", env), ("settings", settings), ("http", http)):
        if expected == "n/a":
            continue  # the environment holds text only
        if isinstance(expected, str):
            with pytest.raises(SettingsError, match=expected.replace(".", r"\.") + "$"):
                _read("allow_public_bind", value, source)
        else:
            assert _read("allow_public_bind", value, source) is expected, source


def test_what_put_saves_the_settings_file_reads_back_the_same() -> None:
    """The file patch PUT writes is in the form resolution reads: restarted on it, the bridge has
    the settings the write made live."""
    body = {"runtimeProfile": "generic", "runtimeName": "Team", "runtimeAdapter": "acp",
            "agentBaseUrl": "http://runtime.test/v1", "hermesApiKey": "sk-1", "agentModel": "m1",
            "timeoutMs": "2500", "fanoutConcurrency": 2, "allowedOrigins": "https://app.test",
            "allowedSourceOrigins": ["http://wiki.test:8765/"], "sourcePolicy": "allowlist",
            "auditLogEnabled": "on", "ioLog": True, "bearerToken": "t0ken", "allowPublicBind": "yes",
            "allowInsecurePublicBind": False}
    change = config_change(body, BridgeSettings())
    reread = resolve_settings({}, {}, change.persisted)
    for writable in WRITABLE:
        if writable.name not in IDENTITY_FIELDS:  # the file holds the profile's identity spelled out
            assert getattr(reread, writable.name) == getattr(change.settings, writable.name), writable.name
    assert reread.identity() == change.settings.identity()
    assert change.settings.runtime_profile == reread.runtime_profile == "generic"


def test_put_never_writes_what_only_the_operator_sets() -> None:
    operator_only = {name for name, option in OPTIONS_BY_NAME.items()
                     if set(option.file_keys) & set(OPERATOR_ONLY_KEYS) or not option.file_keys}
    assert not operator_only & {w.name for w in WRITABLE}
    assert {"io_log_path", "config_path", "allowed_hosts", "deepagents_acp_command"} <= operator_only
