"""A hostile folder (bad bytes, huge and symlinked files, traversal ids) served over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.support.folders import OUTSIDE_GRAPH_RELATION, OUTSIDE_SECRET_WORD, build_adversarial

Client = TestClient[web.Request, web.Application]
ClientFactory = Callable[..., Awaitable[Client]]  # the `serve_client` fixture

PAGE_NOT_FOUND = {"detail": "page not found"}
GOOD_PAGES = {
    "good": "Good Page",
    "another-good": "Another Good Page",
    "crlf": "CRLF Page",
    "dates": "Dates Page",
    "many-links": "Many Links",
    "numeric-tags": "Numeric Tags",
    "yaml-list-frontmatter": "List Frontmatter",
    "loop/page": "Loop Page",
    "empty": "empty",
}
PASSWD_MARKERS = ("root:x:0:0", "/bin/bash", "/usr/sbin/nologin")


@pytest.fixture(scope="module")
def adversarial_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per module (the huge page is 20 MiB); the tests only read it."""
    return build_adversarial(tmp_path_factory.mktemp("adversarial"))


@pytest.fixture
async def client(serve_client: ClientFactory, adversarial_root: Path) -> Client:
    return await serve_client(adversarial_root)


async def get_json(client: Client, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status == status, (path, await response.text())
    return await response.json()


async def raw_get(client: Client, target: str) -> tuple[int, str]:
    """Send a request line byte for byte (no client-side URL normalisation)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                     .encode("latin-1"))
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode("utf-8", "replace")


async def test_health_reports_skipped_and_degraded_files(client: Client) -> None:
    body = await get_json(client, "/health")
    assert body["status"] == "ok"
    assert body["source"]["adapter"] == "generic-markdown"
    assert body["source"]["page_count"] == 12
    # skipped: huge.md (too large), escape-link.md and graph/graph.json (symlinks);
    # degraded: not-utf8.md and broken-frontmatter.md
    assert body["diagnostics"] == {"freshness": "inotify", "skipped_files": 3,
                                   "degraded_files": 2, "store": body["diagnostics"]["store"]}
    assert body["diagnostics"]["store"] in ("disk", "off")


@pytest.mark.parametrize(("page_id", "title"), sorted(GOOD_PAGES.items()))
async def test_good_pages_readable(client: Client, page_id: str, title: str) -> None:
    body = await get_json(client, f"/read/{page_id}")
    assert body["id"] == page_id
    assert body["title"] == title


async def test_crlf_page_normalised(client: Client) -> None:
    body = await get_json(client, "/read/crlf")
    assert "\r" not in body["text"]
    assert body["frontmatter"] == {"title": "CRLF Page", "tags": ["windows"]}
    assert body["headings"] == ["CRLF Page", "Second Heading"]


async def test_not_utf8_page_is_degraded_not_fatal(client: Client) -> None:
    body = await get_json(client, "/read/not-utf8")
    assert body["title"] == "Caf\ufffd Notes"
    assert body["text"] == "# Caf\ufffd Notes\n\nLatin-1 bytes: caf\ufffd r\ufffdsum\ufffd na\ufffdve."


async def test_broken_frontmatter_page_loads(client: Client) -> None:
    body = await get_json(client, "/read/broken-frontmatter")
    assert body["frontmatter"] == {}
    assert body["title"] == "Heading From Body"
    assert body["headings"] == ["Heading From Body"]


async def test_list_frontmatter_is_empty(client: Client) -> None:
    body = await get_json(client, "/read/yaml-list-frontmatter")
    assert body["frontmatter"] == {}


@pytest.mark.parametrize("path", ["/read/huge", "/read/huge.md"])
async def test_huge_page_skipped(client: Client, path: str) -> None:
    assert await get_json(client, path, status=404) == PAGE_NOT_FOUND
    hood = await get_json(client, "/graph/neighborhood?seed=huge&seed=Huge%20Page")
    assert hood["seeds"] == []
    assert hood["unmatched"] == ["huge", "Huge Page"]


@pytest.mark.parametrize("path", ["/read/escape-link", "/read/escape-link.md",
                                  "/read/outside-secret", "/read/loop/self/good"])
async def test_symlinked_files_never_served(client: Client, path: str) -> None:
    assert await get_json(client, path, status=404) == PAGE_NOT_FOUND


async def test_outside_secret_in_no_response(client: Client) -> None:
    texts: list[str] = []
    for path in ("/health", "/manifest", "/source-refs", "/source-bundle", "/graph?limit=2000",
                 "/read/escape-link", "/read/outside-secret"):
        texts.append(await (await client.get(path)).text())
    for query in ("seed=good&seed=another-good&depth=4&limit=500",
                  "seed=escape-link&seed=OUTSIDESECRET&seed=outside-secret",
                  f"seed=good&relation={OUTSIDE_GRAPH_RELATION}"):
        hood = await get_json(client, f"/graph/neighborhood?{query}")
        # seeds and relations are echoed back; only the returned graph can leak
        texts.append(json.dumps({"seeds": hood["seeds"], "nodes": hood["nodes"],
                                 "edges": hood["edges"]}))
    graph = await get_json(client, "/graph?limit=2000")
    page_ids = [n["id"].removeprefix("page:") for n in graph["nodes"] if n["id"].startswith("page:")]
    assert len(page_ids) == 12
    for page_id in page_ids:
        response = await client.get(f"/read/{quote(page_id, safe='')}")
        assert response.status == 200, page_id
        texts.append(await response.text())
    for text in texts:
        assert OUTSIDE_SECRET_WORD not in text
        assert OUTSIDE_GRAPH_RELATION not in text
    # the seed lookup scans the whole graph: a node from the outside sidecar would match
    hood = await get_json(client, "/graph/neighborhood?seed=OUTSIDESECRET")
    assert hood["unmatched"] == ["OUTSIDESECRET"]
    leaked = await get_json(
        client, f"/graph/neighborhood?seed=good&relation={OUTSIDE_GRAPH_RELATION}")
    assert leaked["edges"] == []
    assert [n["id"] for n in leaked["nodes"]] == ["page:good"]


async def test_dotdot_id_only_by_exact_id_or_path(client: Client) -> None:
    exact = await get_json(client, "/read/..%2F..%2Fetc%2Fpasswd")
    assert (exact["id"], exact["path"], exact["title"]) == (
        "../../etc/passwd", "dotdot-id.md", "Dot Dot Id")
    assert exact["text"].startswith("# Dot Dot Id\n")
    by_path = await get_json(client, "/read/dotdot-id.md")
    assert by_path == exact
    # Its path without the suffix names it too (issue 15: reads accept what graph seeds do).
    assert await get_json(client, "/read/dotdot-id") == exact
    for path in ("/read/..%2F..%2F..%2Fetc%2Fpasswd", "/read/%2Fetc%2Fpasswd",
                 "/read/etc/passwd", "/read/..%2Fgood", "/read/..%2F..%2Fetc%2Fshadow",
                 "/read/.%2Fgood"):
        body = await get_json(client, path, status=404)
        assert body == PAGE_NOT_FOUND, path


@pytest.mark.parametrize(("target", "expected"), [
    ("/read/../../etc/passwd", 200),  # the exact id of dotdot-id.md, never the real file
    ("/read/%2e%2e/%2e%2e/etc/passwd", 200),
    ("/read/../../../etc/passwd", 404),
    ("/read/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", 404),
    ("/read//etc/passwd", 404),
])
async def test_raw_traversal_never_reads_the_filesystem(client: Client, target: str,
                                                        expected: int) -> None:
    status, body = await raw_get(client, target)
    assert status == expected, body
    for marker in PASSWD_MARKERS:
        assert marker not in body
    if status == 200:
        assert '"path":"dotdot-id.md"' in body
    else:
        assert body in ('{"detail":"page not found"}', '{"detail":"Not Found"}')


@pytest.mark.parametrize(("target", "loc", "value"), [
    ("/graph?limit=%FF%FE", ["query", "limit"], "\ufffd\ufffd"),
    ("/graph?%%%=&&&limit", ["query", "limit"], ""),
    ("/graph?limit=%00", ["query", "limit"], "\x00"),
    ("/graph?limit=1e3", ["query", "limit"], "1e3"),
    ("/graph/neighborhood?seed=good&depth=%F0%9F%98%80", ["query", "depth"], "\U0001f600"),
    ("/graph/neighborhood?seed=good&direction=%00", ["query", "direction"], "\x00"),
    ("/read/good?include_drafts=%ZZ", ["query", "include_drafts"], "%ZZ"),
    ("/source-bundle?include_drafts=", ["query", "include_drafts"], ""),
    ("/source-refs?include_drafts=truee", ["query", "include_drafts"], "truee"),
])
async def test_malformed_query_strings_are_422(client: Client, target: str,
                                               loc: list[str], value: str) -> None:
    status, body = await raw_get(client, target)
    assert status == 422, body
    detail = json.loads(body)["detail"]
    assert [item["loc"] for item in detail] == [loc]
    assert detail[0]["input"] == value


async def test_service_keeps_serving_after_abuse(client: Client) -> None:
    for target in ("/read/../../../etc/passwd", "/graph?limit=%FF", "/read/huge",
                   "/read/escape-link", "/graph/neighborhood?direction=%00",
                   "/read/" + "a" * 4000, "/graph?" + "&".join(f"k{i}=v" for i in range(500))):
        status, _ = await raw_get(client, target)
        assert status in (200, 404, 422), target
    assert (await get_json(client, "/health"))["status"] == "ok"
    assert (await get_json(client, "/read/good"))["title"] == "Good Page"
    assert (await get_json(client, "/read/not-utf8"))["title"] == "Caf\ufffd Notes"


ODD_FRONTMATTER = {
    "inf": "x: .inf\ny: -.inf\n",
    "nan": "x: .nan\n",
    "binary": "b: !!binary aGVsbG8=\n",
    "yaml-set": "s: !!set {a: null, b: null}\n",
    "date-key": "2026-01-01: x\n",
    "null-key": "~: v\n",
    "list-key": "? [a, b]\n: v\n",
    "title-list": "title: [a, b]\n",
    "tags-map": "tags: {a: 1}\n",
    "alias-bomb": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                  "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                  "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                  "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
}


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN/Infinity, which are not JSON."""

    def refuse(name: str) -> None:
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


async def test_odd_yaml_values_never_break_responses(serve_client: ClientFactory,
                                                     tmp_path: Path) -> None:
    root = tmp_path / "odd"
    root.mkdir()
    for name, frontmatter in ODD_FRONTMATTER.items():
        (root / f"{name}.md").write_text(f"---\n{frontmatter}---\n# {name}\n\nBody.\n",
                                         encoding="utf-8")
    client = await serve_client(root)
    for path in ("/health", "/manifest", "/source-refs", "/source-bundle", "/graph?limit=2000"):
        response = await client.get(path)
        assert response.status == 200, path
        strict_json(await response.text())
    for name in ODD_FRONTMATTER:
        response = await client.get(f"/read/{name}")
        assert response.status == 200, name
        body = strict_json(await response.text())
        assert body["id"] == name
        assert isinstance(body["title"], str)
        assert isinstance(body["frontmatter"], dict)
        assert len(await response.read()) < 100_000, name  # no alias expansion blow-up
