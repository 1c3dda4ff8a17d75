"""One client per source protocol behind one interface: what the run, the MCP tools and the runtime
tools ask of a Knowledge Source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from bridge.fanout import task_group
from bridge.registry import SourceDescriptor
from bridge.sources import http_source
from bridge.sources.base import BundleRead, SourceCallError, bundle_capabilities
from bridge.sources.transport import SourceTransport, call_json, endpoint_url
from bridge.text import safe_trace_text


class SourceClient:
    """The operations a source may support. Every method raises `SourceCallError` (safe message)
    on failure; an operation a protocol lacks raises `UnsupportedOperation`. Payloads are the
    source's own JSON (serve's snake_case shapes); normalisation happens in `artifact`."""

    protocol = ""
    bundle_kind = ""  # in bundle step details: "Read safe<kind> source bundle metadata."

    def __init__(self, transport: SourceTransport, source: SourceDescriptor) -> None:
        self.transport = transport
        self.source = source

    @property
    def label(self) -> str:
        return safe_trace_text(self.source.label) or "Knowledge Source"

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

    async def run_context(self, query: str, fields: Mapping[str, Any],
                          fallback: str | None) -> dict[str, Any]:
        """The run's context for the question with the retrieval plan's fields (`fallback` is the
        intent's fallback when there is an intent): the payload, nothing made of it yet."""
        return await self.context({"query": query, "limit": http_source.DEFAULT_QUERY_LIMIT, **fields})

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


class HttpSourceClient(SourceClient):
    """`llmwiki-http`: serve's HTTP routes."""

    protocol = "llmwiki-http"

    def _url(self, path: str, query: list[tuple[str, str]] | None = None) -> str:
        url = endpoint_url(self.source.url, path)
        if query:
            url += ("&" if "?" in url else "?") + urlencode(query)
        return url

    async def _object(self, method: str, url: str, what: str, body: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
        payload = await call_json(self.transport, method, url, f"{self.protocol} {what}", body)
        if not isinstance(payload, dict):
            raise SourceCallError(f"{self.protocol} {what} returned invalid JSON", invalid_json=True)
        return payload

    def reads_bundle(self) -> bool:
        return True

    async def discover(self) -> BundleRead | None:
        return await self.bundle()

    async def run_context(self, query: str, fields: Mapping[str, Any],
                          fallback: str | None) -> dict[str, Any]:
        """The query, with the augmentation searches sent at the same time (contract 3.8-3.9);
        their new results are merged after the query's, in search order. A failed query cancels
        the searches (they never fail: a failed search only loses its extra evidence)."""
        extra = dict(fields)
        searches = [query] if "query_variants" in extra else http_source.augmentation_queries(query)
        async with task_group() as group:
            found = group.create_task(http_source.search_results(
                self.transport, self.source.url, self.label, searches, extra))
            payload = await super().run_context(query, extra, fallback)
        http_source.merge_search_results(payload, found.result())
        return payload

    async def bundle(self) -> BundleRead:
        return await http_source.read_bundle(self.transport, self.source.url, self.label)

    async def probe(self) -> BundleRead:
        return await http_source.probe(self.transport, self.source.url, self.label)

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        return await http_source.query(self.transport, self.source.url, self.label, body)

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._object("POST", self._url("/search"), "search", body)

    async def read(self, page_id: str, include_drafts: bool = False) -> dict[str, Any]:
        url = self._url("/read/" + quote(page_id, safe=""), [("include_drafts", _flag(include_drafts))])
        return await self._object("GET", url, "read")

    async def graph(self, limit: int, include_drafts: bool = False) -> dict[str, Any]:
        url = self._url("/graph", [("limit", str(limit)), ("include_drafts", _flag(include_drafts))])
        return await self._object("GET", url, "graph")

    async def neighbors(self, seeds: Sequence[str], depth: int, direction: str,
                        relations: Sequence[str], limit: int,
                        include_drafts: bool = False) -> dict[str, Any]:
        query = [("seed", seed) for seed in seeds]
        query += [("depth", str(depth)), ("direction", direction)]
        query += [("relation", relation) for relation in relations]
        query += [("limit", str(limit)), ("include_drafts", _flag(include_drafts))]
        return await self._object("GET", self._url("/graph/neighborhood", query), "graph neighborhood")


def _flag(value: bool) -> str:
    return "true" if value else "false"


class UnknownProtocolClient(SourceClient):
    """A source whose protocol this bridge has no client for: every operation is that source's
    failure (a failed step, a probe with its reason), never an error of the whole request."""

    def __init__(self, transport: SourceTransport, source: SourceDescriptor) -> None:
        super().__init__(transport, source)
        self.protocol = source.protocol

    def _unsupported(self) -> SourceCallError:
        name = safe_trace_text(self.protocol)
        return SourceCallError(f"Knowledge Source protocol {name!r} is not supported.", upstream_error=True)

    async def bundle(self) -> BundleRead:
        return BundleRead(attempted=True, error=self._unsupported())

    async def run_context(self, query: str, fields: Mapping[str, Any],
                          fallback: str | None) -> dict[str, Any]:
        raise self._unsupported()

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported()


def client_for(transport: SourceTransport, source: SourceDescriptor) -> SourceClient:
    """The client for the source's protocol, from the table the bridge was started with."""
    cls = transport.clients.get(source.protocol, UnknownProtocolClient)
    return cls(transport, source)
