"""One bounded, policy-checked JSON call to a Knowledge Source, and the failure it can raise."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from bridge.policy import POLICY_BLOCKED_MESSAGE, SourcePolicy
from bridge.sources.resolver import PolicyResolveError
from common.errors import json_bytes

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
    """What every outbound source call shares: the session, the policy and the timeout."""

    session: aiohttp.ClientSession
    policy: SourcePolicy
    timeout_seconds: float


def endpoint_url(base: str, path: str) -> str:
    """`<base>/<path>` with the base's trailing slashes trimmed; a stored query string is kept."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


async def call_json(transport: SourceTransport, method: str, url: str, label: str,
                    body: dict[str, Any] | None = None) -> Any:
    """Check the URL against the source policy first (no connection otherwise), then make the call
    with the bridge timeout, no redirects followed, and a JSON answer required."""
    if not transport.policy.allows(url):
        raise SourceCallError(POLICY_BLOCKED_MESSAGE, policy=True)
    # The body goes out pre-encoded (compact UTF-8 JSON): cheaper than aiohttp's `json=`.
    data = None if body is None else json_bytes(body)
    headers = {"Accept": "application/json"} if data is None else {
        "Accept": "application/json", "Content-Type": "application/json"}
    try:
        async with asyncio.timeout(transport.timeout_seconds):
            async with transport.session.request(
                    method, url, data=data, allow_redirects=False, headers=headers) as response:
                if not 200 <= response.status < 300:
                    raise SourceCallError(f"{label} returned HTTP {response.status}",
                                          http_status=response.status)
                raw = await response.content.read(MAX_RESPONSE_BYTES + 1)
                if len(raw) > MAX_RESPONSE_BYTES:
                    raise SourceCallError(f"{label} returned too much data")
                text = raw.decode("utf-8", errors="replace")
    except TimeoutError:
        raise SourceCallError("Request timed out.", timeout=True) from None
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, PolicyResolveError):
            raise SourceCallError(POLICY_BLOCKED_MESSAGE, policy=True) from None
        raise SourceCallError(f"{label} could not be reached.") from None
    except aiohttp.ClientError:
        raise SourceCallError(f"{label} could not be reached.") from None
    try:
        return json.loads(text)
    except ValueError:
        raise SourceCallError(f"{label} returned invalid JSON", invalid_json=True) from None
