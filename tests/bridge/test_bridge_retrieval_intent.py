"""Retrieval intent (`data.retrieval`, contract 3.5): the model's messages and the listed schema."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.core.retrieval import IntentError, parse_intent
from bridge.web.mcp_descriptors import tool_descriptors

BASE = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical"}


def _search(**search: Any) -> dict[str, Any]:
    return {**BASE, "search": search}


@pytest.mark.parametrize(("raw", "message"), [
    ([], "retrieval must be a JSON object."),
    ({**BASE, "snippet_chars": 5}, "retrieval.snippet_chars is not a supported retrieval field."),
    ({"searchMode": "lexical"}, "retrieval.schemaVersion is invalid."),
    (_search(limit=51), "retrieval.search.limit is invalid."),
    (_search(limit=True), "retrieval.search.limit is invalid."),
    (_search(fields=["a"] * 17), "retrieval.search.fields is invalid."),
    (_search(fields=["ok", 5]), "retrieval.search.fields.1 is invalid."),
    (_search(fields=[" "]),
     "retrieval.search.fields items must be non-empty strings of at most 80 characters."),
    (_search(excludePageIds=["p" * 513]),
     "retrieval.search.excludePageIds items must be non-empty strings of at most 512 characters."),
    (_search(queryVariants=["a", "b", "c"]), "retrieval.search.queryVariants is invalid."),
    (_search(queryVariants=["v" * 1001]),
     "retrieval.search.queryVariants items must be non-empty strings of at most 1000 characters."),
    # a wrong type anywhere is named before an empty item in an earlier list
    (_search(fields=[""], queryVariants=[5]), "retrieval.search.queryVariants.0 is invalid."),
    ({**BASE, "searchMode": "literal", "search": {"queryVariants": ["x"]}},
     "retrieval.search.queryVariants require searchMode lexical."),
])
def test_invalid_intent_is_named(raw: Any, message: str) -> None:
    with pytest.raises(IntentError) as caught:
        parse_intent(raw, "question")
    assert str(caught.value) == message


def test_list_items_are_trimmed_and_variants_deduped() -> None:
    intent = parse_intent(_search(fields=[" title ", "path"], excludePageIds=[" a:p "],
                                  queryVariants=[" Question ", " " + "x" * 1000 + " "]), "question")
    assert intent.search is not None
    assert intent.search.fields == ["title", "path"] and intent.search.exclude_page_ids == ["a:p"]
    assert intent.search.query_variants == ["x" * 1000]  # the query itself is dropped
    only_the_query = parse_intent(_search(queryVariants=["QUESTION"]), "question").search
    assert only_the_query is not None and only_the_query.query_variants is None


def test_tools_list_the_intent_model_schema() -> None:
    tools = {t["name"]: t["inputSchema"] for t in tool_descriptors(annotated=False)}
    for name in ("llmwiki_agent_run", "llmwiki_context", "llmwiki_search"):
        schema = tools[name]["properties"]["retrieval"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == ["schemaVersion", "searchMode"]
        props = schema["properties"]
        assert props["schemaVersion"] == {"type": "string", "const": "llmwiki.retrieval.v1"}
        assert props["searchMode"]["enum"] == ["lexical", "literal", "vector", "hybrid"]
        assert props["fallback"] == {"type": "string", "enum": ["lexical", "none"], "default": "lexical"}
        search = props["search"]  # optional: listed as the object itself, not "object or null"
        assert search["type"] == "object" and search["additionalProperties"] is False
        assert "anyOf" not in str(schema) and "$ref" not in str(schema)
        fields = search["properties"]
        assert fields["limit"] == {"type": "integer", "minimum": 1, "maximum": 50}
        assert fields["snippetChars"] == {"type": "integer", "minimum": 1, "maximum": 20000}
        assert {n: (fields[n]["maxItems"], fields[n]["items"]) for n in ("fields", "excludePageIds",
                                                                       "queryVariants")} == {
            "fields": (16, {"type": "string", "minLength": 1, "maxLength": 80}),
            "excludePageIds": (50, {"type": "string", "minLength": 1, "maxLength": 512}),
            "queryVariants": (2, {"type": "string", "minLength": 1, "maxLength": 1000})}
        assert "llmwiki_agent_guided_lexical_v1" in fields["queryVariants"]["description"]
