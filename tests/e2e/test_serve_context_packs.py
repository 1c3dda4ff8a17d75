"""Context packs of the installed `llmwiki-serve`: `answerable` is false when the evidence
misses what a question is about (and limitations say which terms), the graph fits its size
budget and can be left out, and MCP text content is compact JSON of the same payload."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hostile import SAMPLE_WIKI, call, post_json
from tests.e2e.processes import Service, start_serve, stop_checked

PACK_TARGET = 16 * 1024  # the median pack at the default limit (issue 16)
PACK_CEILING = 20 * 1024  # any one pack: the target is a median, so a rich page may exceed it
JUDGED = Path(__file__).resolve().parents[2] / "fixtures" / "judged" / "fixtures.jsonl"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_serve(tmp_path_factory.mktemp("packs"), SAMPLE_WIKI)
    yield service
    stop_checked(service)


def pack(served: Service, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    answer = post_json(served.url, "/query", body)
    assert answer.status == 200, answer.body[:300]
    return answer.json(), len(answer.body)


@pytest.mark.parametrize(("question", "missing"), [
    ("How do I file an expense report for conference travel?", ["expense", "conference", "travel"]),
    ("Which page contains a payroll token named zzz_private_payroll_token?", ["zzz_private_payroll_token"]),
    ('"blue-green deployment" cutover steps', ["blue-green deployment"]),
    # A name no evidence page has (issue 27), though the checklist holds the other words.
    ("How do I sync the release checklist with Todoist?", ["Todoist"]),
    ("릴리스 체크리스트를 Todoist로 옮기려면?", ["Todoist"]),
])
def test_questions_the_evidence_does_not_cover_are_not_answerable(served: Service, question: str,
                                                                  missing: list[str]) -> None:
    body, _ = pack(served, {"query": question})
    if question.startswith('"'):
        # A quoted phrase must match as a phrase (issue 27): no page holds it, so no evidence.
        assert body["evidence"] == []
    else:
        assert body["evidence"]  # a page matched some word: before, that made it answerable
    assert body["answerable"] is False
    named = [line for line in body["limitations"] if line.startswith("The evidence does not mention")]
    assert len(named) == 1 and all(f'"{term}"' in named[0] for term in missing), body["limitations"]


@pytest.mark.parametrize("question", ["How do I roll back a release?",
                                      "how often do we replace the signing keys?",
                                      "REFUND_WINDOW_DAYS"])
def test_questions_the_evidence_covers_stay_answerable(served: Service, question: str) -> None:
    body, size = pack(served, {"query": question})
    assert body["answerable"] is True, body["limitations"]
    assert not any(line.startswith("The evidence") for line in body["limitations"])
    assert size <= PACK_CEILING


def test_the_median_pack_of_the_judged_questions_fits_the_target(served: Service) -> None:
    judged = [json.loads(line) for line in JUDGED.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = [j["query"] for j in judged if j["folder"] == "sample-wiki"]
    assert len(questions) >= 30
    sizes = [pack(served, {"query": question})[1] for question in questions]
    assert statistics.median(sizes) <= PACK_TARGET, sorted(sizes)


def test_the_graph_fits_its_budget_and_can_be_left_out(served: Service) -> None:
    full, size = pack(served, {"query": "release"})
    graph = full["graph"]
    assert size <= PACK_CEILING
    assert graph["truncated"] is True and graph["omitted"]["nodes"] > 0
    assert graph["nodes"][0]["id"] == f"page:{full['evidence'][0]['page_id']}"
    # Page nodes keep the reference's metadata keys.
    page = next(node for node in graph["nodes"] if node["id"].startswith("page:"))
    assert {"adapter", "implementation", "source_refs", "review_state", "okf"} <= set(page["metadata"])
    bare, bare_size = pack(served, {"query": "release", "include_graph": False})
    assert bare["graph"] == {"nodes": [], "edges": []}
    assert {k: v for k, v in bare.items() if k != "graph"} == {k: v for k, v in full.items() if k != "graph"}
    assert bare_size < size


def sse_or_json(data: bytes) -> dict[str, Any]:
    text = data.decode("utf-8")
    if text.lstrip().startswith("{"):
        found: dict[str, Any] = json.loads(text)
        return found
    events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    assert events, text[:300]
    found = json.loads(events[-1])
    return found


def test_mcp_text_content_is_the_payload_as_compact_json(served: Service) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "llmwiki_context", "arguments": {"query": "rollback"}}}
    answer = call(served.url, "POST", "/mcp/stream", json.dumps(request).encode(), headers=MCP_HEADERS)
    assert answer.status == 200, answer.body[:300]
    result = sse_or_json(answer.body)["result"]
    text = result["content"][0]["text"]
    assert json.loads(text) == result["structuredContent"]
    assert "\n" not in text and ": " not in text.split('"snippet"')[0]  # no indentation
    assert result["structuredContent"]["answerable"] is True
    bare = {**request, "params": {"name": "llmwiki_context",
                                  "arguments": {"query": "rollback", "include_graph": False}}}
    answer = call(served.url, "POST", "/mcp/stream", json.dumps(bare).encode(), headers=MCP_HEADERS)
    assert sse_or_json(answer.body)["result"]["structuredContent"]["graph"] == {"nodes": [], "edges": []}
