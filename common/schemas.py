"""Pydantic models for serve's wire shapes (contract appendix D; field order is wire order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import WithJsonSchema

from common.filters import QUERY_SYNTAX, optional_filters_schema
from common.guidance import MAX_QUERY_VARIANTS, RetrievalGuidance
from common.limits import SEARCH_LIMIT, SNIPPET_CHARS, name_list

JsonObject = dict[str, Any]
SearchMode = Literal["lexical", "literal", "vector", "hybrid"]
Direction = Literal["out", "in", "both"]


class WireModel(BaseModel):
    """Base for response models: every field is serialised, unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


class GraphNode(WireModel):
    id: str
    label: str
    kind: str
    path: str = ""
    metadata: JsonObject = Field(default_factory=dict)


class GraphEdge(WireModel):
    source: str
    target: str
    relation: str
    metadata: JsonObject = Field(default_factory=dict)


class GraphResponse(WireModel):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class ContextGraph(GraphResponse):
    """A context pack's graph: the reference's nodes and edges, and, only when the size budget
    cut it, `truncated: true` and `omitted: {"nodes": n, "edges": m}` (left open for them)."""

    model_config = ConfigDict(extra="allow")


class GraphNeighborhoodResponse(WireModel):
    seeds: list[str]
    unmatched: list[str]
    depth: int
    direction: Direction
    relations: list[str]
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class ProjectionMetadata(WireModel):
    signature: str = ""
    page_count: int
    approved_page_count: int
    graph_node_count: int
    graph_edge_count: int


class RawOriginsMetadata(WireModel):
    enabled: bool = False
    metadata_only: bool = True
    public_root_labels: list[str] = Field(default_factory=list)
    # Our additions: the folder's public label (never a path) and, when it is a git work
    # tree, the commit it is at.
    root_label: str | None = Field(default=None, exclude_if=lambda v: v is None)
    commit: str | None = Field(default=None, exclude_if=lambda v: v is None)


class WikiManifest(WireModel):
    title: str
    description: str
    root: str
    source_id: str
    bundle_id: str
    public_uri: str
    adapter: str
    implementation: str
    source_profile: str = ""
    format_version: str = ""
    page_count: int
    approved_page_count: int
    hot_page: str
    index_page: str
    overview_page: str
    projection: ProjectionMetadata
    raw_origins: RawOriginsMetadata
    capabilities: list[str]


class SourceRef(WireModel):
    id: str
    label: str
    kind: str = "source_ref"
    uri: str
    linked_pages: list[str]
    linked_page_ids: list[str]
    locator: JsonObject = Field(default_factory=dict)


class SourceRefsResponse(WireModel):
    source_id: str
    bundle_id: str
    source_refs: list[SourceRef]


class SourceBundleManifest(WireModel):
    source_id: str
    bundle_id: str
    public_uri: str
    title: str
    description: str
    adapter: str
    implementation: str
    source_profile: str = ""
    format_version: str = ""
    projection: ProjectionMetadata
    raw_origins: RawOriginsMetadata
    capabilities: list[str]
    source_refs: list[SourceRef]


class WikiPage(WireModel):
    """The full read payload for one page."""

    id: str
    title: str
    path: str
    role: str
    text: str
    summary: str
    frontmatter: JsonObject
    review_state: str
    status: str
    source_refs: list[str]
    tags: list[str]
    links: list[str]
    headings: list[str]
    updated_at: str
    okf: JsonObject | None = None


WIKI_PAGE_FIELDS: tuple[str, ...] = tuple(WikiPage.model_fields)


class ReadNotFound(WireModel):
    """A page withheld from this caller (a draft without permission)."""

    found: Literal[False] = False
    reason: str = "not approved for serving"


class PageMissing(WireModel):
    """No such page, as the MCP read tool answers it (HTTP answers 404)."""

    found: Literal[False] = False


class HealthSource(WireModel):
    source_id: str
    bundle_id: str
    public_uri: str
    title: str
    adapter: str
    implementation: str
    page_count: int
    approved_page_count: int
    projection: ProjectionMetadata


class HealthEndpoints(WireModel):
    """Each route's path ("" for an opt-in route not enabled); serve/routes.py holds them."""

    health: str
    manifest: str
    source_bundle: str
    source_refs: str
    query: str
    search: str
    read: str
    graph: str
    graph_neighborhood: str
    mcp_jsonrpc: str
    mcp_streamable_http: str
    openapi: str
    docs: str
    a2a_agent_card: str
    a2a_message_send: str


class CorsStatus(WireModel):
    mode: Literal["local-dev-allowlist", "explicit-allowlist"]
    local_dev_origins: bool
    explicit_origin_count: int


class HealthDiagnostics(WireModel):
    """How freshness is kept, how many files were skipped or degraded, and where serve's store
    lives (our addition)."""

    freshness: Literal["inotify", "scan", "producer-manifest"]
    skipped_files: int
    degraded_files: int
    # disk: kept for restarts; memory: the cache directory cannot hold it (nothing persists);
    # failing: its last write failed (a full disk), tried again at the next save; off:
    # --no-page-cache.
    store: Literal["disk", "memory", "failing", "off"] = "disk"


Phase = Literal["loading", "indexing", "ready"]


class HealthReadiness(WireModel):
    """How far start-up has got (our addition): pages in the snapshot, documents in the search
    index, and where the index came from ("cache": the restart cache, "built": analysed here,
    "": not yet)."""

    phase: Phase
    pages: int
    indexed_documents: int
    index_origin: Literal["cache", "built", ""]
    seconds_since_start: float


class HealthResponse(WireModel):
    status: Literal["ok"] = "ok"  # the process answers; `ready` says whether queries can be
    service: Literal["llmwiki-serve"] = "llmwiki-serve"
    version: str
    source: HealthSource
    capabilities: list[str]
    endpoints: HealthEndpoints
    cors: CorsStatus
    diagnostics: HealthDiagnostics | None = None
    ready: bool = True
    phase: Phase = "ready"
    readiness: HealthReadiness | None = None


class ProjectionStoreDiagnostics(WireModel):
    """GET /diagnostics/projection-store (contract 4.5); serve keeps its projection in memory."""

    backend: Literal["InMemoryProjectionStore", "RedisProjectionStore"] = "InMemoryProjectionStore"
    backend_kind: Literal["memory", "redis"] = "memory"
    endpoint: str | None = None
    namespace: str = "default"
    cache_source_id: str
    available: bool = True
    last_error: str = ""


class ErrorDetail(WireModel):
    code: str
    message: str


class ErrorBody(WireModel):
    """Root errors and other coded errors: {"error": {"code", "message"}}."""

    error: ErrorDetail


class HttpDetailResponse(WireModel):
    detail: str


class ValidationIssue(WireModel):
    type: str
    loc: list[str | int]
    msg: str
    input: Any = None
    ctx: JsonObject | None = Field(default=None, exclude_if=lambda v: v is None)


class HTTPValidationError(WireModel):
    detail: list[ValidationIssue]


class QueryRequest(BaseModel):
    """Body of POST /query and POST /search (contract 4.8). Unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    query: str = Field(default="", description=QUERY_SYNTAX)
    limit: int | None = Field(default=None, ge=SEARCH_LIMIT.low, le=SEARCH_LIMIT.high)
    include_drafts: bool = False
    mode: SearchMode = "lexical"
    fields: list[str] | None = None
    snippet_chars: int | None = Field(default=None, ge=SNIPPET_CHARS.low, le=SNIPPET_CHARS.high)
    min_score: float | None = Field(default=None, ge=0)
    exclude_page_ids: list[str] = Field(default_factory=list)
    query_variants: list[str] = Field(default_factory=list)
    # POST /query only (an addition to the reference): false gives an empty graph.
    include_graph: bool = True
    # Checked by serve (common/filters.py), so that a bad one is a 400 naming the key, not a 422.
    filters: Annotated[Any, WithJsonSchema(optional_filters_schema())] = None

    @field_validator("fields", mode="before")
    @classmethod
    def _fields(cls, value: Any) -> list[str] | None:
        return None if value is None else name_list(value, "fields")

    @field_validator("exclude_page_ids", mode="before")
    @classmethod
    def _exclusions(cls, value: Any) -> list[str]:
        return name_list(value, "exclude_page_ids")

    @field_validator("query_variants", mode="before")
    @classmethod
    def _variants(cls, value: Any) -> list[str]:
        return query_variants(value)


def query_variants(value: Any) -> list[str]:
    """The agent's query rewrites, trimmed; ValueError with the contract's message otherwise
    (POST /query and the MCP tools share the rule)."""
    if value is None:
        raise ValueError("query_variants must be an array of strings; omit it instead of null")
    if not isinstance(value, list):
        raise ValueError("query_variants must be an array of strings")
    if len(value) > MAX_QUERY_VARIANTS:
        raise ValueError(f"query_variants accepts at most {MAX_QUERY_VARIANTS} supplied variants")
    for item in value:
        if not isinstance(item, str):
            raise ValueError("query_variants must be an array of strings")
        if not item.strip():
            raise ValueError("query_variants entries must be non-empty strings")
    return [item.strip() for item in value]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a client asked of a read beyond the page id (all optional): GET /read's query
    parameters and llmwiki_read's arguments."""

    query: str | None = None
    sections: tuple[str, ...] = ()
    max_chars: int | None = None
    include_links: bool | None = None

    @property
    def focused(self) -> bool:
        return bool(self.query and self.query.strip()) or bool(self.sections)


MatchedField = Literal["title", "heading", "body", "tag", "path", "alias"]


def _absent(value: Any) -> bool:
    return value is None


class EvidenceSection(WireModel):
    """The section of a page an evidence item cites (our addition)."""

    handle: str  # llmwiki://<source_id>/pages/<page_id>#<anchor>; GET /read/{handle} resolves it
    heading_path: str  # "Release Checklist > Rollback"; "" for the text before any heading
    anchor: str  # GitHub-style heading anchor, unique within the page (the handle's fragment)


class EvidenceOrigin(WireModel):
    """Where the cited lines are: 1-based, inclusive, counted in the file as it is on disk
    (frontmatter included); sha256 is the hex SHA-256 of those lines' bytes, line breaks
    included (our addition)."""

    path: str
    line_start: int
    line_end: int
    sha256: str
    bundle_id: str


class SearchResult(WireModel):
    page_id: str
    title: str
    path: str
    score: float
    snippet: str
    role: str
    source_refs: list[str]
    route: str
    # Our additions (absent from the reference's items): the best-matching section, where its
    # lines are, which page fields matched, and the passage around the matched terms (left
    # out when the snippet holds it: docs/evidence.md).
    section: EvidenceSection | None = Field(default=None, exclude_if=_absent)
    origin: EvidenceOrigin | None = Field(default=None, exclude_if=_absent)
    matched_fields: list[MatchedField] | None = Field(default=None, exclude_if=_absent)
    passage: str | None = Field(default=None, exclude_if=_absent)


class SectionNeighbours(WireModel):
    previous: str | None = None
    next: str | None = None
    parent: str | None = None


class SectionRead(WireModel):
    """GET /read/{handle} and llmwiki_read with a handle: one section of a page (or the whole
    body, for a page handle) with its origin and its neighbours' handles (our addition)."""

    handle: str
    page_id: str
    title: str
    path: str
    role: str
    heading_path: str
    anchor: str
    level: int  # 1..6 for a heading, 0 for the preamble, -1 for the whole body
    text: str  # the lines line_start..line_end (the body's first and last stripped)
    origin: EvidenceOrigin
    neighbours: SectionNeighbours
    # A page handle's read lists the page's sections, in document order.
    sections: list[EvidenceSection] | None = Field(default=None, exclude_if=_absent)


class SearchResponse(WireModel):
    """`{"results": [...]}`; items are SearchResults, or their projection by `fields` (so open)."""

    results: list[JsonObject]


class ContextPack(WireModel):
    """POST /query: the context pack (orientation and evidence items are SearchResults, or their
    projection by `fields`, so open)."""

    query: str
    wiki_title: str
    description: str = ""
    adapter: str = ""
    implementation: str = ""
    page_count: int
    approved_page_count: int
    answerable: bool
    orientation: list[JsonObject]
    evidence: list[JsonObject]
    limitations: list[str]
    graph: ContextGraph
    retrieval_guidance: RetrievalGuidance
