"""Settings written over HTTP: `PUT /settings/config.json` and `PUT /settings/sources.json`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bridge.config.registry import (
    SourceDescriptor,
    SourceValidationError,
    normalize_registered,
    settings_view,
    stored_form,
)
from bridge.config.resolve import OPTIONS_BY_NAME
from bridge.config.rules import Given, SettingsError
from bridge.config.settings import (
    DEFAULT_MODEL,
    IDENTITY_KEYS,
    PROFILES,
    BridgeSettings,
    build_settings,
    check_bind_policy,
)
from bridge.config.store import SettingsFileError, SettingsStore
from bridge.support.auth import bearer_matches
from bridge.support.errors import BridgeError, FailureKind

IDENTITY_FIELDS = ("runtime_id", "runtime_name", "runtime", "agent_runtime", "provider_organization")
RESTART_ONLY = ("host", "port")  # saved for the next start, never applied live (contract 1.6)


@dataclass(frozen=True)
class Writable:
    """A setting the body may change: its settings-file keys are its body keys (the first one
    present wins), plus `more_keys`; `applied` lists it under its first key plus `also_applied`."""

    name: str
    more_keys: tuple[str, ...] = ()
    also_applied: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return (*OPTIONS_BY_NAME[self.name].file_keys, *self.more_keys)

    @property
    def applied(self) -> tuple[str, ...]:
        if self.name == "io_log_mode":
            return ("ioLog", "ioLogMode")
        return (self.keys[0], *self.also_applied)

    def saved(self, value: Any) -> dict[str, Any]:
        """The file's form: lists for origin lists, `""` for a cleared secret; the I/O log keeps
        the reference's `ioLog` boolean beside the mode."""
        if self.name == "io_log_mode":
            return {"ioLog": value != "off", "ioLogMode": value}
        if isinstance(value, tuple):
            value = list(value)
        return {self.keys[0]: "" if value is None else value}


# In the order `applied` lists them (after the profile, which comes first).
WRITABLE = (
    Writable("runtime_adapter"),
    *(Writable(name) for name in IDENTITY_FIELDS),  # after the profile: an explicit value wins
    Writable("base_url", also_applied=("hermesBaseUrl",)),
    Writable("api_key"),
    Writable("model", also_applied=("hermesModel",)),
    Writable("request_timeout_ms", ("timeoutMs",)),
    Writable("fanout_concurrency"),
    Writable("allowed_origins"),
    Writable("allowed_source_origins"),
    Writable("source_policy"),
    Writable("audit_log"),
    Writable("io_log_mode"),
    Writable("bearer_token", ("bearerToken",)),
    Writable("allow_public_bind"),
    Writable("allow_insecure_public_bind"),
)
_PROFILE = Writable("runtime_profile")
_BY_NAME = {w.name: w for w in (_PROFILE, *WRITABLE, *(Writable(name) for name in RESTART_ONLY))}
TOKEN_KEYS = _BY_NAME["bearer_token"].keys

# Settings that name a file to write or a program to run, or widen the Host check: set by the
# operator when the bridge starts, never over HTTP, where whoever reaches the settings endpoint
# could point the bridge at any path on the machine.
OPERATOR_ONLY_KEYS = {
    "ioLogPath": "--io-log-path or LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH",
    "configPath": "--config or LLMWIKI_AGENT_BRIDGE_CONFIG_PATH",
    "allowedHosts": "--allowed-host or LLMWIKI_AGENT_BRIDGE_ALLOWED_HOSTS",
    "deepagentsAcpCommand": "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_COMMAND",
    "deepagentsAcpArgs": "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_ARGS",
    "deepagentsAcpCwd": "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_CWD",
}


def operator_only_refusal(raw: Mapping[str, Any]) -> str | None:
    """The 400 message for a settings write over HTTP that names an operator-only key, else None."""
    key = next((k for k in OPERATOR_ONLY_KEYS if k in raw), None)
    if key is None:
        return None
    return f"{key} cannot be set over HTTP; set it with {OPERATOR_ONLY_KEYS[key]} when starting the bridge."


@dataclass(frozen=True)
class ConfigChange:
    """What one `PUT /settings/config.json` body does: the live settings after it, the patch of
    the file's `config`, and the `applied` and `restartRequired` lists of the answer."""

    settings: BridgeSettings
    persisted: dict[str, Any]
    applied: list[str]
    restart: list[str]


def config_change(raw: Mapping[str, Any], current: BridgeSettings) -> ConfigChange:
    """Each recognised key's value through its field's rule (as the flags, environment and file
    values go), then the contract's effects (2.6.5). Raises SettingsError naming the key given."""
    values: dict[str, Any] = {}
    given: dict[str, Given] = {}
    for name, writable in _BY_NAME.items():
        key = next((k for k in writable.keys if k in raw), None)
        if key is not None:
            values[name], given[name] = raw[key], Given("http", key)
    profile = "runtime_profile" in given
    if profile:  # a profile resets the identity to its defaults; a key in the same body still wins
        for name in IDENTITY_FIELDS:
            values.setdefault(name, None)
    for name in ("base_url", "model"):
        if name in given:
            values[f"{name}_source"] = "settings"
    checked = build_settings(values, given)
    update = {name: getattr(checked, name) for name in values}
    persisted: dict[str, Any] = {}
    applied: list[str] = []
    if profile:
        chosen = update["runtime_profile"]
        persisted.update(runtimeProfile=chosen, **{k: PROFILES[chosen][k] for k in IDENTITY_KEYS})
        applied += ["runtimeProfile", *IDENTITY_KEYS]
        if chosen != current.runtime_profile and not current.model and "model" not in given:
            # A new profile on a bridge with no model gets the default one (as the reference).
            update.update(model=DEFAULT_MODEL, model_source="default")
            persisted["model"] = DEFAULT_MODEL
            applied += ["model", "hermesModel"]
    for writable in WRITABLE:
        if writable.name in given:
            persisted.update(writable.saved(update[writable.name]))
            applied += [name for name in writable.applied if name not in applied]
    restart: list[str] = []
    for name in RESTART_ONLY:
        if name in given:
            persisted[name] = update.pop(name)
            if _restart_key(persisted[name]) != _restart_key(getattr(current, name)):
                restart.append(name)
    return ConfigChange(current.model_copy(update=update), persisted, applied, restart)


def _restart_key(value: Any) -> Any:
    """Hosts compare case-insensitively without brackets or a trailing dot (contract 1.6)."""
    return value.strip().strip("[]").rstrip(".").lower() if isinstance(value, str) else value


class LiveSettings(Protocol):
    """What the writes change: the bridge's live settings, registry and settings file."""

    settings: BridgeSettings
    sources: list[SourceDescriptor]
    store: SettingsStore | None
    settings_file_status: str

    def persistence(self) -> dict[str, Any]: ...

    def settings_document(self, host_header: str | None = None) -> dict[str, Any]: ...


def require_store(live: LiveSettings) -> SettingsStore:
    if live.store is None:
        raise _refused("conflict", "settings_persistence_disabled",
                         "Settings persistence is not enabled. Start the bridge with "
                         "LLMWIKI_AGENT_BRIDGE_CONFIG_PATH (or --config).")
    return live.store


def persist(live: LiveSettings, config: dict[str, Any] | None = None,
            sources: list[dict[str, Any]] | None = None) -> None:
    store = require_store(live)
    try:
        store.write(config, sources)
    except SettingsFileError:
        live.settings_file_status = store.status
        raise _refused("failed", "settings_persist_failed",
                         "The settings file could not be read, so it was left unchanged.") from None
    except OSError:
        raise _refused("failed", "settings_persist_failed", "Settings could not be saved.") from None
    live.settings_file_status = store.status


def put_config(live: LiveSettings, body: Any, host_header: str | None = None,
               authorization: str | None = None) -> dict[str, Any]:
    """`PUT /settings/config.json`. `authorization` is the request's header: replacing or
    clearing a configured bearer token needs it to carry that token (checked here as well as
    by the pipeline, so no route to this function can skip it)."""
    require_store(live)
    if not isinstance(body, dict):
        raise _refused("rejected", "bad_request", "Settings config body must be a JSON object.")
    raw = body["config"] if isinstance(body.get("config"), dict) else body
    token = live.settings.bearer_token
    if token and any(k in raw for k in TOKEN_KEYS) and not bearer_matches(authorization, token):
        raise _refused("unauthorized", "bridge_unauthorized",
                         "The current bridge bearer token is required to change it.")
    refused = operator_only_refusal(raw)
    if refused is not None:
        raise _refused("rejected", "invalid_bridge_settings", refused)
    try:
        change = config_change(raw, live.settings)
        check_bind_policy(change.settings)  # the running host with the new token and flags
    except SettingsError as exc:
        raise _refused("rejected", "invalid_bridge_settings", str(exc)) from None
    persist(live, config=change.persisted)
    live.settings = change.settings
    return {"status": "saved", "applied": change.applied, "restartRequired": change.restart,
            "settings": live.settings_document(host_header), "persistence": live.persistence()}


def put_sources(live: LiveSettings, body: Any) -> dict[str, Any]:
    """`PUT /settings/sources.json`: the whole registry replaced, live and in the file."""
    require_store(live)
    try:
        sources = normalize_registered(body)
    except SourceValidationError as exc:
        raise _refused("rejected", "bad_request", str(exc)) from None
    except ValueError as exc:  # DuplicateSourceError
        raise _refused("conflict", "duplicate_source_id", str(exc)) from None
    sources = _keep_redacted_roots(sources, live.sources)
    persist(live, sources=[stored_form(s) for s in sources])
    live.sources = sources
    return {"status": "saved", "sources": [settings_view(s) for s in sources],
            "persistence": live.persistence()}


def _keep_redacted_roots(sources: list[SourceDescriptor], saved: list[SourceDescriptor]
                         ) -> list[SourceDescriptor]:
    """Views show an absolute root only as its folder name, so an entry sent back unchanged (same
    id, URL and label, no root) keeps the root on file instead of losing it."""
    by_id = {s.id: s for s in saved if s.root}
    kept: list[SourceDescriptor] = []
    for source in sources:
        old = by_id.get(source.id)
        if (old is not None and not source.root and source.url == old.url
                and source.root_label in ("", old.root_label)):
            source = dataclasses.replace(source, root=old.root, root_label=old.root_label)
        kept.append(source)
    return kept


def _refused(kind: FailureKind, code: str, message: str) -> BridgeError:
    return BridgeError(code, message, kind)
