"""What the run asks of a Knowledge Source, whatever its protocol: the client interface, the call
failure, the bundle read, and which protocols can run which source tools. No I/O here: the clients
that call sources (bridge.sources.client and its siblings) implement this interface."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.config.registry import SourceDescriptor
from bridge.support.facts import CallFailure, retryable_status

DEFAULT_QUERY_LIMIT = 8
# Which source protocols each source tool can use (contract 6.3); list_sources calls no source.
TOOL_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "llmwiki_context": ("llmwiki-http", "mcp", "a2a"),
    "llmwiki_search": ("llmwiki-http", "mcp"), "llmwiki_read": ("llmwiki-http", "mcp"),
    "llmwiki_graph": ("llmwiki-http", "mcp"), "llmwiki_graph_neighbors": ("llmwiki-http", "mcp"),
    "llmwiki_source_bundle": ("llmwiki-http", "mcp")}


class SourceCallError(CallFailure):
    """A source call failed. `message` is safe to show (no URL, no body); the flags feed diagnostics."""

    def __init__(self, message: str, *, http_status: int | None = None, timeout: bool = False,
                 invalid_json: bool = False, policy: bool = False, json_rpc_error: bool = False,
                 upstream_error: bool = False) -> None:
        super().__init__(message, http_status=http_status, timeout=timeout, invalid_json=invalid_json)
        self.policy = policy
        self.json_rpc_error = json_rpc_error
        # The source answered and said it failed (MCP isError, an A2A error or failed task state).
        self.upstream_error = upstream_error

    @property
    def retryable(self) -> bool:
        if self.policy or self.invalid_json or self.json_rpc_error or self.upstream_error:
            return False
        return retryable_status(self.http_status)


@dataclass(frozen=True)
class BundleRead:
    """The outcome of source-bundle discovery. `attempted` is false when the policy allowed no
    candidate URL (then there is no step); `raw` is None when every candidate failed."""

    attempted: bool
    raw: dict[str, Any] | None = None
    endpoint: str | None = None
    error: SourceCallError | None = None


@dataclass
class ContextAnswer:
    """The run's context call answered: its payload, the source's own JSON. Calls the client sent
    with it (the HTTP client's augmentation searches) may still be out: `added()` is called
    once they are done."""

    payload: dict[str, Any]

    def added(self) -> list[dict[str, Any]]:
        """The items the calls sent with the context added to `payload` (in its item lists)."""
        return []


def bundle_capabilities(raw: dict[str, Any] | None) -> tuple[str, ...]:
    """The capability strings a bundle (or a context payload) advertises, trimmed."""
    caps = (raw or {}).get("capabilities")
    return tuple(c.strip() for c in caps if isinstance(c, str)) if isinstance(caps, list) else ()


class SourceClient:
    """The operations a source may support. Every method raises `SourceCallError` (safe message)
    on failure; an operation a protocol lacks raises `UnsupportedOperation`. Payloads are the
    source's own JSON (serve's snake_case shapes); normalisation happens in `artifact`."""

    protocol = ""
    bundle_kind = ""  # in bundle step details: "Read safe<kind> source bundle metadata."

    def __init__(self, source: SourceDescriptor) -> None:
        self.source = source

    @property
    def label(self) -> str:
        return self.source.safe_label

    # -- what a run asks; each protocol decides how

    def reads_bundle(self) -> bool:
        """Whether a run reads (and reports) this source's bundle alongside its context."""
        return False

    async def discover(self) -> BundleRead | None:
        """Retrieval discovery, before the run: what tells the source's fresh capabilities."""
        return None

    def discovered_capabilities(self, read: BundleRead) -> tuple[str, ...]:
        return bundle_capabilities(read.raw)

    def adopt(self, discovered: BundleRead | None) -> BundleRead | None:
        """Take what discovery read; returns the bundle read the run reports (not read again)."""
        return discovered

    def run_capabilities(self) -> tuple[str, ...]:
        """Capabilities the client learnt on the way (beyond the descriptor, bundle and payload)."""
        return ()

    async def run_context(self, query: str, fields: Mapping[str, Any], fallback: str | None,
                          group: asyncio.TaskGroup) -> ContextAnswer:
        """The run's context for the question with the retrieval plan's fields (`fallback` is the
        intent's fallback when there is an intent): the payload, nothing made of it yet. Calls
        sent with it go in the caller's `group`, so the caller can use the payload while they
        are out, and a failed context call (raised) cancels them."""
        return ContextAnswer(await self.context({"query": query, "limit": DEFAULT_QUERY_LIMIT, **fields}))

    async def bundle(self) -> BundleRead:
        """Source-bundle discovery; never raises for an unreachable source (the read says why)."""
        raise UnsupportedOperation(self.protocol, "source bundle")

    async def probe(self) -> BundleRead:
        """`/sources?probe=1`: is the source live, and its metadata (`raw`) if so; never raises for an
        unreachable source."""
        return await self.bundle()

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        """A context pack for `{"query", "limit", ...retrieval fields}`."""
        raise UnsupportedOperation(self.protocol, "context")

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        """`{"results": [...]}` for `{"query", "limit", ...}`."""
        raise UnsupportedOperation(self.protocol, "search")

    async def read(self, page_id: str, include_drafts: bool = False) -> dict[str, Any]:
        raise UnsupportedOperation(self.protocol, "read")

    async def graph(self, limit: int, include_drafts: bool = False) -> dict[str, Any]:
        raise UnsupportedOperation(self.protocol, "graph")

    async def neighbors(self, seeds: Sequence[str], depth: int, direction: str,
                        relations: Sequence[str], limit: int,
                        include_drafts: bool = False) -> dict[str, Any]:
        raise UnsupportedOperation(self.protocol, "graph neighborhood")


class UnsupportedOperation(SourceCallError):
    """The source's protocol has no such operation (a caller error, not a source failure)."""

    def __init__(self, protocol: str, operation: str) -> None:
        super().__init__(f"{protocol or 'this'} Knowledge Sources do not support {operation}.")
        self.operation = operation


# How the core gets a source's client: handed in, so the core never builds one (or opens a session).
ClientFor = Callable[[SourceDescriptor], SourceClient]
