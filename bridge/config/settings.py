"""The bridge's one typed settings model: each field's type, default and the rule its values go through."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, PlainValidator

from bridge.config import rules
from bridge.config.rules import Given, SettingsError, Source, rule
from common.hosts import is_loopback_host, normalize_host

__all__ = ["BridgeSettings", "SettingsError", "check_bind_policy", "parse_setting"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8788
DEFAULT_BASE_URL = "http://127.0.0.1:8642/v1"
DEFAULT_MODEL = "hermes-agent"
DEFAULT_TIMEOUT_MS = 120_000
MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_SOURCES_PER_RUN = 32
DEFAULT_MAX_RUNTIME_ANSWER_BYTES = 4 * 1024 * 1024
# Relative to the working directory (contract 1.2); used only when the I/O log is on.
DEFAULT_IO_LOG_PATH = Path(".runtime-logs") / "llmwiki-agent-bridge-io.jsonl"
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
# The ACP agent the reference launches by default (contract 1.2); spawned without a shell.
DEFAULT_ACP_COMMAND = "npx"
DEFAULT_ACP_ARGS = ("--yes", "deepagents-acp")
IDENTITY_KEYS = ("runtimeId", "runtimeName", "runtime", "agentRuntime", "providerOrganization")

# Identity presets (contract 1.8). The profile picks the identity and the UI default model only.
PROFILES: dict[str, dict[str, str]] = {
    "hermes": {"runtimeId": "llmwiki-agent-bridge-hermes", "runtimeName": "LLMWiki Agent Bridge for Hermes",
               "runtime": "hermes", "agentRuntime": "hermes", "providerOrganization": "LLMWiki",
               "model": "hermes-agent"},
    "deepagents": {"runtimeId": "llmwiki-agent-bridge-deepagents",
                   "runtimeName": "LLMWiki DeepAgents Agent Bridge", "runtime": "deepagents",
                   "agentRuntime": "deepagents", "providerOrganization": "DeepAgents",
                   "model": "deepagents-local"},
    "generic": {"runtimeId": "llmwiki-agent-bridge-generic-openai-compatible",
                "runtimeName": "LLMWiki Generic OpenAI-Compatible Agent Bridge",
                "runtime": "generic-openai-compatible", "agentRuntime": "openai-compatible",
                "providerOrganization": "Generic OpenAI-Compatible", "model": "local-model"},
}

# The kinds of value, each with its one rule (bridge/config/rules.py).
Text = Annotated[str, rule(rules.text)]
OptionalText = Annotated[str | None, rule(rules.optional_text)]
Secret = Annotated[str | None, rule(rules.clearable_text)]
Flag = Annotated[bool, rule(rules.flag)]
Origins = Annotated[tuple[str, ...], rule(rules.origins)]
OptionalPath = Annotated[Path | None, rule(rules.path)]


def _number(low: int, high: int, phrase: str, *, optional: bool = False) -> PlainValidator:
    """The whole-number rule for one range; `optional` lets code leave the field None."""
    parse = rules.whole_number(low, high, phrase)
    if not optional:
        return rule(parse)
    return rule(lambda value, source: None if value is None and source == "option" else parse(value, source))


class BridgeSettings(BaseModel):
    """Every bridge setting. Built by `bridge.config.resolve` from the command line, environment and
    settings file, by `bridge.config.writes` from `PUT /settings/config.json`, or directly in code;
    a value from any of them goes through its field's rule. Frozen: a change is a new object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: Text = DEFAULT_HOST
    port: Annotated[int, _number(0, 65535, "must be an integer port from 0 to 65535")] = DEFAULT_PORT
    base_url: Text = DEFAULT_BASE_URL
    model: Text = DEFAULT_MODEL
    api_key: Secret = None
    runtime_profile: Annotated[str, rule(rules.runtime_profile)] = "hermes"
    runtime_adapter: Annotated[str, rule(rules.runtime_adapter)] = "chat-completions"
    # Identity overrides (contract 1.8): each one replaces its profile default when set.
    runtime_id: OptionalText = None
    runtime_name: OptionalText = None
    runtime: OptionalText = None
    agent_runtime: OptionalText = None
    provider_organization: OptionalText = None
    deepagents_acp_command: Text = DEFAULT_ACP_COMMAND
    # None: the default args (see acp_args)
    deepagents_acp_args: Annotated[tuple[str, ...] | None, rule(rules.command_args)] = None
    # None: the bridge's working directory
    deepagents_acp_cwd: Annotated[Path | None, rule(rules.directory)] = None
    bearer_token: Annotated[str | None, rule(rules.clearable_text, "bridgeBearerToken")] = None
    allow_public_bind: Flag = False
    allow_insecure_public_bind: Flag = False
    request_timeout_ms: Annotated[int, _number(1, 10**9, "must be a positive integer")] = DEFAULT_TIMEOUT_MS
    allowed_origins: Origins = ()
    # Host header names accepted besides loopback ones (normalized, no port): see accepted_hosts.
    allowed_hosts: Annotated[tuple[str, ...], rule(rules.hosts)] = ()
    source_policy: Annotated[str, rule(rules.source_policy)] = "private-http"
    allowed_source_origins: Annotated[tuple[str, ...], rule(rules.source_origins)] = ()
    fanout_concurrency: Annotated[int, _number(1, 64, "must be between 1 and 64")] = 4
    # Bounds on one run's work (docs/configuration.md): what a caller or a source can make it cost.
    max_sources_per_run: Annotated[int, _number(1, 1000, "must be between 1 and 1000")] = (
        DEFAULT_MAX_SOURCES_PER_RUN)
    # None: the request timeout
    run_deadline_ms: Annotated[int | None, _number(1, 10**9, "must be a positive integer",
                                                   optional=True)] = None
    max_runtime_answer_bytes: Annotated[int, _number(1024, 1 << 30,
                                                     "must be between 1024 and 1073741824")] = (
        DEFAULT_MAX_RUNTIME_ANSWER_BYTES)
    # Finished A2A tasks kept in memory for GetTask/ListTasks: at most this many, this long.
    a2a_max_tasks: Annotated[int, _number(0, 1_000_000, "must be between 0 and 1000000")] = 1000
    a2a_task_ttl_seconds: Annotated[int, _number(1, 2_592_000, "must be between 1 and 2592000")] = 3600
    # For requests that name no orchestration mode.
    default_mode: Annotated[str, rule(rules.orchestration_mode, "defaultOrchestrationMode")] = (
        "delegated-runtime")
    max_body_bytes: Annotated[int, _number(1024, 1 << 40, "must be at least 1024")] = MAX_BODY_BYTES
    config_path: OptionalPath = None
    log_level: Text = "info"
    log_format: Annotated[str, rule(rules.log_format)] = "auto"
    audit_log: Flag = False
    # Off by default, unlike the reference: the I/O log holds prompts, evidence and answers.
    io_log_mode: Annotated[str, rule(rules.io_log_mode)] = "off"
    io_log_path: OptionalPath = None
    # The bridge's address as its clients see it (behind a TLS proxy), for the agent card's URLs.
    public_url: Annotated[str | None, rule(rules.public_url)] = None
    # GET /metrics (Prometheus text format): off unless enabled (flag or environment only).
    metrics: Flag = False
    # On SIGTERM, requests in flight get this long to finish before they are cancelled.
    shutdown_timeout_ms: Annotated[int, _number(1, 3_600_000, "must be between 1 and 3600000")] = 10_000
    # Where base_url and model came from (option, env, settings or default): reported, not set.
    base_url_source: str = "default"
    model_source: str = "default"

    @property
    def timeout_seconds(self) -> float:
        return self.request_timeout_ms / 1000

    @property
    def shutdown_timeout_seconds(self) -> float:
        return self.shutdown_timeout_ms / 1000

    @property
    def run_deadline_seconds(self) -> float:
        """How long a run's source phase (discovery and fan-out) may take in all."""
        return (self.run_deadline_ms or self.request_timeout_ms) / 1000

    @property
    def public_bind(self) -> bool:
        return not is_loopback_host(self.host)

    @property
    def accepted_hosts(self) -> tuple[str, ...]:
        """The `Host` names the bridge answers besides `localhost`, 127.0.0.0/8 and ::1: the
        --allowed-host entries, a bind host that is not a wildcard, the --public-url host and the
        allowed browser origins' hosts. Anything else is a DNS-rebinding page (421)."""
        names = list(self.allowed_hosts)
        if self.host.strip().strip("[]") not in _WILDCARD_HOSTS:
            names.append(self.host)
        if self.public_url:
            names.append(urlsplit(self.public_url).hostname or "")
        names += [urlsplit(o).hostname or "" for o in self.allowed_origins]
        return tuple(dict.fromkeys(n for n in (normalize_host(h) for h in names if h) if n))

    @property
    def io_log_file(self) -> Path | None:
        """Where the I/O log is appended in `file` mode (relative paths from the working directory)."""
        if self.io_log_mode != "file":
            return None
        return Path.cwd() / (self.io_log_path or DEFAULT_IO_LOG_PATH)

    def observability(self) -> dict[str, Any]:
        return {"auditLog": self.audit_log, "ioLog": self.io_log_mode != "off", "ioLogMode": self.io_log_mode,
                "ioLogPathConfigured": self.io_log_path is not None}

    def identity(self) -> dict[str, str]:
        """The profile's identity with each explicit override applied on top."""
        preset = PROFILES[self.runtime_profile]
        overrides = (self.runtime_id, self.runtime_name, self.runtime, self.agent_runtime,
                     self.provider_organization)
        return {key: value or preset[key] for key, value in zip(IDENTITY_KEYS, overrides, strict=True)}

    @property
    def acp_args(self) -> tuple[str, ...]:
        """A configured command takes its args as given; the default command its default args."""
        if self.deepagents_acp_args is not None:
            return self.deepagents_acp_args
        return DEFAULT_ACP_ARGS if self.deepagents_acp_command == DEFAULT_ACP_COMMAND else ()


def build_settings(values: dict[str, Any], given: dict[str, Given] | None = None) -> BridgeSettings:
    """The one way values become settings: each through its field's rule, told by `given` which
    source each value came from (a value not named there is the caller's code)."""
    return BridgeSettings.model_validate(values, context={"given": given or {}})


def parse_setting(name: str, value: Any, source: Source = "option") -> Any:
    """One field's value through its rule, as if given by `source` (the command line's flags are
    read this way)."""
    given = {name: Given(source, name)} if source != "option" else {}
    return getattr(build_settings({name: value}, given), name)


def check_bind_policy(settings: BridgeSettings) -> None:
    """A non-loopback bind needs an explicit opt-in and (unless insecure is allowed) a bearer token."""
    if not settings.public_bind:
        return
    if not settings.allow_public_bind:
        raise SettingsError(
            f"Refusing to bind non-loopback host {settings.host} without "
            "LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND=1 (--allow-public-bind).")
    if not settings.bearer_token and not settings.allow_insecure_public_bind:
        raise SettingsError(
            "A non-loopback bind needs LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN (--bearer-token), or "
            "LLMWIKI_AGENT_BRIDGE_ALLOW_INSECURE_PUBLIC_BIND=1 for development only.")
