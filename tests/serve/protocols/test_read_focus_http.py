"""Focused and budgeted reads on the wire: GET /read/{page_id} params, 422s, drafts and MCP."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

PAGE = "release-checklist"
DRAFT_PAGE = "runbooks/incident-comms"
WITHHELD = {"found": False, "reason": "not approved for serving"}
OUTLINE = ["1 Release Checklist (138)", "1.1 Before Tagging (120)", "1.1.1 Version Bump (172)",
           "1.2 Publishing (99)", "1.3 After Publishing (142)"]
TOTAL_CHARS = 679  # the release checklist's body
FOCUSED_HEAD = ["id", "title", "path", "role", "summary", "review_state", "status", "updated_at",
                "tags", "read_mode"]
FOCUSED_TAIL = ["matched", "outline", "selected_sections", "text", "total_chars",
                "returned_chars", "max_chars", "truncated", "remaining_sections"]
TRUNCATION_KEYS = ["truncated", "total_chars", "returned_chars", "remaining_sections"]
ACCEPT = "application/json, text/event-stream"


async def get_json(client: Client, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status == status, await response.text()
    return await response.json()


async def call_tool(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}
    response = await client.post("/mcp", json=body)
    assert response.status == 200
    reply = await response.json()
    assert "error" not in reply, reply
    return reply["result"]


async def stream_tool(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}
    response = await client.post("/mcp/stream", data=json.dumps(body),
                                 headers={"Accept": ACCEPT, "MCP-Protocol-Version": "2025-11-25"})
    assert response.status == 200
    return (await response.json())["result"]


@pytest.fixture
async def client(serve_client: ClientFactory, sample_root: Path) -> Client:
    return await serve_client(sample_root)


# -- focused reads ----------------------------------------------------------------------


async def test_query_read_picks_the_best_section(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?query=version+tag")
    assert list(body) == [*FOCUSED_HEAD, "query", *FOCUSED_TAIL]
    assert body["read_mode"] == "focused" and body["query"] == "version tag"
    assert body["matched"] is True
    assert body["outline"] == OUTLINE
    # version: df 1 (heading + 3 body hits), tag: df 3 (heading path "before tagging" + body).
    assert body["selected_sections"] == [{"index": "1.1.1", "heading": "Version Bump",
                                          "chars": 172, "score": 6.566}]
    assert body["text"].startswith("### Version Bump\n\nBump the version")
    assert (body["total_chars"], body["returned_chars"]) == (TOTAL_CHARS, 172)
    assert body["max_chars"] == 8000 and body["truncated"] is False
    assert body["remaining_sections"] == []
    assert body["title"] == "Release Checklist" and body["tags"] == ["release", "checklist"]


async def test_sections_repeatable_and_comma_separated(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?sections=1.2&sections=%23%23+after+publishing,"
                                  "Before%20Tagging")
    assert list(body) == [*FOCUSED_HEAD, "requested_sections", *FOCUSED_TAIL]
    assert body["requested_sections"] == ["1.2", "## after publishing", "Before Tagging"]
    # Before Tagging brings its child 1.1.1; text follows document order.
    assert [s["index"] for s in body["selected_sections"]] == ["1.2", "1.3", "1.1", "1.1.1"]
    assert all("score" not in s for s in body["selected_sections"])
    assert body["text"].index("## Before Tagging") < body["text"].index("## Publishing")
    assert body["returned_chars"] == len(body["text"]) == 120 + 172 + 99 + 142 + 3 * 2


async def test_unmatched_sections_fall_back_to_the_first(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?sections=9.9,nothing")
    assert body["matched"] is False
    assert body["unmatched_sections"] == ["9.9", "nothing"]
    assert [s["index"] for s in body["selected_sections"]] == ["1"]
    assert list(body)[-1] == "unmatched_sections"


async def test_korean_query(client: Client) -> None:
    # 항목을 -> 항목 (in one heading: 3 x ln(3/2) = 1.216); 워크플로가 -> 워크플로 (one body hit,
    # ln(3/2) = 0.405) plus its bigrams 워크, 크플, 플로 (0.405 / 3 each): 2.027 in all.
    body = await get_json(client, "/read/ko/release-checklist-ko?query=항목을+워크플로가")
    assert body["matched"] is True
    assert body["selected_sections"] == [{"index": "1.1", "heading": "확인 항목", "chars": 92,
                                          "score": 2.027}]
    # One body hit alone stays under the 1.0 floor: nothing matched, the first section instead.
    alone = await get_json(client, "/read/ko/release-checklist-ko?query=워크플로가")
    assert alone["matched"] is False
    assert alone["selected_sections"][0]["index"] == "1"


async def test_max_chars_budget_on_focused_read(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?sections=1.1,1.3&max_chars=250")
    assert body["max_chars"] == 250
    # 1.1 (120) and 1.1.1 (2 + 172) do not fit together in 250: 1.1.1 and 1.3 remain.
    assert [s["index"] for s in body["selected_sections"]] == ["1.1"]
    assert body["remaining_sections"] == ["1.1.1 Version Bump (172)", "1.3 After Publishing (142)"]
    assert body["truncated"] is True
    clamped = await get_json(client, f"/read/{PAGE}?sections=1&max_chars=3")
    assert clamped["max_chars"] == 200
    huge = await get_json(client, f"/read/{PAGE}?query=publish&max_chars=99999999")
    assert huge["max_chars"] == 1_000_000


async def test_include_links_on_focused_and_plain_reads(client: Client) -> None:
    focused = await get_json(client, f"/read/{PAGE}?query=rollback&include_links=true")
    assert list(focused)[-1] == "links"
    assert "runbooks/rollback" in focused["links"]
    assert "links" not in await get_json(client, f"/read/{PAGE}?query=rollback")
    plain = await get_json(client, f"/read/{PAGE}?include_links=false")
    assert "links" not in plain and plain["text"].startswith("# Release Checklist")
    assert "links" in await get_json(client, f"/read/{PAGE}?include_links=1")


async def test_blank_query_is_a_plain_read(client: Client) -> None:
    plain = await get_json(client, f"/read/{PAGE}")
    assert await get_json(client, f"/read/{PAGE}?query=%20%20&sections=") == plain
    assert "read_mode" not in plain


# -- plain budgets ----------------------------------------------------------------------


async def test_plain_max_chars_clips_with_truncation_keys(client: Client) -> None:
    full = await get_json(client, f"/read/{PAGE}")
    body = await get_json(client, f"/read/{PAGE}?max_chars=1")  # clamped to 200
    assert list(body)[:15] == list(full)
    assert list(body)[15:] == TRUNCATION_KEYS
    assert body["text"] == full["text"][:len(body["text"])] and len(body["text"]) <= 200
    assert body["returned_chars"] == len(body["text"])
    assert body["total_chars"] == TOTAL_CHARS
    assert body["remaining_sections"] == OUTLINE[1:]  # section 1 (138 chars) fits whole
    assert await get_json(client, f"/read/{PAGE}?max_chars=5000") == full


async def test_fields_keep_truncation_keys(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?fields=title,id&max_chars=200")
    assert list(body) == ["id", "title", *TRUNCATION_KEYS]
    assert await get_json(client, f"/read/{PAGE}?fields=&max_chars=200") == {
        k: body[k] for k in TRUNCATION_KEYS}
    # fields do not apply to focused reads
    focused = await get_json(client, f"/read/{PAGE}?fields=id&query=publishing")
    assert focused["read_mode"] == "focused" and "outline" in focused


async def test_server_default_budget(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, read_default_max_chars=200)
    body = await get_json(client, f"/read/{PAGE}")
    assert body["truncated"] is True and body["returned_chars"] <= 200
    wide = await get_json(client, f"/read/{PAGE}?max_chars=100000")
    assert "truncated" not in wide and len(wide["text"]) == TOTAL_CHARS
    focused = await get_json(client, f"/read/{PAGE}?sections=1")
    assert focused["max_chars"] == 8000  # focused reads have their own default
    short = await get_json(client, "/read/hot")
    assert "truncated" not in short or short["total_chars"] > 200


# -- errors, drafts and paths -----------------------------------------------------------


@pytest.mark.parametrize(("query", "kind"), [
    ("max_chars=lots", "int_parsing"),
    ("max_chars=1.5", "int_parsing"),
    ("include_links=maybe", "bool_parsing"),
])
async def test_invalid_params_are_422(client: Client, query: str, kind: str) -> None:
    body = await get_json(client, f"/read/{PAGE}?{query}", status=422)
    name, value = query.split("=")
    assert body["detail"] == [{"type": kind, "loc": ["query", name], "msg": body["detail"][0]["msg"],
                               "input": value}]


async def test_two_bad_params_are_reported_together(client: Client) -> None:
    body = await get_json(client, f"/read/{PAGE}?max_chars=x&include_links=perhaps&query=tag", status=422)
    assert [d["loc"] for d in body["detail"]] == [["query", "max_chars"], ["query", "include_links"]]


async def test_missing_page_is_404_with_focus_params(client: Client) -> None:
    body = await get_json(client, "/read/no-such-page?query=x&sections=1&max_chars=300", status=404)
    assert body == {"detail": "page not found"}
    assert await get_json(client, f"/read/wiki/{PAGE}?sections=1", status=404) == {
        "detail": "page not found"}  # ids match exactly, as for plain reads


@pytest.mark.parametrize("query", ["query=BLUEHERON", "sections=1", "max_chars=200",
                                   "query=codename&sections=1&include_links=true",
                                   "query=BLUEHERON&include_drafts=true"])
async def test_withheld_page_never_leaks(client: Client, query: str) -> None:
    response = await client.get(f"/read/{DRAFT_PAGE}?{query}")
    assert response.status == 200
    text = await response.text()
    assert json.loads(text) == WITHHELD
    assert "BLUEHERON" not in text


async def test_drafts_open_focused_reads_with_double_opt_in(serve_client: ClientFactory,
                                                            sample_root: Path) -> None:
    client = await serve_client(sample_root, allow_drafts=True)
    assert await get_json(client, f"/read/{DRAFT_PAGE}?query=BLUEHERON") == WITHHELD
    body = await get_json(client, f"/read/{DRAFT_PAGE}?query=BLUEHERON&include_drafts=true")
    assert body["review_state"] == "draft" and "BLUEHERON" in body["text"]


async def test_no_local_path_in_any_read(client: Client, sample_root: Path) -> None:
    root = str(sample_root)
    for path in (f"/read/{PAGE}?query=tag&include_links=true", f"/read/{PAGE}?max_chars=200",
                 f"/read/{PAGE}?sections=nowhere", f"/read/{DRAFT_PAGE}?sections=1",
                 "/read/nope?query=x", f"/read/{PAGE}?max_chars=oops"):
        response = await client.get(path)
        text = await response.text()
        assert root not in text and str(sample_root.parent) not in text


# -- MCP --------------------------------------------------------------------------------


PARITY = [
    ({"page_id": PAGE, "query": "version tag"}, "?query=version%20tag"),
    ({"page_id": PAGE, "sections": ["1.2", "After Publishing"]}, "?sections=1.2,After%20Publishing"),
    ({"id": PAGE, "section": "1.1", "max_chars": 250}, "?sections=1.1&max_chars=250"),
    ({"page_id": PAGE, "sections": "1.1,1.3", "include_links": True},
     "?sections=1.1,1.3&include_links=true"),
    ({"page_id": PAGE, "max_chars": 200, "fields": "id,title"}, "?max_chars=200&fields=id,title"),
    ({"page_id": PAGE, "include_links": False}, "?include_links=false"),
]


@pytest.mark.parametrize(("arguments", "query"), PARITY)
async def test_mcp_read_equals_http(client: Client, arguments: dict[str, Any], query: str) -> None:
    expected = await get_json(client, f"/read/{PAGE}{query}")
    assert await call_tool(client, "llmwiki_read", arguments) == expected
    if "id" not in arguments and "section" not in arguments:  # aliases are /mcp only
        result = await stream_tool(client, "llmwiki_read", arguments)
        assert result["isError"] is False and result["structuredContent"] == expected


async def test_mcp_read_not_found_and_withheld_are_results(client: Client) -> None:
    assert await call_tool(client, "llmwiki_read", {"page_id": "nope", "query": "x"}) == {
        "found": False}
    assert await call_tool(client, "llmwiki_read",
                           {"page_id": DRAFT_PAGE, "sections": "1", "include_drafts": True}) == WITHHELD
    lenient = await call_tool(client, "llmwiki_read", {"page_id": PAGE, "max_chars": "garbage",
                                                       "query": "publishing"})
    assert lenient["max_chars"] == 8000


async def test_mcp_tool_description_and_schema(client: Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    tools = (await (await client.post("/mcp", json=body)).json())["result"]["tools"]
    read = next(t for t in tools if t["name"] == "llmwiki_read")
    for word in ("focused", "query", "sections", "max_chars", "include_links=false", "fields"):
        assert word in read["description"]
    props = read["inputSchema"]["properties"]
    assert list(props) == ["page_id", "include_drafts", "fields", "query", "sections",
                           "max_chars", "include_links"]
    assert {t.get("type") for t in props["max_chars"]["anyOf"]} == {"integer", "null"}
    assert {t.get("type") for t in props["include_links"]["anyOf"]} == {"boolean", "null"}
    assert read["inputSchema"]["required"] == ["page_id"]
