"""KnowledgeSource: every operation the protocols need, over the current snapshot."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from common.filters import FILTERS_CAPABILITY
from common.json_wire import json_bytes
from common.limits import DEFAULT_NEIGHBORHOOD_DEPTH, DEFAULT_NEIGHBORHOOD_LIMIT, GRAPH_LIMIT
from common.schemas import (
    CorsStatus,
    Direction,
    GraphNeighborhoodResponse,
    GraphResponse,
    HealthDiagnostics,
    HealthEndpoints,
    HealthReadiness,
    HealthResponse,
    HealthSource,
    PageMissing,
    ProjectionMetadata,
    ProjectionStoreDiagnostics,
    RawOriginsMetadata,
    ReadNotFound,
    SearchResponse,
    SourceBundleManifest,
    SourceRefsResponse,
    WikiManifest,
)
from common.serve_tools import TOOL_CAPABILITIES
from common.version import __version__
from serve.errors import KnowledgeSourceError
from serve.graph.model import slug
from serve.graph.neighbourhood import neighbourhood
from serve.indexing import IndexKeeper
from serve.reads.focus import ReadOptions, read_payload, section_read
from serve.reads.target import find_read_target
from serve.retrieval.items import project_fields
from serve.retrieval.search import Searcher, SearchRequest
from serve.routes import endpoint_paths
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source import okf
from serve.source.git_head import head_commit
from serve.source.handles import parse_handle
from serve.store.database import Database, default_cache_dir
from serve.store.files import FileRecords
from serve.support.memory import release_free_memory
from serve.watch.early_read import EarlyRead
from serve.watch.freshness import Freshness
from serve.watch.records import FileRecord

# What this build can actually answer, in the contract's order (4.3).
BASE_CAPABILITIES = (
    *TOOL_CAPABILITIES,  # the MCP tools' table says which, in which order
    "mcp-jsonrpc",
    "mcp-streamable-http",
    "llmwiki_retrieval_v1",
    "llmwiki_agent_guided_lexical_v1",
    "llmwiki_search_mode_lexical",
    "llmwiki_search_mode_literal",
    FILTERS_CAPABILITY,  # `filters` and query syntax on /query, /search and the search tools
)
DIRECTIONS: tuple[str, ...] = get_args(Direction)


@dataclass(frozen=True, slots=True)
class PageRead:
    """Outcome of a page read: a payload, or a withheld page, or no such page. A found page's
    payload is a WikiPage, or its projection (`fields`), clipping or focus (contract 4.10)."""

    outcome: Literal["found", "withheld", "missing"]
    payload: dict[str, Any] | ReadNotFound | PageMissing


class KnowledgeSource:
    """One served folder. Owns freshness; every call works on one consistent snapshot."""

    def __init__(self, settings: ServeSettings, *, a2a_enabled: bool = False,
                 early: EarlyRead | None = None, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started  # the process's start
        self.settings = settings
        self.root = settings.root.expanduser().resolve()
        self.a2a_enabled = a2a_enabled or settings.enable_a2a
        self.store: Database | None = None
        self.cache: FileRecords | None = None
        self.loaded_keys: frozenset[str] = frozenset()  # what the store held at start
        self.freshness = Freshness(
            self.root,
            source_id=settings.source_id,
            refresh_interval_seconds=settings.refresh_interval_seconds,
            producer_manifest=settings.producer_manifest,
            max_page_bytes=settings.max_page_bytes,
            source_profile=settings.source_profile,
            use_inotify=settings.inotify,
        )
        if settings.page_cache:
            cache_dir = settings.cache_dir or default_cache_dir()
            self.store = Database(cache_dir, self.root,
                                  {"max_page_bytes": str(settings.max_page_bytes)})
            self.cache = FileRecords(self.store)
            self.freshness.mirror.pending.append(self._stored(self.cache))
            self.freshness.mirror.fill = self.cache.fragments
        self._early = early
        if early is not None:
            # Taken by the first scan, after its walk; validated per file like cached
            # records, but not counted as loaded, so the cache is written after that scan.
            self.freshness.mirror.pending.append(early.records)
        self._saved_generation = -1
        self.indexing = IndexKeeper(self.store)
        if self.store is not None:
            self.freshness.restore = self.indexing
        # Set once the start-up warm-up has run (the HTTP service runs it; a one-shot never
        # asks): /health says ready only then, when the first query need not build anything,
        # and READY=1 waits on it.
        self.warmed = threading.Event()
        self._when_warmed: list[Callable[[], None]] = []
        self._warm_lock = threading.Lock()  # never held long: the event loop takes it

    def _stored(self, cache: FileRecords) -> Callable[[], dict[str, FileRecord]]:
        # After the walk, not beside it: threads releasing the GIL per file wait on each other.
        def stored() -> dict[str, FileRecord]:
            self.loaded_keys = frozenset(records := cache.load())
            self.freshness.known_counts.update(cache.counts)
            return records
        return stored

    # -- lifecycle --------------------------------------------------------------------

    def snapshot(self) -> Projection:
        return self.freshness.snapshot()

    def load(self) -> None:
        """Build the first snapshot and the graph counts /health reports, before the service
        starts its background threads (the cache writer and the index build would compete
        with them for the GIL). Errors are left to the first request to report."""
        with contextlib.suppress(KnowledgeSourceError):
            self.snapshot().projection_metadata()

    def early_progress(self) -> int:
        """Files the early read (if any) has parsed so far."""
        return self._early.done if self._early is not None else 0

    def save_cache(self) -> None:
        """Persist parsed pages and the search index for the next start (each skipped when
        nothing changed)."""
        self.indexing.save()
        if self.cache is None:
            return
        with self.freshness.lock:
            mirror = self.freshness.mirror
            generation = mirror.generation
            if generation == self._saved_generation and not self.cache.behind:
                return
            records = dict(mirror.records)
            current = self.freshness.current
            if (self._saved_generation == -1 and mirror.parsed_count == 0
                    and records.keys() == self.loaded_keys and not self.cache.behind):
                # Started from the cache and nothing was parsed since: it is current.
                self._saved_generation = generation
                return
        counts = None
        if current is not None:
            counts = {current.signature: current.graph_counts}
        if self.cache.save(records, counts):
            self._saved_generation = generation
        release_free_memory()

    def close(self) -> None:
        if self._early is not None:
            self._early.close()  # a head start never taken: stop its workers
        self.freshness.close()

    def capabilities(self, projection: Projection, *, for_network: bool = True) -> list[str]:
        caps = list(BASE_CAPABILITIES)
        if projection.layout.options.okf:
            caps.extend(okf.CAPABILITIES)
        if self.a2a_enabled and for_network:
            caps.append("a2a-message")
        return caps

    def allow(self, include_drafts: bool) -> bool:
        """Draft access needs both the operator's flag and the request's."""
        return bool(include_drafts) and self.settings.allow_drafts

    def cache_source_id(self) -> str:
        """The projection-cache id: explicit source id or root folder slug, with the
        profile as a suffix so caches of the same files under two profiles stay apart."""
        base = self.settings.source_id or slug(self.root.name).lower()
        if self.settings.source_profile == okf.PROFILE:
            return f"{base}@{okf.PROFILE}"
        try:
            strict = self.snapshot().layout.options.okf
        except KnowledgeSourceError:  # an invalid bundle still names its profile
            layout = self.freshness.mirror.layout
            strict = layout is not None and layout.options.okf
        return f"{base}@{okf.PROFILE}" if strict else base

    # -- discovery --------------------------------------------------------------------

    @property
    def phase(self) -> Literal["loading", "indexing", "ready"]:
        """loading: no snapshot yet; indexing: the search index or the warm-up is not done;
        ready: queries are answered without building anything first."""
        if self.freshness.current is None:
            return "loading"
        return "ready" if self.indexing.ready and self.warmed.is_set() else "indexing"

    def health(self, cors: CorsStatus) -> HealthResponse:
        p = self.snapshot()
        skipped = sum(1 for d in p.diagnostics if d.skipped)
        phase = self.phase
        return HealthResponse(
            ready=phase == "ready", phase=phase,
            readiness=HealthReadiness(
                phase=phase, pages=p.page_count,
                indexed_documents=self.indexing.index.n_all if self.indexing.ready else 0,
                index_origin=self.indexing.origin,
                seconds_since_start=round(time.monotonic() - self.started, 3)),
            version=__version__,
            source=HealthSource(
                source_id=p.source_id, bundle_id=p.bundle_id, public_uri=p.public_uri,
                title=p.title, adapter=p.layout.adapter, implementation=p.layout.implementation,
                page_count=p.page_count, approved_page_count=p.approved_page_count,
                projection=_projection(p)),
            capabilities=self.capabilities(p),
            endpoints=HealthEndpoints(**endpoint_paths(self.a2a_enabled)),
            cors=cors,
            diagnostics=HealthDiagnostics(freshness=self.freshness.mode, skipped_files=skipped,
                                          degraded_files=len(p.diagnostics) - skipped,
                                          store=self.store.state if self.store else "off"))

    def manifest(self, *, for_network: bool = True) -> WikiManifest:
        p = self.snapshot()
        return WikiManifest(
            title=p.title,
            description=p.description,
            root="" if for_network else str(self.root),
            source_id=p.source_id,
            bundle_id=p.bundle_id,
            public_uri=p.public_uri,
            adapter=p.layout.adapter,
            implementation=p.layout.implementation,
            source_profile=p.layout.metadata.get("source_profile", ""),
            format_version=p.layout.metadata.get("format_version", ""),
            page_count=p.page_count,
            approved_page_count=p.approved_page_count,
            hot_page=p.role_page_path("hot"),
            index_page=p.role_page_path("index"),
            overview_page=p.role_page_path("overview"),
            projection=_projection(p),
            raw_origins=self.raw_origins(p),
            capabilities=self.capabilities(p, for_network=for_network),
        )

    def raw_origins(self, p: Projection) -> RawOriginsMetadata:
        """The projection's raw-origin metadata and the commit the folder is at, if any."""
        return RawOriginsMetadata(**p.raw_origins(), commit=head_commit(str(self.root)))

    def source_refs(self, include_drafts: bool = False) -> SourceRefsResponse:
        p = self.snapshot()
        return SourceRefsResponse(source_id=p.source_id, bundle_id=p.bundle_id,
                                  source_refs=p.source_refs(self.allow(include_drafts)))

    def source_bundle(self, include_drafts: bool = False, *,
                      for_network: bool = True) -> SourceBundleManifest:
        p = self.snapshot()
        return SourceBundleManifest(
            source_id=p.source_id,
            bundle_id=p.bundle_id,
            public_uri=p.public_uri,
            title=p.title,
            description=p.description,
            adapter=p.layout.adapter,
            implementation=p.layout.implementation,
            source_profile=p.layout.metadata.get("source_profile", ""),
            format_version=p.layout.metadata.get("format_version", ""),
            projection=_projection(p),
            raw_origins=self.raw_origins(p),
            capabilities=self.capabilities(p, for_network=for_network),
            source_refs=p.source_refs(self.allow(include_drafts)),
        )

    def projection_store(self) -> ProjectionStoreDiagnostics:
        """Contract 4.5: this build keeps its projection in memory only."""
        return ProjectionStoreDiagnostics(cache_source_id=self.cache_source_id())

    # -- pages ------------------------------------------------------------------------

    def read(self, page_id: str, *, include_drafts: bool = False,
             fields: Sequence[str] | None = None, options: ReadOptions | None = None) -> PageRead:
        p = self.snapshot()
        page = find_read_target(p, page_id, self.allow(include_drafts))
        handle = parse_handle(page_id) if page is None else None
        if handle is not None:  # a page or section handle (serve/source/handles.py)
            page = p.find_page(handle.page_id) if handle.source_id == p.source_id else None
            if page is not None and page.id != handle.page_id:
                page = None  # handles name pages by id, never by path
        if page is None:
            return PageRead("missing", PageMissing())
        if not page.approved and not self.allow(include_drafts):
            return PageRead("withheld", ReadNotFound())
        if handle is not None:
            found = section_read(page, handle.anchor, source_id=p.source_id, bundle_id=p.bundle_id,
                                 page_root=p.layout.page_root)
            return PageRead("missing", PageMissing()) if found is None else PageRead("found", found)
        return PageRead("found", read_payload(page, fields, options or ReadOptions(),
                                              self.settings.read_default_max_chars))

    # -- graph ------------------------------------------------------------------------

    def graph(self, limit: int | None = None, include_drafts: bool = False) -> GraphResponse:
        limit = self.settings.graph_default_limit if limit is None else GRAPH_LIMIT.clamp(limit)
        return GraphResponse(**self.snapshot().graph(self.allow(include_drafts)).truncated(limit))

    def neighborhood(self, seeds: Sequence[str], *, depth: int = DEFAULT_NEIGHBORHOOD_DEPTH,
                     direction: str = "both", relations: Sequence[str] = (),
                     limit: int = DEFAULT_NEIGHBORHOOD_LIMIT,
                     include_drafts: bool = False) -> GraphNeighborhoodResponse:
        if direction not in DIRECTIONS:
            raise ValueError("direction must be out, in or both")
        view = self.snapshot().graph(self.allow(include_drafts))
        return neighbourhood(view, seeds, depth=depth, direction=direction, relations=relations,
                             limit=limit)

    # -- retrieval --------------------------------------------------------------------

    def index_lags(self) -> bool:
        """Whether a search now would first sync the whole index (or build it)."""
        try:
            projection = self.snapshot()
        except KnowledgeSourceError:
            return self.indexing.indexed is None  # nothing to sync: the search reports why
        return self.indexing.lags(projection)

    def searcher(self) -> Searcher:
        """A searcher over the current snapshot, with the index brought up to it."""
        projection = self.snapshot()
        return self.indexing.searcher(projection, self.freshness.mirror.modified_of(projection.layout))

    def warm(self) -> None:
        """Build (or load) the search index and the graph views ahead of the first query, and
        keep a built index in the store, before the index is published (IndexKeeper.warm);
        then wake whoever waits for the warm-up."""
        try:
            self.indexing.warm(self.snapshot())
        except KnowledgeSourceError:
            pass  # nothing to warm until the folder can be served
        finally:
            with self._warm_lock:
                self.warmed.set()
                waiting, self._when_warmed = self._when_warmed, []
            for call in waiting:
                with contextlib.suppress(Exception):  # a waiter gone (its loop closed) is no failure
                    call()

    def warm_then_save(self) -> None:
        """What a long-running service runs beside its first requests: the index first, then
        the restart cache (on a cold start both are CPU work, and the first answer waits only
        for the index)."""
        try:
            self.warm()
        finally:
            self.save_cache()

    def when_warmed(self, call: Callable[[], None]) -> bool:
        """Have `call` run (in the warm-up's thread) once the warm-up is done; False, and no
        call, when it is done already."""
        with self._warm_lock:
            if self.warmed.is_set():
                return False
            self._when_warmed.append(call)
            return True

    def request(self, **values: Any) -> SearchRequest:
        """A SearchRequest with this server's defaults and draft permission applied."""
        limit = values.pop("limit", None)
        include = self.allow(bool(values.pop("include_drafts", False)))
        return SearchRequest(limit=self.settings.context_default_limit if limit is None else limit,
                             include_drafts=include, **values)

    def search(self, req: SearchRequest) -> SearchResponse:
        items = self.searcher().search(req)
        return SearchResponse(results=[project_fields(i, req.fields) for i in items])

    def context(self, req: SearchRequest) -> dict[str, Any]:
        return self.searcher().context(req, graph_limit=self.settings.context_graph_limit)

    def context_json(self, req: SearchRequest) -> bytes:
        """The context pack as compact JSON text (what HTTP answers)."""
        return json_bytes(self.context(req))


def _projection(p: Projection) -> ProjectionMetadata:
    return ProjectionMetadata(**p.projection_metadata())
