"""The HTTP/1.1 client of source calls: one write per request, kept-alive connections per origin,
Content-Length, chunked and read-to-close bodies, every host name resolved through the policy.

aiohttp's ClientSession costs about 110 µs of CPU per call on a small machine; a run makes four
calls per source at once, so on the path before the slowest source's first call that alone was
about a millisecond. Source calls need little of it: no cookies, redirects, proxies or streaming.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
import weakref
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from aiohttp.abc import AbstractResolver

from bridge.sources.resolver import PolicyResolveError

MAX_HEAD_BYTES = 64 * 1024  # status line and headers (and chunked trailers) of one answer
IDLE_SECONDS = 15.0  # a kept-alive connection unused this long is closed
DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


class HttpClientError(Exception):
    """The exchange failed. The message is safe to show: no URL, no address, no body."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConnectError(HttpClientError):
    """No connection could be made; `policy` when the host resolved to an address the source
    policy refuses (nothing was connected to)."""

    def __init__(self, message: str, *, policy: bool = False) -> None:
        super().__init__(message)
        self.policy = policy


class ResponseTooLarge(HttpClientError):
    """The answer's body (after decompression) is larger than the caller accepts."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes


class _Connection(asyncio.Protocol):
    """One connection and the parser of the answer to the request in flight on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.received = False  # any byte of the current answer arrived (a retry is then unsafe)
        self.reusable = False
        self.idle_timer: asyncio.TimerHandle | None = None
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._buffer = bytearray()
        self._limit = 0
        self._state = "idle"  # head, body, chunk-size, chunk-data, trailers, to-close
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body = bytearray()
        self._remaining = 0
        self._keep_alive = True

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        self.received = True
        self._buffer += data
        try:
            self._parse()
        except HttpClientError as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        if self._state == "to-close":
            self._keep_alive = False
            self._finish()
        return None  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self._state == "to-close":
            self._keep_alive = False
            self._finish()
        elif self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(
                HttpClientError("The connection closed before the answer was complete."))

    # -- use

    async def exchange(self, request: bytes, limit: int) -> HttpResponse:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._limit = limit
        self.received = False
        self.reusable = False
        self._state = "head"
        self.transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: HttpClientError) -> None:
        self._state = "idle"
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    # -- the answer, as bytes arrive

    def _parse(self) -> None:
        while True:
            state = self._state
            if state == "head":
                if not self._parse_head():
                    return
            elif state == "body":
                take = min(self._remaining, len(self._buffer))
                self._append(self._buffer[:take])
                del self._buffer[:take]
                self._remaining -= take
                if self._remaining:
                    return
                self._finish()
                return
            elif state == "chunk-size":
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > MAX_HEAD_BYTES:
                        raise HttpClientError("The source sent an invalid chunked answer.")
                    return
                size_text = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
                del self._buffer[:end + 2]
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise HttpClientError("The source sent an invalid chunked answer.") from None
                if size < 0:
                    raise HttpClientError("The source sent an invalid chunked answer.")
                self._remaining = size
                self._state = "chunk-data" if size else "trailers"
            elif state == "chunk-data":
                if len(self._buffer) < self._remaining + 2:
                    # Keep what arrived, minus the chunk's closing CRLF, which may not be here yet.
                    take = min(self._remaining, len(self._buffer))
                    if take:
                        self._append(self._buffer[:take])
                        del self._buffer[:take]
                        self._remaining -= take
                    return
                self._append(self._buffer[:self._remaining])
                if self._buffer[self._remaining:self._remaining + 2] != b"\r\n":
                    raise HttpClientError("The source sent an invalid chunked answer.")
                del self._buffer[:self._remaining + 2]
                self._state = "chunk-size"
            elif state == "trailers":
                if self._buffer[:2] == b"\r\n":
                    del self._buffer[:2]
                else:
                    end = self._buffer.find(b"\r\n\r\n")
                    if end < 0:
                        if len(self._buffer) > MAX_HEAD_BYTES:
                            raise HttpClientError("The source sent an invalid chunked answer.")
                        return
                    del self._buffer[:end + 4]
                self._finish()
                return
            elif state == "to-close":
                self._append(self._buffer)
                self._buffer.clear()
                return
            else:
                return

    def _parse_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpClientError("The source sent an invalid HTTP answer.")
            return False
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[:end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise HttpClientError("The source sent an invalid HTTP answer.")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HttpClientError("The source sent an invalid HTTP answer.")
            name, value = name.lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if 100 <= status < 200:
            if status == 101:
                raise HttpClientError("The source sent an invalid HTTP answer.")
            return True  # an interim answer: the real one follows
        self._status, self._headers, self._body = status, headers, bytearray()
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        self._keep_alive = "close" not in tokens and (version != "HTTP/1.0" or "keep-alive" in tokens)
        coding = headers.get("transfer-encoding", "").lower()
        if status in (204, 304):
            self._finish()
        elif coding:
            if coding.rsplit(",", 1)[-1].strip() != "chunked":
                self._keep_alive = False
                self._state = "to-close"
            else:
                self._state = "chunk-size"
        elif "content-length" in headers:
            lengths = {v.strip() for v in headers["content-length"].split(",")}
            length = lengths.pop() if len(lengths) == 1 else ""
            if not length.isdigit():
                raise HttpClientError("The source sent an invalid HTTP answer.")
            self._remaining = int(length)
            if self._remaining > self._limit:
                raise ResponseTooLarge("The source's answer is too large.")
            self._state = "body"
            if not self._remaining:
                self._finish()
        else:
            self._keep_alive = False
            self._state = "to-close"
        return self._state != "idle"

    def _append(self, data: bytes | bytearray) -> None:
        self._body += data
        if len(self._body) > self._limit:
            raise ResponseTooLarge("The source's answer is too large.")

    def _finish(self) -> None:
        self._state = "idle"
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            body = _decoded(bytes(self._body), self._headers.get("content-encoding", ""), self._limit)
        except HttpClientError as exc:
            self._fail(exc)
            return
        self.reusable = self._keep_alive and not self._buffer and not self.closed
        waiter.set_result(HttpResponse(self._status, self._headers, body))


def _decoded(body: bytes, coding: str, limit: int) -> bytes:
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return body
    if coding not in ("gzip", "x-gzip", "deflate"):
        raise HttpClientError("The source sent an unsupported content encoding.")
    wbits = zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS
    try:
        decoder = zlib.decompressobj(wbits)
        out = decoder.decompress(body, limit + 1)
    except zlib.error:
        if coding != "deflate":
            raise HttpClientError("The source sent a damaged compressed answer.") from None
        try:  # "deflate" is sometimes sent raw, without the zlib wrapper
            decoder = zlib.decompressobj(-zlib.MAX_WBITS)
            out = decoder.decompress(body, limit + 1)
        except zlib.error:
            raise HttpClientError("The source sent a damaged compressed answer.") from None
    if len(out) > limit:
        raise ResponseTooLarge("The source's answer is too large.")
    return out


@functools.lru_cache(maxsize=4096)
def _parsed(url: str) -> tuple[str, str, int, str, str]:
    """Scheme, ASCII host, port, request target and Host header of a source URL (a run calls the
    same few URLs again and again)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
        ascii_host = host if host.isascii() else host.encode("idna").decode("ascii")
    except (ValueError, UnicodeError):
        raise HttpClientError("The source URL is not valid.") from None
    if scheme not in DEFAULT_PORTS or not ascii_host or parts.username is not None or any(
            ch in ascii_host for ch in " \r\n\t/\\@"):
        raise HttpClientError("The source URL is not valid.")
    target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    authority = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
    if port != DEFAULT_PORTS[scheme]:
        authority += f":{port}"
    return scheme, ascii_host, port, target, authority


class SourceHttpClient:
    """Kept-alive connections by origin, at most `limit` in use at once; every connection to a host
    name goes through `resolver` (the policy resolver), which may refuse it."""

    def __init__(self, resolver: AbstractResolver, *, limit: int = 256,
                 user_agent: str = "llmwiki-agent-bridge", ssl_context: ssl.SSLContext | None = None) -> None:
        self.resolver = resolver
        self.user_agent = user_agent
        self._ssl = ssl_context
        self._slots = asyncio.Semaphore(limit)
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        # Every live connection, for close(); one that is closed and dropped leaves by itself.
        self._open: weakref.WeakSet[_Connection] = weakref.WeakSet()

    async def request(self, method: str, url: str, *, body: bytes | None = None,
                      headers: Mapping[str, str] | None = None, max_bytes: int) -> HttpResponse:
        scheme, host, port, request = self._request_bytes(method, url, body, headers or {})
        key = (scheme, host, port)
        async with self._slots:
            for attempt in (1, 2):
                conn = self._idle_connection(key)
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(scheme, host, port)
                try:
                    response = await conn.exchange(request, max_bytes)
                except HttpClientError:
                    conn.close()
                    # A kept-alive connection the server closed as we wrote: retry once, afresh.
                    if reused and not conn.received and attempt == 1:
                        continue
                    raise
                except BaseException:  # cancelled or timed out: the answer would arrive unread
                    conn.close()
                    raise
                if conn.reusable:
                    self._release(key, conn)
                else:
                    conn.close()
                return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()

    async def __aenter__(self) -> SourceHttpClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    # -- internals

    def _request_bytes(self, method: str, url: str, body: bytes | None,
                       headers: Mapping[str, str]) -> tuple[str, str, int, bytes]:
        scheme, host, port, target, authority = _parsed(url)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}", f"User-Agent: {self.user_agent}",
                 "Accept-Encoding: gzip, deflate"]
        lines += [f"{name}: {value}" for name, value in headers.items()
                  if "\r" not in value and "\n" not in value]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
        return scheme, host, port, head + body if body is not None else head

    def _idle_connection(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                if conn.idle_timer is not None:
                    conn.idle_timer.cancel()
                    conn.idle_timer = None
                return conn
        return None

    def _release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        conn.idle_timer = asyncio.get_running_loop().call_later(IDLE_SECONDS, conn.close)
        self._idle.setdefault(key, []).append(conn)

    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        loop = asyncio.get_running_loop()
        # Address literals go through the resolver too, so the policy sees every address connected to.
        try:
            resolved = await self.resolver.resolve(host, port, socket.AF_UNSPEC)
        except PolicyResolveError:
            raise ConnectError("The source host is not allowed by the source policy.",
                               policy=True) from None
        except OSError:
            raise ConnectError("The source host name could not be resolved.") from None
        targets = [(r["host"], r["port"], r["family"]) for r in resolved]
        context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        for address, target_port, family in targets:
            try:
                _transport, conn = await loop.create_connection(
                    _Connection, address, target_port, family=family, ssl=context,
                    server_hostname=host if context is not None else None)
            except (OSError, ssl.SSLError):
                continue
            self._open.add(conn)
            return conn
        raise ConnectError("The source could not be reached.")
