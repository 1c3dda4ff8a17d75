"""The installed serve against a web page on the same machine, as deployed with its defaults: a
rebinding or malformed `Host` is 421 on every route, a foreign `Origin` 403 with no CORS header,
an allowed origin gets the contract's CORS answers, and `/mcp/stream` keeps the MCP SDK's guard."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.processes import Service

ROUTES = [("GET", "/health"), ("GET", "/manifest"), ("GET", "/read/hot"), ("POST", "/query"),
          ("POST", "/mcp"), ("POST", "/mcp/stream"), ("POST", "/message:send"), ("OPTIONS", "/health"),
          ("GET", "/nope")]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def _send(service: Service, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if path.startswith("/mcp") else {"query": "q"}
    with httpx.Client(base_url=service.url, timeout=30, trust_env=False) as client:
        return client.request(method, path, json=None if method in ("GET", "OPTIONS") else body,
                              headers={**MCP_HEADERS, **headers})


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example:80", "evil.localhost", "[::1]evil",
                                  "localhost:x"])
def test_a_rebinding_or_malformed_host_gets_421_everywhere(our_serve: Service, host: str) -> None:
    for method, path in ROUTES:
        response = _send(our_serve, method, path, {"Host": host, "Origin": f"http://{host}"})
        assert response.status_code == 421, (host, method, path)
        assert response.json() == {"detail": "host not allowed"}
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost:3000/page",
                                    "http://LOCALHOST:3000"])
def test_a_foreign_origin_gets_403_without_cors(our_serve: Service, origin: str) -> None:
    for method, path in ROUTES:
        response = _send(our_serve, method, path, {"Origin": origin})
        assert response.status_code == 403, (origin, method, path)
        assert response.json() == {"detail": "origin not allowed"}
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


def test_an_allowed_origin_gets_the_contracts_cors(our_serve: Service) -> None:
    origin = "http://127.0.0.1:5173"
    answer = _send(our_serve, "GET", "/health", {"Origin": origin})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == origin
    assert answer.headers["access-control-expose-headers"] == "Mcp-Session-Id"
    assert answer.headers["vary"] == "Origin"
    preflight = _send(our_serve, "OPTIONS", "/query", {
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-request-id"})
    assert (preflight.status_code, preflight.text) == (200, "OK")
    assert preflight.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    assert preflight.headers["access-control-allow-headers"] == "content-type, x-request-id"
    assert preflight.headers["access-control-max-age"] == "600"
    assert "access-control-allow-credentials" not in preflight.headers


def test_the_stream_keeps_the_sdk_host_guard(our_serve: Service) -> None:
    port = our_serve.url.rsplit(":", 1)[1]
    assert _send(our_serve, "POST", "/mcp/stream", {"Host": f"127.0.0.1:{port}"}).status_code == 200
    assert _send(our_serve, "GET", "/health", {"Host": f"127.0.0.2:{port}"}).status_code == 200
    for host in ("127.0.0.1", f"127.0.0.2:{port}"):
        refused = _send(our_serve, "POST", "/mcp/stream", {"Host": host})
        assert (refused.status_code, refused.text) == (421, "Invalid Host header"), host
