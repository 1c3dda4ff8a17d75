"""One source's part of a run: its calls in a nested task group, folded into one outcome value."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from bridge.config.registry import SourceDescriptor
from bridge.core import artifact
from bridge.core.artifact import SourceEvidence, step
from bridge.core.bundle import source_bundle
from bridge.core.guidance import GuidanceCheck, check_guidance, guidance_diagnostic
from bridge.core.retrieval import GUIDED_LEXICAL, SourceRetrievalPlan
from bridge.sources.base import BundleRead, ClientFor, SourceCallError, SourceClient, bundle_capabilities
from bridge.support.clock import elapsed_ms, now_iso
from bridge.support.fanout import task_group
from bridge.support.text import safe_id
from common.bridge_schemas import CitationRef, Diagnostic, SourceBundle, TraceStep

log = structlog.get_logger("llmwiki.bridge.run")
RUN_DEADLINE_MESSAGE = "Run deadline passed before the source answered."
# A bundle read's steps, its metadata and its warning (see `_bundle_part`).
BundlePart = tuple[tuple[TraceStep, ...], SourceBundle | None, Diagnostic | None]


@dataclass(frozen=True)
class SourceCalls:
    """What every source of one run is called with (one settings snapshot, one deadline)."""

    client_for: ClientFor
    query: str
    deadline: float  # event-loop time; past it, the calls still out fail
    source_policy: str  # for diagnostics
    timeout_ms: int


@dataclass(frozen=True)
class SourceOutcome:
    """One source's part of a run: its steps (the tool step first), diagnostics, bundle metadata
    (kept even when its query failed) and its evidence, which is None when the query failed."""

    source: SourceDescriptor
    steps: tuple[TraceStep, ...]
    diagnostics: tuple[Diagnostic, ...]
    bundle: SourceBundle | None
    evidence: SourceEvidence | None

    @property
    def failed(self) -> bool:
        return self.evidence is None


def deadline_passed() -> SourceCallError:
    return SourceCallError(RUN_DEADLINE_MESSAGE, timeout=True)


async def gather_source(calls: SourceCalls, source: SourceDescriptor, discovered: BundleRead | None,
                        plan: SourceRetrievalPlan | None) -> SourceOutcome:
    """The source's outcome (contract 3.8). Never raises for the source: even a bridge bug with its
    answer is its failed step (logged with the traceback), never the whole run's 500."""
    begun, started = now_iso(), time.perf_counter()
    try:
        return await _gather(calls, source, discovered, plan, begun, started)
    except Exception:
        log.exception("source_gather_failed", source=safe_id(source.id))
        failure = SourceCallError("The source's answer could not be used.")
        return _failed(calls, source, failure, begun, started)


@dataclass(frozen=True)
class _Cited:
    """What the source's tool step says of its evidence."""

    detail: str
    ids: list[str]
    refs: list[CitationRef]


def _cited(evidence: SourceEvidence) -> _Cited:
    return _Cited(artifact.tool_detail(evidence), [c.id for c in evidence.citations],
                  artifact.citation_refs(evidence.citations[:5]))


@dataclass(frozen=True)
class _Context:
    """The source's context call answered, and what was made of it as the answers came."""

    payload: dict[str, Any]
    evidence: SourceEvidence
    guidance: GuidanceCheck
    cited: _Cited


async def _gather(calls: SourceCalls, source: SourceDescriptor, discovered: BundleRead | None,
                  plan: SourceRetrievalPlan | None, begun: str, started: float) -> SourceOutcome:
    if asyncio.get_running_loop().time() >= calls.deadline:  # waited for a slot past the deadline
        return _failed(calls, source, deadline_passed(), begun, started)
    client = calls.client_for(source)
    read = client.adopt(discovered)
    fields = plan.fields if plan is not None else {}
    fallback = plan.fallback if plan is not None else None
    reading: asyncio.Task[BundlePart] | None = None
    async with task_group() as group:  # the query does not need the bundle: both go out at once
        context = group.create_task(_context(client, calls, source, fields, fallback))
        if read is None and client.reads_bundle():
            reading = group.create_task(_bundle(calls, source, client))
    diagnostics = [plan.diagnostic] if plan is not None and plan.diagnostic is not None else []
    bundle_steps, bundle, bundle_note = (reading.result() if reading is not None
                                         else _bundle_part(calls, source, read, client.bundle_kind))
    answered = context.result()
    if isinstance(answered, SourceCallError):  # the bundle's own warning goes with the source's failure
        return _failed(calls, source, answered, begun, started, bundle_steps, diagnostics, bundle)
    if bundle_note is not None:
        diagnostics.append(bundle_note)
    evidence = answered.evidence
    advertised = {*source.capabilities, *bundle_capabilities(answered.payload), *client.run_capabilities(),
                  *((bundle.capabilities or ()) if bundle is not None else ())}
    guidance_note = guidance_diagnostic(answered.payload, GUIDED_LEXICAL in advertised, safe_id(source.id),
                                        source.protocol, answered.guidance)
    if guidance_note is not None:
        diagnostics.append(guidance_note)
    cited = answered.cited
    tool = _tool_step(source, "done", begun, detail=cited.detail, citation_ids=cited.ids,
                      citation_refs=cited.refs, diagnostic=plan.diagnostic if plan is not None else None,
                      latency_ms=elapsed_ms(started))
    return SourceOutcome(source, (tool, *bundle_steps), tuple(diagnostics), bundle, evidence)


async def _context(client: SourceClient, calls: SourceCalls, source: SourceDescriptor,
                   fields: Mapping[str, Any], fallback: str | None) -> _Context | SourceCallError:
    """The run's context, or the source's failure as a value (a sibling call goes on regardless).
    What is made of the context (evidence, guidance check, the tool step's citations) is made as
    soon as it answers, while the calls sent with it (searches) are still out; their new items,
    if any, are added once they are done."""
    try:
        async with asyncio.timeout_at(calls.deadline):
            async with task_group() as sent_with:  # a failed context call cancels them
                answer = await client.run_context(calls.query, fields, fallback, sent_with)
                evidence = artifact.evidence_from(answer.payload, source)
                guidance = check_guidance(answer.payload)
                cited = _cited(evidence)
    except SourceCallError as exc:
        return exc.with_traceback(None)  # kept in the outcome: no frames (or buffers) with it
    except TimeoutError:
        return deadline_passed()
    added = answer.added()
    if added:
        artifact.add_citations(evidence, answer.payload, added, source)
        cited = _cited(evidence)
    return _Context(answer.payload, evidence, guidance, cited)


async def _bundle(calls: SourceCalls, source: SourceDescriptor, client: SourceClient) -> BundlePart:
    """The bundle read and its part of the outcome, made as soon as it answers (the context's
    calls may still be out)."""
    try:
        async with asyncio.timeout_at(calls.deadline):
            read = await client.bundle()  # never raises for a source
    except TimeoutError:
        read = BundleRead(attempted=True, error=deadline_passed())
    return _bundle_part(calls, source, read, client.bundle_kind)


def _bundle_part(calls: SourceCalls, source: SourceDescriptor, read: BundleRead | None, kind: str
                 ) -> BundlePart:
    """The `source-manifest-*` step of an attempted bundle read, its metadata, and the warning
    when the read failed."""
    if read is None or not read.attempted:
        return (), None, None
    sid, label = safe_id(source.id), source.safe_label
    manifest = (f"source-manifest-{sid}", f"Read {label} source bundle")
    if read.raw is not None:
        detail = ("Read safe manifest metadata." if read.endpoint == "manifest"
                  else f"Read safe{kind} source bundle metadata.")
        done = step(*manifest, "done", detail=detail, parent_id=f"tool-{sid}", connection_id=source.id)
        return (done,), source_bundle(read.raw, source), None
    diagnostic = artifact.source_diagnostic(
        source, read.error or SourceCallError("Source bundle unavailable."), "source-bundle",
        source_policy=calls.source_policy, timeout_ms=calls.timeout_ms)
    failed = step(*manifest, "error", error="Source bundle unavailable.", diagnostic=diagnostic,
                  detail=f"{label}{kind} source bundle metadata could not be read; continuing without it.",
                  parent_id=f"tool-{sid}", connection_id=source.id)
    return (failed,), None, diagnostic


def _failed(calls: SourceCalls, source: SourceDescriptor, failure: SourceCallError, begun: str,
            started: float, later_steps: Sequence[TraceStep] = (), diagnostics: Sequence[Diagnostic] = (),
            bundle: SourceBundle | None = None) -> SourceOutcome:
    """The source's failed query (contract 3.8): its diagnostic and the tool step in error."""
    log.warning("source_failed", source=safe_id(source.id), error=failure.message)
    diagnostic = artifact.source_diagnostic(source, failure, "query", source_policy=calls.source_policy,
                                            timeout_ms=calls.timeout_ms)
    detail = f"{source.safe_label} could not be queried by the bridge."
    tool = _tool_step(source, "error", begun, detail=detail,
                      error="Source query failed.", citation_ids=[], citation_refs=[],  # as the seeds
                      diagnostic=diagnostic, latency_ms=elapsed_ms(started))
    return SourceOutcome(source, (tool, *later_steps), (*diagnostics, diagnostic), bundle, None)


def _tool_step(source: SourceDescriptor, status: str, begun: str, **extra: Any) -> TraceStep:
    """The source's `tool-<id>` step, stamped when its part of the run began (contract 3.8)."""
    sid = safe_id(source.id)
    return step(f"tool-{sid}", f"Call {source.safe_label}", status, timestamp=begun, connection_id=source.id,
                tool_name=f"llmwiki_context__{sid}", parent_id="bridge-plan", **extra)
