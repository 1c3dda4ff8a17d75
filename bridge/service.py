"""The bridge application object: live settings, the source registry, and the run."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog

from bridge import artifact, audit
from bridge.acp import AcpFailure
from bridge.answer import (
    ADAPTER_FAILED_MESSAGE,
    RUNTIME_STEPS,
    RuntimeAnswer,
    acp_diagnostic,
    acp_runtime_answer,
    runtime_answer,
)
from bridge.artifact import EvidenceGraph, SourceEvidence, safe_id, safe_trace_text, step
from bridge.config import writes
from bridge.config.settings import BridgeSettings
from bridge.config.store import SettingsStore
from bridge.fanout import fan_out
from bridge.guidance import GuidanceCheck, check_guidance, guidance_diagnostic
from bridge.iolog import IoLog, current_scope, io_scope
from bridge.policy import BrowserPolicy, SourcePolicy
from bridge.prompt import AnsweredSource
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
    summary_counts,
)
from bridge.retrieval import (
    GUIDED_LEXICAL,
    SourceRetrievalPlan,
    plan_for,
    unsupported_message,
)
from bridge.run_request import (
    RunRequest,
    RunRequestError,
    check_excluded_page_ids,
    parse_run_request,
    too_many_sources,
)
from bridge.runtime import CHAT_FAILED_MESSAGE, RuntimeFailure, model_configured, runtime_diagnostic
from bridge.runtime import probe as probe_runtime
from bridge.sources.client import SourceClient, client_for
from bridge.sources.http_source import BundleRead
from bridge.sources.protocols import SourceClients
from bridge.sources.transport import SourceCallError, SourceTransport
from common.bridge_schemas import (
    Citation,
    CitationRef,
    Diagnostic,
    Graph,
    JsonObject,
    RetrievalIntent,
    SourceBundle,
    TraceStep,
)
from common.errors import CodedError

log = structlog.get_logger("llmwiki.bridge.service")

# How many sources' recent path times a bridge keeps (for the fan-out's start order).
PATH_TIMES_KEPT = 1024
RUN_DEADLINE_MESSAGE = "Run deadline passed before the source answered."

ENDPOINTS = {"health": "/health", "sources": "/sources", "agentCard": "/.well-known/agent-card.json",
             "messageSend": "/message:send", "mcp": "/mcp", "settings": "/settings",
             "settingsJson": "/settings.json", "settingsConfigJson": "/settings/config.json",
             "settingsSourcesJson": "/settings/sources.json"}


class RunError(CodedError):
    """A `/message:send` error: the coded body plus the request and trace ids (and steps if any)."""

    def __init__(self, status: int, code: str, message: str, request_id: str, trace_id: str,
                 steps: list[TraceStep] | None = None, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(status, code, message)
        self.request_id = request_id
        self.trace_id = trace_id
        self.steps = steps or []
        self.diagnostics = diagnostics or []

    def body(self) -> dict[str, Any]:
        body = {**super().body(), "requestId": self.request_id, "traceId": self.trace_id}
        if self.steps:
            body["steps"] = [s.wire() for s in self.steps]
        if self.diagnostics:
            body["diagnostics"] = [d.wire() for d in self.diagnostics]
        return body


@dataclass
class SourceOutcome:
    """One source's part of a run, kept in selected order whatever order the calls finished in."""

    source: SourceDescriptor
    steps: list[TraceStep] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    bundle: SourceBundle | None = None
    evidence: SourceEvidence | None = None
    failed: bool = False
    # Wire forms of this source's citations, steps and bundle by model identity, made when the
    # source was done (the slowest source's only, after its answer): see BridgeService._result.
    wired: dict[int, JsonObject] = field(default_factory=dict)


@dataclass(frozen=True)
class EarlyEvidence:
    """What a run makes of a source's context before search results are merged into it (see
    `SourceClient.run_context`): its graph, guidance check and citations so far, those citations'
    wire forms and (the first five's) trace refs, by citation identity."""

    context: dict[str, Any]
    graph: EvidenceGraph
    guidance: GuidanceCheck
    citations: artifact.MadeCitations
    wires: dict[int, JsonObject]
    refs: dict[int, CitationRef]


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
        # Each source's recent path time (seconds, smoothed), by protocol and URL: see start_order.
        self._path_seconds: dict[tuple[str, str], float] = {}
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
            raise CodedError(400, "bad_request", str(exc)) from None
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
        merged = {**raw, **artifact.as_object(raw.get("projection"))}
        metadata = {key: merged[name] for key, name in (
            ("bundleId", "bundle_id"), ("adapter", "adapter"), ("implementation", "implementation"),
            ("pageCount", "page_count"), ("approvedPageCount", "approved_page_count"))
            if isinstance(merged.get(name), (str, int)) and merged.get(name) != ""}
        health = {"ok": True, "basis": "live_probe", "checkedAt": now_iso(), "endpoint": read.endpoint}
        self._remember_probe(source, health)
        return {"health": health, "metadata": metadata}

    def _remember_probe(self, source: SourceDescriptor, health: dict[str, Any]) -> None:
        if len(self._last_probes) >= PATH_TIMES_KEPT:
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

    async def run(self, envelope: Any, request_id: str, trace_id: str, *,
                  inbound: str | None = None) -> dict[str, Any]:
        """`/message:send`: validate, select, fan out, and build the task with the artifact.
        `inbound` is the route the I/O log records this request and its answer under (the A2A
        adapter's message route; MCP runs are not logged as bridge requests)."""
        audit.note(traceId=trace_id)
        io = self.io
        if not io.enabled:
            return await self._run(envelope, request_id, trace_id, None)
        with io_scope(trace_id=trace_id):
            if inbound is None:
                return await self._run(envelope, request_id, trace_id, None)
            try:
                task = await self._run(envelope, request_id, trace_id, (io, inbound))
            except RunError as exc:
                io.emit("bridge.error", "inbound", route=inbound,
                        response={"status": exc.status, "body": exc.body()})
                raise
            io.emit("bridge.response", "inbound", route=inbound, response={"status": 200, "body": task})
            return task

    async def _run(self, envelope: Any, request_id: str, trace_id: str,
                   inbound: tuple[IoLog, str] | None) -> dict[str, Any]:
        def fail(status: int, code: str, message: str) -> RunError:
            return RunError(status, code, message, request_id, trace_id)

        settings = self.settings  # one snapshot: a live settings change does not split a run
        try:
            request = parse_run_request(envelope, settings.default_mode, settings.max_sources_per_run)
        except RunRequestError as exc:
            raise fail(exc.status, exc.code, exc.message) from None
        query, mode, intent = request.query, request.mode, request.intent
        candidates = (list(request.inline_sources) if request.inline_sources is not None
                      else list(self.sources))
        selected = [s for s in candidates if readiness(s).ready]
        if len(selected) > settings.max_sources_per_run:  # the registry's selection (inline: parsed)
            error = too_many_sources(len(selected), settings.max_sources_per_run)
            raise fail(error.status, error.code, error.message)
        try:  # before any source call: a foreign-prefixed exclusion is the caller's mistake
            check_excluded_page_ids(intent, [s.id for s in selected])
        except RunRequestError as exc:
            raise fail(exc.status, exc.code, exc.message) from None
        policy = self.source_policy
        audit.note(orchestrationMode=mode, selectedSourceCount=sum(1 for s in candidates if s.selected),
                   selectedReadySourceCount=sum(1 for s in selected if readiness(s, policy).ready),
                   conversationMessageCount=request.context.message_count,
                   conversationHistoryLength=request.context.history_length,
                   conversationContextProvided=request.context.provided)
        if inbound is not None:  # after validation: a refused request is a bridge.error only
            io, route = inbound
            io.emit("bridge.request", "inbound", route=route,
                    request={"method": "POST", "route": route,
                             "headers": dict(current_scope().headers or {}), "body": envelope})

        transport = self.transport()
        # One deadline for every source call of the run; past it, the sources still out fail.
        # Discovery (retrieval intents only) may use half of it: the fan-out waits for all of
        # discovery, so one hanging source must not leave the others no time to answer.
        now = asyncio.get_running_loop().time()
        deadline = now + settings.run_deadline_seconds
        steps = [step("bridge-plan", "Plan source calls", "done",
                      detail=f"Prepared {len(selected)} selected last-known ready Knowledge Source(s) "
                             f"for {mode} answering.")]
        pre_bundles: dict[int, BundleRead] = {}
        plans: dict[int, SourceRetrievalPlan] = {}
        if intent is not None:
            pre_bundles, plans = await self._discover(transport, selected, intent,
                                                      now + settings.run_deadline_seconds / 2)
            if intent.fallback == "none":
                labels = [f"{s.id} ({s.protocol})" for s in selected]
                mode_unsupported = [labels[i] for i in plans if not plans[i].mode_supported]
                guided_unsupported = [labels[i] for i in plans
                                      if plans[i].mode_supported and plans[i].diagnostic is not None]
                if mode_unsupported or guided_unsupported:
                    raise fail(400, "retrieval_mode_unsupported",
                               unsupported_message(intent, mode_unsupported, guided_unsupported))

        async def gather(index: int) -> SourceOutcome:
            source = selected[index]
            started = time.perf_counter()
            if transport.io is None:
                outcome = await self._guarded_gather(transport, source, query, pre_bundles.get(index),
                                                     plans.get(index), deadline)
            else:
                with io_scope(source={"id": source.id, "name": source.name, "protocol": source.protocol}):
                    outcome = await self._guarded_gather(transport, source, query, pre_bundles.get(index),
                                                         plans.get(index), deadline)
            self._note_path_time(source, time.perf_counter() - started)
            return outcome

        limit = self.settings.fanout_concurrency
        # Only when every source starts at once: beyond that, waves take sources in selected order.
        order = self.start_order(selected) if len(selected) <= limit else None
        outcomes = await fan_out(range(len(selected)), gather, limit, start_order=order)
        return await self._result(outcomes, request, steps, request_id, trace_id, transport)

    def start_order(self, selected: list[SourceDescriptor]) -> list[int]:
        """The order to start the sources' calls in: slowest first (as last seen), sources not seen
        yet before any, ties in selected order. A run waits for its slowest source, and every call
        started before that source's first one delays it: the bridge's writes, and on a small machine
        the other sources' processes waking up first (about 1 ms for 3 sources here)."""
        known = self._path_seconds
        return sorted(range(len(selected)),
                      key=lambda i: -known.get((selected[i].protocol, selected[i].url), math.inf))

    def _note_path_time(self, source: SourceDescriptor, seconds: float) -> None:
        known = self._path_seconds
        key = (source.protocol, source.url)
        last = known.get(key)
        if last is None:
            if len(known) >= PATH_TIMES_KEPT:
                del known[next(iter(known))]  # the oldest entry
            known[key] = seconds
        else:
            known[key] = (last + seconds) / 2  # smoothed: one odd call does not reorder the next run

    async def _discover(self, transport: SourceTransport, selected: list[SourceDescriptor],
                        intent: RetrievalIntent, deadline: float
                        ) -> tuple[dict[int, BundleRead], dict[int, SourceRetrievalPlan]]:
        """With a retrieval intent, read every bundle first: fresh capabilities decide what is sent.
        A read `deadline` cuts short counts as failed (the source keeps the descriptor's
        capabilities)."""

        clients = [client_for(transport, source) for source in selected]

        async def discover(index: int) -> BundleRead | None:
            try:
                async with asyncio.timeout_at(deadline):
                    return await clients[index].discover()
            except TimeoutError:
                return BundleRead(attempted=True, error=SourceCallError(RUN_DEADLINE_MESSAGE, timeout=True))
            except Exception:  # a bridge bug with this source's answer: its failure, not the run's
                log.exception("source_discovery_failed", source=safe_id(selected[index].id))
                return BundleRead(attempted=True, error=SourceCallError("Source discovery failed."))

        reads = await fan_out(range(len(selected)), discover, self.settings.fanout_concurrency)
        bundles: dict[int, BundleRead] = {}
        plans: dict[int, SourceRetrievalPlan] = {}
        ids = [s.id for s in selected]
        for index, (source, read) in enumerate(zip(selected, reads, strict=True)):
            if read is not None:
                bundles[index] = read
            if read is not None and read.raw is not None:
                caps, basis = clients[index].discovered_capabilities(read), "fresh"
            else:
                caps, basis = source.capabilities, "descriptor" if source.capabilities else "none"
            plans[index] = plan_for(intent, caps, basis, source.id, ids, source.protocol)
        return bundles, plans

    async def _guarded_gather(self, transport: SourceTransport, source: SourceDescriptor, query: str,
                              pre_bundle: BundleRead | None, plan: SourceRetrievalPlan | None,
                              deadline: float) -> SourceOutcome:
        """`_gather`, where even a bridge bug with one source's answer is that source's failed
        step (logged with its traceback), never the whole run's 500."""
        started = time.perf_counter()
        try:
            return await self._gather(transport, source, query, pre_bundle, plan, deadline)
        except Exception:
            log.exception("source_gather_failed", source=safe_id(source.id))
            outcome = SourceOutcome(source)
            tool = _tool_step(source)
            outcome.steps.append(tool)
            self._fail_source(outcome, tool, SourceCallError("The source's answer could not be used."),
                              started)
            return outcome

    async def _gather(self, transport: SourceTransport, source: SourceDescriptor, query: str,
                      pre_bundle: BundleRead | None, plan: SourceRetrievalPlan | None,
                      deadline: float) -> SourceOutcome:
        """One source: bundle step, query, tool step. Failures become steps and diagnostics; the
        run deadline cuts the source's calls short."""
        outcome = SourceOutcome(source)
        sid = safe_id(source.id)
        label = safe_trace_text(source.label) or "Knowledge Source"
        started = time.perf_counter()
        tool = _tool_step(source)
        outcome.steps.append(tool)
        if asyncio.get_running_loop().time() >= deadline:  # waited for a slot past the deadline
            self._fail_source(outcome, tool, SourceCallError(RUN_DEADLINE_MESSAGE, timeout=True), started)
            return outcome
        if plan is not None and plan.diagnostic is not None:
            outcome.diagnostics.append(plan.diagnostic)
        bundle_diagnostic: Diagnostic | None = None
        client = client_for(transport, source)
        read = client.adopt(pre_bundle)
        bundle: SourceBundle | None = None
        bundle_task: asyncio.Task[tuple[BundleRead, SourceBundle | None]] | None = None
        if read is None and client.reads_bundle():
            # The query does not need the bundle: both go out at once.
            bundle_task = asyncio.create_task(self._read_bundle(client, source))
        failure: SourceCallError | None = None
        payload: dict[str, Any] = {}
        early: list[EarlyEvidence] = []

        def prepare(context: dict[str, Any]) -> None:
            # Search augmentation only adds evidence items: the graph, the guidance check and the
            # citations so far (with their wire forms and trace refs) are made while the searches
            # are out (for the slowest source, off the run's critical path).
            made = artifact.early_citations(context, source)
            citations = list(made.values())
            early.append(EarlyEvidence(
                context, artifact.evidence_graph(context, source.id), check_guidance(context), made,
                {id(c): c.wire() for c in citations},
                {id(c): ref for c, ref in zip(citations[:5], artifact.citation_refs(citations[:5]),
                                              strict=True)}))

        try:
            async with asyncio.timeout_at(deadline):
                payload = await client.run_context(query, plan.fields if plan is not None else {},
                                                   plan.fallback if plan is not None else None,
                                                   prepare=prepare)
        except SourceCallError as exc:
            failure = exc.with_traceback(None)  # kept in the outcome: no frames (or buffers) with it
        except TimeoutError:
            failure = SourceCallError(RUN_DEADLINE_MESSAGE, timeout=True)
        except BaseException:  # cancelled (or a bug): the bundle read goes too
            if bundle_task is not None:
                bundle_task.cancel()
            raise
        if bundle_task is not None:
            try:
                async with asyncio.timeout_at(deadline):
                    read, bundle = await bundle_task  # never raises for a source
            except TimeoutError:
                read = BundleRead(attempted=True, error=SourceCallError(RUN_DEADLINE_MESSAGE, timeout=True))
        if read is not None and read.attempted:
            bundle_diagnostic = self._bundle_step(outcome, read, source, tool, label, client.bundle_kind,
                                                  bundle)
        if failure is not None:
            if bundle_diagnostic is not None:
                outcome.diagnostics.remove(bundle_diagnostic)
            self._fail_source(outcome, tool, failure, started)
            return outcome
        ready = early[0] if early and early[0].context is payload else None
        evidence = artifact.evidence_from(payload, source, ready.graph if ready else None,
                                          ready.citations if ready else None)
        outcome.evidence = evidence
        caps = set(source.capabilities) | set(artifact.bundle_capabilities(payload))
        if outcome.bundle is not None:
            caps |= set(outcome.bundle.capabilities or ())
        caps |= set(client.run_capabilities())
        guidance_note = guidance_diagnostic(payload, GUIDED_LEXICAL in caps, sid, source.protocol,
                                            ready.guidance if ready else None)
        if guidance_note is not None:
            outcome.diagnostics.append(guidance_note)
        tool.status = "done"
        tool.detail = artifact.tool_detail(evidence)
        tool.citation_ids = [c.id for c in evidence.citations]
        refs = ready.refs if ready else {}
        first = evidence.citations[:5]
        if all(id(c) in refs for c in first):
            tool.citation_refs = [refs[id(c)] for c in first]
        else:
            tool.citation_refs = artifact.citation_refs(first)
        tool.diagnostic = plan.diagnostic if plan is not None else None
        tool.latency_ms = round((time.perf_counter() - started) * 1000)
        bundles = [outcome.bundle] if outcome.bundle is not None else []
        # Nothing changes these models any more.
        wired = ready.wires if ready else {}
        outcome.wired = {id(model): wired.get(id(model)) or model.wire()
                         for model in (*evidence.citations, *outcome.steps, *bundles)}
        return outcome

    def _fail_source(self, outcome: SourceOutcome, tool: TraceStep, failure: SourceCallError,
                     started: float) -> None:
        """The source's failed query (contract 3.8): diagnostic, tool step in error, failure noted."""
        source = outcome.source
        log.warning("source_failed", source=safe_id(source.id), error=failure.message)
        diagnostic = artifact.source_diagnostic(source, failure, "query",
                                                source_policy=self.settings.source_policy,
                                                timeout_ms=self.settings.request_timeout_ms)
        outcome.diagnostics.append(diagnostic)
        label = safe_trace_text(source.label) or "Knowledge Source"
        tool.status = "error"
        tool.detail = f"{label} could not be queried by the bridge."
        tool.error = "Source query failed."
        tool.citation_ids, tool.citation_refs = [], []  # every source step has them (the seeds)
        tool.diagnostic = diagnostic
        tool.latency_ms = round((time.perf_counter() - started) * 1000)
        outcome.failed = True

    @staticmethod
    async def _read_bundle(client: SourceClient, source: SourceDescriptor
                           ) -> tuple[BundleRead, SourceBundle | None]:
        """The bundle read, and its metadata made as soon as it arrives (not after the source's
        last answer)."""
        read = await client.bundle()
        return read, artifact.source_bundle(read.raw, source) if read.raw is not None else None

    def _bundle_step(self, outcome: SourceOutcome, read: BundleRead, source: SourceDescriptor,
                     tool: TraceStep, label: str, kind: str,
                     bundle: SourceBundle | None = None) -> Diagnostic | None:
        """The `source-manifest-*` step for a bundle read (`bundle`: its metadata, if made already);
        its diagnostic when the read failed."""
        sid = safe_id(source.id)
        manifest_step = step(f"source-manifest-{sid}", f"Read {label} source bundle", "done",
                             parent_id=tool.id, connection_id=source.id)
        outcome.steps.append(manifest_step)
        if read.raw is not None:
            outcome.bundle = bundle if bundle is not None else artifact.source_bundle(read.raw, source)
            manifest_step.detail = ("Read safe manifest metadata." if read.endpoint == "manifest"
                                    else f"Read safe{kind} source bundle metadata.")
            return None
        diagnostic = artifact.source_diagnostic(
            source, read.error or SourceCallError("Source bundle unavailable."), "source-bundle",
            source_policy=self.settings.source_policy, timeout_ms=self.settings.request_timeout_ms)
        manifest_step.status = "error"
        manifest_step.error = "Source bundle unavailable."
        manifest_step.detail = (f"{label}{kind} source bundle metadata could not be read; "
                                "continuing without it.")
        manifest_step.diagnostic = diagnostic
        outcome.diagnostics.append(diagnostic)
        return diagnostic

    async def _result(self, outcomes: list[SourceOutcome], request: RunRequest, steps: list[TraceStep],
                      request_id: str, trace_id: str, transport: SourceTransport) -> dict[str, Any]:
        mode = request.mode
        diagnostics: list[Diagnostic] = []
        bundles: list[SourceBundle] = []
        for outcome in outcomes:
            steps += outcome.steps
            diagnostics += outcome.diagnostics
            if outcome.bundle is not None:
                bundles.append(outcome.bundle)
        answered = [o.evidence for o in outcomes if o.evidence is not None]
        failed = sum(1 for o in outcomes if o.failed)
        citations = artifact.dedupe_citations([e.citations for e in answered])
        merged = artifact.merge_evidence_graphs([e.graph for e in answered])
        graph: Graph | EvidenceGraph = merged
        steps.append(step("bridge-evidence", "Prepare evidence", "done",
                          detail=f"Prepared {len(citations)} citation(s), {len(graph.nodes)} graph node(s), "
                                 f"{len(bundles)} source bundle metadata record(s), and {failed} source "
                                 "failure note(s)."))
        if outcomes and failed == len(outcomes) and mode != "evidence-only":
            answer = artifact.fail_closed_answer(failed)
            steps.append(step("bridge-source-fail-closed", "Fail closed without runtime", "done",
                              detail=f"Skipped the runtime call because all {failed} selected ready "
                                     "Knowledge Source(s) failed."))
        elif mode == "evidence-only":
            answer = artifact.evidence_only_answer(citations, graph, bundles, len(answered), failed)
            steps.append(step("bridge-evidence-only-answer", "Build evidence-only answer", "done",
                              detail="Built an evidence-only result without calling the configured "
                                     "runtime."))
        else:
            runtime = await self._runtime_answer(outcomes, request, citations, merged.model(), steps,
                                                 diagnostics, request_id, trace_id, transport)
            answer, citations, graph = runtime.answer, runtime.citations, runtime.graph
        steps.append(step("bridge-final-answer", "Return A2A artifact", "done",
                          detail="Returned a structured llmwiki_agent_result artifact."))
        audit.note(runtimeCalled=any(s.id.startswith("runtime-") for s in steps),
                   citationCount=len(citations),
                   sourceBundleCount=len(bundles), graphNodeCount=len(graph.nodes), artifactCount=1,
                   diagnosticCount=len(diagnostics))
        wired: dict[int, JsonObject] = {}
        for outcome in outcomes:
            wired |= outcome.wired

        def wire(model: Citation | TraceStep | SourceBundle) -> JsonObject:
            made = wired.get(id(model))  # the models are alive, so their identities are still theirs
            return made if made is not None else model.wire()

        result = {"requestId": request_id, "traceId": trace_id, "answer": answer,
                  "orchestrationMode": mode, "citations": [wire(c) for c in citations],
                  "graph": graph.wire(), "steps": [wire(s) for s in steps],
                  "sourceBundles": [wire(b) for b in bundles],
                  "diagnostics": [d.wire() for d in diagnostics]}
        return artifact.task_envelope(answer, result, request_id, trace_id)

    async def _runtime_answer(self, outcomes: list[SourceOutcome], request: RunRequest,
                              citations: list[Citation], graph: Graph, steps: list[TraceStep],
                              diagnostics: list[Diagnostic], request_id: str, trace_id: str,
                              transport: SourceTransport) -> RuntimeAnswer:
        """delegated-runtime / hybrid: the runtime step around one runtime answer; any runtime
        failure is the contract's 502 with every step and diagnostic gathered so far."""
        settings = self.settings  # one snapshot: a live settings change does not split a run
        step_id, step_label = RUNTIME_STEPS[settings.runtime_adapter]
        runtime_step = step(step_id, step_label, "running",
                            detail="Sending grounded evidence to the configured OpenAI-compatible chat "
                                   "completions endpoint." if settings.runtime_adapter == "chat-completions"
                            else "Sending grounded evidence to the configured DeepAgents ACP runtime "
                                 "adapter.")
        steps.append(runtime_step)
        started = time.perf_counter()
        answered = [AnsweredSource(o.source, o.evidence, o.bundle) for o in outcomes
                    if o.evidence is not None]
        failed = [o.source for o in outcomes if o.failed]
        try:
            if settings.runtime_adapter == "deepagents-acp":
                runtime = await acp_runtime_answer(
                    settings, query=request.query, history=request.conversation,
                    conversation_context=request.context.wire(), answered=answered, failed=failed,
                    citations=citations, graph=graph)
            else:
                runtime = await runtime_answer(
                    settings, transport, hybrid=request.mode == "hybrid", query=request.query,
                    history=request.conversation, conversation_context=request.context.wire(),
                    answered=answered, failed=failed, citations=citations, graph=graph,
                    steps=steps, diagnostics=diagnostics)
        except RuntimeFailure as exc:
            log.warning("chat_completions_failed", reason=exc.message, http_status=exc.http_status,
                        timeout=exc.timeout)
            raise self._runtime_failed(runtime_step, started, runtime_diagnostic(settings, exc), exc.message,
                                       "chat_completions_failed", CHAT_FAILED_MESSAGE, citations, steps,
                                       diagnostics, request_id, trace_id) from None
        except AcpFailure as exc:
            log.warning("runtime_adapter_failed", adapter=settings.runtime_adapter, reason=exc.message,
                        timeout=exc.timeout, exit_code=exc.exit_code)
            raise self._runtime_failed(runtime_step, started, acp_diagnostic(settings, exc), exc.message,
                                       "runtime_adapter_failed", ADAPTER_FAILED_MESSAGE, citations, steps,
                                       diagnostics, request_id, trace_id) from None
        runtime_step.status = "done"
        runtime_step.latency_ms = round((time.perf_counter() - started) * 1000)
        # The reference's wording (contract 4.4), plus the tool calls a hybrid run made.
        detail = ("The chat completions endpoint" if settings.runtime_adapter == "chat-completions"
                  else "The DeepAgents ACP runtime adapter") + " returned a grounded markdown answer."
        if runtime.anchors_appended:
            detail += (" The bridge appended bounded fallback citation anchors because the runtime "
                       "returned none.")
        if request.mode == "hybrid" and settings.runtime_adapter == "chat-completions":
            detail += f" The runtime made {runtime.tool_calls} source tool call(s)."
        runtime_step.detail = detail
        return runtime

    @staticmethod
    def _runtime_failed(runtime_step: TraceStep, started: float, diagnostic: Diagnostic, reason: str,
                        code: str, message: str, citations: list[Citation], steps: list[TraceStep],
                        diagnostics: list[Diagnostic], request_id: str, trace_id: str) -> RunError:
        """The contract's 502 (5.6) with every step and diagnostic gathered so far."""
        diagnostics.append(diagnostic)
        runtime_step.status, runtime_step.error = "error", message
        runtime_step.detail, runtime_step.diagnostic = safe_trace_text(reason), diagnostic
        runtime_step.latency_ms = round((time.perf_counter() - started) * 1000)
        audit.note(runtimeCalled=True, citationCount=len(citations), diagnosticCount=len(diagnostics))
        return RunError(502, code, message, request_id, trace_id, steps, diagnostics)


def _probe_key(source: SourceDescriptor) -> tuple[str, str, str]:
    return source.id, source.protocol, source.url


def probe_message(message: str) -> str:
    """A source failure as the settings page may show it: redacted, one line, at most 240 chars."""
    text = " ".join(redact_text(message).split())
    return text if len(text) <= 240 else text[:237] + "..."


def _tool_step(source: SourceDescriptor) -> TraceStep:
    """The running `tool-<id>` step a source's part of a run starts with (contract 3.8)."""
    sid = safe_id(source.id)
    label = safe_trace_text(source.label) or "Knowledge Source"
    return step(f"tool-{sid}", f"Call {label}", "running", connection_id=source.id,
                tool_name=f"llmwiki_context__{sid}", parent_id="bridge-plan",
                detail=f"Calling selected {source.protocol} Knowledge Source.")

