"""The source HTTP client against scripted loopback servers: framing, keep-alive, limits, policy."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bridge.policy import SourcePolicy
from bridge.sources.http_client import (
    ConnectError,
    HttpClientError,
    ResponseTooLarge,
    SourceHttpClient,
)
from bridge.sources.resolver import PolicyResolver
from bridge.sources.transport import source_http_client
from tests.support.bridge_sources import FakeDns

Script = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]  # -> keep the connection open


class RawServer:
    """A loopback server that reads whole requests and answers each with a scripted reply."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> RawServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                if not await self.script(request, writer):
                    return
        finally:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Script], Awaitable[RawServer]]]:
    servers: list[RawServer] = []

    async def start(script: Script) -> RawServer:
        server = await RawServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def client() -> AsyncIterator[SourceHttpClient]:
    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        yield http


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def test_kept_alive_connection_is_reused_and_the_request_goes_out_whole(
        raw_server: Any, client: SourceHttpClient) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b'{"ok": true}', "Content-Length: 12", "Content-Type: application/json"))
        return True

    server = await raw_server(script)
    body = json.dumps({"query": "x"}).encode()
    for _ in range(3):
        response = await client.request("POST", server.url + "/a b/q?x=1 2", body=body,
                                        headers={"Accept": "application/json"}, max_bytes=1024)
        assert (response.status, response.body) == (200, b'{"ok": true}')
        assert response.headers["content-type"] == "application/json"
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("POST /a%20b/q?x=1%202 HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n" in first
    assert f"\r\nContent-Length: {len(body)}\r\n" in first and first.endswith('\r\n\r\n{"query": "x"}')


async def test_header_values_cannot_inject_lines(raw_server: Any, client: SourceHttpClient) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    await client.request("GET", server.url + "/%0d%0aX:%20y\r\nZ: 1", max_bytes=10,
                         headers={"Accept": "a\r\nEvil: 1", "Other": "fine"})
    [request] = server.requests
    lines = request.decode().split("\r\n")
    assert lines[0].startswith("GET /%0d%0aX:%20y") and lines[0].endswith(" HTTP/1.1")
    assert "Other: fine" in lines and not any(line.startswith(("Evil", "Z:")) for line in lines)


async def test_chunked_answer_arriving_in_pieces(raw_server: Any, client: SourceHttpClient) -> None:
    payload = json.dumps({"text": "릴리스 " * 500}).encode()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"", "Transfer-Encoding: chunked"))
        for start in range(0, len(payload), 997):
            piece = payload[start:start + 997]
            writer.write(f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        return True

    server = await raw_server(script)
    for _ in range(2):
        response = await client.request("GET", server.url + "/c", max_bytes=1 << 20)
        assert response.body == payload
    assert server.connections == 1


async def test_answer_read_until_close_is_not_reused(raw_server: Any, client: SourceHttpClient) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b'{"n": 1}'))
        return False

    server = await raw_server(script)
    assert (await client.request("GET", server.url, max_bytes=100)).body == b'{"n": 1}'
    assert (await client.request("GET", server.url, max_bytes=100)).body == b'{"n": 1}'
    assert server.connections == 2


async def test_interim_answer_is_skipped(raw_server: Any, client: SourceHttpClient) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"[1]", "Content-Length: 3"))
        return True

    server = await raw_server(script)
    assert (await client.request("GET", server.url, max_bytes=100)).body == b"[1]"


async def test_closed_idle_connection_is_replaced(raw_server: Any, client: SourceHttpClient) -> None:
    """The server closes a kept-alive connection while it is idle: the next call opens a new one
    (and a stale connection that dies on the write is retried once)."""

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        await writer.drain()
        return False  # closes, without saying "Connection: close"

    server = await raw_server(script)
    for _ in range(4):
        assert (await client.request("GET", server.url, max_bytes=10)).status == 200
    assert server.connections == 4


async def test_connection_dying_on_reuse_is_retried_once(raw_server: Any, client: SourceHttpClient) -> None:
    """The race a kept-alive connection has: the server drops it just as the next request goes
    out. Nothing of an answer arrived, so the request is sent again on a new connection."""
    served: dict[asyncio.StreamWriter, int] = {}  # holds the writers, so no two share an id

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        served[writer] = served.get(writer, 0) + 1
        if served[writer] > 1:
            return False  # drop it unanswered
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    for _ in range(3):
        assert (await client.request("POST", server.url, body=b"{}", max_bytes=10)).body == b"{}"
    assert server.connections == 3 and len(server.requests) == 5


async def test_answer_cut_short_is_not_retried(raw_server: Any, client: SourceHttpClient) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{", "Content-Length: 2"))
        await writer.drain()
        return False

    server = await raw_server(script)
    with pytest.raises(HttpClientError):
        await client.request("GET", server.url, max_bytes=10)
    assert len(server.requests) == 1


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"SMTP ready\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70_000,
])
async def test_broken_answers_fail_cleanly(raw_server: Any, client: SourceHttpClient, answer: bytes) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer)
        await writer.drain()
        return False

    server = await raw_server(script)
    with pytest.raises(HttpClientError) as caught:
        await client.request("GET", server.url, max_bytes=1 << 20)
    assert str(server.port) not in caught.value.message and "127.0.0.1" not in caught.value.message


async def test_size_limits_hold_before_and_after_decompression(
        raw_server: Any, client: SourceHttpClient) -> None:
    bomb = gzip.compress(b"0" * 5_000_000)
    answers = iter([
        reply(b"x" * 10, "Content-Length: 5000000"),  # refused from the header alone
        reply(b"x" * 2000),  # read to close
        reply(b"7d0\r\n" + b"x" * 2000 + b"\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),
        reply(bomb, f"Content-Length: {len(bomb)}", "Content-Encoding: gzip"),
    ])

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(next(answers))
        await writer.drain()
        return False

    server = await raw_server(script)
    for _ in range(4):
        with pytest.raises(ResponseTooLarge):
            await client.request("GET", server.url, max_bytes=1000)


async def test_compressed_answers_are_decoded(aiohttp_server: Any, client: SourceHttpClient) -> None:
    payload = {"evidence": [{"snippet": "release freeze " * 200}]}

    async def handler(request: web.Request) -> web.Response:
        response = web.json_response(payload)
        response.enable_compression()
        return response

    app = web.Application()
    app.router.add_get("/q", handler)
    server = await aiohttp_server(app, host="127.0.0.1")
    response = await client.request("GET", str(server.make_url("/q")), max_bytes=1 << 20)
    assert response.headers.get("content-encoding") in ("gzip", "deflate")
    assert json.loads(response.body) == payload


async def test_a_cancelled_call_drops_its_connection(raw_server: Any, client: SourceHttpClient) -> None:
    release = asyncio.Event()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/slow" in request:
            await release.wait()
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    await client.request("GET", server.url + "/fast", max_bytes=10)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await client.request("GET", server.url + "/slow", max_bytes=10)
    release.set()
    # The late answer must not be taken for the next call's: that goes on a new connection.
    response = await client.request("GET", server.url + "/fast", max_bytes=10)
    assert response.body == b"{}" and server.connections == 2


async def test_names_resolve_through_the_policy(raw_server: Any) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    inner = FakeDns({"wiki.test": "127.0.0.1", "rebound.example": "10.1.2.3"})
    policy = SourcePolicy("public-https", ("http://wiki.test",))
    async with SourceHttpClient(PolicyResolver(inner, lambda: policy)) as http:
        response = await http.request("GET", f"http://wiki.test:{server.port}/x", max_bytes=10)
        assert response.status == 200
        assert f"\r\nHost: wiki.test:{server.port}\r\n".encode() in server.requests[0]
        with pytest.raises(ConnectError) as caught:
            await http.request("GET", "https://rebound.example/x", max_bytes=10)
        assert caught.value.policy is True
        with pytest.raises(ConnectError) as unknown:
            await http.request("GET", "http://missing.example/x", max_bytes=10)
        assert unknown.value.policy is False
    assert inner.asked == ["wiki.test", "rebound.example", "missing.example"]


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http:///x", "http://u:p@127.0.0.1/x",
                                 "http://127.0.0.1:99999/x", "http://[::1/x"])
async def test_invalid_urls_fail_without_connecting(client: SourceHttpClient, url: str) -> None:
    with pytest.raises(HttpClientError):
        await client.request("GET", url, max_bytes=10)


async def test_dead_port_is_a_connect_error(client: SourceHttpClient, dead_url: str) -> None:
    with pytest.raises(ConnectError) as caught:
        await client.request("GET", dead_url, max_bytes=10)
    assert caught.value.policy is False


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `wiki.test` and 127.0.0.1, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=wiki.test", "-addext", "subjectAltName=DNS:wiki.test,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


async def test_https_verifies_the_certificate_and_the_name(aiohttp_server: Any, tls_files: tuple[Path, Path]
                                                           ) -> None:
    cert, key = tls_files
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"scheme": request.scheme, "host": request.host})

    app = web.Application()
    app.router.add_get("/q", handler)
    server = await aiohttp_server(app, host="127.0.0.1", ssl=server_context)
    port = server.port
    trusting = ssl.create_default_context(cafile=str(cert))
    policy = SourcePolicy()
    dns = FakeDns({"wiki.test": "127.0.0.1", "other.test": "127.0.0.1"})
    async with SourceHttpClient(PolicyResolver(dns, lambda: policy), ssl_context=trusting) as http:
        for url in (f"https://wiki.test:{port}/q", f"https://127.0.0.1:{port}/q"):
            response = await http.request("GET", url, max_bytes=1000)
            assert json.loads(response.body)["scheme"] == "https"
        with pytest.raises(ConnectError):  # the certificate does not name other.test
            await http.request("GET", f"https://other.test:{port}/q", max_bytes=1000)
    async with SourceHttpClient(PolicyResolver(dns, lambda: policy)) as default_trust:
        with pytest.raises(ConnectError):  # self-signed: not trusted by the system store
            await default_trust.request("GET", f"https://wiki.test:{port}/q", max_bytes=1000)
