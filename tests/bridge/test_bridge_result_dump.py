"""The run's result stays a model in its task and is written by the answer's one JSON dump: what
any writer makes of it must be its `wire()` form (camelCase keys, unset keys left out, NaN as null)."""

from __future__ import annotations

import json
from typing import Any

from bridge.config.registry import normalize_inline
from bridge.core import artifact
from bridge.sources.base import SourceCallError
from bridge.support.redaction import redact
from common.bridge_schemas import Citation
from common.errors import json_bytes

SOURCE = normalize_inline([{"id": "kb-1", "name": "KB", "protocol": "llmwiki-http", "status": "ready",
                            "url": "http://127.0.0.1:9"}])[0]


def _result(title: str = "Release", score: float | None = 1.5) -> artifact.AgentResult:
    payload = {"graph": {"nodes": [{"id": "a", "metadata": {"w": float("nan"), "n": None}}],
                         "edges": [{"source": "a", "target": "b", "metadata": {"x": float("-inf")}}]}}
    cited = Citation(id="kb-1:a", source_id="kb-1", page_id="a", title=title, path="a.md", score=score,
                     snippet="s", connection_id="kb-1")  # no handle: the key must be absent
    diagnostic = artifact.source_diagnostic(SOURCE, SourceCallError("down", timeout=True), "source-bundle",
                                            source_policy="private-http", timeout_ms=100)
    steps = [artifact.step("bridge-plan", "Plan", "done"),
             artifact.step("tool-kb_1", "Call KB", "error", error="failed", diagnostic=diagnostic,
                           citation_ids=[], citation_refs=artifact.citation_refs([cited]))]
    return artifact.AgentResult(
        request_id="r", trace_id="t", answer="answer", orchestration_mode="evidence-only", citations=[cited],
        graph=artifact.graph_from(payload, "kb-1").value(), steps=steps, source_bundles=[],
        diagnostics=[diagnostic])


def _data(body: bytes) -> Any:
    return json.loads(body)["artifacts"][0]["parts"][0]["data"]


def test_the_task_is_written_with_the_result_in_its_wire_form() -> None:
    result = _result()
    task = artifact.task_envelope(result.answer, result, "r", "t")
    wire = result.wire()
    assert "handle" not in wire["citations"][0] and "detail" not in wire["steps"][0]
    assert wire["graph"]["nodes"][0]["metadata"] == {"w": None, "n": None, "connectionId": "kb-1"}
    for body in (json_bytes(task), json_bytes(task, exact_floats=False)):
        assert _data(body) == wire
        assert b"NaN" not in body and b"Infinity" not in body
    assert artifact.result_of(task) is result


def test_the_stdlib_fallbacks_write_the_same_result() -> None:
    """A float under 1e-4 (the exact spelling) and a lone surrogate (ASCII escapes) go through the
    standard library writer, which must give the nested model the same form."""
    small = _result(score=1e-05)
    body = json_bytes(artifact.task_envelope("a", small, "r", "t"))
    assert _data(body) == small.wire() and b'"score":1e-05' in body
    odd = _result(title="a\ud800b")
    body = json_bytes(artifact.task_envelope("a", odd, "r", "t"), exact_floats=False)
    assert b'"title":"a\\ud800b"' in body
    assert _data(body) == odd.wire()


def test_the_io_log_redacts_the_result_as_its_wire_form() -> None:
    result = _result()
    task = artifact.task_envelope(result.answer, result, "r", "t")
    as_values = json.loads(json_bytes(task))  # the task as it was before: the result in Python values
    logged = redact(task)
    assert logged == redact(as_values)
    assert logged["artifacts"][0]["parts"][0]["data"]["citations"][0]["title"] == "Release"
