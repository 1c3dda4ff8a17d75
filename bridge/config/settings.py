"""The bridge's one typed settings object, resolved as: option > environment > settings file > default."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bridge.hosts import host_of_authority, is_loopback_host, normalize_host
from common.options import Option, parse_public_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8788
DEFAULT_BASE_URL = "http://127.0.0.1:8642/v1"
DEFAULT_TIMEOUT_MS = 120_000
MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_SOURCES_PER_RUN = 32
DEFAULT_MAX_RUNTIME_ANSWER_BYTES = 4 * 1024 * 1024
SOURCE_POLICIES = ("private-http", "allowlist", "public-https")
IO_LOG_MODES = ("off", "file", "logger")
# Relative to the working directory (contract 1.2); used only when the I/O log is on.
DEFAULT_IO_LOG_PATH = Path(".runtime-logs") / "llmwiki-agent-bridge-io.jsonl"
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
ORCHESTRATION_MODES = ("evidence-only", "delegated-runtime", "hybrid")
RUNTIME_ADAPTERS = ("chat-completions", "deepagents-acp")
_ADAPTER_ALIASES = {"chatcompletions": "chat-completions", "openai": "chat-completions",
                    "openaicompatible": "chat-completions", "deepagentsacp": "deepagents-acp",
                    "acp": "deepagents-acp"}
# The ACP agent the reference launches by default (contract 1.2); spawned without a shell.
DEFAULT_ACP_COMMAND = "npx"
DEFAULT_ACP_ARGS = ("--yes", "deepagents-acp")
IDENTITY_KEYS = ("runtimeId", "runtimeName", "runtime", "agentRuntime", "providerOrganization")
_POLICY_ALIASES = {"private-http": "private-http", "default": "private-http", "open": "private-http",
                   "allowlist": "allowlist", "public-https": "public-https"}

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


class SettingsError(ValueError):
    """A setting is invalid or the bind policy refuses it; the message names the setting."""


@dataclass(frozen=True)
class BridgeSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    base_url: str = DEFAULT_BASE_URL
    model: str = "hermes-agent"
    api_key: str | None = None
    runtime_profile: str = "hermes"
    runtime_adapter: str = "chat-completions"
    # Identity overrides (contract 1.8): each one replaces its profile default when set.
    runtime_id: str | None = None
    runtime_name: str | None = None
    runtime: str | None = None
    agent_runtime: str | None = None
    provider_organization: str | None = None
    deepagents_acp_command: str = DEFAULT_ACP_COMMAND
    deepagents_acp_args: tuple[str, ...] | None = None  # None: the default args
    deepagents_acp_cwd: Path | None = None  # None: the bridge's working directory
    bearer_token: str | None = None
    allow_public_bind: bool = False
    allow_insecure_public_bind: bool = False
    request_timeout_ms: int = DEFAULT_TIMEOUT_MS
    allowed_origins: tuple[str, ...] = ()
    # Host header names accepted besides loopback ones (normalized, no port): see accepted_hosts.
    allowed_hosts: tuple[str, ...] = ()
    source_policy: str = "private-http"
    allowed_source_origins: tuple[str, ...] = ()
    fanout_concurrency: int = 4
    # Bounds on one run's work (docs/configuration.md): what a caller or a source can make it cost.
    max_sources_per_run: int = DEFAULT_MAX_SOURCES_PER_RUN
    run_deadline_ms: int | None = None  # None: the request timeout
    max_runtime_answer_bytes: int = DEFAULT_MAX_RUNTIME_ANSWER_BYTES
    default_mode: str = "delegated-runtime"  # for requests that name no orchestration mode
    max_body_bytes: int = MAX_BODY_BYTES
    config_path: Path | None = None
    log_level: str = "info"
    log_format: str = "auto"
    audit_log: bool = False
    # Off by default, unlike the reference: the I/O log holds prompts, evidence and answers.
    io_log_mode: str = "off"
    io_log_path: Path | None = None
    # The bridge's address as its clients see it (behind a TLS proxy), for the agent card's URLs.
    public_url: str | None = None
    # Where base_url and model came from (option, env, settings or default): reported, not set.
    base_url_source: str = "default"
    model_source: str = "default"

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise SettingsError("port must be an integer between 0 and 65535.")
        if (isinstance(self.request_timeout_ms, bool) or not isinstance(self.request_timeout_ms, int)
                or self.request_timeout_ms <= 0):
            raise SettingsError("requestTimeoutMs must be a positive integer.")
        if not 1 <= self.fanout_concurrency <= 64:
            raise SettingsError("fanoutConcurrency must be between 1 and 64.")
        if not 1 <= self.max_sources_per_run <= 1000:
            raise SettingsError("maxSourcesPerRun must be between 1 and 1000.")
        if self.run_deadline_ms is not None and not 1 <= self.run_deadline_ms <= 10**9:
            raise SettingsError("runDeadlineMs must be a positive integer.")
        if not 1024 <= self.max_runtime_answer_bytes <= 1 << 30:
            raise SettingsError("maxRuntimeAnswerBytes must be between 1024 and 1073741824.")
        if self.default_mode not in ORCHESTRATION_MODES:
            raise SettingsError("defaultOrchestrationMode must be one of: "
                                f"{', '.join(ORCHESTRATION_MODES)}.")
        if self.source_policy not in SOURCE_POLICIES:
            raise SettingsError(f"Unsupported LLMWiki Agent Bridge source policy: {self.source_policy}.")
        if self.runtime_profile not in PROFILES:
            raise SettingsError(f"Unsupported LLMWiki Agent Bridge runtime profile: {self.runtime_profile}.")
        if self.runtime_adapter not in RUNTIME_ADAPTERS:
            raise SettingsError(f"Unsupported LLMWiki Agent Bridge runtime adapter: {self.runtime_adapter}.")
        if self.max_body_bytes < 1024:
            raise SettingsError("max_body_bytes must be at least 1024.")
        if self.log_format not in ("auto", "json", "console"):
            raise SettingsError("log_format must be auto, json or console.")
        if self.io_log_mode not in IO_LOG_MODES:
            raise SettingsError(f"Unsupported LLMWiki Agent Bridge I/O log mode: {self.io_log_mode}.")

    @property
    def timeout_seconds(self) -> float:
        return self.request_timeout_ms / 1000

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


# ----------------------------------------------------------------------------- parsers

def _text(value: str) -> str:
    return value.strip()


def parse_int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError("must be an integer") from None


def parse_env_bool(value: str) -> bool:
    """Contract 1.3: 1/true/yes/on are true, anything else non-empty is false."""
    return value.strip().lower() in ("1", "true", "yes", "on")


def parse_policy(value: str) -> str:
    policy = _POLICY_ALIASES.get(value.strip().lower())
    if policy is None:
        raise ValueError(f"Unsupported LLMWiki Agent Bridge source policy: {value.strip()}.")
    return policy


def parse_mode(value: str) -> str:
    mode = value.strip().lower()
    if mode not in ORCHESTRATION_MODES:
        raise ValueError(f"defaultOrchestrationMode must be one of: {', '.join(ORCHESTRATION_MODES)}.")
    return mode


def parse_io_log_mode(value: str | bool) -> str:
    """Contract 1.3: off/file/logger and their aliases; JSON true is `file`, false is `off`."""
    if isinstance(value, bool):
        return "file" if value else "off"
    key = value.strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    for mode, aliases in (("off", ("0", "false", "no", "off", "disable", "disabled", "none")),
                          ("file", ("1", "true", "yes", "on", "file", "jsonl")),
                          ("logger", ("logger", "log", "stdout"))):
        if key in aliases:
            return mode
    raise ValueError(f"Unsupported LLMWiki Agent Bridge I/O log mode: {value.strip()}.")


def parse_profile(value: str) -> str:
    key = value.strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    profile = {"hermes": "hermes", "deepagents": "deepagents", "generic": "generic",
               "openaicompatible": "generic"}.get(key)
    if profile is None:
        raise ValueError(f"Unsupported LLMWiki Agent Bridge runtime profile: {value.strip()}.")
    return profile


def parse_adapter(value: str) -> str:
    """Contract 1.3: spaces, `_` and `-` ignored, any case; `openai`/`acp` and the like are aliases."""
    key = value.strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    adapter = _ADAPTER_ALIASES.get(key)
    if adapter is None:
        raise ValueError(f"Unsupported LLMWiki Agent Bridge runtime adapter: {value.strip()}.")
    return adapter


def parse_command_args(value: str) -> tuple[str, ...]:
    """A JSON string array (when it starts with `[`) or a whitespace-separated list with quotes."""
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise ValueError("must be a JSON array of strings") from None
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise ValueError("must be a JSON array of strings")
        return tuple(parsed)
    try:
        return tuple(shlex.split(text))
    except ValueError:
        raise ValueError("has an unclosed quote") from None


def normalize_origin(value: str, *, http_only: bool = False) -> str | None:
    """`scheme://host[:port]` with the default port dropped; None for unusable entries."""
    text = value.strip()
    if not text or text == "null":
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or "@" in parts.netloc:
        return None
    scheme = parts.scheme.lower()
    if http_only and scheme not in ("http", "https"):
        return None
    host = normalize_host(parts.hostname)  # compared as the network sees it (IDNA, canonical IPs)
    if host is None:
        return None
    if ":" in host:
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default_port else "")


def parse_origins(value: str | list[Any] | tuple[Any, ...]) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(dict.fromkeys(o for o in (normalize_origin(i) for i in items) if o))


def parse_hosts(value: str | list[Any] | tuple[Any, ...]) -> tuple[str, ...]:
    """Host names (a port, if given, is ignored), normalized; an entry that is not one is an error."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    hosts: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host = host_of_authority(item)
        if host is None:
            raise ValueError(f"allowed host is not a host name: {item}")
        hosts.append(host)
    return tuple(dict.fromkeys(hosts))


def parse_source_origins(value: str | list[Any] | tuple[Any, ...]) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(dict.fromkeys(o for o in (normalize_origin(i, http_only=True) for i in items) if o))


def _option(name: str, flag: str, env: str, parse: Callable[[str], Any], help: str,
            legacy_env: tuple[str, ...] = (), file_keys: tuple[str, ...] = (),
            is_flag: bool = False, secret: bool = False) -> Option:
    """The bridge's table lists legacy names and settings-file keys positionally."""
    return Option(name, flag, env, parse, help, is_flag=is_flag, legacy_env=legacy_env,
                  file_keys=file_keys, secret=secret)


OPTIONS: tuple[Option, ...] = (
    _option("host", "--host", "LLMWIKI_AGENT_BRIDGE_HOST", _text,
           "Address to bind (default 127.0.0.1). A non-loopback address needs --allow-public-bind "
           "and a bearer token.", ("HERMES_A2A_BRIDGE_HOST", "HOST"), ("host",)),
    _option("port", "--port", "LLMWIKI_AGENT_BRIDGE_PORT", parse_int,
           "Port to bind (0..65535, default 8788; 0 picks a free port).",
           ("HERMES_A2A_BRIDGE_PORT", "PORT"), ("port",)),
    _option("base_url", "--base-url", "LLMWIKI_AGENT_BRIDGE_BASE_URL", _text,
           "OpenAI-compatible runtime base URL (default http://127.0.0.1:8642/v1; called by "
           "delegated-runtime and hybrid runs only).", ("HERMES_BASE_URL",),
           ("baseUrl", "agentBaseUrl", "hermesBaseUrl")),
    _option("model", "--model", "LLMWIKI_AGENT_BRIDGE_MODEL", _text,
           "Runtime model name (default hermes-agent).", ("HERMES_MODEL",),
           ("model", "agentModel", "hermesModel")),
    _option("api_key", "--api-key", "LLMWIKI_AGENT_BRIDGE_API_KEY", _text,
           "Runtime API key, sent only to the runtime (never shown by the bridge).",
           ("HERMES_API_KEY",), ("apiKey", "agentApiKey", "hermesApiKey"), secret=True),
    _option("runtime_profile", "--runtime-profile", "LLMWIKI_AGENT_BRIDGE_RUNTIME_PROFILE", parse_profile,
           "Runtime identity preset: hermes (default), deepagents or generic.",
           ("HERMES_A2A_BRIDGE_RUNTIME_PROFILE",), ("runtimeProfile",)),
    _option("runtime_adapter", "--runtime-adapter", "LLMWIKI_AGENT_BRIDGE_RUNTIME_ADAPTER", parse_adapter,
           "How the runtime is called: chat-completions (default, OpenAI-compatible) or deepagents-acp "
           "(a DeepAgents ACP agent launched per run over stdio).",
           ("HERMES_A2A_BRIDGE_RUNTIME_ADAPTER",), ("runtimeAdapter",)),
    _option("runtime_id", "--runtime-id", "LLMWIKI_AGENT_BRIDGE_RUNTIME_ID", _text,
           "Runtime id reported by the agent card, /health and /settings.json (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME_ID",), ("runtimeId",)),
    _option("runtime_name", "--runtime-name", "LLMWIKI_AGENT_BRIDGE_RUNTIME_NAME", _text,
           "Runtime name, the agent card's name (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME_NAME",), ("runtimeName",)),
    _option("runtime", "--runtime", "LLMWIKI_AGENT_BRIDGE_RUNTIME", _text,
           "Runtime label of the agent card (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME",), ("runtime",)),
    _option("agent_runtime", "--agent-runtime", "LLMWIKI_AGENT_BRIDGE_AGENT_RUNTIME", _text,
           "Agent runtime label of the agent card and /health (default: the profile's).",
           ("HERMES_A2A_BRIDGE_AGENT_RUNTIME",), ("agentRuntime",)),
    _option("provider_organization", "--provider-organization",
           "LLMWIKI_AGENT_BRIDGE_PROVIDER_ORGANIZATION", _text,
           "Provider organization of the agent card (default: the profile's).",
           ("HERMES_A2A_BRIDGE_PROVIDER_ORGANIZATION",), ("providerOrganization",)),
    _option("deepagents_acp_command", "--deepagents-acp-command",
           "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_COMMAND", _text,
           "Executable of the deepagents-acp adapter, run without a shell (default npx)."),
    _option("deepagents_acp_args", "--deepagents-acp-args", "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_ARGS",
           parse_command_args,
           "Its arguments: a JSON string array or a quoted, space-separated list (default "
           "--yes deepagents-acp with the default command, none with another)."),
    _option("deepagents_acp_cwd", "--deepagents-acp-cwd", "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_CWD",
           lambda v: Path(v.strip()).expanduser().resolve(),
           "Working directory of the ACP agent and its session (default: the bridge's)."),
    _option("bearer_token", "--bearer-token", "LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN", _text,
           "When set, every bridge request needs `Authorization: Bearer <token>`.",
           ("HERMES_A2A_BRIDGE_BEARER_TOKEN",), ("bridgeBearerToken",), secret=True),
    _option("allow_public_bind", "--allow-public-bind", "LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND",
           parse_env_bool, "Opt in to binding a non-loopback address (a bearer token is also needed).",
           ("HERMES_A2A_BRIDGE_ALLOW_PUBLIC_BIND",), ("allowPublicBind",), is_flag=True),
    _option("allow_insecure_public_bind", "--allow-insecure-public-bind",
           "LLMWIKI_AGENT_BRIDGE_ALLOW_INSECURE_PUBLIC_BIND", parse_env_bool,
           "Allow a non-loopback bind without a bearer token (development only).",
           ("HERMES_A2A_BRIDGE_ALLOW_INSECURE_PUBLIC_BIND",), ("allowInsecurePublicBind",), is_flag=True),
    _option("request_timeout_ms", "--timeout-ms", "LLMWIKI_AGENT_BRIDGE_TIMEOUT_MS", parse_int,
           "Timeout of every source call and runtime request, in milliseconds (default 120000).",
           ("HERMES_A2A_BRIDGE_TIMEOUT_MS",), ("requestTimeoutMs",)),
    _option("allowed_origins", "--allowed-origin", "LLMWIKI_AGENT_BRIDGE_ALLOWED_ORIGINS", parse_origins,
           "Extra browser origin allowed by CORS (repeatable; env is comma-separated). Loopback "
           "origins are always allowed.", ("HERMES_A2A_BRIDGE_ALLOWED_ORIGINS",), ("allowedOrigins",)),
    _option("allowed_hosts", "--allowed-host", "LLMWIKI_AGENT_BRIDGE_ALLOWED_HOSTS", parse_hosts,
           "Extra Host header name the bridge answers (repeatable; env is comma-separated). "
           "Loopback names, a non-wildcard bind host, the --public-url host and allowed origins' "
           "hosts are always accepted; any other Host gets 421.", (), ("allowedHosts",)),
    _option("source_policy", "--source-policy", "LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY", parse_policy,
           "Which source URLs may be called: private-http (default), allowlist or public-https.",
           ("HERMES_A2A_BRIDGE_SOURCE_POLICY",), ("sourcePolicy",)),
    _option("allowed_source_origins", "--allowed-source-origin",
           "LLMWIKI_AGENT_BRIDGE_ALLOWED_SOURCE_ORIGINS", parse_source_origins,
           "Source origin admitted under every policy (repeatable; env is comma-separated).",
           ("HERMES_A2A_BRIDGE_ALLOWED_SOURCE_ORIGINS",), ("allowedSourceOrigins",)),
    _option("fanout_concurrency", "--fanout-concurrency", "LLMWIKI_AGENT_BRIDGE_FANOUT_CONCURRENCY",
           parse_int, "Most sources queried at once (1..64, default 4).", (), ("fanoutConcurrency",)),
    _option("max_sources_per_run", "--max-sources-per-run", "LLMWIKI_AGENT_BRIDGE_MAX_SOURCES_PER_RUN",
           parse_int, "Most Knowledge Sources one run may call (1..1000, default 32); a request naming "
           "more is refused with 400.", (), ("maxSourcesPerRun",)),
    _option("run_deadline_ms", "--run-deadline-ms", "LLMWIKI_AGENT_BRIDGE_RUN_DEADLINE_MS", parse_int,
           "Deadline of a run's source calls as a whole, in milliseconds (default: the timeout); "
           "sources still out then are failed steps and the run answers with the rest.", (),
           ("runDeadlineMs",)),
    _option("max_runtime_answer_bytes", "--max-runtime-answer-bytes",
           "LLMWIKI_AGENT_BRIDGE_MAX_RUNTIME_ANSWER_BYTES", parse_int,
           "Largest runtime (chat completions) answer accepted, in bytes (default 4194304); a larger "
           "one fails the runtime call.", (), ("maxRuntimeAnswerBytes",)),
    _option("default_mode", "--default-mode", "LLMWIKI_AGENT_BRIDGE_DEFAULT_MODE", parse_mode,
           "Orchestration mode for requests that name none: delegated-runtime (default, as the "
           "contract says), evidence-only or hybrid.", (), ("defaultOrchestrationMode",)),
    _option("config_path", "--config", "LLMWIKI_AGENT_BRIDGE_CONFIG_PATH", lambda v: Path(v.strip()),
           "Settings file (default $XDG_CONFIG_HOME/llmwiki-agent-bridge/settings.json).",
           ("HERMES_A2A_BRIDGE_CONFIG_PATH",)),
    _option("log_level", "--log-level", "LLMWIKI_AGENT_BRIDGE_LOG_LEVEL", _text,
           "debug, info, warning or error (default info)."),
    _option("log_format", "--log-format", "LLMWIKI_AGENT_BRIDGE_LOG_FORMAT", _text,
           "auto (JSON unless stderr is a terminal), json or console."),
    _option("public_url", "--public-url", "LLMWIKI_AGENT_BRIDGE_PUBLIC_URL", parse_public_url,
           "The bridge's URL as clients reach it (e.g. https://bridge.example.org behind a TLS proxy); "
           "the agent card's absolute URLs start with it instead of the request's scheme and Host."),
    _option("audit_log", "--audit-log", "LLMWIKI_AGENT_BRIDGE_AUDIT_LOG", parse_env_bool,
           "Write the safe request audit log: one JSON line per request to stdout, counts and flags "
           "only (off by default).", (), ("auditLog", "auditLogEnabled"), is_flag=True),
    _option("io_log_mode", "--io-log", "LLMWIKI_AGENT_BRIDGE_IO_LOG", parse_io_log_mode,
           "I/O debug log of requests, source and runtime calls, redacted: off (default), file or "
           "logger (stdout). It holds prompts, evidence and answers.", (),
           ("ioLogMode", "ioLog", "ioLogEnabled")),
    _option("io_log_path", "--io-log-path", "LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH", lambda v: Path(v.strip()),
           "File of the I/O log in file mode (default .runtime-logs/llmwiki-agent-bridge-io.jsonl in "
           "the working directory); setting it alone turns the file log on. Flag or environment only: "
           "neither the settings file nor the settings page can name a file to write.", ()),
)
OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}
REPORTED_FIELDS = frozenset({"base_url_source", "model_source", "max_body_bytes"})


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`%APPDATA%` on Windows, else `$XDG_CONFIG_HOME` (or ~/.config); then the bridge's settings.json."""
    env = os.environ if env is None else env
    if sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    elif env.get("XDG_CONFIG_HOME"):
        base = Path(env["XDG_CONFIG_HOME"])
    else:
        base = Path.home() / ".config"
    return base / "llmwiki-agent-bridge" / "settings.json"


def config_path_from(cli: Mapping[str, Any], env: Mapping[str, str]) -> Path:
    """The settings file the CLI uses: --config, then the environment, then the default path."""
    given = cli.get("config_path")
    if given:
        return Path(given).expanduser()
    for name in ("LLMWIKI_AGENT_BRIDGE_CONFIG_PATH", "HERMES_A2A_BRIDGE_CONFIG_PATH"):
        if env.get(name, "").strip():
            return Path(env[name].strip()).expanduser()
    return default_config_path(env)


_LIST_OPTIONS = ("allowed_origins", "allowed_hosts", "allowed_source_origins")


def _from_file(option: Option, raw: Any) -> Any:
    """A settings-file value: JSON types are taken as they are; strings go through the parser."""
    if option.name == "io_log_mode" and isinstance(raw, bool):
        return parse_io_log_mode(raw)
    if option.name in ("allow_public_bind", "allow_insecure_public_bind", "audit_log"):
        if not isinstance(raw, bool):
            raise ValueError("must be a JSON boolean")
        return raw
    if option.name in _LIST_OPTIONS and isinstance(raw, list):
        return option.parse(",".join(str(v) for v in raw))
    if isinstance(raw, bool):
        raise ValueError("has the wrong type")
    if isinstance(raw, int) and option.name in ("port", "request_timeout_ms", "fanout_concurrency",
                                                "max_sources_per_run", "run_deadline_ms",
                                                "max_runtime_answer_bytes"):
        return raw
    if not isinstance(raw, str):
        raise ValueError("has the wrong type")
    return option.parse(raw)


def resolve_settings(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                     file_config: Mapping[str, Any] | None = None) -> BridgeSettings:
    """Resolve every option: a CLI/programmatic value wins, then `LLMWIKI_AGENT_BRIDGE_*`, then the
    legacy aliases, then the settings file's `config`, then the default. Empty strings are unset."""
    cli = cli or {}
    env = os.environ if env is None else env
    file_config = file_config or {}
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for option in OPTIONS:
        given = cli.get(option.name)
        if given is not None and given != () and given != "" and not (option.is_flag and given is False):
            values[option.name] = tuple(given) if isinstance(given, list) else given
            origin[option.name] = "option"
            continue
        for name in (option.env, *option.legacy_env):
            raw = env.get(name)
            if raw is None or not raw.strip():
                continue
            try:
                values[option.name] = option.parse(raw)
            except ValueError as exc:
                raise SettingsError(f"{name} {exc}" if str(exc).startswith("must") else str(exc)) from None
            origin[option.name] = "env"
            break
        else:
            for key in option.file_keys:
                raw = file_config.get(key)
                if raw is None or (isinstance(raw, str) and not raw.strip()):
                    continue
                try:
                    values[option.name] = _from_file(option, raw)
                except ValueError as exc:
                    raise SettingsError(f"settings file config.{key} {exc}") from None
                origin[option.name] = "settings"
                break
    if "config_path" in values:
        values["config_path"] = Path(values["config_path"]).expanduser()
    if "io_log_path" in values:
        values["io_log_path"] = Path(values["io_log_path"]).expanduser()
        values.setdefault("io_log_mode", "file")  # a path alone turns the file log on (contract 1.3)
    values["base_url_source"] = origin.get("base_url", "default")
    values["model_source"] = origin.get("model", "default")
    known = {f.name for f in fields(BridgeSettings)}
    return BridgeSettings(**{k: v for k, v in values.items() if k in known})


TOKEN_KEYS = ("bridgeBearerToken", "bearerToken")
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
