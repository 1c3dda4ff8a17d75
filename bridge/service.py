"""The bridge application object: live settings, the source registry, and the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import structlog

from bridge.config import writes
from bridge.config.policy import SourcePolicy
from bridge.config.registry import (
    SourceDescriptor,
    SourceValidationError,
    normalize_registered,
    readiness,
    redact_url,
    registry_view,
    settings_view,
    summary_counts,
)
from bridge.config.settings import BridgeSettings
from bridge.config.store import SettingsStore
from bridge.core.errors import RequestRejected
from bridge.core.gather import SourceOutcome
from bridge.core.run import RunContext, run_task
from bridge.runtime.base import model_configured
from bridge.runtime.chat import ChatRuntime
from bridge.runtime.chat import probe as probe_runtime
from bridge.sources.base import SourceCallError, SourceClient
from bridge.sources.client import client_for
from bridge.sources.protocols import SourceClients
from bridge.sources.transport import SourceTransport
from bridge.support import audit
from bridge.support.clock import now_iso
from bridge.support.fanout import fan_out
from bridge.support.fields import as_object
from bridge.support.iolog import IoLog, current_scope, io_scope
from bridge.support.redaction import redact_text
from bridge.support.routes import ENDPOINTS
from common.browser import BrowserPolicy, OriginRule

log = structlog.get_logger("llmwiki.bridge.service")

# How many sources' last probes a bridge keeps.
PROBES_KEPT = 1024



@dataclass(frozen=True)
class RunReports:
    """Who hears a streaming run while it works: each source's part as it completes, and the
    runtime's answer as it is generated."""

    source_done: Callable[[SourceOutcome], None]
    answer_delta: Callable[[str], None]


class RunMeter(Protocol):
    """What counts a run's source queries and runtime requests (bridge/web/metrics.py)."""

    def metered_source(self, client: SourceClient) -> SourceClient: ...

    def metered_runtime(self, runtime: ChatRuntime) -> ChatRuntime: ...


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
        self.metrics: RunMeter | None = None  # set by the app factory when metrics are on

    # ------------------------------------------------------------------ policies

    @property
    def source_policy(self) -> SourcePolicy:
        return SourcePolicy(self.settings.source_policy, self.settings.allowed_source_origins)

    @property
    def browser_policy(self) -> BrowserPolicy:
        """Host and Origin checks from the live settings (a settings change applies at once).
        `Host`: a loopback name or an accepted host (else 421), so a page whose name was rebound
        to this machine is refused before anything else. `Origin`: none (curl, servers), a
        configured origin, an http(s) loopback origin, or one whose host is an accepted host (the
        settings page served under it); the `Host` header is never the measure of an origin."""
        s = self.settings
        if self._browser_policy[0] is not s:
            self._browser_policy = (s, BrowserPolicy(
                accepted_hosts=frozenset(s.accepted_hosts), origins=s.allowed_origins,
                origin_rule=OriginRule.LISTED_OR_SAME_MACHINE))
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
            # Not in the contract's shape: the settings page says when no model is needed.
            "orchestration": {"defaultMode": s.default_mode},
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

    def put_config(self, body: Any, host_header: str | None = None,
                   authorization: str | None = None) -> dict[str, Any]:
        """`PUT /settings/config.json` (bridge/config/writes.py)."""
        return writes.put_config(self, body, host_header, authorization)

    def put_sources(self, body: Any) -> dict[str, Any]:
        """`PUT /settings/sources.json` (bridge/config/writes.py)."""
        return writes.put_sources(self, body)

    # ------------------------------------------------------------------ the run

    def run_context(self, reports: RunReports | None = None) -> RunContext:
        """What a run starting now is made with (one settings snapshot); a streaming run's runtime
        answers token by token to `reports`."""
        transport = self.transport()
        metrics = self.metrics
        answer_delta = reports.answer_delta if reports is not None else None
        on_source = reports.source_done if reports is not None else None

        def open_chat(settings: BridgeSettings, io: IoLog | None) -> ChatRuntime:
            chat = ChatRuntime(settings, io=io, on_delta=answer_delta)
            return metrics.metered_runtime(chat) if metrics is not None else chat

        def source_client(source: SourceDescriptor) -> SourceClient:
            client = client_for(transport, source)
            return metrics.metered_source(client) if metrics is not None else client

        return RunContext(self.settings, list(self.sources), source_client, transport.policy, open_chat,
                          transport.io, on_source)

    async def run(self, envelope: Any, request_id: str, trace_id: str, *,
                  inbound: str | None = None, reports: RunReports | None = None) -> dict[str, Any]:
        """`/message:send` (see `bridge.core.run`). `inbound` is the route the I/O log records the
        accepted request under (the A2A adapter's message route, which logs the answer too; MCP runs
        are not logged as bridge requests). `reports` hears a streaming run's progress."""
        audit.note(traceId=trace_id)
        context = self.run_context(reports)
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


