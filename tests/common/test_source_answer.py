"""The source-answer models read every spelling the contracts document, treat null and "" as absent,
read a wrong type as no value without raising, and ignore keys they do not know."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from common.source_answer import (
    GraphEdgeItem,
    GraphNodeItem,
    PageItem,
    SourceAnswer,
    SourceContextPack,
)

ODD: list[Any] = [None, "", 0, 7, 1.5, float("nan"), True, False, [], {}, ["x"], {"k": 1}, "x", "\ud800"]


# ----------------------------------------------------------------------------- page items

@pytest.mark.parametrize(("field", "spellings"), [
    ("citation_id", ["id", "page_id", "path"]),  # bridge contract 4.3.1: raw id
    ("page_id", ["page_id", "pageId", "id"]),  # 4.3.1: page id
    ("result_id", ["page_id", "pageId", "id", "path"]),  # 3.11: a search result's id
    ("item_id", ["id", "page_id", "pageId"]),  # 3.11: an orientation item's id
    ("connection_id", ["connectionId", "connection_id"]),  # 4.3.1
    ("handle", ["handle", "uri"]),
])
def test_each_spelling_is_read_and_the_first_with_a_value_wins(field: str, spellings: list[str]) -> None:
    for index, name in enumerate(spellings):
        assert getattr(PageItem.model_validate({name: f"v-{name}"}), field) == f"v-{name}"
        later = {other: f"v-{other}" for other in spellings[index:]}
        assert getattr(PageItem.model_validate(later), field) == f"v-{name}"
        # null and "" are no value: the next spelling is read
        for unset in (None, ""):
            if index + 1 < len(spellings):
                skipped = {name: unset, **{o: f"v-{o}" for o in spellings[index + 1:]}}
                assert getattr(PageItem.model_validate(skipped), field) == f"v-{spellings[index + 1]}"


def test_a_value_of_the_wrong_type_is_no_value_and_stops_the_spellings() -> None:
    """As the reference reads them: the first spelling with a value is the one read, even when its
    value is no text (a list, an object, a boolean)."""
    for odd in ([], {}, True, ["x"]):
        item = PageItem.model_validate({"id": odd, "page_id": "p", "path": "p.md"})
        assert item.citation_id is None and item.item_id is None
        assert item.page_id == "p" and item.result_id == "p"


def test_source_refs_in_either_spelling_keep_strings_and_integers() -> None:
    refs = ["a", 1, 2.5, None, True, {}]
    assert PageItem.model_validate({"sourceRefs": refs}).source_refs == ["a", 1, True]
    assert PageItem.model_validate({"source_refs": ["b"]}).source_refs == ["b"]
    assert PageItem.model_validate({"sourceRefs": [], "source_refs": ["b"]}).source_refs == []
    assert PageItem.model_validate({"sourceRefs": None, "source_refs": ["b"]}).source_refs == ["b"]
    assert PageItem.model_validate({"sourceRefs": "a,b"}).source_refs is None


def test_scalars_keep_strings_and_numbers_as_sent() -> None:
    item = PageItem.model_validate({"title": 7, "path": 1.5, "snippet": "s", "role": False, "score": 3})
    assert (item.title, item.path, item.snippet, item.role, item.score) == (7, 1.5, "s", None, 3)
    assert type(item.score) is int
    assert PageItem.model_validate({"score": True}).score is None
    assert PageItem.model_validate({"score": "0.5"}).score is None


def test_missing_fields_are_none() -> None:
    item = PageItem.model_validate({})
    assert all(value is None for value in item.model_dump().values())


def test_origin_and_section_are_objects_as_sent() -> None:
    origin = {"path": "a.md", "line_start": 1, "line_end": 2}
    item = PageItem.model_validate({"origin": origin, "section": ["not", "an", "object"]})
    assert item.origin is origin and item.section is None


def test_unknown_keys_are_ignored() -> None:
    item = PageItem.model_validate({"id": "a", "route": "search", "matched_fields": ["title"], "x": {"y": 1}})
    assert item.citation_id == "a"
    assert not hasattr(item, "route") and item.model_extra is None


# ----------------------------------------------------------------------------- graphs

@pytest.mark.parametrize(("field", "spellings", "model"), [
    ("label", ["label", "title", "id"], GraphNodeItem),  # 4.3.2
    ("kind", ["kind", "role"], GraphNodeItem),
    ("relation", ["relation", "kind"], GraphEdgeItem),
])
def test_graph_spellings(field: str, spellings: list[str],
                         model: type[GraphNodeItem | GraphEdgeItem]) -> None:
    for index, name in enumerate(spellings):
        assert getattr(model.model_validate({name: f"v-{name}"}), field) == f"v-{name}"
        rest = {other: f"v-{other}" for other in spellings[index + 1:]}
        for unset in (None, ""):
            expected = f"v-{spellings[index + 1]}" if rest else ""
            assert getattr(model.model_validate({name: unset, **rest}), field) == expected
    assert getattr(model.model_validate({}), field) == ""


@pytest.mark.parametrize("value", ODD + [3e-05, 1e16, -0.0, float("inf"), 2**70])
def test_graph_text_is_the_text_of_the_value(value: Any) -> None:
    """A string as is, a number as Python writes it, anything else "" (the bridge's `text_of`)."""
    expected = value if isinstance(value, str) else (
        str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "")
    node = GraphNodeItem.model_validate({"id": value, "path": value})
    edge = GraphEdgeItem.model_validate({"source": value, "target": value})
    assert node.id == node.path == edge.source == edge.target == expected


def test_the_graph_is_the_graph_object_else_the_top_level_nodes_and_edges() -> None:
    top = {"nodes": [{"id": "top"}], "edges": [{"source": "top", "target": "x"}]}
    assert [n.id for n in SourceAnswer.model_validate(top).graph_items()[0]] == ["top"]
    inner = {**top, "graph": {"nodes": [{"id": "inner"}]}}
    nodes, edges = SourceAnswer.model_validate(inner).graph_items()
    assert [n.id for n in nodes] == ["inner"] and edges == []
    for no_graph in ({}, None, [], "graph", 3):
        nodes, _ = SourceAnswer.model_validate({**top, "graph": no_graph}).graph_items()
        assert [n.id for n in nodes] == ["top"], no_graph
    assert SourceAnswer.model_validate({"graph": {"other": 1}}).graph_items() == ([], [])


def test_graph_items_that_are_not_objects_are_left_out_and_metadata_is_kept_as_sent() -> None:
    metadata = {"okf": {}, "score": float("nan")}
    answer = SourceAnswer.model_validate({"nodes": ["x", {"id": "a", "metadata": metadata}, None, 3, {}],
                                          "edges": [[], {"source": "a", "metadata": "m"}]})
    nodes, edges = answer.graph_items()
    assert [n.id for n in nodes] == ["a", ""]
    assert nodes[0].metadata is metadata and nodes[1].metadata is None
    assert [(e.source, e.target, e.metadata) for e in edges] == [("a", "", None)]
    assert SourceAnswer.model_validate({"nodes": "many", "edges": {}}).graph_items() == ([], [])


# ----------------------------------------------------------------------------- answers

def test_cited_items_are_evidence_then_citations_and_keep_their_places() -> None:
    answer = SourceAnswer.model_validate({"evidence": [{"id": "a"}, "junk", {"id": "b"}],
                                          "citations": [None, {"pageId": "c"}]})
    assert [item.page_id if item else None for item in answer.cited_items()] == ["a", None, "b", None, "c"]
    assert SourceAnswer.model_validate({"evidence": "x", "citations": [{"id": "c"}]}).cited_items()[0]
    assert SourceAnswer.model_validate({"results": [{"page_id": "r"}]}).results is not None


@pytest.mark.parametrize("spelling", ["wiki_title", "wikiTitle", "title"])
def test_the_wiki_title_in_each_spelling(spelling: str) -> None:
    assert SourceContextPack.model_validate({spelling: "Wiki"}).wiki_title == "Wiki"
    assert SourceContextPack.model_validate({"wiki_title": "", spelling: "Wiki"}).wiki_title == "Wiki"


@pytest.mark.parametrize(("field", "spellings"), [("page_count", ["page_count", "pageCount"]),
                                                  ("approved_page_count",
                                                   ["approved_page_count", "approvedPageCount"])])
def test_counts_in_each_spelling_on_the_pack_else_its_metadata(field: str, spellings: list[str]) -> None:
    for name in spellings:
        assert SourceContextPack.model_validate({name: 4}).described(field) == 4
        assert SourceContextPack.model_validate({"metadata": {name: 5}}).described(field) == 5
        assert SourceContextPack.model_validate({name: 4, "metadata": {name: 5}}).described(field) == 4
        assert SourceContextPack.model_validate({name: None, "metadata": {name: 5}}).described(field) == 5
        # a count of the wrong type on the pack is no count, and the metadata is not read instead
        for odd in ("4", 4.0, True, [4]):
            pack = SourceContextPack.model_validate({name: odd, "metadata": {name: 5}})
            assert pack.described(field) is None


def test_description_adapter_and_implementation_on_the_pack_else_its_metadata() -> None:
    metadata = {"description": "D", "adapter": "A", "implementation": 3}
    pack = SourceContextPack.model_validate({"description": "", "adapter": {"x": 1}, "metadata": metadata})
    assert (pack.described("description"), pack.described("adapter"), pack.described("implementation")) == (
        "D", None, 3)
    assert SourceContextPack.model_validate({"metadata": "none"}).described("description") is None


def test_answerable_limitations_and_orientation() -> None:
    pack = SourceContextPack.model_validate({"answerable": True, "limitations": ["a", 1, None, "", "b"],
                                         "orientation": [{"page_id": "hot", "role": "hot"}, "x"]})
    assert pack.answerable is True and pack.limitations == ["a", "", "b"]
    assert [item.item_id if item else None for item in pack.orientation or ()] == ["hot", None]
    odd = SourceContextPack.model_validate({"answerable": "true", "limitations": "none", "orientation": {}})
    assert (odd.answerable, odd.limitations, odd.orientation) == (None, None, None)


def _odd_value(rng: random.Random, depth: int = 0) -> Any:
    if depth < 2 and rng.random() < 0.3:
        if rng.random() < 0.5:
            return [_odd_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(KEYS): _odd_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return rng.choice(ODD)


KEYS = ["id", "page_id", "pageId", "path", "title", "wiki_title", "wikiTitle", "label", "kind", "role",
        "relation", "source", "target", "metadata", "graph", "nodes", "edges", "evidence", "citations",
        "results", "orientation", "limitations", "answerable", "sourceRefs", "source_refs", "score",
        "snippet", "origin", "section", "handle", "uri", "connectionId", "connection_id", "page_count",
        "pageCount", "extra", "description"]


@pytest.mark.parametrize("seed", range(20))
def test_any_json_object_validates(seed: int) -> None:
    """A peer's answer is read, never rejected: any JSON object, nested anyhow, validates."""
    rng = random.Random(seed)
    for _ in range(200):
        payload = {rng.choice(KEYS): _odd_value(rng) for _ in range(rng.randint(0, 8))}
        pack = SourceContextPack.model_validate(payload)
        pack.graph_items()
        pack.cited_items()
        json.dumps(pack.model_dump(), default=str)
