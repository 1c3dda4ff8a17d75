"""Malformed request bodies (not JSON, nested too deeply) get a 4xx with the route's error envelope."""

from __future__ import annotations

from typing import Any

import pytest

from common.json_read import MAX_JSON_DEPTH, JsonTooDeep, loads_bounded
from tests.support.bridge_sources import BridgeFactory

DEEP = [
    b"[" * 100_000 + b"]" * 100_000,  # the standard parser's own recursion limit
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b'{"data": {"query": "x", "retrieval": ' + b"[" * 300 + b"]" * 300 + b"}}",  # parses, too deep
]
NOT_JSON = [b"{not json", b'{"query": "x"', b"\xff\xfe\xfd"]
MCP_HEADERS = {"MCP-Protocol-Version": "2025-06-18", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def test_loads_bounded_refuses_nesting_past_the_limit() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_bounded(at_limit) is not None  # exactly at the limit is accepted
    with pytest.raises(JsonTooDeep):
        loads_bounded("[" + at_limit + "]")
    with pytest.raises(JsonTooDeep):
        loads_bounded('{"a": ' * 5000 + "null" + "}" * 5000)
    assert loads_bounded('{"a": [1, {"b": "c"}]}') == {"a": [1, {"b": "c"}]}
    with pytest.raises(ValueError):
        loads_bounded("{")


@pytest.mark.parametrize("raw", DEEP + NOT_JSON)
@pytest.mark.parametrize(("method", "path"), [("POST", "/message:send"), ("POST", "/mcp"),
                                              ("PUT", "/settings/config.json"),
                                              ("PUT", "/settings/sources.json")])
async def test_bridge_routes_answer_400_invalid_json(bridge_client: BridgeFactory, method: str, path: str,
                                                     raw: bytes) -> None:
    client = await bridge_client()
    response = await client.request(method, path, data=raw, headers={"X-Request-Id": "req-deep"})
    body: dict[str, Any] = await response.json()
    assert response.status == 400, body
    assert body["error"]["code"] == "invalid_json"
    assert body["error"]["message"] in ("Request body must be valid JSON.",
                                        "Request body JSON is nested too deeply.")
    if path == "/message:send":  # contract 2.5: every /message:send error carries both ids
        assert body["requestId"] == "req-deep" and body["traceId"]


@pytest.mark.parametrize("raw", DEEP + NOT_JSON)
async def test_versioned_mcp_answers_400_parse_error(bridge_client: BridgeFactory, raw: bytes) -> None:
    client = await bridge_client()
    response = await client.post("/mcp", data=raw, headers=MCP_HEADERS)
    body = await response.json()
    assert response.status == 400 and body["error"]["code"] == -32700 and body["id"] is None


@pytest.mark.parametrize("raw", DEEP + NOT_JSON)
async def test_a2a_jsonrpc_answers_a_parse_error(bridge_client: BridgeFactory, raw: bytes) -> None:
    """JSON-RPC's own envelope, with HTTP 200 like every A2A JSON-RPC error here
    (test_bridge_a2a pins that)."""
    client = await bridge_client()
    response = await client.post("/a2a/jsonrpc", data=raw, headers={"Content-Type": "application/json"})
    body = await response.json()
    assert response.status == 200 and body["error"]["code"] == -32700 and body["id"] is None
