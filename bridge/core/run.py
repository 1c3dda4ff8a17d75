"""One `/message:send` run, top to bottom: request -> selection -> discovery -> fan-out ->
evidence -> answer (evidence-only, fail-closed or the runtime) -> the task with its artifact."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.config.policy import SourcePolicy
from bridge.config.registry import SourceDescriptor, readiness
from bridge.config.settings import BridgeSettings
from bridge.core import artifact
from bridge.core.artifact import WireGraph, step
from bridge.core.discovery import Discovery, discover
from bridge.core.errors import RunFailed
from bridge.core.evidence import Evidence, collect
from bridge.core.gather import SourceCalls, SourceOutcome, gather_source
from bridge.core.request import (
    RunRequest,
    RunRequestError,
    check_excluded_page_ids,
    parse_run_request,
    too_many_sources,
)
from bridge.core.runtime_step import runtime_step
from bridge.runtime.base import OpenChat
from bridge.sources.base import ClientFor
from bridge.support import audit
from bridge.support.fanout import fan_out
from bridge.support.iolog import IoLog, io_scope
from common.bridge_schemas import Citation, Diagnostic, JsonObject, TraceStep


@dataclass(frozen=True)
class RunContext:
    """What one run is made with: one snapshot of the settings (a live change does not split a
    run), the registered sources, and how sources are called: the clients are handed in, so the
    core never builds one or opens a session."""

    settings: BridgeSettings
    registered: Sequence[SourceDescriptor]
    client_for: ClientFor
    source_policy: SourcePolicy
    open_chat: OpenChat  # the runtime's client, for runtime-backed runs
    io: IoLog | None  # the I/O log when enabled
    on_source: Callable[[SourceOutcome], None] | None = None  # a streaming run's client, told each part


async def run_task(ctx: RunContext, envelope: Any, request_id: str, trace_id: str, *,
                   accepted: Callable[[], None] | None = None) -> JsonObject:
    """The task for `envelope`, or `RunFailed`. `accepted` is told once the request passed
    validation, before any source is called (the I/O log records the request then)."""
    settings = ctx.settings
    request, selected = _accept(ctx, envelope, request_id, trace_id)
    if accepted is not None:
        accepted()
    # One deadline for every source call of the run; past it, the sources still out fail.
    # Discovery may use half of it: one hanging source must leave the others time to answer.
    now = asyncio.get_running_loop().time()
    deadline = now + settings.run_deadline_seconds
    steps = [step("bridge-plan", "Plan source calls", "done",
                  detail=f"Prepared {len(selected)} selected last-known ready Knowledge Source(s) for "
                         f"{request.mode} answering.")]
    discovery = Discovery({}, {})
    if request.intent is not None:
        discovery = await discover(ctx.client_for, selected, request.intent,
                                   now + settings.run_deadline_seconds / 2, settings.fanout_concurrency)
        refused = discovery.unsupported(request.intent, selected)
        if refused is not None:
            raise RunFailed("rejected", "retrieval_mode_unsupported", refused, request_id, trace_id)
    outcomes = await _fan_out(ctx, request.query, selected, discovery, deadline)
    evidence = collect(outcomes, request.query, request.citation_order == "relevance")
    steps += [*evidence.steps, evidence.step()]
    diagnostics = list(evidence.diagnostics)
    answer, citations, graph = await _answer(ctx, request, evidence, steps, diagnostics, request_id, trace_id)
    steps.append(step("bridge-final-answer", "Return A2A artifact", "done",
                      detail="Returned a structured llmwiki_agent_result artifact."))
    audit.note(runtimeCalled=any(s.id.startswith("runtime-") for s in steps), citationCount=len(citations),
               sourceBundleCount=len(evidence.bundles), graphNodeCount=len(graph.nodes), artifactCount=1,
               diagnosticCount=len(diagnostics))
    result = artifact.AgentResult(
        request_id=request_id, trace_id=trace_id, answer=answer, orchestration_mode=request.mode,
        citations=citations, graph=graph.value(), steps=steps, source_bundles=evidence.bundles,
        diagnostics=diagnostics)
    return artifact.task_envelope(answer, result, request_id, trace_id)


def _accept(ctx: RunContext, envelope: Any, request_id: str, trace_id: str
            ) -> tuple[RunRequest, list[SourceDescriptor]]:
    """The parsed request and its selected ready sources (selected order = input order), or the
    caller's mistake as `RunFailed("rejected")`: nothing here calls a source."""
    settings = ctx.settings
    try:
        request = parse_run_request(envelope, settings.default_mode, settings.max_sources_per_run)
        candidates = (list(request.inline_sources) if request.inline_sources is not None
                      else list(ctx.registered))
        # Without the policy: a blocked source fails its fetch, so it shows in the trace (3.4).
        selected = [s for s in candidates if readiness(s).ready]
        if len(selected) > settings.max_sources_per_run:  # the registry's selection (inline: parsed)
            raise too_many_sources(len(selected), settings.max_sources_per_run)
        check_excluded_page_ids(request.intent, [s.id for s in selected])
    except RunRequestError as exc:
        raise RunFailed("rejected", exc.code, exc.message, request_id, trace_id) from None
    policy = ctx.source_policy
    audit.note(orchestrationMode=request.mode, selectedSourceCount=sum(1 for s in candidates if s.selected),
               selectedReadySourceCount=sum(1 for s in selected if readiness(s, policy).ready),
               conversationMessageCount=request.context.message_count,
               conversationHistoryLength=request.context.history_length,
               conversationContextProvided=request.context.provided)
    return request, selected


async def _fan_out(ctx: RunContext, query: str, selected: list[SourceDescriptor], discovery: Discovery,
                   deadline: float) -> list[SourceOutcome]:
    """Every selected source at most `fanoutConcurrency` at once; outcomes in selected order."""
    settings = ctx.settings
    calls = SourceCalls(ctx.client_for, query, deadline, settings.source_policy, settings.request_timeout_ms)
    logged = ctx.io is not None

    async def one(index: int) -> SourceOutcome:
        source = selected[index]
        scope = (io_scope(source={"id": source.id, "name": source.name, "protocol": source.protocol})
                 if logged else contextlib.nullcontext())
        with scope:
            outcome = await gather_source(calls, source, discovery.reads.get(index),
                                          discovery.plans.get(index))
        if ctx.on_source is not None:
            ctx.on_source(outcome)
        return outcome

    return await fan_out(range(len(selected)), one, settings.fanout_concurrency)


async def _answer(ctx: RunContext, request: RunRequest, evidence: Evidence, steps: list[TraceStep],
                  diagnostics: list[Diagnostic], request_id: str, trace_id: str
                  ) -> tuple[str, list[Citation], WireGraph]:
    """Fail closed when every source failed (runtime modes), the evidence-only answer, or the
    runtime's (contract 3.7 step 7); its step goes into `steps`."""
    failed = len(evidence.failed)
    if evidence.failed and not evidence.answered and request.mode != "evidence-only":
        steps.append(step("bridge-source-fail-closed", "Fail closed without runtime", "done",
                          detail=f"Skipped the runtime call because all {failed} selected ready "
                                 "Knowledge Source(s) failed."))
        return artifact.fail_closed_answer(failed), evidence.citations, evidence.graph
    if request.mode == "evidence-only":
        steps.append(step("bridge-evidence-only-answer", "Build evidence-only answer", "done",
                          detail="Built an evidence-only result without calling the configured runtime."))
        answer = artifact.evidence_only_answer(evidence.citations, evidence.graph, evidence.bundles,
                                               len(evidence.answered), failed)
        return answer, evidence.citations, evidence.graph
    runtime = await runtime_step(ctx.settings, ctx.client_for, ctx.open_chat, ctx.io, request, evidence,
                                 steps, diagnostics, request_id, trace_id)
    return runtime.answer, runtime.citations, runtime.graph
