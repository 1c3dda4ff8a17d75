"""Pydantic models for the bridge's wire shapes (camelCase on the wire via aliases, snake_case in code)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from common import schemas
from common.bounded import Trimmed
from common.guidance import MAX_QUERY_VARIANTS
from common.limits import INTENT_LIMIT, INTENT_SNIPPET_CHARS

JsonObject = dict[str, Any]
DIAGNOSTIC_SCHEMA = "llmwiki.agent-bridge.diagnostic.v1"


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def wire(self) -> JsonObject:
        """The JSON form: camelCase keys, unset optional keys dropped."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Observation(CamelModel):
    name: str
    value: str


class Diagnostic(CamelModel):
    schema_version: str = DIAGNOSTIC_SCHEMA
    severity: Literal["warning", "error"]
    scope: Literal["source", "runtime", "bridge"]
    phase: str
    protocol: str | None = None
    subject: str
    retryable: bool
    redacted: bool = True
    observations: list[Observation] = Field(default_factory=list)
    remediation: str | None = None
    message: str


class CitationOrigin(CamelModel):
    """Where a citation's lines are in its source's file, when the source says (our serve's
    evidence `origin` and `section`): 1-based inclusive lines, the section's heading path and
    its `llmwiki://` handle (llmwiki_read resolves it)."""

    path: str
    line_start: int
    line_end: int
    heading_path: str | None = None
    handle: str | None = None
    sha256: str | None = None


class Citation(CamelModel):
    """One piece of evidence, namespaced by its source (`<sourceId>:<pageId>`)."""

    id: str
    source_id: str
    page_id: str
    title: str
    path: str
    score: float | None = None
    snippet: str
    connection_id: str
    source_refs: list[str] = Field(default_factory=list)
    handle: str | None = None  # the source's opaque `llmwiki://` handle for the item, when it sent one
    origin: CitationOrigin | None = None  # the cited lines, from sources that give them


# Graph nodes and edges have one-word keys, so serve's models are the bridge's too.
GraphNode = schemas.GraphNode
GraphEdge = schemas.GraphEdge


class Graph(CamelModel):
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)


class CitationRef(CamelModel):
    id: str | None = None
    title: str | None = None
    path: str | None = None
    source_refs: list[str] | None = None
    line_start: int | None = None  # the cited lines of `path`, when the source gave them
    line_end: int | None = None


class TraceStep(CamelModel):
    id: str
    label: str
    status: Literal["running", "done", "error"]
    detail: str | None = None
    connection_id: str | None = None
    tool_name: str | None = None
    citation_ids: list[str] | None = None
    citation_refs: list[CitationRef] | None = None
    parent_id: str | None = None
    latency_ms: int | None = None
    timestamp: str
    error: str | None = None
    diagnostic: Diagnostic | None = None


class ProjectionSummary(CamelModel):
    signature: str | None = None
    page_count: int | None = None
    approved_page_count: int | None = None
    graph_node_count: int | None = None
    graph_edge_count: int | None = None
    source_ref_count: int | None = None


class RawOriginsSummary(CamelModel):
    enabled: bool | None = None
    metadata_only: bool | None = None
    origin_count: int | None = None
    public_root_label_count: int | None = None


class BundleSourceRef(CamelModel):
    id: str | None = None
    label: str | None = None
    type: str | None = None
    uri: str | None = None


class SourceBundle(CamelModel):
    """The strict allow-list of source-bundle metadata the bridge passes on (contract 4.3.3)."""

    connection_id: str
    source_id: str
    bundle_id: str | None = None
    title: str | None = None
    capabilities: list[str] | None = None
    adapter: str | None = None
    implementation: str | None = None
    projection: ProjectionSummary | None = None
    raw_origins: RawOriginsSummary | None = None
    source_refs: list[BundleSourceRef] | None = None
    source_ref_count: int | None = None


def _item(max_chars: int) -> Trimmed:
    """A trimmed list item of `data.retrieval.search`; one message for empty or overlong."""
    words = f"items must be non-empty strings of at most {max_chars} characters."
    return Trimmed(max_chars, "retrieval_item", words, words)


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


class RetrievalIntent(CamelModel):
    """Retrieval intent (llmwiki.retrieval.v1): search mode, fallback and search options."""

    # Closed and camelCase only: `snippet_chars` and the like are unknown fields (contract 3.5).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="forbid")

    schema_version: Literal["llmwiki.retrieval.v1"]
    search_mode: Literal["lexical", "literal", "vector", "hybrid"]
    fallback: Literal["lexical", "none"] = "lexical"
    search: RetrievalSearch | None = None
