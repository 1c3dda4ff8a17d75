"""serve's MCP tools' argument shapes (contract 6.3): the tools/list input schemas and the
standard surfaces' validation are both derived from these models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from common.guidance import MAX_QUERY_VARIANTS
from common.limits import DEFAULT_NEIGHBORHOOD_DEPTH, DEFAULT_NEIGHBORHOOD_LIMIT
from common.schemas import Direction, SearchMode

# serve's MCP tools in tools/list order: the one list every surface and `--mcp-tools` read. The
# search tools are the ones whose calls may wait for the index (run off the event loop).
TOOL_NAMES: tuple[str, ...] = (
    "llmwiki_context", "llmwiki_search", "llmwiki_read", "llmwiki_graph",
    "llmwiki_graph_neighbors", "llmwiki_source_refs", "llmwiki_source_bundle",
)
SEARCH_TOOLS: tuple[str, ...] = ("llmwiki_context", "llmwiki_search")


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


NameList = list[str] | str | None
VARIANTS_HELP = ("At most two agent-written lexical rewrites of the query (mode=lexical only), "
                 "e.g. terms chosen from retrieval_guidance. Omit when not needed.")

GRAPH_HELP = ("Whether the pack carries the graph around its evidence; false gives an empty "
              "graph and a smaller pack.")


def argument_models(context_limit: int, graph_limit: int) -> dict[str, type[BaseModel]]:
    """One model per tool, named `<tool>Arguments`; the limits' defaults are the server's."""
    search_fields: dict[str, Any] = {
        "query": (str, ""),
        "limit": (int, context_limit),
        "include_drafts": (bool, False),
        "mode": (SearchMode, "lexical"),
        "fields": (NameList, None),
        "snippet_chars": (int | None, None),
        "min_score": (float | None, None),
        "exclude_page_ids": (NameList, None),
        "query_variants": (list[str], Field(default_factory=list, max_length=MAX_QUERY_VARIANTS,
                                            description=VARIANTS_HELP)),
    }
    specs: dict[str, dict[str, Any]] = {
        "llmwiki_context": {**search_fields, "include_graph": (bool, Field(True, description=GRAPH_HELP))},
        "llmwiki_search": search_fields,
        "llmwiki_read": {"page_id": (str, ...), "include_drafts": (bool, False),
                         "fields": (NameList, None), "query": (str | None, None),
                         "sections": (NameList, None), "max_chars": (int | None, None),
                         "include_links": (bool | None, None)},
        "llmwiki_graph": {"limit": (int, graph_limit), "include_drafts": (bool, False)},
        "llmwiki_graph_neighbors": {
            "seed": (str, ""), "seeds": (list[str] | None, None),
            "depth": (int, DEFAULT_NEIGHBORHOOD_DEPTH), "direction": (Direction, "both"),
            "relation": (str, ""), "relations": (list[str] | None, None),
            "limit": (int, DEFAULT_NEIGHBORHOOD_LIMIT), "include_drafts": (bool, False)},
        "llmwiki_source_refs": {"include_drafts": (bool, False)},
        "llmwiki_source_bundle": {"include_drafts": (bool, False)},
    }
    assert tuple(specs) == TOOL_NAMES  # one model per tool, in the table's order
    return {name: create_model(f"{name}Arguments", __base__=_Args, **spec)
            for name, spec in specs.items()}


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.setdefault("properties", {})
    return schema


def output_schema(name: str) -> dict[str, Any]:
    """Contract 6.3: every tool's output schema is this open object."""
    return {"type": "object", "additionalProperties": True, "title": f"{name}DictOutput"}
