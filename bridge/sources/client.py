"""The `llmwiki-http` client, the client of an unknown protocol, and `client_for` (the protocol
table's lookup); the interface they implement is `bridge.sources.base.SourceClient`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from bridge.config.registry import SourceDescriptor
from bridge.sources import http_source
from bridge.sources.base import BundleRead, ContextAnswer, SourceCallError, SourceClient
from bridge.sources.transport import SourceTransport, call_json, endpoint_url
from bridge.support.text import safe_trace_text


class TransportClient(SourceClient):
    """A client that calls its source through the bridge's one source session."""

    def __init__(self, transport: SourceTransport, source: SourceDescriptor) -> None:
        super().__init__(source)
        self.transport = transport


@dataclass
class AugmentedContext(ContextAnswer):
    """The query's payload and the augmentation searches sent with it (contract 3.8-3.9)."""

    searches: Sequence[asyncio.Task[list[dict[str, Any]]]] = field(default_factory=list)

    def added(self) -> list[dict[str, Any]]:
        """The searches' new results, merged after the query's, in search order."""
        return http_source.merge_search_results(self.payload, [task.result() for task in self.searches])


class HttpSourceClient(TransportClient):
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

    async def run_context(self, query: str, fields: Mapping[str, Any], fallback: str | None,
                          group: asyncio.TaskGroup) -> AugmentedContext:
        """The query, with the augmentation searches sent at the same time in `group` (contract
        3.8-3.9). They never fail (a failed search only loses its extra evidence), and they are
        queued before the query goes out, so every source's query and bundle calls go out before
        any source's searches."""
        extra = dict(fields)
        texts = [query] if "query_variants" in extra else http_source.augmentation_queries(query)
        searches = [group.create_task(http_source.search_augmentation(
            self.transport, self.source.url, self.label, text, extra)) for text in texts]
        answer = await super().run_context(query, extra, fallback, group)
        return AugmentedContext(answer.payload, searches)

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


class UnknownProtocolClient(TransportClient):
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

    async def run_context(self, query: str, fields: Mapping[str, Any], fallback: str | None,
                          group: asyncio.TaskGroup) -> ContextAnswer:
        raise self._unsupported()

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported()


def client_for(transport: SourceTransport, source: SourceDescriptor) -> TransportClient:
    """The client for the source's protocol, from the table the bridge was started with."""
    cls = transport.clients.get(source.protocol, UnknownProtocolClient)
    return cls(transport, source)
