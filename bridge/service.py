"""The bridge application object: live settings, the source registry, and the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import aiohttp
import structlog

from bridge import audit
from bridge.auth import bearer_matches
from bridge.core.errors import RequestRejected
from bridge.core.run import RunContext, run_task
from bridge.fanout import fan_out
from bridge.fields import as_object
from bridge.iolog import IoLog, current_scope, io_scope
from bridge.policy import BrowserPolicy, SourcePolicy
from bridge.redaction import redact_text
from bridge.registry import (
    SourceDescriptor,
    SourceValidationError,
    normalize_registered,
    now_iso,
    readiness,
    redact_url,
    registry_view,
    settings_view,
    stored_form,
    summary_counts,
)
from bridge.run_request import (
    query_text,
)
from bridge.runtime import model_configured
from bridge.runtime import probe as probe_runtime
from bridge.settings import (
    PROFILES,
    TOKEN_KEYS,
    BridgeSettings,
    SettingsError,
    check_bind_policy,
    operator_only_refusal,
    parse_adapter,
    parse_env_bool,
    parse_io_log_mode,
    parse_origins,
    parse_policy,
    parse_profile,
    parse_source_origins,
)
from bridge.settings_store import SettingsFileError, SettingsStore
from bridge.sources.base import SourceCallError
from bridge.sources.client import client_for
from bridge.sources.protocols import SourceClients
from bridge.sources.transport import SourceTransport
from common.errors import CodedError

log = structlog.get_logger("llmwiki.bridge.service")

# How many sources' last probes a bridge keeps.
PROBES_KEPT = 1024

# Identity keys of PUT /settings/config.json and the settings fields they set.
IDENTITY_FIELDS = {"runtimeId": "runtime_id", "runtimeName": "runtime_name", "runtime": "runtime",
                   "agentRuntime": "agent_runtime", "providerOrganization": "provider_organization"}

ENDPOINTS = {"health": "/health", "sources": "/sources", "agentCard": "/.well-known/agent-card.json",
             "messageSend": "/message:send", "mcp": "/mcp", "settings": "/settings",
             "settingsJson": "/settings.json", "settingsConfigJson": "/settings/config.json",
             "settingsSourcesJson": "/settings/sources.json"}


class BridgeService:
    """Owns the live settings and registry; every handler goes through it."""

    def __init__(self, settings: BridgeSettings, sources: list[SourceDescriptor] | None = None,
                 store: SettingsStore | None = None, *, clients: SourceClients) -> None:
        self.settings = settings
        self.clients = clients
        self.sources = list(sources or [])
        self.store = store
        self.settings_file_status = store.status if store else "disabled"
        self.http: aiohttp.ClientSession | None = None
        self._io = IoLog()
        self._browser_policy: tuple[BridgeSettings | None, BrowserPolicy] = (None, BrowserPolicy())
        # The last live probe's health of each source (by id, protocol and URL), for views that
        # do not probe. In memory only: the bridge's one persistent state is its settings file.
        self._last_probes: dict[tuple[str, str, str], dict[str, Any]] = {}

    # ------------------------------------------------------------------ policies

    @property
    def source_policy(self) -> SourcePolicy:
        return SourcePolicy(self.settings.source_policy, self.settings.allowed_source_origins)

    @property
    def browser_policy(self) -> BrowserPolicy:
        """Host and Origin checks from the live settings (a settings change applies at once)."""
        s = self.settings
        if self._browser_policy[0] is not s:
            self._browser_policy = (s, BrowserPolicy(s.allowed_origins, s.accepted_hosts))
        return self._browser_policy[1]

    @property
    def io(self) -> IoLog:
        """The I/O log as the live settings say (rebuilt when a settings change moves it)."""
        s = self.settings
        if self._io.mode != s.io_log_mode or self._io.path != s.io_log_file:
            self._io = IoLog(s.io_log_mode, s.io_log_file)
        return self._io

    def transport(self) -> SourceTransport:
        if self.http is None:
            raise RuntimeError("the bridge's source client is not open")
        io = self.io
        return SourceTransport(self.http, self.source_policy, self.settings.timeout_seconds,
                               io if io.enabled else None, clients=self.clients)

    # ------------------------------------------------------------------ views

    def _runtime_connection(self) -> dict[str, Any]:
        s = self.settings
        return {"baseUrlConfigured": bool(s.base_url), "baseUrlSource": s.base_url_source,
                "modelConfigured": model_configured(s), "modelSource": s.model_source,
                "apiKeyConfigured": bool(s.api_key), "requestTimeoutMs": s.request_timeout_ms,
                "reachability": {"checked": False, "basis": "not_probed"}}

    def persistence(self) -> dict[str, Any]:
        return {"enabled": self.store is not None, "configPathConfigured": self.store is not None,
                "registeredSources": len(self.sources), "fileStatus": self.settings_file_status}

    async def probed_health(self) -> dict[str, Any]:
        """`/health?probe=1`: the runtime checked live. A runtime that cannot be reached, or that
        answers with an error, makes the status `degraded`, so the answer never reads as "ok"
        when runtime-backed runs would fail (evidence-only runs still work)."""
        document = self.health()
        settings = self.settings
        if settings.runtime_adapter != "chat-completions":
            reachability = {"checked": False, "basis": "adapter_not_probeable", "protocol": "acp"}
        else:
            reachability = await probe_runtime(settings)
        document["runtimeConnection"]["reachability"] = reachability
        if reachability.get("checked") and reachability.get("ok") is not True:
            document["status"] = "degraded"
        return document

    def health(self) -> dict[str, Any]:
        s = self.settings
        identity = s.identity()
        return {"status": "ok", "runtime": "llmwiki-agent-bridge", "runtimeProfile": s.runtime_profile,
                "runtimeAdapter": s.runtime_adapter, "runtimeId": identity["runtimeId"],
                "agentRuntime": identity["agentRuntime"], "modelConfigured": model_configured(s),
                "hermesModelConfigured": model_configured(s),
                "configuredAllowedOrigins": len(s.allowed_origins), "sourcePolicy": s.source_policy,
                "sourceRegistry": summary_counts(self.sources, self.source_policy),
                "runtimeConnection": self._runtime_connection(),
                "settingsFile": {"status": self.settings_file_status}}

    def settings_document(self, host_header: str | None = None) -> dict[str, Any]:
        s = self.settings
        identity = s.identity()
        port = s.port
        if host_header and host_header.rsplit(":", 1)[-1].isdigit() and not host_header.endswith("]"):
            port = int(host_header.rsplit(":", 1)[-1])
        return {
            "bridge": "llmwiki-agent-bridge", "endpoints": dict(ENDPOINTS),
            "runtime": {"profile": s.runtime_profile, "adapter": s.runtime_adapter,
                        "id": identity["runtimeId"], "name": identity["runtimeName"],
                        "runtime": identity["runtime"], "agentRuntime": identity["agentRuntime"],
                        "providerOrganization": identity["providerOrganization"]},
            # The model name is not a secret; the settings page shows it (the contract shape lacks it).
            "runtimeConnection": {"baseUrl": redact_url(s.base_url), "model": s.model,
                                  **self._runtime_connection()},
            "bridgeAuth": {"bearerTokenConfigured": bool(s.bearer_token)},
            "network": {"host": s.host, "port": port, "publicBind": s.public_bind,
                        "allowPublicBind": s.allow_public_bind,
                        "allowInsecurePublicBind": s.allow_insecure_public_bind,
                        "configuredAllowedOrigins": len(s.allowed_origins),
                        "allowedOrigins": [redact_url(o) for o in s.allowed_origins]},
            "sourcePolicy": {"policy": s.source_policy,
                             "configuredAllowedSourceOrigins": len(s.allowed_source_origins),
                             "allowedSourceOrigins": [redact_url(o) for o in s.allowed_source_origins],
                             "fanoutConcurrency": s.fanout_concurrency},
            "observability": s.observability(),
            "persistence": self.persistence(),
        }

    def sources_document(self) -> dict[str, Any]:
        return {"sources": [settings_view(s) for s in self.sources], "persistence": self.persistence()}

    async def sources_view(self, probe: bool, *, local: bool = False) -> dict[str, Any]:
        """`GET /sources`; without a probe each entry still shows its last probe's result."""
        if not probe:
            view = registry_view(self.sources, self.source_policy, local=local)
            for source, entry in zip(self.sources, view["sources"], strict=True):
                last = self._last_probes.get(_probe_key(source))
                if last is not None:
                    entry["lastProbe"] = last
            return view
        policy = self.source_policy
        # Readiness already limits protocols to the three this bridge has clients for.
        targets = [(i, s) for i, s in enumerate(self.sources) if readiness(s, policy).ready]
        transport = self.transport()

        async def probe_one(target: tuple[int, SourceDescriptor]) -> dict[str, Any]:
            return await self._probe(transport, target[1])

        results = await fan_out(targets, probe_one, self.settings.fanout_concurrency)
        probes = {index: result for (index, _), result in zip(targets, results, strict=True)}
        return registry_view(self.sources, policy, probes, local=local)

    async def probe_draft(self, body: Any) -> dict[str, Any]:
        """`POST /sources/probe`: one source as the settings page has it, saved or not. It is probed
        as if selected and ready; the source policy applies as to every source call."""
        raw = body.get("source") if isinstance(body, dict) and isinstance(body.get("source"), dict) else body
        try:
            [source] = normalize_registered([raw])
        except SourceValidationError as exc:
            raise RequestRejected("bad_request", str(exc)) from None
        source = dataclasses.replace(source, selected=True, status="ready")
        policy = self.source_policy
        state = readiness(source, policy)
        probe: dict[str, Any] | None = None
        if state.ready:
            probe = await self._probe(self.transport(), source)
        [entry] = registry_view([source], policy, {0: probe} if probe else None)["sources"]
        return {"schemaVersion": "llmwiki.agent-bridge.source-probe.v1", "source": entry}

    async def _probe(self, transport: SourceTransport, source: SourceDescriptor) -> dict[str, Any]:
        """One live probe: the health entry (remembered for later views) and bundle metadata."""
        read = await client_for(transport, source).probe()
        if read.raw is None:
            error = read.error or SourceCallError("The source answered without source bundle metadata.")
            health: dict[str, Any] = {"ok": False, "basis": "live_probe", "checkedAt": now_iso(),
                                      "reason": "probe_failed"}
            if error.http_status is not None:
                health["httpStatus"] = str(error.http_status)
            if error.timeout:
                health["timeout"] = True
            # What failed, in words (redacted: no URLs, tokens or paths), for the settings page.
            health.update(retryable=error.retryable, redacted=True, message=probe_message(error.message))
            self._remember_probe(source, health)
            return {"health": health}
        raw = read.raw
        merged = {**raw, **as_object(raw.get("projection"))}
        metadata = {key: merged[name] for key, name in (
            ("bundleId", "bundle_id"), ("adapter", "adapter"), ("implementation", "implementation"),
            ("pageCount", "page_count"), ("approvedPageCount", "approved_page_count"))
            if isinstance(merged.get(name), (str, int)) and merged.get(name) != ""}
        health = {"ok": True, "basis": "live_probe", "checkedAt": now_iso(), "endpoint": read.endpoint}
        self._remember_probe(source, health)
        return {"health": health, "metadata": metadata}

    def _remember_probe(self, source: SourceDescriptor, health: dict[str, Any]) -> None:
        if len(self._last_probes) >= PROBES_KEPT:
            del self._last_probes[next(iter(self._last_probes))]  # the oldest entry
        self._last_probes[_probe_key(source)] = health

    # ------------------------------------------------------------------ settings writes

    def _require_store(self) -> SettingsStore:
        if self.store is None:
            raise CodedError(409, "settings_persistence_disabled",
                             "Settings persistence is not enabled. Start the bridge with "
                             "LLMWIKI_AGENT_BRIDGE_CONFIG_PATH (or --config).")
        return self.store

    def _persist(self, config: dict[str, Any] | None = None,
                 sources: list[dict[str, Any]] | None = None) -> None:
        store = self._require_store()
        try:
            store.write(config, sources)
        except SettingsFileError:
            self.settings_file_status = store.status
            raise CodedError(500, "settings_persist_failed",
                             "The settings file could not be read, so it was left unchanged.") from None
        except OSError:
            raise CodedError(500, "settings_persist_failed", "Settings could not be saved.") from None
        self.settings_file_status = store.status

    def put_sources(self, body: Any) -> dict[str, Any]:
        self._require_store()
        try:
            sources = normalize_registered(body)
        except SourceValidationError as exc:
            raise CodedError(400, "bad_request", str(exc)) from None
        except ValueError as exc:  # DuplicateSourceError
            raise CodedError(409, "duplicate_source_id", str(exc)) from None
        sources = _keep_redacted_roots(sources, self.sources)
        self._persist(sources=[stored_form(s) for s in sources])
        self.sources = sources
        return {"status": "saved", "sources": [settings_view(s) for s in sources],
                "persistence": self.persistence()}

    def put_config(self, body: Any, host_header: str | None = None,
                   authorization: str | None = None) -> dict[str, Any]:
        """`PUT /settings/config.json`. `authorization` is the request's header: replacing or
        clearing a configured bearer token needs it to carry that token (checked here as well as
        by the pipeline, so no route to this method can skip it)."""
        self._require_store()
        if not isinstance(body, dict):
            raise CodedError(400, "bad_request", "Settings config body must be a JSON object.")
        raw = body["config"] if isinstance(body.get("config"), dict) else body
        current = self.settings.bearer_token
        if current and any(k in raw for k in TOKEN_KEYS) and not bearer_matches(authorization, current):
            raise CodedError(401, "bridge_unauthorized",
                             "The current bridge bearer token is required to change it.")
        refused = operator_only_refusal(raw)
        if refused is not None:
            raise CodedError(400, "invalid_bridge_settings", refused)
        try:
            changes, persisted, applied, restart = self._config_changes(raw)
            updated = dataclasses.replace(self.settings, **changes)
            check_bind_policy(updated)
        except (SettingsError, ValueError) as exc:
            raise CodedError(400, "invalid_bridge_settings", str(exc)) from None
        self._persist(config=persisted)
        self.settings = updated
        return {"status": "saved", "applied": applied, "restartRequired": restart,
                "settings": self.settings_document(host_header), "persistence": self.persistence()}

    def _config_changes(self, raw: Mapping[str, Any]
                        ) -> tuple[dict[str, Any], dict[str, Any], list[str], list[str]]:
        """Validate the recognised keys: live changes, the file patch, applied and restart lists."""
        changes: dict[str, Any] = {}
        persisted: dict[str, Any] = {}
        applied: list[str] = []
        restart: list[str] = []

        def first(*keys: str) -> tuple[str, Any] | None:
            return next(((k, raw[k]) for k in keys if k in raw), None)

        def text(value: Any, name: str, allow_empty: bool = False) -> str:
            # Numbers and booleans are read as text (`String(value)`), as the reference reads them.
            given = query_text(value) if not isinstance(value, (dict, list)) else ""
            if not given and not (allow_empty and not isinstance(value, (dict, list))):
                raise ValueError(f"{name} must be a non-empty string.")
            return given

        def boolean(value: Any, name: str) -> bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in (
                    "1", "0", "true", "false", "yes", "no", "on", "off"):
                return parse_env_bool(value)
            raise ValueError(f"{name} must be a boolean.")

        def integer(value: Any, name: str, low: int, high: int, message: str) -> int:
            # A JSON number or a numeric string, whole (`3000`, `"3000"`, `3000.0`, `"3e3"`).
            if isinstance(value, str):
                try:
                    value = float(value.strip())
                except ValueError:
                    raise ValueError(message) from None
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(message)
            return value

        if "runtimeProfile" in raw:
            # A profile resets the identity to its defaults, in the file too (contract 2.6.5).
            changes["runtime_profile"] = parse_profile(text(raw["runtimeProfile"], "runtimeProfile"))
            changes.update(dict.fromkeys(IDENTITY_FIELDS.values()))
            persisted["runtimeProfile"] = changes["runtime_profile"]
            persisted.update({k: PROFILES[changes["runtime_profile"]][k] for k in IDENTITY_FIELDS})
            applied += ["runtimeProfile", *IDENTITY_FIELDS]
            if (changes["runtime_profile"] != self.settings.runtime_profile and not self.settings.model
                    and not any(k in raw for k in ("model", "agentModel", "hermesModel"))):
                # A new profile on a bridge with no model gets the default one (as the reference).
                changes.update(model=BridgeSettings.model, model_source="default")
                persisted["model"] = BridgeSettings.model
                applied += ["model", "hermesModel"]
        if "runtimeAdapter" in raw:
            changes["runtime_adapter"] = parse_adapter(text(raw["runtimeAdapter"], "runtimeAdapter"))
            persisted["runtimeAdapter"] = changes["runtime_adapter"]
            applied.append("runtimeAdapter")
        for key, name in IDENTITY_FIELDS.items():  # after the profile: an explicit value wins
            if key in raw:
                changes[name] = persisted[key] = text(raw[key], key)
                if key not in applied:
                    applied.append(key)
        if found := first("baseUrl", "agentBaseUrl", "hermesBaseUrl"):
            changes["base_url"] = text(found[1], found[0])
            changes["base_url_source"] = "settings"
            persisted["baseUrl"] = changes["base_url"]
            applied += ["baseUrl", "hermesBaseUrl"]
        if found := first("apiKey", "agentApiKey", "hermesApiKey"):
            key = text(found[1], "apiKey", allow_empty=True)
            changes["api_key"] = key or None
            persisted["apiKey"] = key
            applied.append("apiKey")
        if found := first("model", "agentModel", "hermesModel"):
            changes["model"] = text(found[1], found[0])
            changes["model_source"] = "settings"
            persisted["model"] = changes["model"]
            applied += ["model", "hermesModel"]
        if found := first("requestTimeoutMs", "timeoutMs"):
            changes["request_timeout_ms"] = integer(found[1], found[0], 1, 10**9,
                                                    f"{found[0]} must be a positive integer.")
            persisted["requestTimeoutMs"] = changes["request_timeout_ms"]
            applied.append("requestTimeoutMs")
        if "fanoutConcurrency" in raw:
            changes["fanout_concurrency"] = integer(raw["fanoutConcurrency"], "fanoutConcurrency", 1, 64,
                                                    "fanoutConcurrency must be between 1 and 64.")
            persisted["fanoutConcurrency"] = changes["fanout_concurrency"]
            applied.append("fanoutConcurrency")
        for key, name, parse in (("allowedOrigins", "allowed_origins", parse_origins),
                                 ("allowedSourceOrigins", "allowed_source_origins", parse_source_origins)):
            if key in raw:
                value = raw[key]
                if not isinstance(value, (str, list)):
                    raise ValueError(f"{key} must be an array or a comma-separated string.")
                changes[name] = parse(value)
                persisted[key] = list(changes[name])
                applied.append(key)
        if "sourcePolicy" in raw:
            changes["source_policy"] = parse_policy(text(raw["sourcePolicy"], "sourcePolicy"))
            persisted["sourcePolicy"] = changes["source_policy"]
            applied.append("sourcePolicy")
        if "auditLog" in raw or "auditLogEnabled" in raw:
            key = "auditLog" if "auditLog" in raw else "auditLogEnabled"
            changes["audit_log"] = boolean(raw[key], "auditLog")
            persisted["auditLog"] = changes["audit_log"]
            applied.append("auditLog")
        if found := first("ioLogMode", "ioLog", "ioLogEnabled"):
            value = found[1]
            if not isinstance(value, (bool, str)):
                raise ValueError("ioLogMode must be off, file or logger.")
            changes["io_log_mode"] = parse_io_log_mode(value)
            persisted.update(ioLog=changes["io_log_mode"] != "off", ioLogMode=changes["io_log_mode"])
            applied += ["ioLog", "ioLogMode"]
        if found := first(*TOKEN_KEYS):
            token = text(found[1], "bridgeBearerToken", allow_empty=True)
            changes["bearer_token"] = token or None
            persisted["bridgeBearerToken"] = token
            applied.append("bridgeBearerToken")
        for key, name in (("allowPublicBind", "allow_public_bind"),
                          ("allowInsecurePublicBind", "allow_insecure_public_bind")):
            if key in raw:
                changes[name] = boolean(raw[key], key)
                persisted[key] = changes[name]
                applied.append(key)
        if "host" in raw:
            host = text(raw["host"], "host")
            persisted["host"] = host
            if _host_key(host) != _host_key(self.settings.host):
                restart.append("host")
        if "port" in raw:
            port = integer(raw["port"], "port", 0, 65535, "port must be an integer port from 0 to 65535.")
            persisted["port"] = port
            if port != self.settings.port:
                restart.append("port")
        assert set(changes) <= {f.name for f in dataclasses.fields(BridgeSettings)}
        return changes, persisted, applied, restart

    # ------------------------------------------------------------------ the run

    def run_context(self) -> RunContext:
        """What a run starting now is made with (one settings snapshot)."""
        transport = self.transport()
        return RunContext(self.settings, list(self.sources), transport,
                          lambda source: client_for(transport, source))

    async def run(self, envelope: Any, request_id: str, trace_id: str, *,
                  inbound: str | None = None) -> dict[str, Any]:
        """`/message:send` (see `bridge.core.run`). `inbound` is the route the I/O log records the
        accepted request under (the A2A adapter's message route, which logs the answer too; MCP runs
        are not logged as bridge requests)."""
        audit.note(traceId=trace_id)
        context = self.run_context()
        io = self.io
        if not io.enabled:
            return await run_task(context, envelope, request_id, trace_id)

        def accepted() -> None:
            io.emit("bridge.request", "inbound", route=inbound,
                    request={"method": "POST", "route": inbound,
                             "headers": dict(current_scope().headers or {}), "body": envelope})

        with io_scope(trace_id=trace_id):
            return await run_task(context, envelope, request_id, trace_id,
                             accepted=accepted if inbound is not None else None)


def _probe_key(source: SourceDescriptor) -> tuple[str, str, str]:
    return source.id, source.protocol, source.url


def probe_message(message: str) -> str:
    """A source failure as the settings page may show it: redacted, one line, at most 240 chars."""
    text = " ".join(redact_text(message).split())
    return text if len(text) <= 240 else text[:237] + "..."


def _host_key(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


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
