"""KnowledgeSource: every operation the protocols need, over the current snapshot."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from common.limits import (
    DEFAULT_NEIGHBORHOOD_DEPTH,
    DEFAULT_NEIGHBORHOOD_LIMIT,
    GRAPH_LIMIT,
    NEIGHBORHOOD_DEPTH,
    NEIGHBORHOOD_LIMIT,
)
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
from common.version import __version__
from serve.errors import KnowledgeSourceError
from serve.graph.model import Edge, Node, canonical_relation, lookup_key, slug
from serve.graph.views import GraphView
from serve.reads.focus import ReadOptions, read_payload, section_read
from serve.reads.target import find_read_target
from serve.retrieval.index import COMPACT_DEAD_SHARE, LexicalIndex
from serve.retrieval.search import Searcher, SearchRequest, project_fields
from serve.routes import endpoint_paths
from serve.settings import ServeSettings
from serve.snapshot.projection import Projection
from serve.source import okf
from serve.source.git_head import head_commit
from serve.source.handles import parse_handle
from serve.source.page import Page
from serve.store.database import Database, default_cache_dir
from serve.store.files import FileRecords
from serve.store.search_index import Pending, StoredIndex, Views
from serve.support.memory import release_free_memory
from serve.watch.early_read import EarlyRead
from serve.watch.freshness import Freshness

# What this build can actually answer, in the contract's order (4.3).
BASE_CAPABILITIES = (
    "llmwiki_source_bundle",
    "llmwiki_context",
    "llmwiki_search",
    "llmwiki_read",
    "llmwiki_graph",
    "llmwiki_graph_neighbors",
    "llmwiki_source_refs",
    "mcp-jsonrpc",
    "mcp-streamable-http",
    "llmwiki_retrieval_v1",
    "llmwiki_agent_guided_lexical_v1",
    "llmwiki_search_mode_lexical",
    "llmwiki_search_mode_literal",
)
DIRECTIONS: tuple[str, ...] = get_args(Direction)
NEIGHBORHOOD_SEED_MATCHES = 10


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
        self.index_cache: StoredIndex | None = None
        records = None
        if settings.page_cache:
            cache_dir = settings.cache_dir or default_cache_dir()
            self.store = Database(cache_dir, self.root,
                                  {"max_page_bytes": str(settings.max_page_bytes)})
            self.cache = FileRecords(self.store)
            self.index_cache = StoredIndex(self.store)
            records = self.cache.load()
        self.loaded_keys = frozenset(records or ())  # what the restart cache held at start
        self.freshness = Freshness(
            self.root,
            source_id=settings.source_id,
            refresh_interval_seconds=settings.refresh_interval_seconds,
            producer_manifest=settings.producer_manifest,
            max_page_bytes=settings.max_page_bytes,
            source_profile=settings.source_profile,
            use_inotify=settings.inotify,
            cached_records=records,
            known_counts=self.cache.counts if self.cache is not None else None,
        )
        self._early = early
        if early is not None:
            # Taken by the first scan, after its walk; validated per file like cached
            # records, but not counted as loaded, so the cache is written after that scan.
            self.freshness.mirror.pending = early.records
        self._saved_generation = -1
        self.index = LexicalIndex()
        self._indexed: Projection | None = None
        # The index grows in place: syncing and index lookups must not interleave (the
        # start-up warm-up and literal scans run in worker threads).
        self._index_lock = threading.Lock()
        self.index_builds = 0  # full builds, and the last one's duration (for /metrics)
        self.index_build_seconds = 0.0
        self.index_origin: Literal["cache", "built", ""] = ""
        self._index_cache_tried = False
        # Set once the start-up warm-up has run (the HTTP service runs it; a one-shot never
        # asks): /health says ready only then, when the first query need not build anything,
        # and READY=1 waits on it.
        self.warmed = threading.Event()
        self._when_warmed: list[Callable[[], None]] = []
        self._warm_lock = threading.Lock()  # never held long: the event loop takes it

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
        self.save_index()
        if self.cache is None:
            return
        with self.freshness.lock:
            mirror = self.freshness.mirror
            generation = mirror.generation
            if generation == self._saved_generation:
                return
            records = dict(mirror.records)
            current = self.freshness.current
            if (self._saved_generation == -1 and mirror.parsed_count == 0
                    and records.keys() == self.loaded_keys):
                # Started from the cache and nothing was parsed since: it is current.
                self._saved_generation = generation
                return
        counts = None
        if current is not None:
            counts = {current.signature: current.graph_counts}
        if self.cache.save(records, counts):
            self._saved_generation = generation
        release_free_memory()

    def save_index(self) -> None:
        """Persist the search index when it is a bulk build of the snapshot it serves (after
        edits it is not: the next start builds it again)."""
        with self._index_lock:
            indexed = self._indexed
            pending = self._pending_index(indexed) if indexed is not None else None
        if pending is not None:
            self._write_index(pending, self._index_lock)

    def _pending_index(self, indexed: Projection) -> Pending | None:
        """What the restart cache's write needs of the index of `indexed` (under the index
        lock), or None when there is nothing to write."""
        if self.index_cache is None or not self.index.is_bulk_of(indexed.pages):
            return None
        views = Views(indexed.incoming, indexed.owners(False), indexed.lookup)
        return self.index_cache.prepare(indexed.signature, indexed.pages, self.index, views)

    def _write_index(self, pending: Pending, lock: contextlib.AbstractContextManager[object]) -> None:
        """Write the index file, then let the pair signatures go from memory (a literal search
        reads them back from the file) under `lock`: the index lock, or nothing for a caller
        holding it already."""
        assert self.index_cache is not None
        if self.index_cache.write(pending):
            with lock:
                self.index_cache.leave_signatures(pending, self.index)
        del pending
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
        return "ready" if self.index_ready and self.warmed.is_set() else "indexing"

    def health(self, cors: CorsStatus) -> HealthResponse:
        p = self.snapshot()
        skipped = sum(1 for d in p.diagnostics if d.skipped)
        phase = self.phase
        return HealthResponse(
            ready=phase == "ready", phase=phase,
            readiness=HealthReadiness(
                phase=phase, pages=p.page_count,
                indexed_documents=self.index.n_all if self.index_ready else 0,
                index_origin=self.index_origin,
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
                                          degraded_files=len(p.diagnostics) - skipped))

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
        return neighborhood(view, seeds, depth=depth, direction=direction, relations=relations,
                            limit=limit)

    # -- retrieval --------------------------------------------------------------------

    @property
    def index_ready(self) -> bool:
        """Whether the search index has been built once (later syncs are quick)."""
        return self._indexed is not None

    def index_lags(self) -> bool:
        """Whether a search now would first sync the whole index (or build it): after a
        checkout or a recompiled wiki, seconds of work that must not hold the event loop."""
        indexed = self._indexed
        if indexed is None:
            return True
        try:
            projection = self.snapshot()
        except KnowledgeSourceError:
            return False  # nothing to sync: the search itself reports why
        return _edits_since(indexed, projection) is None

    def searcher(self) -> Searcher:
        """A searcher over the current snapshot, with the index brought up to it."""
        projection = self.snapshot()
        with self._index_lock:
            self._index_to(projection)
            self._indexed = projection
        return Searcher(projection, self.index, self._index_lock)

    def _index_to(self, projection: Projection) -> None:
        """Bring the index up to `projection` (under the index lock): from the restart cache
        the first time, else in bulk or by the pages that changed; the caller publishes it."""
        indexed = self._indexed
        if indexed is None and not self._index_cache_tried:
            self._index_cache_tried = True  # one try: later snapshots differ from the file's
            cached = (self.index_cache.load(projection.signature, projection.pages)
                      if self.index_cache is not None else None)
            if cached is not None:
                self.index, views = cached.index, cached.views
                if views is not None:  # the snapshot's own index
                    projection.adopt_link_views(views.incoming, views.owners, views.lookup)
                self.index.update(cached.missing)  # pages changed since it was written
                indexed = projection
                self.index_origin = "cache"
        if indexed is not projection:
            changed = _edits_since(indexed, projection) if indexed is not None else None
            if changed is None:
                started = time.perf_counter()
                self.index.sync(projection.pages)
                self.index_build_seconds = time.perf_counter() - started
                self.index_builds += 1
                self.index_origin = self.index_origin or "built"
            else:  # a few pages changed, came or went: only they are looked at
                pages, position = projection.pages, projection.position
                self.index.remove([path for path in changed if path not in position])
                self.index.update([pages[position[path]] for path in sorted(changed)
                                   if path in position])

    def warm(self) -> None:
        """Build (or load) the search index and the graph views ahead of the first query, and
        keep a built index in the restart cache, all before the index is published (a search
        meanwhile waits for the warm-up, as for the build): its pair signatures are then left
        in the file until a literal search needs them, before any request can see the index,
        and the write (a second or so) never competes with the first requests."""
        try:
            projection = self.snapshot()
            with self._index_lock:
                self._index_to(projection)
                len(projection.incoming)  # the link index behind context-pack graphs
                len(projection.approved_position)  # what the first edit's snapshot needs
                len(projection.owners(False))
                len(projection.facts)
                pending = self._pending_index(projection)
                if pending is not None:
                    self._write_index(pending, contextlib.nullcontext())
                    del pending
                self._indexed = projection
            release_free_memory()
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
        """The context pack as compact JSON text (what HTTP answers), built faster than
        encoding context()."""
        return self.searcher().context_json(req, graph_limit=self.settings.context_graph_limit)


def _edits_since(indexed: Projection, projection: Projection) -> set[str] | None:
    """The paths whose pages to edit into an index synced to `indexed` to bring it up to
    `projection`, or None when it is synced whole: `projection` is not derived from it, or so
    many pages changed (a checkout, a recompiled wiki) that sync's rebuild in bulk is quicker
    than editing them in one by one."""
    changed = projection.changed_since(indexed)
    if changed is None or len(changed) > COMPACT_DEAD_SHARE * len(projection.pages):
        return None
    return changed


def neighborhood(view: GraphView, seeds: Sequence[str], *, depth: int = DEFAULT_NEIGHBORHOOD_DEPTH,
                 direction: str = "both", relations: Sequence[str] = (),
                 limit: int = DEFAULT_NEIGHBORHOOD_LIMIT) -> GraphNeighborhoodResponse:
    """Breadth-first neighbourhood of seed nodes in one graph view (contract 4.12)."""
    depth = NEIGHBORHOOD_DEPTH.clamp(depth)
    limit = NEIGHBORHOOD_LIMIT.clamp(limit)
    wanted = list(dict.fromkeys(_relation(r) for r in relations if r.strip()))
    found: dict[str, None] = {}
    unmatched: list[str] = []
    by_key: dict[str, list[str]] | None = None  # made once, only if a seed needs it
    for seed in seeds:
        seed = seed.strip()
        if not seed:
            continue
        ids = _exact_seed(view.by_id, seed)
        if not ids:
            if by_key is None:
                by_key = _seed_keys(view.nodes)
            seed_key = lookup_key(seed)
            ids = by_key.get(seed_key, []) if seed_key else []
        if not ids:
            unmatched.append(seed)
        found.update(dict.fromkeys(ids))
    resolved = list(found)
    visited: list[str] = []
    seen: set[str] = set()
    for nid in resolved:
        if len(visited) >= limit:
            break
        visited.append(nid)
        seen.add(nid)
    traversed: list[Edge] = []
    traversed_keys: set[tuple[str, str, str]] = set()
    frontier = list(visited)
    allowed = set(wanted)
    for _ in range(depth):
        if len(visited) >= limit:
            break
        next_frontier: list[str] = []
        for nid in frontier:
            candidates: list[tuple[Edge, str]] = []
            if direction in ("out", "both"):
                candidates += [(e, e.target) for e in view.outgoing(nid)]
            if direction in ("in", "both"):
                candidates += [(e, e.source) for e in view.incoming(nid)]
            for edge, other in candidates:
                if allowed and edge.relation not in allowed:
                    continue
                key = (edge.source, edge.target, edge.relation)
                if key not in traversed_keys:
                    traversed_keys.add(key)
                    traversed.append(edge)
                if other not in seen and len(visited) < limit:
                    seen.add(other)
                    visited.append(other)
                    next_frontier.append(other)
                if len(visited) >= limit:
                    break
            if len(visited) >= limit:
                break
        frontier = next_frontier
    edges = [e for e in traversed if e.source in seen and e.target in seen][:limit]
    graph = view.payload([view.by_id[n] for n in visited], edges)
    return GraphNeighborhoodResponse(seeds=resolved, unmatched=unmatched, depth=depth,
                                     direction=direction,
                                     relations=wanted, **graph)


def _projection(p: Projection) -> ProjectionMetadata:
    return ProjectionMetadata(**p.projection_metadata())


def _relation(value: str) -> str:
    return canonical_relation(value.strip())


def _exact_seed(by_id: dict[str, Node], seed: str) -> list[str]:
    for candidate in (seed, f"page:{seed}", f"page:{slug(seed)}"):
        if candidate in by_id:
            return [candidate]
    return []


def _seed_keys(nodes: Sequence[Node]) -> dict[str, list[str]]:
    """Lookup key -> the first NEIGHBORHOOD_SEED_MATCHES node ids (in node order) one of whose
    forms (id, id without `page:`, label, path, file stem) has that key: one pass over the nodes
    for all of a request's seeds."""
    by_key: dict[str, list[str]] = {}
    for node in nodes:
        nid, path = node.id, node.path
        name = path.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0] if "." in name else name
        forms: tuple[str, ...] = (nid, nid.removeprefix("page:"), node.label, path, stem)
        if isinstance(node.meta, Page):
            forms += node.meta.aliases
        for key in {lookup_key(form) for form in forms}:
            ids = by_key.setdefault(key, [])
            if len(ids) < NEIGHBORHOOD_SEED_MATCHES:
                ids.append(nid)
    return by_key
