"""Source calls (aiohttp session, policy resolver, bounded reads) against scripted loopback servers."""

from __future__ import annotations

import asyncio
import contextlib
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
from aiohttp.test_utils import TestServer

from bridge.config.policy import POLICY_BLOCKED_MESSAGE, SourcePolicy
from bridge.sources import transport
from bridge.sources.base import SourceCallError
from bridge.sources.transport import SourceTransport, call_json, source_http_client
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
async def calls() -> AsyncIterator[SourceTransport]:
    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        yield SourceTransport(http, policy, 5.0, clients={})


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def get(calls: SourceTransport, url: str) -> Any:
    return await call_json(calls, "GET", url, "wiki")


async def test_kept_alive_connection_is_reused_and_the_request_goes_out_whole(
        raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b'{"ok": true}', "Content-Length: 12", "Content-Type: application/json"))
        return True

    server = await raw_server(script)
    for _ in range(3):
        answer = await call_json(calls, "POST", server.url + "/a b/q?x=1", "wiki", {"query": "x"})
        assert answer == {"ok": True}
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("POST /a%20b/q?x=1 HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n" in first
    assert "\r\nContent-Length: 13\r\n" in first and first.endswith('\r\n\r\n{"query":"x"}')
    assert "\r\nUser-Agent: llmwiki-agent-bridge/" in first


async def test_a_url_cannot_inject_request_lines(raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    with contextlib.suppress(SourceCallError):  # refused before anything was sent is fine too
        await get(calls, server.url + "/%0d%0aX:%20y\r\nEvil: 1")
    for request in server.requests:
        lines = request.decode().split("\r\n")
        assert lines[0].endswith(" HTTP/1.1") and not any(line.startswith("Evil") for line in lines)


async def test_chunked_answer_arriving_in_pieces(raw_server: Any, calls: SourceTransport) -> None:
    payload = {"text": "릴리스 " * 500}
    raw = json.dumps(payload).encode()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"", "Transfer-Encoding: chunked"))
        for start in range(0, len(raw), 997):
            piece = raw[start:start + 997]
            writer.write(f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        return True

    server = await raw_server(script)
    for _ in range(2):
        assert await get(calls, server.url + "/c") == payload
    assert server.connections == 1


async def test_answer_read_until_close_is_not_reused(raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b'{"n": 1}'))
        return False

    server = await raw_server(script)
    assert await get(calls, server.url) == {"n": 1}
    assert await get(calls, server.url) == {"n": 1}
    assert server.connections == 2


async def test_interim_answer_is_skipped(raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"[1]", "Content-Length: 3"))
        return True

    server = await raw_server(script)
    assert await get(calls, server.url) == [1]


async def test_closed_idle_connection_is_replaced(raw_server: Any, calls: SourceTransport) -> None:
    """The server closes a kept-alive connection while it is idle (without "Connection: close"):
    the next call opens a new one, and a GET that dies on a stale connection is sent again."""

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        await writer.drain()
        return False

    server = await raw_server(script)
    for _ in range(4):
        assert await get(calls, server.url) == {}
    assert server.connections == 4


async def test_answer_cut_short_fails_and_is_not_retried(raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{", "Content-Length: 2"))
        await writer.drain()
        return False

    server = await raw_server(script)
    with pytest.raises(SourceCallError) as caught:
        await call_json(calls, "POST", server.url, "wiki", {})
    assert caught.value.message == "wiki could not be reached." and len(server.requests) == 1


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"SMTP ready\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70_000,
    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n\xff\xfe{\x00}\x00\x00\x00",
])
async def test_broken_answers_fail_cleanly(raw_server: Any, calls: SourceTransport, answer: bytes) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer)
        await writer.drain()
        return False

    server = await raw_server(script)
    with pytest.raises(SourceCallError) as caught:
        await get(calls, server.url)
    assert str(server.port) not in caught.value.message and "127.0.0.1" not in caught.value.message


async def test_size_limits_hold_before_and_after_decompression(
        raw_server: Any, calls: SourceTransport, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MAX_RESPONSE_BYTES", 1000)
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
        with pytest.raises(SourceCallError) as caught:
            await get(calls, server.url)
        assert caught.value.message == "wiki returned too much data"


@pytest.mark.parametrize("status", [200, 500])
async def test_an_endless_answer_is_cut_off_at_the_cap(calls: SourceTransport, status: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The read stops at the cap and the connection is dropped: the source cannot make the bridge
    take (or hold) more than the cap, however much it has to send (error bodies are read too:
    MCP's JSON-RPC errors come in them)."""
    monkeypatch.setattr(transport, "MAX_RESPONSE_BYTES", 1 << 20)
    sent = 0
    gone = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(status=status)
        response.content_type = "application/json"
        await response.prepare(request)
        try:
            await response.write(b'["')
            while sent < 1 << 30:
                await response.write(b"x" * 65536)
                sent += 65536
        finally:  # the write fails, or the handler is cancelled, once the bridge hangs up
            gone.set()
        return response

    app = web.Application()
    app.router.add_get("/q", endless)
    async with TestServer(app, host="127.0.0.1") as server:
        with pytest.raises(SourceCallError) as caught:
            await get(calls, str(server.make_url("/q")))
        assert caught.value.message == "wiki returned too much data"
        await asyncio.wait_for(gone.wait(), 10)
    assert sent < 64 << 20  # the cap plus what the socket buffers held, not the gigabyte


async def test_compressed_answers_are_decoded(aiohttp_server: Any, calls: SourceTransport) -> None:
    payload = {"evidence": [{"snippet": "release freeze " * 200}]}
    encodings: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        response = web.json_response(payload)
        response.enable_compression()
        return response

    async def note(request: web.Request, response: web.StreamResponse) -> None:
        encodings.append(response.headers.get("Content-Encoding"))

    app = web.Application()
    app.on_response_prepare.append(note)
    app.router.add_get("/q", handler)
    server = await aiohttp_server(app, host="127.0.0.1")
    assert await get(calls, str(server.make_url("/q"))) == payload
    assert encodings[0] in ("gzip", "deflate")


@pytest.mark.parametrize(("answer", "message"), [
    (b"[" * 100_000 + b"]" * 100_000, "wiki returned JSON nested too deeply"),
    (b'{"a": "\xff' + b"[" * 5000 + b'"}', None),  # invalid UTF-8 inside a string: read leniently
    (b"\xff" + b"[" * 100_000, "wiki returned invalid JSON"),
    (b'{"a": "\xff"}' + b"[" * 300, "wiki returned invalid JSON"),
    (b'{"a": ["\xff", ' + b"[" * 300 + b"]" * 300 + b"]}", "wiki returned JSON nested too deeply"),
    (b"", "wiki returned invalid JSON"),
])
async def test_answers_that_do_not_decode_are_the_calls_failure(
        raw_server: Any, calls: SourceTransport, answer: bytes, message: str | None) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(answer, f"Content-Length: {len(answer)}"))
        return True

    server = await raw_server(script)
    if message is None:
        assert (await get(calls, server.url))["a"].startswith("\ufffd[[")
        return
    with pytest.raises(SourceCallError) as caught:
        await get(calls, server.url)
    assert caught.value.message == message and caught.value.invalid_json


async def test_a_lone_surrogate_escape_is_kept(raw_server: Any, calls: SourceTransport) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b'{"a": "x\\ud800y"}', "Content-Length: 17"))
        return True

    server = await raw_server(script)
    assert await get(calls, server.url) == {"a": "x\ud800y"}


async def test_a_cancelled_call_drops_its_connection(raw_server: Any, calls: SourceTransport) -> None:
    release = asyncio.Event()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/slow" in request:
            await release.wait()
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    await get(calls, server.url + "/fast")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await get(calls, server.url + "/slow")
    release.set()
    # The late answer must not be taken for the next call's: that goes on a new connection.
    assert await get(calls, server.url + "/fast") == {} and server.connections == 2


async def test_the_call_timeout_is_a_timeout_failure(raw_server: Any) -> None:
    never = asyncio.Event()

    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await never.wait()
        return False

    server = await raw_server(script)
    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        with pytest.raises(SourceCallError) as caught:
            await get(SourceTransport(http, policy, 0.2, clients={}), server.url)
    assert caught.value.timeout and caught.value.message == "Request timed out."
    never.set()


async def test_a_hanging_host_does_not_hold_connections_other_hosts_need(
        raw_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """More calls to a hanging host than it may have connections: they wait for their host's
    slots, and a call to another host goes straight through."""
    monkeypatch.setattr(transport, "CONNECTIONS_PER_HOST", 2)
    release = asyncio.Event()

    async def hang(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await release.wait()
        return False

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    hanging, healthy = await raw_server(hang), await raw_server(answer)
    policy = SourcePolicy()
    async with source_http_client(lambda: policy) as http:
        calls = SourceTransport(http, policy, 30.0, clients={})
        stuck = [asyncio.create_task(get(calls, hanging.url)) for _ in range(6)]
        async with asyncio.timeout(10):
            while len(hanging.requests) < 2:
                await asyncio.sleep(0.01)
        async with asyncio.timeout(5):
            for _ in range(3):
                assert await get(calls, healthy.url) == {}
        assert hanging.connections == 2  # the other four wait for the hanging host's own slots
        release.set()
        await asyncio.gather(*stuck, return_exceptions=True)


async def test_names_resolve_through_the_policy(raw_server: Any) -> None:
    async def script(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply(b"{}", "Content-Length: 2"))
        return True

    server = await raw_server(script)
    inner = FakeDns({"wiki.test": "127.0.0.1", "rebound.example": "10.1.2.3"})
    policy = SourcePolicy("public-https", ("http://wiki.test",))
    async with source_http_client(lambda: policy, inner) as http:
        # The URL check passes everything here: what refuses the rebound name is the resolver.
        calls = SourceTransport(http, SourcePolicy(), 5.0, clients={})
        assert await get(calls, f"http://wiki.test:{server.port}/x") == {}
        assert f"\r\nHost: wiki.test:{server.port}\r\n".encode() in server.requests[0]
        with pytest.raises(SourceCallError) as caught:
            await get(calls, "https://rebound.example/x")
        assert caught.value.policy is True and caught.value.message == POLICY_BLOCKED_MESSAGE
        with pytest.raises(SourceCallError) as unknown:
            await get(calls, "http://missing.example/x")
        assert unknown.value.policy is False
        assert unknown.value.message == "wiki host name could not be resolved."
    assert inner.asked == ["wiki.test", "rebound.example", "missing.example"]


async def test_a_host_name_the_idna_codec_refuses_is_a_failed_call(calls: SourceTransport) -> None:
    """A 64-character label: the system resolver's IDNA encoding raises UnicodeError, not OSError."""
    with pytest.raises(SourceCallError) as caught:
        await get(calls, f"http://{'a' * 64}.localhost:1/x")
    assert caught.value.message == "wiki host name could not be resolved."


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http:///x", "http://u:p@127.0.0.1/x",
                                 "http://127.0.0.1:99999/x", "http://[::1/x"])
async def test_invalid_urls_fail_without_connecting(calls: SourceTransport, url: str) -> None:
    with pytest.raises(SourceCallError):
        await get(calls, url)


async def test_dead_port_is_a_connect_failure(calls: SourceTransport, dead_url: str) -> None:
    with pytest.raises(SourceCallError) as caught:
        await get(calls, dead_url)
    assert caught.value.policy is False and caught.value.message == "wiki could not be reached."


async def test_redirects_are_not_followed(aiohttp_server: Any, calls: SourceTransport) -> None:
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/elsewhere")

    app = web.Application()
    app.router.add_get("/q", moved)
    server = await aiohttp_server(app, host="127.0.0.1")
    with pytest.raises(SourceCallError) as caught:
        await get(calls, str(server.make_url("/q")))
    assert caught.value.http_status == 302


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
        return web.json_response({"scheme": request.scheme})

    app = web.Application()
    app.router.add_get("/q", handler)
    server = await aiohttp_server(app, host="127.0.0.1", ssl=server_context)
    port = server.port
    trusting = ssl.create_default_context(cafile=str(cert))
    policy = SourcePolicy()
    dns = FakeDns({"wiki.test": "127.0.0.1", "other.test": "127.0.0.1"})
    async with source_http_client(lambda: policy, dns, ssl_context=trusting) as http:
        calls = SourceTransport(http, policy, 5.0, clients={})
        for url in (f"https://wiki.test:{port}/q", f"https://127.0.0.1:{port}/q"):
            assert (await get(calls, url))["scheme"] == "https"
        with pytest.raises(SourceCallError):  # the certificate does not name other.test
            await get(calls, f"https://other.test:{port}/q")
    async with source_http_client(lambda: policy, dns) as default_trust:
        with pytest.raises(SourceCallError):  # self-signed: not trusted by the system store
            await get(SourceTransport(default_trust, policy, 5.0, clients={}), f"https://wiki.test:{port}/q")
