"""The run's fast paths give what the slower, plainer code they replace gives: wire-form graphs,
text normalisation and the JSON writer."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

import pytest

from bridge import artifact, wire_json
from bridge.registry import normalize_inline
from bridge.wire_json import WrittenDict, answer_body
from common import json_wire
from common.bridge_schemas import Graph, GraphEdge, GraphNode
from common.errors import json_body, json_bytes

SOURCE = normalize_inline([{"id": "kb-1", "name": "KB", "protocol": "llmwiki-http", "status": "ready",
                            "url": "http://127.0.0.1:9"}])[0]
ODD = ["", None, 0, 7, 1.5, 3e-05, float("nan"), float("inf"), True, [], {}, ["x", None], {"k": float("nan")},
       "x\x00y", "\ud800", "NaN", "é 中文 \u2028", "  spaced  ", "# Head [[A|B]] [[C]]"]


def _plain_graph(payload: dict[str, Any], source_id: str) -> Graph:
    """The node-by-node construction `graph_from` replaced."""
    raw = artifact.as_object(payload.get("graph")) or payload
    nodes: list[GraphNode] = []
    local_ids: set[str] = set()
    for index, node in enumerate(n for n in artifact.as_list(raw.get("nodes")) if isinstance(n, dict)):
        node_id = artifact._str(node.get("id")) or f"node:{index + 1}"
        local_ids.add(node_id)
        nodes.append(GraphNode(
            id=f"{source_id}:{node_id}",
            label=artifact._str(artifact._first(node, "label", "title", "id")) or f"Node {index + 1}",
            kind=artifact._str(artifact._first(node, "kind", "role")) or "node",
            path=artifact._str(node.get("path")),
            metadata={**artifact.as_object(node.get("metadata")), "connectionId": source_id}))
    edges: list[GraphEdge] = []
    for edge in (e for e in artifact.as_list(raw.get("edges")) if isinstance(e, dict)):
        source, target = artifact._str(edge.get("source")), artifact._str(edge.get("target"))
        if not source or not target:
            continue
        edges.append(GraphEdge(
            source=f"{source_id}:{source}" if source in local_ids else source,
            target=f"{source_id}:{target}" if target in local_ids else target,
            relation=artifact._str(artifact._first(edge, "relation", "kind")) or "related",
            metadata={**artifact.as_object(edge.get("metadata")), "connectionId": source_id}))
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
    assert [artifact.graph_from(p, f"kb-{i % 2}").wire() for i, p in enumerate(payloads)] == expected
    fast = [artifact.evidence_graph(p, f"kb-{i % 2}") for i, p in enumerate(payloads)]
    for graph, wire in zip(fast, expected, strict=True):
        assert _same_json(graph.wire(), wire)
        assert graph.model() == Graph.model_validate(wire)
    assert _same_json(artifact.merge_evidence_graphs(fast).wire(), artifact.merge_graphs(plain).wire())


def test_graph_metadata_nan_is_written_as_null_like_the_model_dump() -> None:
    payload = {"graph": {"nodes": [{"id": "a", "metadata": {"x": float("nan"), "y": [float("-inf")]}}],
                         "edges": [{"source": "a", "target": "b", "metadata": {"w": float("inf")}}]}}
    wire = artifact.evidence_graph(payload, "kb").wire()
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
        assert artifact.markdown_readable(text) == _plain_readable(text), repr(text)
        assert artifact.safe_trace_text(text) == _plain_trace_text(text), repr(text)
        assert artifact.safe_trace_text(text, 12) == _plain_trace_text(text, 12), repr(text)


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
    """`json_body` (HTTP answers) skips the tiny-float spelling pass: the text may differ from the
    stdlib's only in how such a number is written, never in what any JSON reader gets back."""
    rng = random.Random(11)
    values: list[Any] = [0.0, 1e-05, -2.5e-07, 9.99e-05, 5e-324, 11.1528, 1e16, "é 中文", "1e-05", None, True,
                         2**70, "\u2028"]
    for _ in range(2000):
        payload = {"a": rng.choice(values), "b": [rng.choice(values) for _ in range(rng.randint(0, 4))]}
        assert json.loads(json_body(payload)) == json.loads(_stdlib(payload)), payload
    assert json_body({"score": 1.5}) == _stdlib({"score": 1.5})
    assert json_body({"q": "a\ud800b"}) == b'{"q":"a\\ud800b"}'  # the ASCII fallback still holds


def _graphs(seed: int, ids: list[str]) -> list[artifact.EvidenceGraph]:
    rng = random.Random(seed)
    return [artifact.evidence_graph(_odd_graph(rng), source_id) for source_id in ids]


@pytest.mark.parametrize("ids", [["kb-0", "kb-1", "kb-2"], ["kb-0", "kb-0"], ["a", "a:b"], ["kb-0"], []])
@pytest.mark.parametrize("seed", range(30))
def test_merged_graphs_written_ahead_equal_the_plain_merge_and_writer(seed: int, ids: list[str]) -> None:
    """Graphs of distinct colon-free namespaces are joined, their JSON too; repeated or colon
    namespaces, repeated keys and edges to other sources' nodes take the keyed merge."""
    graphs = _graphs(seed, ids)
    merged = artifact.merge_evidence_graphs(graphs)
    plain = artifact.merge_graphs([g.model() for g in graphs]).wire()
    wire = merged.wire()
    assert _same_json(dict(wire), plain)
    assert answer_body(wire) == json_body(dict(wire))
    for graph in graphs:
        assert answer_body(graph.wire()) == json_body(dict(graph.wire()))


def _serve_graph(label: str = "P") -> dict[str, Any]:
    nodes = [{"id": f"page:{i}", "label": f"{label}{i}", "kind": "page", "path": f"{i}.md",
              "metadata": {"review_state": "approved", "score": 0.25, "okf": {}}} for i in range(5)]
    edges = [{"source": f"page:{i}", "target": f"page:{i + 1}", "relation": "links", "metadata": {}}
             for i in range(4)]
    return {"graph": {"nodes": nodes, "edges": edges}}


def test_a_serve_shaped_graph_is_written_ahead_and_joined() -> None:
    nodes = _serve_graph()["graph"]["nodes"]
    graphs = [artifact.evidence_graph(_serve_graph(), f"kb-{i}") for i in range(3)]
    assert all(g.namespace == f"kb-{i}" and g.nodes_json is not None for i, g in enumerate(graphs))
    merged = artifact.merge_evidence_graphs(graphs)
    assert isinstance(merged.wire(), WrittenDict) and len(merged.nodes) == 15 and len(merged.edges) == 12
    assert answer_body(merged.wire()) == json_body(dict(merged.wire()))
    # an edge to another source's node, or a repeated node id, takes the keyed merge
    outward = artifact.evidence_graph({"graph": {"nodes": nodes, "edges": [
        {"source": "page:0", "target": "kb-0:page:1", "relation": "links"}]}}, "kb-9")
    repeated = artifact.evidence_graph({"graph": {"nodes": nodes + nodes[:1], "edges": []}}, "kb-8")
    assert outward.namespace is None and repeated.namespace is None
    for odd in (outward, repeated):
        mixed = artifact.merge_evidence_graphs([*graphs, odd])
        assert mixed.wire() == artifact.merge_graphs([g.model() for g in (*graphs, odd)]).wire()


def test_answers_with_written_parts_are_byte_for_byte_the_plain_writer() -> None:
    graph = artifact.merge_evidence_graphs([artifact.evidence_graph(_serve_graph(), "kb-0"),
                                            artifact.evidence_graph(_serve_graph("é 中文 \u2028"), "kb-1")])
    wire = graph.wire()
    assert isinstance(wire, WrittenDict)
    result = {"answer": "a", "citations": [{"id": "c"}] * 3, "graph": wire, "steps": [{"id": "s"}] * 3}
    task = artifact.task_envelope("a", result, "r", "t")
    forms = [task, {"task": {"artifacts": [{"parts": [{"data": result}, {"text": "a"}]}]}},
             {"jsonrpc": "2.0", "id": 1, "result": {"task": {"artifacts": [{"parts": [{"data": result}]}]}}},
             {"one": wire, "two": wire}, [wire], wire]
    for payload in forms:
        assert answer_body(payload) == json_body(json.loads(json_body(payload)))
    assert task["artifacts"][0]["parts"][0]["data"]["graph"] is wire  # left as it was
    # the placeholder spelt by a value, or a value only the fallback writers can write
    token = wire_json._TOKEN + "0"
    for odd in (token, "a\ud800b", float("nan")):
        payload = {"x": odd, "graph": wire}
        assert answer_body(payload) == json_body(payload)
        assert payload["graph"] is wire
    assert answer_body({"plain": [1, 2.5, None]}) == json_body({"plain": [1, 2.5, None]})


@pytest.mark.parametrize("keys", [("evidence",), ("citations",), ("evidence", "citations")])
def test_citations_made_early_equal_the_citations_made_at_the_end(keys: tuple[str, ...]) -> None:
    """Items made into citations before search results were merged in are reused only where they
    still are: appended results, or results that push the `citations` items along, are made anew."""
    from bridge.sources.http_source import merge_search_results

    def item(page: str) -> dict[str, Any]:
        return {"page_id": page, "title": page.upper(), "path": f"{page}.md", "snippet": "# S [[x|y]]"}

    payload: dict[str, Any] = {key: [item(f"{key}-{i}") for i in range(3)] for key in keys}
    payload[keys[0]].insert(1, "not an item")
    payload[keys[-1]].append({"title": "no id"})  # its id is its place: a moved one gets a new one
    made = artifact.early_citations(payload, SOURCE)
    merge_search_results(payload, [[item("found-1"), item(f"{keys[0]}-0")], [item("found-2")]])
    reused = artifact.citations_from(payload, SOURCE, made)
    assert [c.wire() for c in reused] == [c.wire() for c in artifact.citations_from(payload, SOURCE)]
    assert [c.id for c in reused][-2:] == ["kb-1:found-1", "kb-1:found-2"] or len(keys) == 2
    kept = {id(c) for c in made.values()}
    # with both lists, the additions go to `evidence` and every `citations` item moves along
    assert sum(id(c) in kept for c in reused) == (len(made) if len(keys) == 1 else 3)
