"""Source payloads as the MCP source tools answer with them (contract 3.11): context and search."""

from __future__ import annotations

from typing import Any

from bridge.config.registry import SourceDescriptor
from bridge.core import artifact
from bridge.core.guidance import GuidanceError, guidance_diagnostic, map_guidance
from bridge.support.text import markdown_readable, safe_id
from common.bridge_schemas import Diagnostic, JsonObject
from common.source_answer import PackFact, PageItem, SourceAnswer, SourceContextPack


def string(value: Any) -> str:
    """A string value as is; anything else (numbers too) is no text here."""
    return value if isinstance(value, str) else ""


def prefixed(source_id: str, raw_id: str) -> str:
    return raw_id if raw_id.startswith(f"{source_id}:") else f"{source_id}:{raw_id}"


_COUNTS: tuple[tuple[str, PackFact], ...] = (("pageCount", "page_count"),
                                             ("approvedPageCount", "approved_page_count"))


def context_value(payload: JsonObject, source: SourceDescriptor, query: str,
                  summary: JsonObject) -> tuple[JsonObject, Diagnostic | None]:
    """The `llmwiki_context` value (contract 3.11) and a note when the source's guidance was dropped."""
    pack = SourceContextPack.model_validate(payload)
    orientation = [{"id": string(item.item_id), "title": string(item.title) or "Untitled",
                    "path": string(item.path), "snippet": markdown_readable(item.snippet),
                    "role": string(item.role), "sourceRefs": _refs(item)}
                   for item in pack.orientation or () if item is not None]
    graph = artifact.graph_of(pack, source.id)
    value: JsonObject = {
        "source": summary, "query": query,
        "wikiTitle": string(pack.wiki_title) or source.name,
        "description": string(pack.described("description")) or source.description,
        "adapter": string(pack.described("adapter")) or source.adapter,
        "implementation": string(pack.described("implementation")) or source.implementation}
    for key, name in _COUNTS:
        count = pack.described(name)
        if count is not None:
            value[key] = count
    value["orientation"] = orientation
    value["citations"] = [c.wire() for c in artifact.citations_of(pack.cited_items(), source)]
    value["limitations"] = pack.limitations or []
    note: Diagnostic | None = None
    raw_guidance = payload.get("retrieval_guidance", payload.get("retrievalGuidance"))
    if raw_guidance is not None:
        try:  # a source may send either spelling; only the closed shape passes
            snake = "retrieval_guidance" in payload
            value["retrievalGuidance"] = map_guidance(raw_guidance, snake=snake,
                                                      where="retrieval_guidance" if snake else
                                                      "retrievalGuidance")
        except GuidanceError:
            note = guidance_diagnostic({"retrieval_guidance": raw_guidance}, False,
                                       safe_id(source.id), source.protocol)
    value["graph"] = graph.wire()
    return value, note


def _refs(item: PageItem) -> list[str]:
    return [str(ref) for ref in item.source_refs or ()]


def search_results(payload: JsonObject, source: SourceDescriptor) -> list[JsonObject]:
    answer = SourceAnswer.model_validate(payload)
    results = []
    items = answer.results if answer.results is not None else answer.evidence
    for index, item in enumerate(items or ()):
        if item is None:
            continue
        raw_id = string(item.result_id) or str(index + 1)
        page_id = raw_id.removeprefix(f"{source.id}:")
        result: JsonObject = {"id": prefixed(source.id, raw_id), "pageId": page_id,
                              "title": string(item.title) or "Untitled",
                              "path": string(item.path),
                              "snippet": markdown_readable(item.snippet)}
        if item.score is not None:
            result["score"] = item.score
        result["sourceRefs"] = _refs(item)
        results.append(result)
    return results
