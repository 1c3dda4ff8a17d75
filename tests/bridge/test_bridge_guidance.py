"""Retrieval guidance: the closed shape, snake_case to camelCase mapping, and its diagnostics."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.core.guidance import GuidanceError, map_guidance, parse_guidance
from bridge.web.mcp_descriptors import tool_descriptors
from common.guidance import FolderCard, PageCard, RetrievalGuidance
from tests.support.bridge_sources import BridgeFactory, source

SNAKE: dict[str, Any] = {
    "schema_version": "llmwiki.retrieval_guidance.v1", "orientation_source": "authored",
    "content_trust": "untrusted_source_evidence", "max_query_variants": 2, "character_budget": 400,
    "folder_cards": [{"path": "runbooks", "page_count": 2, "terms": ["hotfix"]}],
    "page_cards": [{"page_id": "hot", "title": "Current Focus", "path": "hot.md", "headings": ["Open"],
                    "terms": ["release"], "exact_identifiers": ["v1.2.3"], "excerpt": "This week"}],
    "suggested_terms": ["release", "릴리스"], "exact_identifiers": ["publish.yml"],
    "fallback_modes": ["literal"],
}


def test_valid_guidance_maps_to_camel_case() -> None:
    mapped = map_guidance(SNAKE, snake=True)
    assert list(mapped) == ["schemaVersion", "orientationSource", "contentTrust", "maxQueryVariants",
                            "characterBudget", "folderCards", "pageCards", "suggestedTerms",
                            "exactIdentifiers", "fallbackModes"]
    assert mapped["pageCards"][0] == {"pageId": "hot", "title": "Current Focus", "path": "hot.md",
                                      "headings": ["Open"], "terms": ["release"],
                                      "exactIdentifiers": ["v1.2.3"], "excerpt": "This week"}
    assert mapped["folderCards"] == [{"path": "runbooks", "pageCount": 2, "terms": ["hotfix"]}]
    assert map_guidance(mapped, snake=False) == mapped  # the public form validates the same way
    with pytest.raises(GuidanceError):
        map_guidance(mapped, snake=True)


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(SNAKE)
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw


def _renamed(old: str, new: str) -> dict[str, Any]:
    return {new if key == old else key: value for key, value in SNAKE.items()}


# The messages are the bridge's diagnostics (and 400 bodies for caller guidance): each one pinned,
# including which problem is named when there are several (the order the checks run in).
G = "retrieval_guidance"
P0 = f"{G}.pageCards[0]"
RELATIVE = "must be a source-relative path."
REJECTED: list[tuple[Any, str]] = [
    ([], f"{G} must be an object."),
    ({**SNAKE, "extra": 1}, f"{G}.extra is not a supported field."),
    (_broken(["suggested_terms"], KeyError), f"{G}.suggested_terms is required."),
    ({**_broken(["suggested_terms"], KeyError), "extra": 1}, f"{G}.extra is not a supported field."),
    (_renamed("page_cards", "pageCards"), f"{G}.pageCards is not a supported field."),
    (_broken(["schema_version"], "v2"), f"{G}.schemaVersion must be llmwiki.retrieval_guidance.v1."),
    (_broken(["schema_version"], " llmwiki.retrieval_guidance.v1"),
     f"{G}.schemaVersion must be llmwiki.retrieval_guidance.v1."),
    (_broken(["orientation_source"], "model"), f"{G}.orientationSource is not supported."),
    (_broken(["content_trust"], "trusted"), f"{G}.contentTrust must be untrusted_source_evidence."),
    (_broken(["max_query_variants"], 3), f"{G}.maxQueryVariants must be 2."),
    (_broken(["max_query_variants"], True), f"{G}.maxQueryVariants must be 2."),
    (_broken(["character_budget"], 0), f"{G}.characterBudget must be an integer between 1 and 6000."),
    (_broken(["character_budget"], 6001), f"{G}.characterBudget must be an integer between 1 and 6000."),
    (_broken(["character_budget"], 400.0), f"{G}.characterBudget must be an integer between 1 and 6000."),
    (_broken(["character_budget"], True), f"{G}.characterBudget must be an integer between 1 and 6000."),
    (_broken(["character_budget"], 10), f"{G} exceeds its characterBudget."),
    (_broken(["folder_cards", 0, "page_count"], 0),
     f"{G}.folderCards[0].pageCount must be an integer between 1 and any."),
    ({**SNAKE, "folder_cards": [{"path": "a", "page_count": 0, "terms": [""]}]},
     f"{G}.folderCards[0].terms[0] must be a non-empty string."),  # a folder checks pageCount last
    (_broken(["folder_cards"], [{}] * 9), f"{G}.folderCards must have at most 8 items."),
    (_broken(["page_cards"], None), f"{G}.pageCards must be an array."),
    (_broken(["page_cards"], [5]), f"{P0} must be an object."),
    (_broken(["page_cards", 0, "page_id"], KeyError), f"{P0}.page_id is required."),
    (_broken(["page_cards", 0, "pageId"], "hot"), f"{P0}.pageId is not a supported field."),
    (_broken(["page_cards", 0, "path"], "/etc/passwd"), f"{P0}.path {RELATIVE}"),
    (_broken(["page_cards", 0, "path"], "../x.md"), f"{P0}.path {RELATIVE}"),
    (_broken(["page_cards", 0, "path"], "https://x/y"), f"{P0}.path {RELATIVE}"),
    (_broken(["page_cards", 0, "path"], "C:/x.md"), f"{P0}.path {RELATIVE}"),
    (_broken(["page_cards", 0, "path"], "a\\b.md"), f"{P0}.path {RELATIVE}"),
    (_broken(["page_cards", 0, "title"], "x" * 241), f"{P0}.title must be at most 240 characters."),
    (_broken(["page_cards", 0, "headings"], ["ok", 5]), f"{P0}.headings[1] must be a non-empty string."),
    (_broken(["suggested_terms"], ["a", "A"]), f"{G}.suggestedTerms items must be unique."),
    (_broken(["suggested_terms"], ["Café", "Cafe\u0301"]), f"{G}.suggestedTerms items must be unique."),
    (_broken(["suggested_terms"], ["a", "a", ""]), f"{G}.suggestedTerms[2] must be a non-empty string."),
    (_broken(["suggested_terms"], ["x"] * 17), f"{G}.suggestedTerms must have at most 16 items."),
    (_broken(["exact_identifiers"], [" "]), f"{G}.exactIdentifiers[0] must be a non-empty string."),
    (_broken(["fallback_modes"], ["vector", "literal"]),
     f"{G}.fallbackModes must be a subset of literal, hybrid, vector in order."),
    (_broken(["fallback_modes"], ["semantic"]),
     f"{G}.fallbackModes must be a subset of literal, hybrid, vector in order."),
    (_broken(["fallback_modes"], ["x" * 17]), f"{G}.fallbackModes[0] must be at most 16 characters."),
    ({**_broken(["schema_version"], "v2"), "page_cards": None},
     f"{G}.schemaVersion must be llmwiki.retrieval_guidance.v1."),  # the first field checked wins
]


@pytest.mark.parametrize(("raw", "message"), REJECTED)
def test_invalid_guidance_is_rejected_with_its_message(raw: Any, message: str) -> None:
    with pytest.raises(GuidanceError) as caught:
        map_guidance(raw, snake=True, where=G)
    assert str(caught.value) == message


def test_public_form_names_keys_as_given_and_fields_in_camel_case() -> None:
    public = map_guidance(SNAKE, snake=True)
    card = {**public["pageCards"][0], "page_id": "hot"}
    with pytest.raises(GuidanceError, match=r"^data\.g\.pageCards\[0\]\.page_id is not a supported field\.$"):
        map_guidance({**public, "pageCards": [card]}, snake=False, where="data.g")
    with pytest.raises(GuidanceError, match=r"^retrievalGuidance\.pageCards\[0\]\.excerpt must be"):
        map_guidance({**public, "pageCards": [{**public["pageCards"][0], "excerpt": "x" * 241}]}, snake=False)


def test_accepted_values_are_trimmed_and_kept() -> None:
    raw = _broken(["page_cards", 0, "title"], "  Current Focus \x1c")
    raw["max_query_variants"] = 2.0  # always accepted (compared with ==), written back as 2
    raw["suggested_terms"] = ["release", "\ud800 lone"]  # JSON may carry a lone surrogate
    mapped = map_guidance(raw, snake=True)
    assert mapped["pageCards"][0]["title"] == "Current Focus"
    assert mapped["maxQueryVariants"] == 2 and type(mapped["maxQueryVariants"]) is int
    assert mapped["suggestedTerms"] == ["release", "\ud800 lone"]
    assert parse_guidance(raw, snake=True) == RetrievalGuidance.model_validate(mapped, by_alias=True)


async def test_caller_guidance_is_validated(bridge_client: BridgeFactory) -> None:
    client = await bridge_client()
    public = map_guidance(SNAKE, snake=True)
    ok = await client.post("/message:send", json={"data": {
        "query": "q", "mode": "evidence-only", "knowledgeSources": [], "retrievalGuidance": public}})
    assert ok.status == 200
    bad = await client.post("/message:send", json={"data": {
        "query": "q", "retrievalGuidance": {**public, "pageCards": None}}})
    body = await bad.json()
    assert bad.status == 400
    assert body["error"] == {"code": "invalid_retrieval_guidance",
                             "message": "data.retrievalGuidance.pageCards must be an array."}


async def test_source_guidance_diagnostics(bridge_client: BridgeFactory, aiohttp_server: Any) -> None:
    def app(payload: dict[str, Any], capabilities: list[str]) -> web.Application:
        async def bundle(request: web.Request) -> web.Response:
            return web.json_response({"source_id": "s", "capabilities": capabilities})

        async def query(request: web.Request) -> web.Response:
            return web.json_response(payload)

        application = web.Application()
        application.router.add_get("/source-bundle", bundle)
        application.router.add_post("/query", query)
        return application

    evidence = {"evidence": [{"page_id": "p", "title": "P"}]}
    guided = ["llmwiki_agent_guided_lexical_v1"]
    servers: list[TestServer] = [
        await aiohttp_server(app({**evidence, "retrieval_guidance": SNAKE}, guided)),
        await aiohttp_server(app(evidence, guided)),
        await aiohttp_server(app(evidence, [])),
        await aiohttp_server(app({**evidence, "retrieval_guidance": {"schema_version": "x"}}, [])),
    ]
    client = await bridge_client()
    response = await client.post("/message:send", json={
        "query": "q", "mode": "evidence-only",
        "knowledgeSources": [source(f"s{i}", str(s.make_url(""))) for i, s in enumerate(servers)]})
    result = (await response.json())["artifacts"][0]["parts"][0]["data"]
    notes = {d["subject"]: {o["name"]: o["value"] for o in d["observations"]}
             for d in result["diagnostics"]}
    assert set(notes) == {"s1", "s3"}
    assert notes["s1"]["guidance"] == "absent" and notes["s3"]["guidance"] == "omitted"
    assert "retrievalGuidance" not in str(result) and "suggestedTerms" not in str(result)


def _nodes(node: Any) -> list[dict[str, Any]]:
    """Every schema object under `node` (property names are not schema keywords)."""
    if isinstance(node, list):
        return [n for item in node for n in _nodes(item)]
    if not isinstance(node, dict):
        return []
    subs = [v for k, v in node.items() if k != "properties"] + list(node.get("properties", {}).values())
    return [node, *_nodes(subs)]


def test_the_run_tool_lists_the_model_schema() -> None:
    """`llmwiki_agent_run` lists the guidance schema made from the model: self-contained, closed,
    with the contract's constants, enums and bounds."""
    [run] = [t for t in tool_descriptors(annotated=False) if t["name"] == "llmwiki_agent_run"]
    schema = run["inputSchema"]["properties"]["retrievalGuidance"]
    assert all(not {"$ref", "$defs", "title"} & set(node) for node in _nodes(schema))
    page, folder = schema["properties"]["pageCards"]["items"], schema["properties"]["folderCards"]["items"]
    for closed, model in ((schema, RetrievalGuidance), (page, PageCard), (folder, FolderCard)):
        assert closed["type"] == "object" and closed["additionalProperties"] is False
        assert closed["required"] == list(closed["properties"]) == [
            f.alias for f in model.model_fields.values()]
    props = schema["properties"]
    assert props["schemaVersion"] == {"type": "string", "const": "llmwiki.retrieval_guidance.v1"}
    assert props["orientationSource"]["enum"] == ["authored", "projection_extractive", "none"]
    assert props["contentTrust"]["const"] == "untrusted_source_evidence"
    assert props["maxQueryVariants"] == {"type": "integer", "const": 2}
    assert (props["characterBudget"]["minimum"], props["characterBudget"]["maximum"]) == (1, 6000)
    assert props["fallbackModes"]["maxItems"] == 3
    assert props["fallbackModes"]["items"] == {"type": "string", "enum": ["literal", "hybrid", "vector"]}
    assert folder["properties"]["pageCount"] == {"type": "integer", "minimum": 1}

    def bounds(prop: dict[str, Any]) -> tuple[int, ...]:
        if prop["type"] == "array":
            return (prop["maxItems"], prop["items"]["minLength"], prop["items"]["maxLength"])
        return (prop["minLength"], prop["maxLength"])

    assert {name: bounds(props[name]) for name in ("suggestedTerms", "exactIdentifiers")} == {
        "suggestedTerms": (16, 1, 120), "exactIdentifiers": (16, 1, 240)}
    assert props["folderCards"]["maxItems"] == 8 and props["pageCards"]["maxItems"] == 12
    assert {name: bounds(folder["properties"][name]) for name in ("path", "terms")} == {
        "path": (1, 1024), "terms": (8, 1, 120)}
    assert {name: bounds(prop) for name, prop in page["properties"].items()} == {
        "pageId": (1, 512), "title": (1, 240), "path": (1, 1024), "headings": (8, 1, 160),
        "terms": (12, 1, 120), "exactIdentifiers": (8, 1, 240), "excerpt": (1, 240)}
