"""One bounded, policy-checked JSON call to a Knowledge Source, and the failure it can raise."""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from pydantic_core import from_json

from bridge.config.policy import POLICY_BLOCKED_MESSAGE, SourcePolicy
from bridge.sources.base import SourceCallError
from bridge.sources.resolver import ConnectGuard, PolicyResolveError, PolicyResolver
from bridge.support.iolog import IoCall, IoLog, header_summary
from common.json_read import JsonTooDeep, loads_bounded
from common.json_wire import json_bytes
from common.version import __version__

if TYPE_CHECKING:
    from bridge.sources.client import TransportClient

MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # a source answer larger than this is a failure, not evidence
# Connections open at once to one source host (host and port). A host that hangs holds at most
# these; calls to every other host never wait behind it (docs/architecture.md, "Bounded work").
CONNECTIONS_PER_HOST = 32
KEEP_ALIVE_SECONDS = 15.0


@dataclass(frozen=True)
class SourceTransport:
    """What every outbound source call shares: the HTTP session, the policy, the timeout and the
    protocol table the bridge was started with (see `bridge.sources.protocols`)."""

    http: aiohttp.ClientSession
    policy: SourcePolicy
    timeout_seconds: float
    io: IoLog | None = None  # the I/O debug log, when the operator turned it on
    clients: Mapping[str, type[TransportClient]] = field(kw_only=True)


def source_http_client(policy: Callable[[], SourcePolicy], resolver: AbstractResolver | None = None, *,
                       ssl_context: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """The one session for source calls. Every host name goes through the policy resolver (not
    cached, so a policy change applies to the next connection), so the addresses actually
    connected to are the ones checked; no cookies, no proxies from the environment."""
    inner = resolver if resolver is not None else aiohttp.ThreadedResolver()
    guard = ConnectGuard(policy)  # judges address literals too: aiohttp never resolves those
    connector = aiohttp.TCPConnector(
        resolver=PolicyResolver(inner, policy, guard), socket_factory=guard, use_dns_cache=False, limit=0,
        limit_per_host=CONNECTIONS_PER_HOST, keepalive_timeout=KEEP_ALIVE_SECONDS,
        ssl=ssl_context if ssl_context is not None else True)
    return aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None),  # each call's own deadline bounds it (call_json)
        headers={"User-Agent": f"llmwiki-agent-bridge/{__version__}"})


@functools.lru_cache(maxsize=4096)
def endpoint_url(base: str, path: str) -> str:
    """`<base>/<path>` with the base's trailing slashes trimmed; a stored query string is kept."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


@dataclass(frozen=True)
class SourceAnswer:
    """A source's answer of any status: what protocols that read headers or non-JSON bodies need."""

    status: int
    headers: Mapping[str, str]  # aiohttp's, looked up by any case
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def call_source(transport: SourceTransport, method: str, url: str, label: str,
                      body: dict[str, Any] | None = None, headers: Mapping[str, str] | None = None
                      ) -> SourceAnswer:
    """Check the URL against the source policy first (no connection otherwise), then make the call
    with the bridge timeout and no redirects followed; any status is returned."""
    if not transport.policy.allows(url):
        raise SourceCallError(POLICY_BLOCKED_MESSAGE, policy=True)
    data = None if body is None else json_bytes(body)
    sent = {"Accept": "application/json"} if data is None else {
        "Accept": "application/json", "Content-Type": "application/json"}
    sent.update(headers or {})
    io = transport.io
    if io is None:
        return await _exchange(transport, method, url, label, data, sent)
    call = IoCall(io, "source", _operation(url, body),
                  url, {"method": method, "headers": header_summary(sent), "body": body})
    try:
        answer = await _exchange(transport, method, url, label, data, sent)
    except SourceCallError as exc:
        call.failed(exc, timeout=exc.timeout)
        raise
    call.answered({"status": answer.status, "body": _logged_body(answer)})
    return answer


async def call_json(transport: SourceTransport, method: str, url: str, label: str,
                    body: dict[str, Any] | None = None) -> Any:
    """`call_source` with a 2xx JSON answer required; anything else is a `SourceCallError`."""
    answer = await call_source(transport, method, url, label, body)
    if not answer.ok:
        raise SourceCallError(f"{label} returned HTTP {answer.status}", http_status=answer.status)
    return decode_json(answer.body, label)


async def _exchange(transport: SourceTransport, method: str, url: str, label: str, data: bytes | None,
                    headers: dict[str, str]) -> SourceAnswer:
    """The call itself, whatever its status; every failure a `SourceCallError`."""
    failure: SourceCallError | None = None
    try:
        async with asyncio.timeout(transport.timeout_seconds):
            return await _fetch(transport.http, method, url, data, headers)
    except AnswerTooLarge:
        failure = SourceCallError(f"{label} returned too much data")
    except Exception as exc:  # noqa: BLE001 - whatever a source or its URL causes is its failure
        failure = _call_error(exc, label)
    # Raised here, outside the handlers: the error carries no context (and no frame) of the read.
    raise failure


class AnswerTooLarge(Exception):
    """The answer's body (after decompression) passed the cap; the read stopped there."""


async def _fetch(http: aiohttp.ClientSession, method: str, url: str, data: bytes | None,
                 headers: dict[str, str]) -> SourceAnswer:
    """One exchange, its body read as it streams in and dropped at the cap (closing the
    connection), so an oversized answer never sits whole in memory."""
    async with http.request(method, url, data=data, headers=headers, allow_redirects=False) as response:
        limit = MAX_RESPONSE_BYTES
        if response.content_length is not None and response.content_length > limit:
            raise AnswerTooLarge
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > limit:
                chunks.clear()
                raise AnswerTooLarge
            chunks.append(chunk)
        return SourceAnswer(response.status, response.headers, b"".join(chunks))


def _logged_body(answer: SourceAnswer) -> Any:
    """The answer as the I/O log shows it: JSON decoded, other text as text (the log bounds it)."""
    try:
        return decode_json(answer.body, "")
    except SourceCallError:
        return answer.body.decode("utf-8", errors="replace")


def _call_error(exc: Exception, label: str) -> SourceCallError:
    if isinstance(exc, TimeoutError):
        return SourceCallError("Request timed out.", timeout=True)
    # The resolver's refusal (a DNS error to aiohttp) or the connect guard's (a connector error).
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, PolicyResolveError):
        return SourceCallError(POLICY_BLOCKED_MESSAGE, policy=True)
    if isinstance(exc, (aiohttp.ClientConnectorDNSError, UnicodeError)):
        # UnicodeError: a host name the IDNA codec refuses (a label over 63 characters, ...).
        return SourceCallError(f"{label} host name could not be resolved.")
    return SourceCallError(f"{label} could not be reached.")


def _operation(url: str, body: dict[str, Any] | None) -> str:
    """`query`, `search`, `source-bundle`, `message:send`, ...; `tools/call:<tool>` for MCP."""
    if body is not None and "jsonrpc" in body:
        params = body.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        return f"{body.get('method')}:{tool}" if isinstance(tool, str) else str(body.get("method"))
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or "/"


def decode_json(raw: bytes, label: str) -> Any:
    """pydantic-core's parser (about a third cheaper than `json`, and it refuses nesting deeper
    than `MAX_JSON_DEPTH`); what it refuses for its encoding (invalid UTF-8, lone surrogates)
    gets the standard library's more lenient reading, under the same depth limit, before it
    counts as invalid."""
    try:
        return from_json(raw)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise SourceCallError(f"{label} returned JSON nested too deeply", invalid_json=True) from None
    try:
        return loads_bounded(raw.decode("utf-8", errors="replace"), surrogates=True)
    except JsonTooDeep:
        raise SourceCallError(f"{label} returned JSON nested too deeply", invalid_json=True) from None
    except ValueError:
        raise SourceCallError(f"{label} returned invalid JSON", invalid_json=True) from None
