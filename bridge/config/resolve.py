"""How each bridge setting is given (flag, environment, settings file) and the one function that
resolves them: option > environment > legacy alias > settings file > default."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bridge.config.rules import Given
from bridge.config.settings import BridgeSettings, build_settings, parse_setting
from bridge.config.store import SettingsStore
from common.options import Option


def _option(name: str, flag: str, env: str, help: str, legacy_env: tuple[str, ...] = (),
            file_keys: tuple[str, ...] = (), is_flag: bool = False, secret: bool = False) -> Option:
    """The bridge's table lists legacy names and settings-file keys positionally; a flag's text is
    read by its field's rule, as every other source's value is."""
    return Option(name, flag, env, functools.partial(parse_setting, name), help, is_flag=is_flag,
                  legacy_env=legacy_env, file_keys=file_keys, secret=secret)


OPTIONS: tuple[Option, ...] = (
    _option("host", "--host", "LLMWIKI_AGENT_BRIDGE_HOST",
           "Address to bind (default 127.0.0.1). A non-loopback address needs --allow-public-bind "
           "and a bearer token.", ("HERMES_A2A_BRIDGE_HOST", "HOST"), ("host",)),
    _option("port", "--port", "LLMWIKI_AGENT_BRIDGE_PORT",
           "Port to bind (0..65535, default 8788; 0 picks a free port).",
           ("HERMES_A2A_BRIDGE_PORT", "PORT"), ("port",)),
    _option("base_url", "--base-url", "LLMWIKI_AGENT_BRIDGE_BASE_URL",
           "OpenAI-compatible runtime base URL (default http://127.0.0.1:8642/v1; called by "
           "delegated-runtime and hybrid runs only).", ("HERMES_BASE_URL",),
           ("baseUrl", "agentBaseUrl", "hermesBaseUrl")),
    _option("model", "--model", "LLMWIKI_AGENT_BRIDGE_MODEL",
           "Runtime model name (default hermes-agent).", ("HERMES_MODEL",),
           ("model", "agentModel", "hermesModel")),
    _option("api_key", "--api-key", "LLMWIKI_AGENT_BRIDGE_API_KEY",
           "Runtime API key, sent only to the runtime (never shown by the bridge).",
           ("HERMES_API_KEY",), ("apiKey", "agentApiKey", "hermesApiKey"), secret=True),
    _option("runtime_profile", "--runtime-profile", "LLMWIKI_AGENT_BRIDGE_RUNTIME_PROFILE",
           "Runtime identity preset: hermes (default), deepagents or generic.",
           ("HERMES_A2A_BRIDGE_RUNTIME_PROFILE",), ("runtimeProfile",)),
    _option("runtime_adapter", "--runtime-adapter", "LLMWIKI_AGENT_BRIDGE_RUNTIME_ADAPTER",
           "How the runtime is called: chat-completions (default, OpenAI-compatible) or deepagents-acp "
           "(a DeepAgents ACP agent launched per run over stdio).",
           ("HERMES_A2A_BRIDGE_RUNTIME_ADAPTER",), ("runtimeAdapter",)),
    _option("runtime_id", "--runtime-id", "LLMWIKI_AGENT_BRIDGE_RUNTIME_ID",
           "Runtime id reported by the agent card, /health and /settings.json (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME_ID",), ("runtimeId",)),
    _option("runtime_name", "--runtime-name", "LLMWIKI_AGENT_BRIDGE_RUNTIME_NAME",
           "Runtime name, the agent card's name (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME_NAME",), ("runtimeName",)),
    _option("runtime", "--runtime", "LLMWIKI_AGENT_BRIDGE_RUNTIME",
           "Runtime label of the agent card (default: the profile's).",
           ("HERMES_A2A_BRIDGE_RUNTIME",), ("runtime",)),
    _option("agent_runtime", "--agent-runtime", "LLMWIKI_AGENT_BRIDGE_AGENT_RUNTIME",
           "Agent runtime label of the agent card and /health (default: the profile's).",
           ("HERMES_A2A_BRIDGE_AGENT_RUNTIME",), ("agentRuntime",)),
    _option("provider_organization", "--provider-organization",
           "LLMWIKI_AGENT_BRIDGE_PROVIDER_ORGANIZATION",
           "Provider organization of the agent card (default: the profile's).",
           ("HERMES_A2A_BRIDGE_PROVIDER_ORGANIZATION",), ("providerOrganization",)),
    _option("deepagents_acp_command", "--deepagents-acp-command",
           "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_COMMAND",
           "Executable of the deepagents-acp adapter, run without a shell (default npx)."),
    _option("deepagents_acp_args", "--deepagents-acp-args", "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_ARGS",
           "Its arguments: a JSON string array or a quoted, space-separated list (default "
           "--yes deepagents-acp with the default command, none with another)."),
    _option("deepagents_acp_cwd", "--deepagents-acp-cwd", "LLMWIKI_AGENT_BRIDGE_DEEPAGENTS_ACP_CWD",
           "Working directory of the ACP agent and its session (default: the bridge's)."),
    _option("bearer_token", "--bearer-token", "LLMWIKI_AGENT_BRIDGE_BEARER_TOKEN",
           "When set, every bridge request needs `Authorization: Bearer <token>`.",
           ("HERMES_A2A_BRIDGE_BEARER_TOKEN",), ("bridgeBearerToken",), secret=True),
    _option("allow_public_bind", "--allow-public-bind", "LLMWIKI_AGENT_BRIDGE_ALLOW_PUBLIC_BIND",
           "Opt in to binding a non-loopback address (a bearer token is also needed).",
           ("HERMES_A2A_BRIDGE_ALLOW_PUBLIC_BIND",), ("allowPublicBind",), is_flag=True),
    _option("allow_insecure_public_bind", "--allow-insecure-public-bind",
           "LLMWIKI_AGENT_BRIDGE_ALLOW_INSECURE_PUBLIC_BIND",
           "Allow a non-loopback bind without a bearer token (development only).",
           ("HERMES_A2A_BRIDGE_ALLOW_INSECURE_PUBLIC_BIND",), ("allowInsecurePublicBind",), is_flag=True),
    _option("request_timeout_ms", "--timeout-ms", "LLMWIKI_AGENT_BRIDGE_TIMEOUT_MS",
           "Timeout of every source call and runtime request, in milliseconds (default 120000).",
           ("HERMES_A2A_BRIDGE_TIMEOUT_MS",), ("requestTimeoutMs",)),
    _option("allowed_origins", "--allowed-origin", "LLMWIKI_AGENT_BRIDGE_ALLOWED_ORIGINS",
           "Extra browser origin allowed by CORS (repeatable; env is comma-separated). Loopback "
           "origins are always allowed.", ("HERMES_A2A_BRIDGE_ALLOWED_ORIGINS",), ("allowedOrigins",)),
    _option("allowed_hosts", "--allowed-host", "LLMWIKI_AGENT_BRIDGE_ALLOWED_HOSTS",
           "Extra Host header name the bridge answers (repeatable; env is comma-separated). "
           "Loopback names, a non-wildcard bind host, the --public-url host and allowed origins' "
           "hosts are always accepted; any other Host gets 421.", (), ("allowedHosts",)),
    _option("source_policy", "--source-policy", "LLMWIKI_AGENT_BRIDGE_SOURCE_POLICY",
           "Which source URLs may be called: private-http (default; any http(s) URL, private or "
           "public), allowlist or public-https.",
           ("HERMES_A2A_BRIDGE_SOURCE_POLICY",), ("sourcePolicy",)),
    _option("allowed_source_origins", "--allowed-source-origin",
           "LLMWIKI_AGENT_BRIDGE_ALLOWED_SOURCE_ORIGINS",
           "Source origin admitted under every policy (repeatable; env is comma-separated).",
           ("HERMES_A2A_BRIDGE_ALLOWED_SOURCE_ORIGINS",), ("allowedSourceOrigins",)),
    _option("fanout_concurrency", "--fanout-concurrency", "LLMWIKI_AGENT_BRIDGE_FANOUT_CONCURRENCY",
           "Most sources queried at once (1..64, default 4).", (), ("fanoutConcurrency",)),
    _option("max_sources_per_run", "--max-sources-per-run", "LLMWIKI_AGENT_BRIDGE_MAX_SOURCES_PER_RUN",
           "Most Knowledge Sources one run may call (1..1000, default 32); a request naming "
           "more is refused with 400.", (), ("maxSourcesPerRun",)),
    _option("run_deadline_ms", "--run-deadline-ms", "LLMWIKI_AGENT_BRIDGE_RUN_DEADLINE_MS",
           "Deadline of a run's source calls as a whole, in milliseconds (default: the timeout); "
           "sources still out then are failed steps and the run answers with the rest.", (),
           ("runDeadlineMs",)),
    _option("max_runtime_answer_bytes", "--max-runtime-answer-bytes",
           "LLMWIKI_AGENT_BRIDGE_MAX_RUNTIME_ANSWER_BYTES",
           "Largest runtime (chat completions) answer accepted, in bytes (default 4194304); a larger "
           "one fails the runtime call.", (), ("maxRuntimeAnswerBytes",)),
    _option("a2a_max_tasks", "--a2a-max-tasks", "LLMWIKI_AGENT_BRIDGE_A2A_MAX_TASKS",
           "Finished A2A tasks kept in memory for GetTask and ListTasks (default 1000; 0 keeps none; "
           "the oldest go first; a restart forgets them).", (), ("a2aMaxTasks",)),
    _option("a2a_task_ttl_seconds", "--a2a-task-ttl-seconds", "LLMWIKI_AGENT_BRIDGE_A2A_TASK_TTL_SECONDS",
           "How long a finished A2A task is kept, in seconds (default 3600).", (),
           ("a2aTaskTtlSeconds",)),
    _option("default_mode", "--default-mode", "LLMWIKI_AGENT_BRIDGE_DEFAULT_MODE",
           "Orchestration mode for requests that name none: delegated-runtime (default, as the "
           "contract says), evidence-only or hybrid.", (), ("defaultOrchestrationMode",)),
    _option("config_path", "--config", "LLMWIKI_AGENT_BRIDGE_CONFIG_PATH",
           "Settings file (default $XDG_CONFIG_HOME/llmwiki-agent-bridge/settings.json).",
           ("HERMES_A2A_BRIDGE_CONFIG_PATH",)),
    _option("log_level", "--log-level", "LLMWIKI_AGENT_BRIDGE_LOG_LEVEL",
           "debug, info, warning or error (default info)."),
    _option("log_format", "--log-format", "LLMWIKI_AGENT_BRIDGE_LOG_FORMAT",
           "auto (JSON unless stderr is a terminal), json or console."),
    _option("public_url", "--public-url", "LLMWIKI_AGENT_BRIDGE_PUBLIC_URL",
           "The bridge's URL as clients reach it (e.g. https://bridge.example.org behind a TLS proxy); "
           "the agent card's absolute URLs start with it instead of the request's scheme and Host."),
    _option("audit_log", "--audit-log", "LLMWIKI_AGENT_BRIDGE_AUDIT_LOG",
           "Write the safe request audit log: one JSON line per request to stdout, counts and flags "
           "only (off by default).", (), ("auditLog", "auditLogEnabled"), is_flag=True),
    _option("io_log_mode", "--io-log", "LLMWIKI_AGENT_BRIDGE_IO_LOG",
           "I/O debug log of requests, source and runtime calls, redacted: off (default), file or "
           "logger (stdout). It holds prompts, evidence and answers.", (),
           ("ioLogMode", "ioLog", "ioLogEnabled")),
    _option("io_log_path", "--io-log-path", "LLMWIKI_AGENT_BRIDGE_IO_LOG_PATH",
           "File of the I/O log in file mode (default .runtime-logs/llmwiki-agent-bridge-io.jsonl in "
           "the working directory); setting it alone turns the file log on. Flag or environment only: "
           "neither the settings file nor the settings page can name a file to write.", ()),
    _option("metrics", "--metrics", "LLMWIKI_AGENT_BRIDGE_METRICS",
           "Serve GET /metrics in the Prometheus text format (off by default; the Host, Origin and "
           "bearer-token rules of every route apply). Flag or environment only.", (), is_flag=True),
    _option("shutdown_timeout_ms", "--shutdown-timeout-ms", "LLMWIKI_AGENT_BRIDGE_SHUTDOWN_TIMEOUT_MS",
           "On SIGTERM, how long requests in flight may take to finish before they are cancelled, in "
           "milliseconds (default 10000).", ()),
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


def _unset(value: Any) -> bool:
    """Contract 1.3: an empty or whitespace-only value counts as not set."""
    return value is None or value == () or value == [] or (isinstance(value, str) and not value.strip())


def _winner(option: Option, cli: Mapping[str, Any], env: Mapping[str, str],
            file_config: Mapping[str, Any]) -> tuple[Any, Given] | None:
    """The value that wins for one option, and where it came from; None leaves the default."""
    given = cli.get(option.name)
    if not _unset(given) and not (option.is_flag and given is False):
        return given, Given("option", option.name)
    for name in (option.env, *option.legacy_env):
        if not _unset(env.get(name)):
            return env[name], Given("env", name)
    for key in option.file_keys:
        if not _unset(file_config.get(key)):
            return file_config[key], Given("settings", key)
    return None


def resolve_settings(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                     file_config: Mapping[str, Any] | None = None) -> BridgeSettings:
    """Resolve every option: a CLI/programmatic value wins, then `LLMWIKI_AGENT_BRIDGE_*`, then the
    legacy aliases, then the settings file's `config`, then the default; each winner goes through
    its field's rule."""
    cli = cli or {}
    env = os.environ if env is None else env
    file_config = file_config or {}
    values: dict[str, Any] = {}
    given: dict[str, Given] = {}
    for option in OPTIONS:
        won = _winner(option, cli, env, file_config)
        if won is not None:
            values[option.name], given[option.name] = won
    if "io_log_path" in values and "io_log_mode" not in values:
        values["io_log_mode"] = "file"  # a path alone turns the file log on (contract 1.3)
    for name, reported in (("base_url", "base_url_source"), ("model", "model_source")):
        if name in given:
            values[reported] = given[name].source
    # Code's values are checked by the rules like any other; only their names differ.
    return build_settings(values, {k: v for k, v in given.items() if v.source != "option"})


def load_settings(cli: Mapping[str, Any] | None = None,
                  env: Mapping[str, str] | None = None) -> BridgeSettings:
    """The CLI's settings: persistence always on (--config, env, or the default user path); the
    file's `config` is the layer under options and environment. A corrupt file is skipped here and
    reported by the running bridge."""
    cli = dict(cli or {})
    env = os.environ if env is None else env
    path = config_path_from(cli, env)
    document = SettingsStore(path).read_or_empty()
    return resolve_settings({**cli, "config_path": path}, env, document.config)
