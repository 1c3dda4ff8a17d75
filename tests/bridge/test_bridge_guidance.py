"""Retrieval guidance: the closed shape, snake_case to camelCase mapping, and its diagnostics."""

from __future__ import annotations

import contextlib
import copy
import random
import unicodedata
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge import guidance
from bridge.guidance import GuidanceError, map_guidance
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


@pytest.mark.parametrize(("path", "value"), [
    (["schema_version"], "v2"), (["extra"], 1), (["suggested_terms"], KeyError),
    (["max_query_variants"], 3), (["character_budget"], 10), (["page_cards"], None),
    (["page_cards", 0, "path"], "/etc/passwd"), (["page_cards", 0, "path"], "../x.md"),
    (["page_cards", 0, "path"], "https://x/y"), (["folder_cards", 0, "page_count"], 0),
    (["suggested_terms"], ["a", "A"]), (["fallback_modes"], ["vector", "literal"]),
    (["exact_identifiers"], [" "]),
])
def test_invalid_guidance_is_rejected(path: list[Any], value: Any) -> None:
    with pytest.raises(GuidanceError):
        map_guidance(_broken(path, value), snake=True)


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


# The validation as it was before field paths were built only for errors: every path eagerly.
def _plain_string(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise GuidanceError(f"{where} must be a non-empty string.")
    text = value.strip()
    if len(text) > limit:
        raise GuidanceError(f"{where} must be at most {limit} characters.")
    return text


def _plain_strings(value: Any, where: str, count: int, limit: int) -> list[str]:
    values = guidance._array(value, where, count)
    items = [_plain_string(v, f"{where}[{i}]", limit) for i, v in enumerate(values)]
    folded = [unicodedata.normalize("NFC", i).lower() for i in items]
    if len(set(folded)) != len(folded):
        raise GuidanceError(f"{where} items must be unique.")
    return items


def _plain_path(value: Any, where: str, limit: int) -> str:
    path = _plain_string(value, where, limit)
    if (path.startswith(("/", "\\")) or "\\" in path or guidance._DRIVE.match(path)
            or guidance._SCHEME.match(path) or ".." in path.split("/")):
        raise GuidanceError(f"{where} must be a source-relative path.")
    return path


def _plain_count(value: Any, where: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        raise GuidanceError(f"{where} must be an integer between {low} and {high or 'any'}.")
    return value


def _plain_map(raw: Any, *, snake: bool, where: str = "retrievalGuidance") -> dict[str, Any]:
    top = guidance._keys(raw, guidance._TOP, snake, where)
    if top["schemaVersion"] != guidance.SCHEMA:
        raise GuidanceError(f"{where}.schemaVersion must be {guidance.SCHEMA}.")
    if top["orientationSource"] not in ("authored", "projection_extractive", "none"):
        raise GuidanceError(f"{where}.orientationSource is not supported.")
    if top["contentTrust"] != "untrusted_source_evidence":
        raise GuidanceError(f"{where}.contentTrust must be untrusted_source_evidence.")
    if top["maxQueryVariants"] != 2 or isinstance(top["maxQueryVariants"], bool):
        raise GuidanceError(f"{where}.maxQueryVariants must be 2.")
    budget = _plain_count(top["characterBudget"], f"{where}.characterBudget", 1, 6000)
    counted: list[str] = []
    folders: list[dict[str, Any]] = []
    for i, card in enumerate(guidance._array(top["folderCards"], f"{where}.folderCards", 8)):
        at = f"{where}.folderCards[{i}]"
        fields = guidance._keys(card, guidance._FOLDER, snake, at)
        path = _plain_path(fields["path"], f"{at}.path", 1024)
        terms = _plain_strings(fields["terms"], f"{at}.terms", 8, 120)
        folders.append({"path": path, "pageCount": _plain_count(fields["pageCount"], f"{at}.pageCount", 1),
                        "terms": terms})
        counted += [path, *terms]
    pages: list[dict[str, Any]] = []
    for i, card in enumerate(guidance._array(top["pageCards"], f"{where}.pageCards", 12)):
        at = f"{where}.pageCards[{i}]"
        fields = guidance._keys(card, guidance._PAGE, snake, at)
        texts = {"pageId": _plain_string(fields["pageId"], f"{at}.pageId", 512),
                 "title": _plain_string(fields["title"], f"{at}.title", 240),
                 "path": _plain_path(fields["path"], f"{at}.path", 1024)}
        lists = {"headings": _plain_strings(fields["headings"], f"{at}.headings", 8, 160),
                 "terms": _plain_strings(fields["terms"], f"{at}.terms", 12, 120),
                 "exactIdentifiers": _plain_strings(fields["exactIdentifiers"], f"{at}.exactIdentifiers",
                                                    8, 240)}
        excerpt = _plain_string(fields["excerpt"], f"{at}.excerpt", 240)
        pages.append({**texts, **lists, "excerpt": excerpt})
        counted += [*texts.values(), *(t for items in lists.values() for t in items), excerpt]
    suggested = _plain_strings(top["suggestedTerms"], f"{where}.suggestedTerms", 16, 120)
    identifiers = _plain_strings(top["exactIdentifiers"], f"{where}.exactIdentifiers", 16, 240)
    modes = _plain_strings(top["fallbackModes"], f"{where}.fallbackModes", 3, 16)
    order = guidance.FALLBACK_ORDER
    if any(m not in order for m in modes) or modes != [m for m in order if m in modes]:
        raise GuidanceError(f"{where}.fallbackModes must be a subset of literal, hybrid, vector in order.")
    counted += [*suggested, *identifiers, *modes]
    if sum(len(s) for s in counted) > budget:
        raise GuidanceError(f"{where} exceeds its characterBudget.")
    return {"schemaVersion": guidance.SCHEMA, "orientationSource": top["orientationSource"],
            "contentTrust": top["contentTrust"], "maxQueryVariants": 2, "characterBudget": budget,
            "folderCards": folders, "pageCards": pages, "suggestedTerms": suggested,
            "exactIdentifiers": identifiers, "fallbackModes": modes}


_ODD: list[Any] = ["", " ", "  padded  ", "x" * 121, "x" * 161, "x" * 241, "y" * 1025, "Hot", "hot",
                   "Ｃａｆé", "Cafe\u0301", "café", "/abs.md", "a\\b.md", "C:/x.md", "https://x/y", "../x.md",
                   "ok/../x.md", "ok/page.md", None, 0, 1, -1, 9, True, 2.5, [], ["a"], ["a", "A"],
                   ["a", " "], ["x"] * 17, {}, {"a": 1}, "literal", "vector", ["vector", "literal"],
                   ["hybrid"]]


def _mutated(rng: random.Random) -> Any:
    raw: Any = copy.deepcopy(SNAKE)
    raw["page_cards"].append({**raw["page_cards"][0], "page_id": "two", "terms": ["deploy", "Déploy"]})
    raw["folder_cards"].append({"path": "notes", "page_count": 1, "terms": ["a", "b"]})
    raw["character_budget"] = 4000
    for _ in range(rng.randint(0, 3)):
        target: Any = raw
        key: Any = None
        while True:  # walk down to a random container and pick one of its keys or indexes
            keys = list(target) if isinstance(target, dict) else list(range(len(target)))
            key = None
            if not keys:
                break
            key = rng.choice(keys)
            if not isinstance(target[key], (dict, list)) or rng.random() < 0.4:
                break
            target = target[key]
        if key is None:
            continue
        roll = rng.random()
        if roll < 0.15 and isinstance(target, dict):
            del target[key]
        elif roll < 0.25 and isinstance(target, dict):
            target[rng.choice(["extra", "pageId", "page_count"])] = 1
        elif roll < 0.35 and isinstance(target, list):
            target.append(rng.choice(_ODD))
        else:
            target[key] = copy.deepcopy(rng.choice(_ODD))
    return raw


@pytest.mark.parametrize("seed", range(4))
def test_lazy_field_paths_give_the_plain_validation(seed: int) -> None:
    """Valid or not, the same result or the same error message as eager paths gave."""
    rng = random.Random(seed)
    outcomes = set()
    for _ in range(1500):
        raw = _mutated(rng)
        snake = rng.random() < 0.8
        if not snake:
            with contextlib.suppress(GuidanceError):  # the public form of valid guidance
                raw = _plain_map(raw, snake=True)
        where = rng.choice(["retrieval_guidance", "retrievalGuidance", "data.guidance"])
        try:
            expected: Any = _plain_map(raw, snake=snake, where=where)
        except GuidanceError as exc:
            expected = ("error", str(exc))
        try:
            actual: Any = map_guidance(raw, snake=snake, where=where)
        except GuidanceError as exc:
            actual = ("error", str(exc))
        assert actual == expected, raw
        outcomes.add(expected[0] if isinstance(expected, tuple) else "valid")
    assert outcomes == {"valid", "error"}
