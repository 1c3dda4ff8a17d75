"""Reading a source's answer through the `common.source_answer` models gives what the key-by-key
reading they replaced gave, for odd answers too: citations, orientation previews, the wiki
title, the MCP context value and search results."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from bridge.config.registry import normalize_inline
from bridge.core import artifact
from bridge.core.bundle import safe_uri
from bridge.core.origins import citation_origin
from bridge.support.fields import as_list, as_object, first, text_of
from bridge.support.text import markdown_readable
from bridge.web.mcp_payloads import context_value, search_results, string
from common.bridge_schemas import Citation

SOURCE = normalize_inline([{"id": "kb-1", "name": "KB", "protocol": "llmwiki-http", "status": "ready",
                            "url": "http://127.0.0.1:9", "description": "D", "adapter": "A"}])[0]
ODD: list[Any] = ["", None, 0, 7, 1.5, float("nan"), True, [], {}, ["x", 3, True, None], {"k": 1},
                  "x\x00y", "\ud800", "kb-1:pre", "# Head [[A|B]]", "llmwiki://kb/pages/a", "https://u:p@h/x?q"]
ID_KEYS = ("id", "page_id", "pageId", "path")


def _plain_refs(item: dict[str, Any]) -> list[str]:
    refs = first(item, "sourceRefs", "source_refs")
    return [str(r) for r in refs if isinstance(r, (str, int))] if isinstance(refs, list) else []


def _plain_citations(payload: dict[str, Any]) -> list[Citation]:
    """The key-by-key reading of contract 4.3.1 the models replaced."""
    items = [item for key in ("evidence", "citations") if isinstance(payload.get(key), list)
             for item in payload[key]]
    made = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        raw_id = text_of(first(item, "id", "page_id", "path")) or str(index + 1)
        score = item.get("score")
        handle = safe_uri(first(item, "handle", "uri"))
        origin = item.get("origin")
        section = item.get("section")
        made.append(Citation(
            id=raw_id if raw_id.startswith("kb-1:") else f"kb-1:{raw_id}", source_id="kb-1",
            page_id=text_of(first(item, "page_id", "pageId", "id")) or raw_id,
            title=text_of(item.get("title")) or "Untitled", path=text_of(item.get("path")),
            score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
            snippet=markdown_readable(item.get("snippet")),
            connection_id=text_of(first(item, "connectionId", "connection_id")) or "kb-1",
            source_refs=_plain_refs(item),
            handle=handle if handle is not None and handle.startswith("llmwiki://") else None,
            origin=citation_origin(origin if isinstance(origin, dict) else None,
                                   section if isinstance(section, dict) else None)))
    return made


def _plain_context(payload: dict[str, Any]) -> dict[str, Any]:
    metadata = as_object(payload.get("metadata"))

    def pick(*keys: str) -> Any:
        found = first(payload, *keys)
        return found if found is not None else first(metadata, *keys)

    value: dict[str, Any] = {
        "wikiTitle": string(first(payload, "wiki_title", "wikiTitle", "title")) or SOURCE.name,
        "description": string(pick("description")) or SOURCE.description,
        "adapter": string(pick("adapter")) or SOURCE.adapter,
        "implementation": string(pick("implementation")) or SOURCE.implementation}
    for key, names in (("pageCount", ("page_count", "pageCount")),
                       ("approvedPageCount", ("approved_page_count", "approvedPageCount"))):
        count = pick(*names)
        if isinstance(count, int) and not isinstance(count, bool):
            value[key] = count
    value["orientation"] = [{
        "id": string(first(item, "id", "page_id", "pageId")),
        "title": string(item.get("title")) or "Untitled", "path": string(item.get("path")),
        "snippet": markdown_readable(item.get("snippet")),
        "role": string(item.get("role")), "sourceRefs": _plain_refs(item)}
        for item in as_list(payload.get("orientation")) if isinstance(item, dict)]
    value["limitations"] = [s for s in as_list(payload.get("limitations")) if isinstance(s, str)]
    return value


def _plain_search(payload: dict[str, Any]) -> list[dict[str, Any]]:
    items = payload.get("results") if isinstance(payload.get("results"), list) else payload.get("evidence")
    results = []
    for index, item in enumerate(as_list(items)):
        if not isinstance(item, dict):
            continue
        raw_id = string(first(item, "page_id", "pageId", "id", "path")) or str(index + 1)
        result: dict[str, Any] = {"id": raw_id if raw_id.startswith("kb-1:") else f"kb-1:{raw_id}",
                                  "pageId": raw_id.removeprefix("kb-1:"),
                                  "title": string(item.get("title")) or "Untitled",
                                  "path": string(item.get("path")),
                                  "snippet": markdown_readable(item.get("snippet"))}
        score = item.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            result["score"] = score
        result["sourceRefs"] = _plain_refs(item)
        results.append(result)
    return results


def _odd_item(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice(ODD)
    keys = [*rng.sample(ID_KEYS, rng.randint(0, 4)), "title", "snippet", "score", "role", "connectionId",
            "connection_id", "sourceRefs", "source_refs", "handle", "uri", "extra"]
    item = {key: rng.choice(ODD) if rng.random() < 0.4 else f"{key}-{rng.randint(0, 3)}" for key in keys
            if rng.random() < 0.6}
    if rng.random() < 0.5:
        item["score"] = rng.choice([0.5, 3, True, "1", None])
    if rng.random() < 0.3:
        origin = {"path": "a.md", "line_start": 2, "line_end": 4, "sha256": "0" * 64}
        item["origin"] = rng.choice([origin, [], "o"])
        item["section"] = rng.choice([{"heading_path": "A > B", "handle": "llmwiki://kb/pages/a#b"}, None, 3])
    return item


def _odd_pack(rng: random.Random) -> dict[str, Any]:
    pack: dict[str, Any] = {}
    for key in ("evidence", "citations", "results", "orientation"):
        if rng.random() < 0.7:
            pack[key] = [_odd_item(rng) for _ in range(rng.randint(0, 5))] if rng.random() < 0.9 else "x"
    for key in ("wiki_title", "wikiTitle", "title", "description", "adapter", "implementation", "page_count",
                "pageCount", "approved_page_count", "approvedPageCount", "answerable"):
        if rng.random() < 0.4:
            pack[key] = rng.choice([*ODD, 12, "Wiki", False])
    if rng.random() < 0.5:
        pack["metadata"] = rng.choice([{"description": rng.choice(ODD), "adapter": "MA", "pageCount": 9,
                                        "approved_page_count": rng.choice([3, "3", None])}, "m", None])
    if rng.random() < 0.5:
        pack["limitations"] = rng.choice([["a", 1, None, "b"], "none", []])
    return pack


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and left == right


@pytest.mark.parametrize("seed", range(60))
def test_the_models_read_what_the_key_by_key_reading_read(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        pack = _odd_pack(rng)
        citations = [c.model_dump() for c in artifact.citations_from(pack, SOURCE)]
        assert _same(citations, [c.model_dump() for c in _plain_citations(pack)])
        evidence = artifact.evidence_from(pack, SOURCE)
        plain_orientation = [
            artifact._preview(text_of(item.get("path")), text_of(item.get("title")),
                              text_of(first(item, "id", "page_id", "pageId")))
            for item in as_list(pack.get("orientation")) if isinstance(item, dict)]
        assert evidence.orientation == [o for o in plain_orientation if o]
        title = text_of(first(pack, "wiki_title", "wikiTitle", "title"))
        assert evidence.wiki_title == (title or SOURCE.name)
        answerable = pack.get("answerable")
        assert evidence.answerable == (answerable if isinstance(answerable, bool) else None)
        value, _ = context_value(pack, SOURCE, "q", {})
        plain = _plain_context(pack)
        assert _same({k: value[k] for k in plain if k in value}, plain) and set(plain) <= set(value)
        assert _same(search_results(pack, SOURCE), _plain_search(pack))
