"""serve's one typed settings object, resolved as: CLI option > environment > default."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from common.booleans import parse_bool
from common.limits import CONTEXT_GRAPH_LIMIT, GRAPH_LIMIT, READ_MAX_CHARS, SEARCH_LIMIT, Limit
from common.options import Option, parse_public_url
from common.serve_tools import TOOL_NAMES

DEFAULT_MAX_PAGE_BYTES = 8 * 1024 * 1024


class SettingsError(ValueError):
    """An option or environment value is invalid; the message names it."""


class SourceProfileError(SettingsError):
    """An unknown source profile (the CLI exits 1 with it, as the reference does)."""


SOURCE_PROFILES = ("auto", "okf-v0.2")


def parse_source_profile(text: str) -> str:
    value = text.strip()
    if value not in SOURCE_PROFILES:
        raise SourceProfileError("source_profile must be auto or okf-v0.2")
    return value


@dataclass(frozen=True)
class ServeSettings:
    root: Path
    host: str = "127.0.0.1"
    port: int = 8765
    allow_drafts: bool = False
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    refresh_interval_seconds: float = 0.0
    producer_manifest: str | None = None
    source_id: str | None = None
    graph_default_limit: int = 100
    context_default_limit: int = 8
    context_graph_limit: int = 120
    read_default_max_chars: int | None = None  # plain reads without max_chars: unlimited
    cache_dir: Path | None = None
    page_cache: bool = True
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES
    max_body_bytes: int = 1024 * 1024
    # A connection with no request in progress (idle keep-alive, or headers that never end) is
    # closed after idle_timeout_seconds; a request body must arrive within body_timeout_seconds.
    idle_timeout_seconds: float = 30.0
    body_timeout_seconds: float = 30.0
    inotify: bool = True
    log_level: str = "info"
    log_format: str = "auto"
    mcp_server_name: str | None = None
    mcp_instructions: str | None = None
    mcp_tool_description_prefix: str | None = None
    mcp_tools: tuple[str, ...] = ()
    mcp_exclude_tools: tuple[str, ...] = ()
    enable_a2a: bool = False
    # Finished A2A tasks kept for GetTask/ListTasks: at most this many, for at most this long.
    a2a_max_tasks: int = 1000
    a2a_task_ttl_seconds: float = 3600.0
    source_profile: str = "auto"
    # serve's address as clients reach it (behind a TLS proxy), for the A2A card's absolute URLs.
    public_url: str | None = None
    # GET /metrics (Prometheus text format): off unless enabled.
    metrics: bool = False
    # On SIGTERM, requests in flight get this long to finish before they are cancelled.
    shutdown_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        parse_source_profile(self.source_profile)
        _check_range("port", self.port, Limit(1, 65535))
        _check_range("graph_default_limit", self.graph_default_limit, GRAPH_LIMIT)
        _check_range("context_default_limit", self.context_default_limit, SEARCH_LIMIT)
        _check_range("context_graph_limit", self.context_graph_limit, CONTEXT_GRAPH_LIMIT)
        if self.read_default_max_chars is not None:
            _check_range("read_default_max_chars", self.read_default_max_chars, READ_MAX_CHARS)
        _check_range("max_page_bytes", self.max_page_bytes, Limit(1024, 1 << 31))
        _check_range("max_body_bytes", self.max_body_bytes, Limit(1024, 1 << 30))
        _check_range("a2a_max_tasks", self.a2a_max_tasks, Limit(0, 1_000_000))
        if not 0 < self.a2a_task_ttl_seconds <= 86400 * 30:
            raise SettingsError("a2a_task_ttl_seconds must be > 0 and <= 2592000")
        for name in ("idle_timeout_seconds", "body_timeout_seconds", "shutdown_timeout_seconds"):
            if not 0 < getattr(self, name) <= 3600:
                raise SettingsError(f"{name} must be > 0 and <= 3600")
        if self.refresh_interval_seconds < 0:
            raise SettingsError("refresh_interval_seconds must be >= 0")
        if self.log_format not in ("auto", "json", "console"):
            raise SettingsError("log_format must be auto, json or console")
        tool_selection(self.mcp_tools, self.mcp_exclude_tools)


MCP_TOOL_NAMES = TOOL_NAMES


def tool_selection(include: Sequence[str], exclude: Sequence[str]) -> tuple[str, ...]:
    """The MCP tools left enabled by an allowlist then an exclusion list (comma lists ok)."""
    wanted = [n.strip() for item in include for n in str(item).split(",") if n.strip()]
    dropped = [n.strip() for item in exclude for n in str(item).split(",") if n.strip()]
    unknown = [n for n in dict.fromkeys(wanted + dropped) if n not in MCP_TOOL_NAMES]
    if unknown:
        raise SettingsError(f"Unknown MCP tool name(s): {', '.join(unknown)}. "
                            f"Known tools: {', '.join(MCP_TOOL_NAMES)}")
    enabled = tuple(n for n in MCP_TOOL_NAMES if (not wanted or n in wanted) and n not in dropped)
    if not enabled:
        raise SettingsError("MCP tool selection leaves no tools enabled")
    return enabled


def _check_range(name: str, value: int, limit: Limit) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{name} must be an integer")
    if not limit.contains(value):
        raise SettingsError(f"{name} must be between {limit.low} and {limit.high}")


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("must be an integer") from None


def parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("must be a number") from None


def parse_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())




OPTIONS: tuple[Option, ...] = (
    Option("host", "--host", "LLMWIKI_SERVE_HOST", str,
           "Address to bind. Loopback by default; a public address needs --allowed-host.", http_only=True),
    Option("port", "--port", "LLMWIKI_SERVE_PORT", parse_int, "Port to bind (1..65535, default 8765).",
           http_only=True),
    Option("allow_drafts", "--allow-drafts", "LLMWIKI_SERVE_ALLOW_DRAFTS", parse_bool,
           "Let requests opt in to withheld pages with include_drafts=true.", is_flag=True),
    Option("cors_origins", "--cors-origin", "LLMWIKI_SERVE_CORS_ORIGINS", parse_list,
           "Allowed browser origin (repeatable; env is comma-separated). Replaces the local-dev "
           "allowlist.", repeatable=True, http_only=True),
    Option("allowed_hosts", "--allowed-host", "LLMWIKI_SERVE_ALLOWED_HOSTS", parse_list,
           "Extra Host header value accepted besides loopback names (repeatable; '*' disables "
           "the Host check).", repeatable=True, http_only=True),
    Option("refresh_interval_seconds", "--refresh-interval-seconds",
           "LLMWIKI_SERVE_REFRESH_INTERVAL_SECONDS", parse_float,
           "Reuse the snapshot for this many seconds between freshness checks (0 = strict)."),
    Option("producer_manifest", "--producer-manifest", "LLMWIKI_SERVE_PRODUCER_MANIFEST", str,
           "Marker file inside the root; when valid, only its change triggers a rescan."),
    Option("source_id", "--source-id", "LLMWIKI_SOURCE_ID", str,
           "Override the source id (default: slug of the wiki title)."),
    Option("source_profile", "--source-profile", "LLMWIKI_SOURCE_PROFILE", str,
           "Input profile: auto (detect the folder shape) or okf-v0.2 (serve the root as an "
           "Open Knowledge Format v0.2 bundle, validated strictly)."),
    Option("graph_default_limit", "--graph-default-limit", "LLMWIKI_GRAPH_DEFAULT_LIMIT", parse_int,
           f"Nodes returned by /graph when the client gives no limit ({GRAPH_LIMIT.span}, default 100)."),
    Option("context_default_limit", "--context-default-limit", "LLMWIKI_CONTEXT_DEFAULT_LIMIT",
           parse_int, "Evidence items for /query and /search when the client gives no limit "
           f"({SEARCH_LIMIT.span}, default 8)."),
    Option("context_graph_limit", "--context-graph-limit", "LLMWIKI_CONTEXT_GRAPH_LIMIT",
           parse_int, "Most nodes (and edges) in a context pack's graph: the neighbourhood of "
           f"the evidence ({CONTEXT_GRAPH_LIMIT.span}, default 120; 0 = no graph)."),
    Option("read_default_max_chars", "--read-default-max-chars", "LLMWIKI_READ_DEFAULT_MAX_CHARS",
           parse_int, "Character budget of plain page reads that give no max_chars "
           f"({READ_MAX_CHARS.span}; default: unlimited)."),
    Option("cache_dir", "--cache-dir", "LLMWIKI_SERVE_CACHE_DIR", Path,
           "Where the store (a SQLite database of the parsed pages and the search index, kept "
           "for restarts) lives (default: user cache dir; never inside the root)."),
    Option("page_cache", "--no-page-cache", "LLMWIKI_SERVE_PAGE_CACHE", parse_bool,
           "Keep no store on disk: every start reads the whole folder (env: set to false).",
           is_flag=True, flag_value=False),
    Option("max_page_bytes", "--max-page-bytes", "LLMWIKI_SERVE_MAX_PAGE_BYTES", parse_int,
           "Files larger than this are skipped and reported (default 8 MiB)."),
    Option("max_body_bytes", "--max-body-bytes", "LLMWIKI_SERVE_MAX_BODY_BYTES", parse_int,
           "Largest accepted request body (default 1 MiB)."),
    Option("idle_timeout_seconds", "--idle-timeout-seconds", "LLMWIKI_SERVE_IDLE_TIMEOUT_SECONDS",
           parse_float, "Close a connection idle this long, or whose request headers have not "
           "ended by then (default 30).", http_only=True),
    Option("body_timeout_seconds", "--body-timeout-seconds", "LLMWIKI_SERVE_BODY_TIMEOUT_SECONDS",
           parse_float, "A request body must arrive within this many seconds, else 408 (default 30).",
           http_only=True),
    Option("inotify", "--no-inotify", "LLMWIKI_SERVE_INOTIFY", parse_bool,
           "Use stat scans instead of kernel change notifications (env: set to false).",
           is_flag=True, flag_value=False),
    Option("log_level", "--log-level", "LLMWIKI_SERVE_LOG_LEVEL", str,
           "debug, info, warning or error (default info)."),
    Option("log_format", "--log-format", "LLMWIKI_SERVE_LOG_FORMAT", str,
           "auto (JSON unless stderr is a terminal), json or console."),
    Option("mcp_server_name", "--mcp-server-name", "LLMWIKI_MCP_SERVER_NAME", str,
           "MCP server name (default: '<wiki title> - LLMWiki Serve').", aliases=("--mcp-title",)),
    Option("mcp_instructions", "--mcp-instructions", "LLMWIKI_MCP_INSTRUCTIONS", str,
           "MCP server instructions (default: derived from the manifest)."),
    Option("mcp_tool_description_prefix", "--mcp-tool-description-prefix",
           "LLMWIKI_MCP_TOOL_DESCRIPTION_PREFIX", str,
           "Prefix for every MCP tool description (default: '[<title> | source_id: <id>]')."),
    Option("mcp_tools", "--mcp-tools", "LLMWIKI_MCP_TOOLS", parse_list,
           "Only these MCP tools are listed and callable (repeatable or comma-separated): "
           f"{', '.join(TOOL_NAMES)}.",
           repeatable=True),
    Option("mcp_exclude_tools", "--mcp-exclude-tools", "LLMWIKI_MCP_EXCLUDE_TOOLS", parse_list,
           "MCP tools to hide and block (repeatable or comma-separated).", repeatable=True),
    Option("enable_a2a", "--enable-a2a", "LLMWIKI_SERVE_ENABLE_A2A", parse_bool,
           "Serve the A2A agent card and POST /message:send (off by default).", is_flag=True,
           aliases=("--enable-a2a-compat",), http_only=True),
    Option("a2a_max_tasks", "--a2a-max-tasks", "LLMWIKI_SERVE_A2A_MAX_TASKS", parse_int,
           "Finished A2A tasks kept in memory for GetTask and ListTasks (default 1000; 0 keeps "
           "none; the oldest go first; a restart forgets them).", http_only=True),
    Option("a2a_task_ttl_seconds", "--a2a-task-ttl-seconds", "LLMWIKI_SERVE_A2A_TASK_TTL_SECONDS",
           parse_float, "How long a finished A2A task is kept, in seconds (default 3600).",
           http_only=True),
    Option("public_url", "--public-url", "LLMWIKI_SERVE_PUBLIC_URL", parse_public_url,
           "serve's URL as clients reach it (e.g. https://wiki.example.org behind a TLS proxy); the "
           "A2A card's absolute URLs start with it instead of the request's scheme and Host.",
           http_only=True),
    Option("metrics", "--metrics", "LLMWIKI_SERVE_METRICS", parse_bool,
           "Serve GET /metrics in the Prometheus text format (off by default; the Host, Origin and "
           "CORS rules of every route apply).", is_flag=True, http_only=True),
    Option("shutdown_timeout_seconds", "--shutdown-timeout-seconds",
           "LLMWIKI_SERVE_SHUTDOWN_TIMEOUT_SECONDS", parse_float,
           "On SIGTERM, how long requests in flight may take to finish before they are cancelled "
           "(default 10).", http_only=True),
)


def resolve_settings(root: str | Path, cli: Mapping[str, Any],
                     env: Mapping[str, str] | None = None) -> ServeSettings:
    """Resolve every option: a CLI value wins, then the environment, then the default. `cli`
    holds each setting's own value (`page_cache=False` for --no-page-cache); None, () and a flag
    left at its other value mean not given."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for option in OPTIONS:
        given = cli.get(option.name)
        if given is not None and given != () and (not option.is_flag or given == option.flag_value):
            values[option.name] = tuple(given) if option.repeatable else given
            continue
        raw = env.get(option.env)
        if raw is None or raw == "":
            continue
        try:
            values[option.name] = option.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{option.env} {exc}") from None
    if "source_profile" in values:  # checked here so that the CLI can exit 1 on it
        values["source_profile"] = parse_source_profile(values["source_profile"])
    if "mcp_server_name" not in values and env.get("LLMWIKI_MCP_TITLE"):
        values["mcp_server_name"] = env["LLMWIKI_MCP_TITLE"]  # the older name of the variable
    known = {f.name for f in fields(ServeSettings)}
    values = {k: v for k, v in values.items() if k in known}
    return ServeSettings(root=Path(root).expanduser(), **values)
