"""Bridge settings: resolution order, legacy aliases, bind policy, the file, and documentation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bridge.config.policy import SourcePolicy, is_public_host
from bridge.config.resolve import (
    OPTIONS,
    REPORTED_FIELDS,
    default_config_path,
    load_settings,
    resolve_settings,
)
from bridge.config.settings import BridgeSettings, SettingsError, check_bind_policy
from bridge.config.store import SettingsFileError, SettingsStore
from common.browser import BrowserPolicy

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_defaults() -> None:
    settings = resolve_settings({}, {})
    assert (settings.host, settings.port) == ("127.0.0.1", 8788)
    assert settings.base_url == "http://127.0.0.1:8642/v1" and settings.base_url_source == "default"
    assert settings.model == "hermes-agent" and settings.runtime_profile == "hermes"
    assert settings.request_timeout_ms == 120000 and settings.source_policy == "private-http"
    assert settings.fanout_concurrency == 4 and settings.max_body_bytes == 2 * 1024 * 1024


def test_every_setting_has_an_option() -> None:
    settable = set(BridgeSettings.model_fields) - REPORTED_FIELDS
    assert settable == {o.name for o in OPTIONS}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_every_option_is_documented(option: Any) -> None:
    text = DOCS.read_text(encoding="utf-8").split("## llmwiki-agent-bridge", 1)[1]
    assert f"`{option.flag}`" in text
    assert f"`{option.env}`" in text
    for legacy in option.legacy_env:
        assert f"`{legacy}`" in text


def test_option_beats_env_beats_legacy_beats_file_beats_default() -> None:
    file_config = {"port": 7001, "model": "file-model", "baseUrl": "http://file.test/v1",
                   "sourcePolicy": "allowlist", "requestTimeoutMs": 3000}
    env = {"LLMWIKI_AGENT_BRIDGE_PORT": "7002", "HERMES_A2A_BRIDGE_PORT": "7003", "PORT": "65536",
           "HOST": "0.0.0.0", "LLMWIKI_AGENT_BRIDGE_HOST": "127.0.0.2", "HERMES_MODEL": "legacy-model",
           "LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY": "  "}
    settings = resolve_settings({"port": 7004}, env, file_config)
    assert settings.port == 7004
    assert resolve_settings({}, env, file_config).port == 7002
    assert settings.host == "127.0.0.2"  # namespaced beats the generic HOST
    assert settings.model == "legacy-model" and settings.model_source == "env"
    assert settings.base_url == "http://file.test/v1" and settings.base_url_source == "settings"
    assert settings.source_policy == "allowlist"  # whitespace env counts as unset
    assert settings.request_timeout_ms == 3000


def test_env_parsing() -> None:
    env = {"HERMES_A2A_BRIDGE_SOURCE_POLICY": "OPEN", "LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND": "maybe",
           "LLMWIKI_AGENT_BRIDGE_ALLOWED_ORIGINS": "https://A.test:443/x, null, http://u@b.test, http://c.test:81",
           "LLMWIKI_AGENT_BRIDGE_ALLOWED_SOURCE_ORIGINS": "ftp://x.test, http://wiki.test:8765/",
           "LLMWIKI_AGENT_BRIDGE_RUNTIME_PROFILE": "Open_AI-Compatible"}
    settings = resolve_settings({}, env)
    assert settings.source_policy == "private-http"
    assert settings.allow_public_bind is False  # any other non-empty value is false
    assert settings.allowed_origins == ("https://a.test", "http://c.test:81")
    assert settings.allowed_source_origins == ("http://wiki.test:8765",)
    assert settings.runtime_profile == "generic"


def test_invalid_enums_raise() -> None:
    with pytest.raises(SettingsError, match="source policy: weird"):
        resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY": "weird"})
    with pytest.raises(SettingsError, match="LLMWIKI_AGENT_BRIDGE_PORT"):
        resolve_settings({}, {"LLMWIKI_AGENT_BRIDGE_PORT": "eighty"})
    with pytest.raises(SettingsError, match="allowPublicBind"):
        resolve_settings({}, {}, {"allowPublicBind": "yes"})  # file booleans must be JSON booleans


def test_bind_policy() -> None:
    check_bind_policy(BridgeSettings(host="localhost"))
    check_bind_policy(BridgeSettings(host="::1"))
    with pytest.raises(SettingsError, match="LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND=1"):
        check_bind_policy(resolve_settings({}, {"HOST": "0.0.0.0"}))
    with pytest.raises(SettingsError, match="LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN"):
        check_bind_policy(BridgeSettings(host="0.0.0.0", allow_public_bind=True))
    check_bind_policy(BridgeSettings(host="0.0.0.0", allow_public_bind=True, bearer_token="t"))
    check_bind_policy(BridgeSettings(host="0.0.0.0", allow_public_bind=True,
                                     allow_insecure_public_bind=True))


def test_default_config_path(tmp_path: Path) -> None:
    assert default_config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "llmwiki-agent-bridge" / "settings.json")
    assert default_config_path({}).parts[-3:] == (".config", "llmwiki-agent-bridge", "settings.json")


def test_load_settings_reads_the_file_layer(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    SettingsStore(path).write({"model": "from-file", "allowedOrigins": "http://x.test"})
    settings = load_settings({}, {"LLMWIKI_AGENT_BRIDGE_CONFIG_PATH": str(path)})
    assert settings.config_path == path and settings.model == "from-file"
    assert settings.allowed_origins == ("http://x.test",)
    path.write_text("{broken", encoding="utf-8")
    assert load_settings({"config_path": path}, {}).model == "hermes-agent"


def test_store_writes_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "dir" / "settings.json"
    store = SettingsStore(path)
    store.write({"model": "one"}, [{"id": "a"}])
    store.write({"port": 1})
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document == {"version": 1, "config": {"model": "one", "port": 1}, "sources": [{"id": "a"}]}
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    before = path.read_bytes()

    def crash(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError):
        store.write({"model": "two"})
    assert path.read_bytes() == before  # the old file, whole
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp file left


def test_store_reports_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[1, 2", encoding="utf-8")
    store = SettingsStore(path)
    with pytest.raises(SettingsFileError):
        store.read()
    assert store.status == "invalid"
    with pytest.raises(SettingsFileError):
        store.write({"model": "x"})
    assert path.read_text(encoding="utf-8") == "[1, 2"
    path.write_text("", encoding="utf-8")
    assert store.read().config == {} and store.status == "ok"


@pytest.mark.parametrize(("policy", "url", "allowed"), [
    ("private-http", "http://10.0.0.5:8765", True),
    ("private-http", "https://wiki.example.com", True),
    ("private-http", "ftp://127.0.0.1/", False),
    ("private-http", "http://user:pw@127.0.0.1/", False),
    ("private-http", "not a url", False),
    ("allowlist", "http://127.0.0.1:8765/x", True),
    ("allowlist", "http://127.0.0.1:8766", False),
    ("public-https", "http://127.0.0.1:9", True),
    ("public-https", "http://localhost:9", True),
    ("public-https", "https://wiki.example.com", True),
    ("public-https", "http://wiki.example.com", False),
    ("public-https", "https://10.1.2.3", False),
    ("public-https", "https://169.254.169.254", False),
    ("public-https", "https://[::ffff:192.168.0.1]", False),
    ("public-https", "https://printer.local", False),
    ("public-https", "https://intranet", False),
    ("public-https", "https://8.8.8.8", True),
    ("public-https", "http://10.0.0.9:1", True),  # exact allowlisted origin passes every policy
])
def test_source_policy(policy: str, url: str, allowed: bool) -> None:
    rule = SourcePolicy(policy, ("http://127.0.0.1:8765", "http://10.0.0.9:1"))
    assert rule.allows(url) is allowed


def test_public_host_rules() -> None:
    assert not is_public_host("100.64.1.1") and not is_public_host("fe80::1")
    assert is_public_host("2606:4700::1")


def test_cors_policy() -> None:
    policy = BrowserPolicy(accepted_hosts=frozenset({"bridge.test"}), origins=("https://app.test",))
    assert policy.origin_allowed("http://bridge.test:8788")  # the page served under an accepted host
    assert policy.origin_allowed("https://app.test") and policy.origin_allowed("http://[::1]:3000")
    assert not policy.origin_allowed("https://evil.test") and not policy.origin_allowed("null")
