"""Pydantic models for the bridge's wire shapes (camelCase on the wire via aliases, snake_case in code)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

from common import schemas
from common.bounded import Trimmed
from common.filters import FilterError, filters_schema, parse_filters
from common.guidance import MAX_QUERY_VARIANTS
from common.limits import INTENT_LIMIT, INTENT_SNIPPET_CHARS

JsonObject = dict[str, Any]
DIAGNOSTIC_SCHEMA = "llmwiki.agent-bridge.diagnostic.v1"


_T = TypeVar("_T")


def _unset(value: object) -> bool:
    return value is None


# An optional wire key: left out, never written as null, when it is None. The model says so itself,
# so a bridge model nested in a plain JSON value is written in its wire form by any dump
# (`json_bytes`, `model_dump_json`) without a `wire()` copy first.
OptionalKey = Annotated[_T | None, Field(exclude_if=_unset)]


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True,
                              extra="forbid")

    def wire(self) -> JsonObject:
        """The JSON form as Python values: camelCase keys, unset optional keys dropped."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Observation(CamelModel):
    name: str
    value: str


class Diagnostic(CamelModel):
    schema_version: str = DIAGNOSTIC_SCHEMA
    severity: Literal["warning", "error"]
    scope: Literal["source", "runtime", "bridge"]
    phase: str
    protocol: OptionalKey[str] = None
    subject: str
    retryable: bool
    redacted: bool = True
    observations: list[Observation] = Field(default_factory=list)
    remediation: OptionalKey[str] = None
    message: str


class CitationOrigin(CamelModel):
    """Where a citation's lines are in its source's file, when the source says (our serve's
    evidence `origin` and `section`): 1-based inclusive lines, the section's heading path and
    its `llmwiki://` handle (llmwiki_read resolves it)."""

    path: str
    line_start: int
    line_end: int
    # Left out when unknown, in every dump: the answer's citations and the model's evidence
    # bundle (wire()) must be the same objects, a page without a handle included.
    heading_path: OptionalKey[str] = None
    handle: OptionalKey[str] = None
    sha256: OptionalKey[str] = None


class CitationAlias(CamelModel):
    """The same page as served by another source, merged into a citation (`alsoIn`)."""

    id: str
    source_id: str
    page_id: str


class Citation(CamelModel):
    """One piece of evidence, namespaced by its source (`<sourceId>:<pageId>`)."""

    id: str
    source_id: str
    page_id: str
    title: str
    path: str
    score: OptionalKey[float] = None
    snippet: str
    connection_id: str
    source_refs: list[str] = Field(default_factory=list)
    handle: OptionalKey[str] = None  # the source's opaque `llmwiki://` handle for the item, when it sent one
    origin: OptionalKey[CitationOrigin] = None  # the cited lines, from sources that give them
    also_in: OptionalKey[list[CitationAlias]] = None  # near-duplicates from other sources, merged here


# Graph nodes and edges have one-word keys, so serve's models are the bridge's too.
GraphNode = schemas.GraphNode
GraphEdge = schemas.GraphEdge


class Graph(CamelModel):
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)


class CitationRef(CamelModel):
    id: OptionalKey[str] = None
    title: OptionalKey[str] = None
    path: OptionalKey[str] = None
    source_refs: OptionalKey[list[str]] = None
    line_start: OptionalKey[int] = None  # the cited lines of `path`, when the source gave them
    line_end: OptionalKey[int] = None


class TraceStep(CamelModel):
    id: str
    label: str
    status: Literal["running", "done", "error"]
    detail: OptionalKey[str] = None
    connection_id: OptionalKey[str] = None
    tool_name: OptionalKey[str] = None
    citation_ids: OptionalKey[list[str]] = None
    citation_refs: OptionalKey[list[CitationRef]] = None
    parent_id: OptionalKey[str] = None
    latency_ms: OptionalKey[int] = None
    timestamp: str
    error: OptionalKey[str] = None
    diagnostic: OptionalKey[Diagnostic] = None


class ProjectionSummary(CamelModel):
    signature: OptionalKey[str] = None
    page_count: OptionalKey[int] = None
    approved_page_count: OptionalKey[int] = None
    graph_node_count: OptionalKey[int] = None
    graph_edge_count: OptionalKey[int] = None
    source_ref_count: OptionalKey[int] = None


class RawOriginsSummary(CamelModel):
    enabled: OptionalKey[bool] = None
    metadata_only: OptionalKey[bool] = None
    origin_count: OptionalKey[int] = None
    public_root_label_count: OptionalKey[int] = None


class BundleSourceRef(CamelModel):
    id: OptionalKey[str] = None
    label: OptionalKey[str] = None
    type: OptionalKey[str] = None
    uri: OptionalKey[str] = None


class SourceBundle(CamelModel):
    """The strict allow-list of source-bundle metadata the bridge passes on (contract 4.3.3)."""

    connection_id: str
    source_id: str
    bundle_id: OptionalKey[str] = None
    title: OptionalKey[str] = None
    capabilities: OptionalKey[list[str]] = None
    adapter: OptionalKey[str] = None
    implementation: OptionalKey[str] = None
    projection: OptionalKey[ProjectionSummary] = None
    raw_origins: OptionalKey[RawOriginsSummary] = None
    source_refs: OptionalKey[list[BundleSourceRef]] = None
    source_ref_count: OptionalKey[int] = None


def _item(max_chars: int) -> Trimmed:
    """A trimmed list item of `data.retrieval.search`; one message for empty or overlong."""
    words = f"items must be non-empty strings of at most {max_chars} characters."
    return Trimmed(max_chars, "retrieval_item", words, words)


def _filters(value: Any) -> JsonObject | None:
    """`retrieval.search.filters`: serve's filters object in camelCase keys, checked by the same
    rules (common/filters.py), kept as its camelCase JSON; None when it filters nothing."""
    try:
        parsed = parse_filters(value, camel=True, where="retrieval.search.filters")
    except FilterError as exc:
        raise PydanticCustomError("retrieval_filter", str(exc)) from None
    return None if parsed is None else parsed.wire(camel=True)


FILTERS_HELP = ("Narrow the pages each source searches (tagsAny, tagsAll, pathPrefix, kinds, dateFrom, "
                "dateTo; serve's rules); sent only to sources that advertise llmwiki_search_filters_v1.")
IntentFilters = Annotated[
    JsonObject | None, BeforeValidator(_filters),
    WithJsonSchema({**filters_schema(camel=True), "description": FILTERS_HELP})]  # optional: the object


class RetrievalSearch(CamelModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="forbid")

    limit: int | None = Field(default=None, ge=INTENT_LIMIT.low, le=INTENT_LIMIT.high, strict=True)
    snippet_chars: int | None = Field(default=None, ge=INTENT_SNIPPET_CHARS.low,
                                      le=INTENT_SNIPPET_CHARS.high, strict=True)
    fields: list[Annotated[str, _item(80)]] | None = Field(default=None, max_length=16)
    exclude_page_ids: list[Annotated[str, _item(512)]] | None = Field(default=None, max_length=50)
    query_variants: list[Annotated[str, _item(1000)]] | None = Field(
        default=None, max_length=MAX_QUERY_VARIANTS, description=(
            "At most two lexical rewrites of the query; sent only to sources that advertise "
            "llmwiki_agent_guided_lexical_v1."))
    filters: OptionalKey[IntentFilters] = None


class RetrievalIntent(CamelModel):
    """Retrieval intent (llmwiki.retrieval.v1): search mode, fallback and search options."""

    # Closed and camelCase only: `snippet_chars` and the like are unknown fields (contract 3.5).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="forbid")

    schema_version: Literal["llmwiki.retrieval.v1"]
    search_mode: Literal["lexical", "literal", "vector", "hybrid"]
    fallback: Literal["lexical", "none"] = "lexical"
    search: RetrievalSearch | None = None
