"""Source payloads as the MCP source tools answer with them (contract 3.11): context and search."""

from __future__ import annotations

from typing import Any

from bridge.config.registry import SourceDescriptor
from bridge.core import artifact
from bridge.core.guidance import GuidanceError, guidance_diagnostic, map_guidance
from bridge.support.fields import as_list, as_object, first, source_refs
from bridge.support.text import markdown_readable, safe_id
from common.bridge_schemas import Diagnostic, JsonObject


def string(value: Any) -> str:
    """A string value as is; anything else (numbers too) is no text here."""
    return value if isinstance(value, str) else ""


def prefixed(source_id: str, raw_id: str) -> str:
    return raw_id if raw_id.startswith(f"{source_id}:") else f"{source_id}:{raw_id}"


def context_value(payload: JsonObject, source: SourceDescriptor, query: str,
                  summary: JsonObject) -> tuple[JsonObject, Diagnostic | None]:
    """The `llmwiki_context` value (contract 3.11) and a note when the source's guidance was dropped."""
    metadata = as_object(payload.get("metadata"))

    def pick(*keys: str) -> Any:
        found = first(payload, *keys)
        return found if found is not None else first(metadata, *keys)

    orientation = []
    for item in as_list(payload.get("orientation")):
        if isinstance(item, dict):
            orientation.append({
                "id": string(first(item, "id", "page_id", "pageId")),
                "title": string(item.get("title")) or "Untitled", "path": string(item.get("path")),
                "snippet": markdown_readable(item.get("snippet")),
                "role": string(item.get("role")), "sourceRefs": source_refs(item)})
    graph = artifact.graph_from(payload, source.id)
    value: JsonObject = {
        "source": summary, "query": query,
        "wikiTitle": string(first(payload, "wiki_title", "wikiTitle", "title")) or source.name,
        "description": string(pick("description")) or source.description,
        "adapter": string(pick("adapter")) or source.adapter,
        "implementation": string(pick("implementation")) or source.implementation}
    for key, names in (("pageCount", ("page_count", "pageCount")),
                       ("approvedPageCount", ("approved_page_count", "approvedPageCount"))):
        count = pick(*names)
        if isinstance(count, int) and not isinstance(count, bool):
            value[key] = count
    value["orientation"] = orientation
    value["citations"] = [c.wire() for c in artifact.citations_from(payload, source)]
    value["limitations"] = [s for s in as_list(payload.get("limitations")) if isinstance(s, str)]
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


def search_results(payload: JsonObject, source: SourceDescriptor) -> list[JsonObject]:
    results = []
    items = payload.get("results") if isinstance(payload.get("results"), list) else payload.get("evidence")
    for index, item in enumerate(as_list(items)):
        if not isinstance(item, dict):
            continue
        raw_id = string(first(item, "page_id", "pageId", "id", "path")) or str(index + 1)
        page_id = raw_id.removeprefix(f"{source.id}:")
        result: JsonObject = {"id": prefixed(source.id, raw_id), "pageId": page_id,
                              "title": string(item.get("title")) or "Untitled",
                              "path": string(item.get("path")),
                              "snippet": markdown_readable(item.get("snippet"))}
        score = item.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            result["score"] = score
        result["sourceRefs"] = source_refs(item)
        results.append(result)
    return results
