"""Browser and network defences: CORS, Origin and Host checks, root errors, no path leaks."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.support.folders import FIXTURES, copy_fixture

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

LOCAL_ORIGINS = [
    "http://localhost", "http://localhost:5173", "https://localhost:8443",
    "http://127.0.0.1", "http://127.0.0.1:8765", "https://127.0.0.1:1",
    "http://[::1]", "http://[::1]:3000", "https://[::1]:65535",
]
FOREIGN_ORIGINS = [
    "http://evil.example", "https://localhost.evil.example", "http://localhost.",
    "http://127.0.0.2", "http://localhost:5173/path", "ftp://localhost", "null",
    "http://[::2]:80", "http://LOCALHOST", "http://localhost:",
]
ORIGIN_FORBIDDEN = {"detail": "origin not allowed"}
HOST_FORBIDDEN = {"detail": "host not allowed"}
MISSING = {"error": {"code": "wiki_root_missing",
                     "message": "Configured wiki root does not exist or is not a directory."}}
UNSUPPORTED = {"error": {"code": "wiki_root_unsupported",
                         "message": "No supported wiki files were found under the configured "
                                    "root."}}
PROJECTION_ROUTES = ["/health", "/manifest", "/source-refs", "/source-bundle", "/graph",
                     "/graph?limit=5", "/graph/neighborhood?seed=hot", "/read/hot"]


# -- CORS ---------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", LOCAL_ORIGINS)
async def test_local_origins_get_cors_headers(serve_client: ClientFactory, sample_root: Path,
                                              origin: str) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"Origin": origin})
    assert response.status == 200
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Vary"] == "Origin"
    assert response.headers["Access-Control-Expose-Headers"] == "Mcp-Session-Id"
    assert "Access-Control-Allow-Credentials" not in response.headers


async def test_cors_headers_on_error_responses_too(serve_client: ClientFactory,
                                                   sample_root: Path) -> None:
    client = await serve_client(sample_root)
    origin = "http://localhost:5173"
    for path, status in (("/read/nope", 404), ("/nope", 404), ("/graph?limit=x", 422)):
        response = await client.get(path, headers={"Origin": origin})
        assert response.status == status
        assert response.headers["Access-Control-Allow-Origin"] == origin
        assert response.headers["Vary"] == "Origin"


async def test_no_origin_means_no_cors_but_vary(serve_client: ClientFactory,
                                                sample_root: Path) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/manifest")
    assert response.status == 200
    assert response.headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Access-Control-Expose-Headers" not in response.headers


@pytest.mark.parametrize("path", ["/health", "/graph/neighborhood", "/query", "/mcp/stream"])
async def test_preflight(serve_client: ClientFactory, sample_root: Path, path: str) -> None:
    client = await serve_client(sample_root)
    origin = "http://127.0.0.1:5500"
    response = await client.options(path, headers={
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-request-id",
    })
    assert response.status == 200
    assert await response.text() == "OK"
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Access-Control-Allow-Methods"] == "GET, POST, DELETE, OPTIONS"
    assert response.headers["Access-Control-Allow-Headers"] == "content-type, x-request-id"
    assert response.headers["Access-Control-Max-Age"] == "600"
    assert response.headers["Vary"] == "Origin"
    assert "Access-Control-Allow-Credentials" not in response.headers


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_foreign_origin_is_403_on_get(serve_client: ClientFactory, sample_root: Path,
                                            origin: str) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"Origin": origin})
    assert response.status == 403
    assert await response.json() == ORIGIN_FORBIDDEN
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Access-Control-Expose-Headers" not in response.headers


@pytest.mark.parametrize(("method", "path"), [
    ("OPTIONS", "/health"), ("OPTIONS", "/query"), ("GET", "/read/hot"), ("GET", "/nope"),
    ("POST", "/graph"), ("DELETE", "/mcp/stream"),
])
async def test_foreign_origin_is_403_everywhere(serve_client: ClientFactory, sample_root: Path,
                                                method: str, path: str) -> None:
    client = await serve_client(sample_root)
    response = await client.request(method, path, headers={
        "Origin": "https://attacker.example", "Access-Control-Request-Method": "GET"})
    assert response.status == 403
    assert await response.json() == ORIGIN_FORBIDDEN
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Access-Control-Allow-Methods" not in response.headers


async def test_explicit_origins_replace_local_defaults(serve_client: ClientFactory,
                                                       sample_root: Path) -> None:
    allowed = "https://app.example.org"
    client = await serve_client(sample_root,
                                cors_origins=(allowed, "https://second.example.org"))
    ok = await client.get("/manifest", headers={"Origin": allowed})
    assert ok.status == 200
    assert ok.headers["Access-Control-Allow-Origin"] == allowed
    preflight = await client.options("/health", headers={"Origin": allowed})
    assert preflight.status == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == allowed
    for origin in ("http://localhost:5173", "http://127.0.0.1", "https://app.example.org:443",
                   "https://APP.example.org"):
        refused = await client.get("/manifest", headers={"Origin": origin})
        assert refused.status == 403, origin
        assert await refused.json() == ORIGIN_FORBIDDEN
        assert "Access-Control-Allow-Origin" not in refused.headers
    health = await client.get("/health")
    body = await health.json()
    assert body["cors"] == {"mode": "explicit-allowlist", "local_dev_origins": False,
                            "explicit_origin_count": 2}
    text = await health.text()
    assert "app.example.org" not in text
    assert "second.example.org" not in text


# -- Host header ----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example",
                                  "localhost.evil.example:80", "10.0.0.5"])
async def test_foreign_host_is_421(serve_client: ClientFactory, sample_root: Path,
                                   host: str) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"Host": host})
    assert response.status == 421
    assert await response.json() == HOST_FORBIDDEN
    missing_page = await client.get("/read/nope", headers={"Host": host})
    assert missing_page.status == 421


@pytest.mark.parametrize("host", ["localhost", "localhost:9999", "127.0.0.1:8765", "[::1]:8765",
                                  "LOCALHOST:1"])
async def test_loopback_hosts_allowed(serve_client: ClientFactory, sample_root: Path,
                                      host: str) -> None:
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"Host": host})
    assert response.status == 200


@pytest.mark.parametrize("host", ["[::1]evil", "localhost:x", "[::1]:8765x", "127.0.0.1:8765:1",
                                  "user@localhost", "localhost/x", "１２７.０.０.１"])
async def test_malformed_hosts_are_421(serve_client: ClientFactory, sample_root: Path, host: str) -> None:
    """The one Host parser of both services (common/hosts.py): a header that is no plain
    authority names no host, loopback or not."""
    client = await serve_client(sample_root)
    response = await client.get("/health", headers={"Host": host})
    assert response.status == 421, host
    assert await response.json() == HOST_FORBIDDEN


@pytest.mark.parametrize("host", ["127.0.0.2:8765", "[::ffff:127.0.0.1]:8765", "localhost.:8765",
                                  "127.1:8765"])
async def test_every_loopback_address_is_a_loopback_host(serve_client: ClientFactory, sample_root: Path,
                                                        host: str) -> None:
    """One loopback rule for both services (127.0.0.0/8, ::1, localhost); the stream keeps the
    MCP SDK's narrower guard (contract 6.2.6): its three names, each with a port."""
    client = await serve_client(sample_root)
    assert (await client.get("/health", headers={"Host": host})).status == 200
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    stream = await client.post("/mcp/stream", json=body, headers={
        "Host": host, "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"})
    if host.startswith(("localhost.", "127.1")):  # the parser's forms of the SDK's names
        assert stream.status == 200
    else:
        assert stream.status == 421
        assert await stream.text() == "Invalid Host header"


async def test_a_listed_null_origin_is_still_refused(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, cors_origins=("null", "https://app.example.org"))
    refused = await client.get("/health", headers={"Origin": "null"})
    assert refused.status == 403
    assert await refused.json() == ORIGIN_FORBIDDEN


async def test_allowed_hosts_extend_loopback(serve_client: ClientFactory,
                                             sample_root: Path) -> None:
    client = await serve_client(sample_root, allowed_hosts=("wiki.internal",))
    assert (await client.get("/health", headers={"Host": "wiki.internal"})).status == 200
    assert (await client.get("/health", headers={"Host": "wiki.internal:8080"})).status == 200
    assert (await client.get("/health", headers={"Host": "localhost:1"})).status == 200
    other = await client.get("/health", headers={"Host": "other.internal"})
    assert other.status == 421
    assert await other.json() == HOST_FORBIDDEN


async def test_star_disables_host_check(serve_client: ClientFactory, sample_root: Path) -> None:
    client = await serve_client(sample_root, allowed_hosts=("*",))
    for host in ("anything.example", "203.0.113.7:80"):
        assert (await client.get("/health", headers={"Host": host})).status == 200


# -- root errors (D1, D9, E5) ---------------------------------------------------------------


@pytest.mark.parametrize("path", PROJECTION_ROUTES)
async def test_missing_root_is_404_then_served_once_created(
        serve_client: ClientFactory, tmp_path: Path, path: str) -> None:
    root = tmp_path / "later"
    client = await serve_client(root)
    response = await client.get(path)
    assert response.status == 404
    assert await response.json() == MISSING
    shutil.copytree(FIXTURES / "shapes" / "llmwiki-compiler-output", root)
    ready = await client.get(path)
    assert ready.status == 200, await ready.text()
    health = await (await client.get("/health")).json()
    assert health["source"]["adapter"] == "llmwiki-markdown"
    assert health["source"]["page_count"] == 3
    assert health["source"]["title"] == "Compiler Output"


@pytest.mark.parametrize("path", PROJECTION_ROUTES)
async def test_empty_root_is_422_then_served_once_populated(
        serve_client: ClientFactory, tmp_path: Path, path: str) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    client = await serve_client(root)
    response = await client.get(path)
    assert response.status == 422
    assert await response.json() == UNSUPPORTED
    shutil.copytree(FIXTURES / "shapes" / "llmwiki-compiler-output", root, dirs_exist_ok=True)
    ready = await client.get(path)
    assert ready.status == 200, await ready.text()
    health = await (await client.get("/health")).json()
    assert (health["source"]["adapter"], health["source"]["page_count"]) == (
        "llmwiki-markdown", 3)


@pytest.mark.parametrize("shape", ["dendron", "foam", "logseq", "quartz"])
async def test_marker_only_root_is_unsupported(serve_client: ClientFactory, tmp_path: Path,
                                               shape: str) -> None:
    root = copy_fixture(f"shapes/marker-only/{shape}", tmp_path / "roots")
    client = await serve_client(root)
    response = await client.get("/manifest")
    assert response.status == 422
    assert await response.json() == UNSUPPORTED


async def test_root_removed_after_start_is_404(serve_client: ClientFactory,
                                               sample_root: Path) -> None:
    client = await serve_client(sample_root)
    assert (await client.get("/health")).status == 200
    shutil.rmtree(sample_root)
    for path in PROJECTION_ROUTES:
        response = await client.get(path)
        assert response.status == 404, path
        assert await response.json() == MISSING
    sample_root.write_text("now a file, not a directory\n", encoding="utf-8")
    response = await client.get("/manifest")
    assert response.status == 404
    assert await response.json() == MISSING


# -- G1: the local path never reaches the network ------------------------------------------


async def collect_bodies(client: Client, requests: list[tuple[str, str, dict[str, str]]],
                         ) -> list[str]:
    texts = []
    for method, path, headers in requests:
        response = await client.request(method, path, headers=headers, data=b"")
        texts.append(f"{method} {path} {response.status} {dict(response.headers)} "
                     f"{await response.text()}")
    return texts


EVERY_REQUEST: list[tuple[str, str, dict[str, str]]] = [
    ("GET", "/health", {}), ("GET", "/manifest", {}), ("GET", "/source-refs", {}),
    ("GET", "/source-bundle", {}), ("GET", "/graph?limit=2000", {}),
    ("GET", "/graph/neighborhood?seed=hot&seed=overview&depth=4&limit=500", {}),
    ("GET", "/graph/neighborhood?seed=/etc/passwd", {}),
    ("GET", "/read/hot", {}), ("GET", "/read/vendor-contacts", {}),
    ("GET", "/read/runbooks/incident-comms?include_drafts=true", {}),
    ("GET", "/read/no-such-page", {}), ("GET", "/read/..%2F..%2Fetc%2Fpasswd", {}),
    ("GET", "/diagnostics/projection-store", {}), ("GET", "/openapi.json", {}),
    ("GET", "/graph?limit=oops", {}), ("GET", "/graph/neighborhood?direction=x", {}),
    ("GET", "/source-refs?include_drafts=perhaps", {}),
    ("POST", "/health", {}), ("GET", "/nope", {}),
    ("GET", "/health", {"Origin": "http://evil.example"}),
    ("OPTIONS", "/health", {"Origin": "http://localhost:3000"}),
    ("GET", "/health", {"Host": "evil.example"}),
]


def assert_no_path(texts: list[str], *paths: Path) -> None:
    needles = {str(p) for p in paths} | {str(p.resolve()) for p in paths if p.exists()}
    for text in texts:
        for needle in needles:
            assert needle not in text, (needle, text[:300])


async def test_no_local_path_in_any_response(serve_client: ClientFactory, sample_root: Path,
                                             tmp_path: Path) -> None:
    client = await serve_client(sample_root, allow_drafts=True, max_body_bytes=1024)
    texts = await collect_bodies(client, EVERY_REQUEST)
    big = await client.post("/health", data=b"y" * 5000)
    assert big.status == 413
    texts.append(await big.text())
    assert len(texts) == len(EVERY_REQUEST) + 1
    assert_no_path(texts, tmp_path, sample_root)
    assert "pytest-of-" not in "".join(texts)


async def test_no_local_path_in_root_errors(serve_client: ClientFactory, tmp_path: Path) -> None:
    root = tmp_path / "some-root"
    client = await serve_client(root)
    missing = await collect_bodies(client, EVERY_REQUEST)
    assert any(" 404 " in t and "wiki_root_missing" in t for t in missing)
    root.mkdir()
    (root / "notes.txt").write_text("not markdown\n", encoding="utf-8")
    unsupported = await collect_bodies(client, EVERY_REQUEST)
    assert any(" 422 " in t and "wiki_root_unsupported" in t for t in unsupported)
    assert_no_path(missing + unsupported, tmp_path, root)
    assert "pytest-of-" not in "".join(missing + unsupported)


# -- CORS on a streamed answer ----------------------------------------------------------------


async def test_a_streamed_answer_carries_the_cors_headers(serve_client: ClientFactory,
                                                          sample_root: Path) -> None:
    """An SSE answer is sent before its handler returns: aiohttp-cors and `Vary` are written as it
    is prepared, like every other answer's."""
    client = await serve_client(sample_root, enable_a2a=True)
    origin = "http://localhost:3000"
    body = {"message": {"messageId": "cors", "role": "ROLE_USER", "parts": [{"text": "rollback"}]}}
    response = await client.post("/message:stream", json=body,
                                 headers={"A2A-Version": "1.0", "Origin": origin})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Access-Control-Expose-Headers"] == "Mcp-Session-Id"
    assert response.headers["Vary"] == "Origin"
    assert "data:" in await response.text()
    plain = await client.post("/message:stream", json=body, headers={"A2A-Version": "1.0"})
    assert plain.headers["Vary"] == "Origin" and "Access-Control-Allow-Origin" not in plain.headers
    await plain.read()
