"""The run's fast paths give what the slower, plainer code they replace gives: graphs made in
their wire form (what validating each node and edge into models and dumping them gave), text
normalisation and the JSON writer."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

import pytest

from bridge.config.registry import normalize_inline
from bridge.core import artifact
from bridge.support import fields
from bridge.support import text as bridge_text
from common import json_wire
from common.bridge_schemas import Graph, GraphEdge, GraphNode
from common.errors import json_bytes

SOURCE = normalize_inline([{"id": "kb-1", "name": "KB", "protocol": "llmwiki-http", "status": "ready",
                            "url": "http://127.0.0.1:9"}])[0]
ODD = ["", None, 0, 7, 1.5, 3e-05, float("nan"), float("inf"), True, [], {}, ["x", None], {"k": float("nan")},
       "x\x00y", "\ud800", "NaN", "é 中文 \u2028", "  spaced  ", "# Head [[A|B]] [[C]]"]


def _plain_graph(payload: dict[str, Any], source_id: str) -> Graph:
    """The node-by-node construction `graph_from` replaced."""
    raw = fields.as_object(payload.get("graph")) or payload
    nodes: list[GraphNode] = []
    local_ids: set[str] = set()
    for index, node in enumerate(n for n in fields.as_list(raw.get("nodes")) if isinstance(n, dict)):
        node_id = fields.text_of(node.get("id")) or f"node:{index + 1}"
        local_ids.add(node_id)
        nodes.append(GraphNode(
            id=f"{source_id}:{node_id}",
            label=fields.text_of(fields.first(node, "label", "title", "id")) or f"Node {index + 1}",
            kind=fields.text_of(fields.first(node, "kind", "role")) or "node",
            path=fields.text_of(node.get("path")),
            metadata={**fields.as_object(node.get("metadata")), "connectionId": source_id}))
    edges: list[GraphEdge] = []
    for edge in (e for e in fields.as_list(raw.get("edges")) if isinstance(e, dict)):
        source, target = fields.text_of(edge.get("source")), fields.text_of(edge.get("target"))
        if not source or not target:
            continue
        edges.append(GraphEdge(
            source=f"{source_id}:{source}" if source in local_ids else source,
            target=f"{source_id}:{target}" if target in local_ids else target,
            relation=fields.text_of(fields.first(edge, "relation", "kind")) or "related",
            metadata={**fields.as_object(edge.get("metadata")), "connectionId": source_id}))
    return Graph(nodes=nodes, edges=edges)


def _odd_graph(rng: random.Random) -> dict[str, Any]:
    def field(value: Any) -> Any:
        return rng.choice(ODD) if rng.random() < 0.3 else value

    nodes: list[Any] = []
    for i in range(rng.randint(0, 12)):
        node = {key: field(value) for key, value in (
            ("id", f"page:{i % 7}"), ("label", f"Page {i}"), ("title", f"T{i}"), ("kind", "page"),
            ("role", "hot"), ("path", f"p/{i}.md"),
            ("metadata", {"tags": ["a", field("b")], "score": field(0.5), "okf": {}}))
            if rng.random() > 0.15}
        nodes.append(node if rng.random() > 0.1 else rng.choice(ODD))
    edges: list[Any] = []
    for _ in range(rng.randint(0, 15)):
        edge = {key: field(value) for key, value in (
            ("source", f"page:{rng.randint(0, 9)}"), ("target", rng.choice(["page:1", "heading:x", "ext"])),
            ("relation", rng.choice(["links", "contains"])), ("kind", "k"),
            ("metadata", {"weight": field(1)})) if rng.random() > 0.15}
        edges.append(edge if rng.random() > 0.1 else rng.choice(ODD))
    graph = {"nodes": nodes, "edges": edges}
    return {"graph": graph} if rng.random() < 0.8 else graph


def _same_json(left: Any, right: Any) -> bool:
    """Equal, counting NaN equal to NaN (as the written JSON does)."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(_same_json(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same_json(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and left == right


@pytest.mark.parametrize("seed", range(40))
def test_graph_forms_equal_the_node_by_node_models(seed: int) -> None:
    rng = random.Random(seed)
    payloads = [_odd_graph(rng) for _ in range(3)]
    plain = [_plain_graph(p, f"kb-{i % 2}") for i, p in enumerate(payloads)]
    expected = [g.wire() for g in plain]
    made = [artifact.graph_from(p, f"kb-{i % 2}") for i, p in enumerate(payloads)]
    assert _same_json([g.wire() for g in made], expected)


def test_graph_metadata_nan_is_written_as_null_like_the_model_dump() -> None:
    payload = {"graph": {"nodes": [{"id": "a", "metadata": {"x": float("nan"), "y": [float("-inf")]}}],
                         "edges": [{"source": "a", "target": "b", "metadata": {"w": float("inf")}}]}}
    wire = artifact.graph_from(payload, "kb").wire()
    assert wire == _plain_graph(payload, "kb").wire()
    assert wire["nodes"][0]["metadata"] == {"x": None, "y": [None], "connectionId": "kb"}
    assert wire["edges"][0]["metadata"] == {"w": None, "connectionId": "kb"}
    assert b"NaN" not in json_bytes(wire) and b"Infinity" not in json_bytes(wire)


def _plain_readable(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    text = re.sub(r"(?m)^\s{0,3}#{1,6}\s+", "", text)
    text = re.sub(r"\[\[([^\]|]+)\|([^\]]+)\]\]", r"\2", text)
    text = re.sub(r"\[\[([^\]]+)\]\]", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _plain_trace_text(text: Any, limit: int = 160) -> str:
    clean = re.sub(r"[\x00-\x1f\x7f]", " ", _plain_readable(text)).strip()
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def test_text_normalisation_equals_the_plain_regexes() -> None:
    rng = random.Random(7)
    pieces = ["# ", "## H", "\n", "  ", "\t", "[[", "]]", "|", "[", "]", "a", "Wörd", "中", "\x00", "\x1c",
              "\x7f", "\u00a0", "\u2028", "\u200b", "#", "###### x", "\r\n", "   #  y", "[[A|B]]", "[[C]]",
              " x "]
    samples: list[Any] = [None, 3, "", " ", "# only", "[[x]]"]
    one_line = [p for p in pieces if "\n" not in p]  # a heading can then only start the text
    samples += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    samples += ["".join(rng.choice(one_line) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in samples:
        assert bridge_text.markdown_readable(text) == _plain_readable(text), repr(text)
        assert bridge_text.safe_trace_text(text) == _plain_trace_text(text), repr(text)
        assert bridge_text.safe_trace_text(text, 12) == _plain_trace_text(text, 12), repr(text)


def _stdlib(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def test_json_bytes_equals_the_stdlib_writer() -> None:
    rng = random.Random(3)
    floats = [0.0, -0.0, 1.0, 11.1528, 0.1 + 0.2, 1e-4, 9.99e-05, 3e-05, 1e-07, -2.5e-09, 1e15, 1e16, 1.5e17,
              1e300, 5e-324, float("nan"), float("inf"), float("-inf")]
    strings = ["", "plain", "é 中文 😀", "\u2028\u2029", "\x00\x1f\x7f\"\\/", "1e-5 in text", "0.00001 text",
               "NaN"]
    scalars: list[Any] = [*floats, *strings, None, True, False, 0, -7, 2**70]
    for _ in range(2000):
        payload = {"a": rng.choice(scalars), "b": [rng.choice(scalars) for _ in range(rng.randint(0, 4))],
                   "c": {rng.choice(strings): rng.choice(scalars)}}
        assert json_bytes(payload) == _stdlib(payload), payload
    for value in [*floats, *strings]:
        assert json_bytes([value]) == _stdlib([value])


def test_json_bytes_keeps_the_ascii_fallback_for_a_lone_surrogate() -> None:
    assert json_bytes({"q": "a\ud800b"}) == b'{"q":"a\\ud800b"}'
    with pytest.raises(TypeError):
        json_bytes({"x": object()})


def test_json_bytes_looks_for_small_floats_only_where_a_number_can_be(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Number-like text inside strings (a UUID's `...-448e-8b3a-...`, `11.1528` in a title) keeps the
    fast output; a real number under 1e-4 anywhere still gets the stdlib's spelling."""
    rng = random.Random(5)
    texts = ["ec012a51-0d32-448e-8b3a-0fbbe1d936fc", "x:1e-5", "[0.00001", ",0.0000", "-0.00001", "7e-3",
             "score 11.1528", "0.00001", "a,-1e-7]", "1e-05"]
    small = [1e-05, -1e-05, 9.99e-05, 2.5e-07, -3e-300, 5e-324]
    plain = [0.0, 0.0001, 0.00012, 10.00001, 11.1528, 1e16, -2.5, 3]
    for _ in range(3000):
        payload: Any = {rng.choice(texts): [rng.choice(texts + plain) for _ in range(rng.randint(0, 3))],
                        "n": rng.choice(plain + small) if rng.random() < 0.3 else rng.choice(plain)}
        if rng.random() < 0.1:
            payload = rng.choice(small + plain)
        assert json_bytes(payload) == _stdlib(payload), payload
    calls: list[Any] = []
    real = json_wire._stdlib_json
    monkeypatch.setattr(json_wire, "_stdlib_json", lambda payload: calls.append(payload) or real(payload))
    in_strings = [texts[0], "-0.00001", "7e-3", "score 11.1528", "0.00001", "1e-05"]
    fast = {"id": texts[0], "texts": in_strings, "numbers": plain}
    assert json_bytes(fast) == _stdlib(fast) and calls == []
    for value in small:
        payload = {"id": texts[0], "x": [1, {"y": value}]}
        assert json_bytes(payload) == _stdlib(payload)
    assert len(calls) == len(small)


def test_http_answers_hold_the_same_json_values() -> None:
    """HTTP answers skip the tiny-float spelling pass (`exact_floats=False`): the text may differ from
    the stdlib's only in how such a number is written, never in what any JSON reader gets back."""
    rng = random.Random(11)
    values: list[Any] = [0.0, 1e-05, -2.5e-07, 9.99e-05, 5e-324, 11.1528, 1e16, "é 中文", "1e-05", None, True,
                         2**70, "\u2028"]
    for _ in range(2000):
        payload = {"a": rng.choice(values), "b": [rng.choice(values) for _ in range(rng.randint(0, 4))]}
        assert json.loads(json_bytes(payload, exact_floats=False)) == json.loads(_stdlib(payload)), payload
    assert json_bytes({"score": 1.5}, exact_floats=False) == _stdlib({"score": 1.5})
    # the ASCII fallback still holds
    assert json_bytes({"q": "a\ud800b"}, exact_floats=False) == b'{"q":"a\\ud800b"}'


def test_merged_graphs_keep_the_first_node_per_id_and_the_first_edge_per_key() -> None:
    first = artifact.graph_from({"graph": {"nodes": [{"id": "a", "label": "first"}, {"id": "b"}],
                                           "edges": [{"source": "a", "target": "b", "label": "x"}]}}, "kb")
    nodes = [{"id": "a", "label": "second"}, {"id": "b"}, {"id": "c"}]
    again = artifact.graph_from({"graph": {"nodes": nodes,
                                           "edges": [{"source": "a", "target": "b"},
                                                     {"source": "a", "target": "c"}]}}, "kb")
    merged = artifact.merge_graphs([first, again]).wire()
    labels = [(n["id"], n["label"]) for n in merged["nodes"]]
    assert labels == [("kb:a", "first"), ("kb:b", "b"), ("kb:c", "c")]
    assert [(e["source"], e["target"]) for e in merged["edges"]] == [("kb:a", "kb:b"), ("kb:a", "kb:c")]
    assert merged["edges"][0]["metadata"] == {"connectionId": "kb"}


def test_the_result_dumped_once_equals_each_part_dumped_alone() -> None:
    """`AgentResult.wire()` (one dump) gives what dumping every citation, step, bundle, diagnostic
    and the graph on its own gave: camelCase keys, unset optional keys dropped, key order kept."""
    payload = {"evidence": [{"id": "a", "title": "A", "path": "a.md", "snippet": "x", "score": 0.5},
                            {"id": "b", "title": "B", "path": "b.md", "snippet": "y", "handle": "llmwiki://kb/b"}],
               "graph": {"nodes": [{"id": "a", "metadata": {"gone": None, "x": float("nan")}}], "edges": []}}
    evidence = artifact.evidence_from(payload, SOURCE)
    steps = [artifact.step("tool-kb-1", "Call KB", "done", citation_ids=["kb-1:a"],
                           citation_refs=artifact.citation_refs(evidence.citations)),
             artifact.step("bridge-final-answer", "Return", "done")]
    failure = artifact.source_diagnostic(SOURCE, artifact.SourceCallError("down", timeout=True), "query",
                                         source_policy="loopback", timeout_ms=1000)
    result = artifact.AgentResult(request_id="r", trace_id="t", answer="A.", orchestration_mode="hybrid",
                                  citations=evidence.citations, graph=evidence.graph.value(), steps=steps,
                                  source_bundles=[], diagnostics=[failure])
    alone = {"requestId": "r", "traceId": "t", "answer": "A.", "orchestrationMode": "hybrid",
             "citations": [c.wire() for c in evidence.citations], "graph": evidence.graph.wire(),
             "steps": [s.wire() for s in steps], "sourceBundles": [], "diagnostics": [failure.wire()]}
    assert result.wire() == alone
    assert list(result.wire()) == list(alone)
    assert "handle" not in result.wire()["citations"][0] and result.wire()["citations"][1]["handle"]
    # The one dump makes the graph JSON-safe, as dumping it alone does.
    assert result.wire()["graph"]["nodes"][0]["metadata"] == {"gone": None, "x": None, "connectionId": "kb-1"}


@pytest.mark.parametrize("payload", [
    {"evidence": [{"id": "a"}, {"title": "no id"}]},  # searches' items go after the evidence
    {"citations": [{"id": "a"}, {"title": "no id"}]},  # ... or after the citations
    {"evidence": "not a list", "citations": [{"id": "a"}]},
    {"evidence": [{"id": "a"}], "citations": [{"title": "no id"}]},  # into the middle: all again
    {},
])
def test_citations_of_merged_search_items_are_those_of_the_merged_payload(payload: dict[str, Any]) -> None:
    """The evidence made before the searches answered, with their new items added, equals the
    evidence made from the merged payload (ids of items without one are their place)."""
    from bridge.sources.http_source import merge_search_results

    merged = json.loads(json.dumps(payload))
    early = artifact.evidence_from(merged, SOURCE)
    added = merge_search_results(merged, [[{"page_id": "a"}, {"pageId": "n1", "title": "N1"}],
                                          [{"path": "b.md"}]])
    assert [item.get("pageId") or item.get("path") for item in added][-2:] == ["n1", "b.md"]
    artifact.add_citations(early, merged, added, SOURCE)
    made_after = artifact.evidence_from(merged, SOURCE).citations
    assert [c.wire() for c in early.citations] == [c.wire() for c in made_after]
    assert len(early.citations) == len(artifact.citations_from(payload, SOURCE)) + len(added)


@pytest.mark.parametrize(("failure", "remediation"), [
    (artifact.SourceCallError("KB query returned HTTP 503", http_status=503),
     "The Knowledge Source is busy or still starting (HTTP 503); retry in a few seconds."),
    (artifact.SourceCallError("KB query returned HTTP 429", http_status=429),
     "The Knowledge Source is busy or still starting (HTTP 429); retry in a few seconds."),
    (artifact.SourceCallError("KB query returned HTTP 500", http_status=500),
     "Check that the Knowledge Source is running and reachable, then retry."),
    (artifact.SourceCallError("KB query could not be reached."),
     "Check that the Knowledge Source is running and reachable, then retry."),
])
def test_a_source_that_answers_busy_is_not_called_unreachable(failure: artifact.SourceCallError,
                                                              remediation: str) -> None:
    """serve answers 503 (Retry-After) while its index loads after a start: it is up and
    reachable, and the diagnostic must not send the operator looking for a dead process."""
    diagnostic = artifact.source_diagnostic(SOURCE, failure, "query", source_policy="loopback",
                                            timeout_ms=1000).wire()
    assert diagnostic["remediation"] == remediation
    assert diagnostic["retryable"] is True
