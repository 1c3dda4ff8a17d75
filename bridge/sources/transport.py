"""One bounded, policy-checked JSON call to a Knowledge Source, and the failure it can raise."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp.abc import AbstractResolver
from pydantic_core import from_json

from bridge.iolog import IoCall, IoLog, header_summary
from bridge.policy import POLICY_BLOCKED_MESSAGE, SourcePolicy
from bridge.sources.http_client import ConnectError, HttpClientError, ResponseTooLarge, SourceHttpClient
from bridge.sources.resolver import PolicyResolver
from common.errors import json_bytes
from common.version import __version__

if TYPE_CHECKING:
    from bridge.sources.client import SourceClient

MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # a source answer larger than this is a failure, not evidence


class SourceCallError(Exception):
    """A source call failed. `message` is safe to show (no URL, no body); the flags feed diagnostics."""

    def __init__(self, message: str, *, http_status: int | None = None, timeout: bool = False,
                 invalid_json: bool = False, policy: bool = False, json_rpc_error: bool = False,
                 upstream_error: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.timeout = timeout
        self.invalid_json = invalid_json
        self.policy = policy
        self.json_rpc_error = json_rpc_error
        # The source answered and said it failed (MCP isError, an A2A error or failed task state).
        self.upstream_error = upstream_error

    @property
    def retryable(self) -> bool:
        if self.policy or self.invalid_json or self.json_rpc_error or self.upstream_error:
            return False
        if self.http_status is None:
            return True
        return self.http_status in (408, 409, 425, 429) or self.http_status >= 500


@dataclass(frozen=True)
class SourceTransport:
    """What every outbound source call shares: the HTTP client, the policy, the timeout and the
    protocol table the bridge was started with (see `bridge.sources.protocols`)."""

    http: SourceHttpClient
    policy: SourcePolicy
    timeout_seconds: float
    io: IoLog | None = None  # the I/O debug log, when the operator turned it on
    clients: Mapping[str, type[SourceClient]] = field(kw_only=True)


def source_http_client(policy: Callable[[], SourcePolicy],
                       resolver: AbstractResolver | None = None) -> SourceHttpClient:
    """The one client for source calls; every host name goes through the policy resolver, so the
    addresses actually connected to are the ones checked."""
    inner = resolver if resolver is not None else aiohttp.ThreadedResolver()
    return SourceHttpClient(PolicyResolver(inner, policy), user_agent=f"llmwiki-agent-bridge/{__version__}")


@functools.lru_cache(maxsize=4096)
def endpoint_url(base: str, path: str) -> str:
    """`<base>/<path>` with the base's trailing slashes trimmed; a stored query string is kept."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


@dataclass(frozen=True)
class SourceAnswer:
    """A source's answer of any status: what protocols that read headers or non-JSON bodies need."""

    status: int
    headers: Mapping[str, str]  # lower-case names
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
    try:
        async with asyncio.timeout(transport.timeout_seconds):
            response = await transport.http.request(method, url, body=data, headers=headers,
                                                    max_bytes=MAX_RESPONSE_BYTES)
    except (TimeoutError, HttpClientError) as exc:
        raise _call_error(exc, label) from None
    return SourceAnswer(response.status, response.headers, response.body)


def _logged_body(answer: SourceAnswer) -> Any:
    """The answer as the I/O log shows it: JSON decoded, other text as text (the log bounds it)."""
    try:
        return decode_json(answer.body, "")
    except SourceCallError:
        return answer.body.decode("utf-8", errors="replace")


def _call_error(exc: TimeoutError | HttpClientError, label: str) -> SourceCallError:
    if isinstance(exc, TimeoutError):
        return SourceCallError("Request timed out.", timeout=True)
    if isinstance(exc, ConnectError) and exc.policy:
        return SourceCallError(POLICY_BLOCKED_MESSAGE, policy=True)
    if isinstance(exc, ResponseTooLarge):
        return SourceCallError(f"{label} returned too much data")
    return SourceCallError(f"{label} could not be reached.")


def _operation(url: str, body: dict[str, Any] | None) -> str:
    """`query`, `search`, `source-bundle`, `message:send`, ...; `tools/call:<tool>` for MCP."""
    if body is not None and "jsonrpc" in body:
        params = body.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        return f"{body.get('method')}:{tool}" if isinstance(tool, str) else str(body.get("method"))
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or "/"


def decode_json(raw: bytes, label: str) -> Any:
    """pydantic-core's parser is about a third cheaper than `json`; what it refuses (invalid UTF-8,
    lone surrogates) gets the standard library's more lenient reading before it counts as invalid."""
    try:
        return from_json(raw)
    except ValueError:
        pass
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        raise SourceCallError(f"{label} returned invalid JSON", invalid_json=True) from None
