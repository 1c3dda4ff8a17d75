"""The run's runtime step (delegated-runtime, hybrid): one runtime answer, or the run's failure."""

from __future__ import annotations

import time

import structlog

from bridge.config.settings import BridgeSettings
from bridge.core.answer import (
    ADAPTER_FAILED_MESSAGE,
    RUNTIME_STEPS,
    RuntimeAnswer,
    acp_diagnostic,
    acp_runtime_answer,
    runtime_answer,
)
from bridge.core.artifact import step
from bridge.core.errors import RunFailed
from bridge.core.evidence import Evidence
from bridge.core.request import RunRequest
from bridge.runtime.acp import AcpFailure
from bridge.runtime.base import CHAT_FAILED_MESSAGE, OpenChat, RuntimeFailure, runtime_diagnostic
from bridge.sources.base import ClientFor
from bridge.support import audit
from bridge.support.clock import elapsed_ms
from bridge.support.iolog import IoLog
from bridge.support.text import safe_trace_text
from common.bridge_schemas import Diagnostic, TraceStep

log = structlog.get_logger("llmwiki.bridge.run")


async def runtime_step(settings: BridgeSettings, client_for: ClientFor,
                       open_chat: OpenChat, io: IoLog | None, request: RunRequest,
                       evidence: Evidence, steps: list[TraceStep], diagnostics: list[Diagnostic],
                       request_id: str, trace_id: str) -> RuntimeAnswer:
    """The runtime step around one runtime answer. A hybrid run's tool steps and diagnostics go into
    `steps` and `diagnostics` as they happen; any runtime failure is `RunFailed` with all of them."""
    adapter = settings.runtime_adapter
    step_id, step_label = RUNTIME_STEPS[adapter]
    chat = adapter == "chat-completions"
    running = step(step_id, step_label, "running",
                   detail="Sending grounded evidence to the configured OpenAI-compatible chat completions "
                          "endpoint." if chat else
                   "Sending grounded evidence to the configured DeepAgents ACP runtime adapter.")
    steps.append(running)
    started = time.perf_counter()
    context = request.context.wire()
    ranked = request.citation_order == "relevance"
    try:
        if adapter == "deepagents-acp":
            runtime = await acp_runtime_answer(
                settings, query=request.query, history=request.conversation, conversation_context=context,
                answered=evidence.answered, failed=evidence.failed, citations=evidence.citations,
                graph=evidence.graph, ranked=ranked)
        else:
            runtime = await runtime_answer(
                settings, client_for, open_chat, io, hybrid=request.mode == "hybrid", query=request.query,
                history=request.conversation, conversation_context=context, answered=evidence.answered,
                failed=evidence.failed, citations=evidence.citations, graph=evidence.graph, steps=steps,
                diagnostics=diagnostics, ranked=ranked)
    except RuntimeFailure as exc:
        log.warning("chat_completions_failed", reason=exc.message, http_status=exc.http_status,
                    timeout=exc.timeout)
        raise _failed(running, started, runtime_diagnostic(settings, exc), exc.message,
                      "chat_completions_failed", CHAT_FAILED_MESSAGE, evidence, steps, diagnostics,
                      request_id, trace_id) from None
    except AcpFailure as exc:
        log.warning("runtime_adapter_failed", adapter=adapter, reason=exc.message, timeout=exc.timeout,
                    exit_code=exc.exit_code)
        raise _failed(running, started, acp_diagnostic(settings, exc), exc.message,
                      "runtime_adapter_failed", ADAPTER_FAILED_MESSAGE, evidence, steps, diagnostics,
                      request_id, trace_id) from None
    # The reference's wording (contract 4.4), plus the tool calls a hybrid run made.
    detail = ("The chat completions endpoint" if chat else "The DeepAgents ACP runtime adapter") + \
        " returned a grounded markdown answer."
    if runtime.anchors_appended:
        detail += " The bridge appended bounded fallback citation anchors because the runtime returned none."
    if request.mode == "hybrid" and chat:
        detail += f" The runtime made {runtime.tool_calls} source tool call(s)."
    running.status, running.detail, running.latency_ms = "done", detail, elapsed_ms(started)
    return runtime


def _failed(running: TraceStep, started: float, diagnostic: Diagnostic, reason: str, code: str, message: str,
            evidence: Evidence, steps: list[TraceStep], diagnostics: list[Diagnostic], request_id: str,
            trace_id: str) -> RunFailed:
    """The contract's runtime failure (5.6) with every step and diagnostic gathered so far."""
    diagnostics.append(diagnostic)
    running.status, running.error = "error", message
    running.detail, running.diagnostic = safe_trace_text(reason), diagnostic
    running.latency_ms = elapsed_ms(started)
    audit.note(runtimeCalled=True, citationCount=len(evidence.citations), diagnosticCount=len(diagnostics))
    return RunFailed("runtime_failed", code, message, request_id, trace_id, steps, diagnostics)
