"""A Knowledge Source's answer as the bridge reads it: lenient models holding every documented spelling.

A source is a peer, not a client: its answer is read, never rejected. Each field names the
spellings the contracts document, in their order (bridge contract 3.11, 4.3.1 and 4.3.2), and:
- a key whose value is null or "" counts as absent, so the next spelling is read;
- a value of the wrong type reads as no value (None; "" for a text), never as an error;
- keys the bridge does not read are ignored.
So any JSON object validates. What a value then means (its text, a default, the source's
namespace) is the bridge's to say; these models only say where it is and what type it has.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    OnErrorOmit,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema


class _OrNone:
    """A value that does not validate reads as None (in pydantic-core, no Python call)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_default_schema(handler(source), default=None, on_error="default")


class _OrEmpty:
    """A value that does not validate reads as "" (no text)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_default_schema(handler(source), default="", on_error="default")


class _AsSent:
    """A JSON object kept as the source sent it: the bridge copies what it keeps of one, so
    validating every key and value into a new dict first would only cost time."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.nullable_schema(core_schema.is_instance_schema(dict))


# A string or a number as the source sent it (booleans, objects and lists read as None): the
# bridge reads the text of some fields with numbers (`text_of`) and of others without.
Scalar = Annotated[StrictStr | StrictInt | StrictFloat | None, _OrNone()]
# The text of a value: a string, a number written as Python writes it, anything else "" (the
# bridge's `text_of`, done by pydantic-core: a graph has hundreds of these).
Text = Annotated[str, Field(coerce_numbers_to_str=True), _OrEmpty()]
Number = Annotated[StrictInt | StrictFloat | None, _OrNone()]
Count = Annotated[StrictInt | None, _OrNone()]
Flag = Annotated[StrictBool | None, _OrNone()]
Object = Annotated[dict[str, Any] | None, _AsSent(), _OrNone()]
# Kept as the reference keeps them: strings and integers, booleans included (they are ints there).
RefList = Annotated[list[OnErrorOmit[StrictStr | StrictInt | StrictBool]] | None, _OrNone()]
Strings = Annotated[list[OnErrorOmit[StrictStr]] | None, _OrNone()]


def _spelled(*names: str, default: str | None = None) -> Any:
    """A field read from the first of `names` that holds a value (one home for the spelling list)."""
    return Field(default=default, validation_alias=AliasChoices(*names))


class SourceAnswerModel(BaseModel):
    """Base: unknown keys ignored, null and "" values absent (see the module docstring)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _unset_values_are_absent(cls, data: Any) -> Any:
        # AliasChoices takes the first spelling present; the contracts take the first with a
        # value. Most items hold no null or "" value, so they are passed on as they are.
        if isinstance(data, dict) and (None in (values := data.values()) or "" in values):
            return {key: value for key, value in data.items() if value is not None and value != ""}
        return data


class PageItem(SourceAnswerModel):
    """An evidence, citation, search-result or orientation item: one page (or section) the source
    cites. The ids are spelled several ways and each use reads them in the contract's order."""

    citation_id: Scalar = _spelled("id", "page_id", "path")  # a citation's raw id (4.3.1)
    page_id: Scalar = _spelled("page_id", "pageId", "id")  # a citation's page id (4.3.1)
    result_id: Scalar = _spelled("page_id", "pageId", "id", "path")  # a search result's id (3.11)
    item_id: Scalar = _spelled("id", "page_id", "pageId")  # an orientation item's id (3.11)
    title: Scalar = None
    path: Scalar = None
    snippet: Scalar = None
    role: Scalar = None
    score: Number = None
    connection_id: Scalar = _spelled("connectionId", "connection_id")
    source_refs: RefList = _spelled("sourceRefs", "source_refs")
    handle: Scalar = _spelled("handle", "uri")
    origin: Object = None  # where the cited lines are (our serve's addition), checked by the bridge
    section: Object = None


class GraphNodeItem(SourceAnswerModel):
    id: Text = ""
    label: Text = _spelled("label", "title", "id", default="")
    kind: Text = _spelled("kind", "role", default="")
    path: Text = ""
    metadata: Object = None


class GraphEdgeItem(SourceAnswerModel):
    source: Text = ""
    target: Text = ""
    relation: Text = _spelled("relation", "kind", default="")
    metadata: Object = None


# An item that is not an object is left out of a graph, but keeps its place among citations
# (they are numbered by their place in the answer).
GraphNodes = Annotated[list[OnErrorOmit[GraphNodeItem]], _OrNone()]
GraphEdges = Annotated[list[OnErrorOmit[GraphEdgeItem]], _OrNone()]
PageItems = Annotated[list[Annotated[PageItem | None, _OrNone()]], _OrNone()]


class SourceGraph(SourceAnswerModel):
    nodes: GraphNodes | None = None
    edges: GraphEdges | None = None


class SourceAnswer(SourceAnswerModel):
    """Any answer that may cite pages or carry a graph: a context pack, a search, a graph or a
    neighbourhood. Its graph is `graph`, else its own top-level `nodes` and `edges` (4.3.2)."""

    evidence: PageItems | None = None
    citations: PageItems | None = None
    results: PageItems | None = None
    graph: SourceGraph | None = None
    nodes: GraphNodes | None = None
    edges: GraphEdges | None = None

    @field_validator("graph", mode="before")
    @classmethod
    def _graph_object(cls, value: Any) -> Any:
        return value if isinstance(value, dict) and value else None  # `{}` names no graph either

    def cited_items(self) -> list[PageItem | None]:
        """`evidence` then `citations` (None where an item is not an object)."""
        return [*(self.evidence or ()), *(self.citations or ())]

    def graph_items(self) -> tuple[list[GraphNodeItem], list[GraphEdgeItem]]:
        graph = self.graph if self.graph is not None else self
        return graph.nodes or [], graph.edges or []


# What a pack says of its source, on itself or under its `metadata` (3.11).
PackFact = Literal["description", "adapter", "implementation", "page_count", "approved_page_count"]


class SourcePackMetadata(SourceAnswerModel):
    """A context pack's `metadata`, read where the pack itself does not say."""

    description: Scalar = None
    adapter: Scalar = None
    implementation: Scalar = None
    page_count: Count = _spelled("page_count", "pageCount")
    approved_page_count: Count = _spelled("approved_page_count", "approvedPageCount")


class SourceContextPack(SourceAnswer, SourcePackMetadata):
    """A context pack (serve's `POST /query`, MCP `llmwiki_context`, an A2A `llmwiki_context`
    artifact) in any spelling the contracts document."""

    wiki_title: Scalar = _spelled("wiki_title", "wikiTitle", "title")
    answerable: Flag = None
    orientation: PageItems | None = None
    limitations: Strings = None
    metadata: Annotated[SourcePackMetadata | None, _OrNone()] = None

    def described(self, name: PackFact) -> Any:
        """The pack's field `name` when the pack has it (even with a value of the wrong type,
        which then reads as None), else its metadata's."""
        if name in self.model_fields_set or self.metadata is None:
            return getattr(self, name)
        return getattr(self.metadata, name)



class ManifestRef(SourceAnswerModel):
    """One of a source bundle's source refs (contract 4.3.3)."""

    id: Text = _spelled("id", "source_ref_id", "sourceRefId", default="")
    label: Text = _spelled("label", "name", default="")
    type: Text = _spelled("type", "kind", default="")
    uri: Scalar = None


class ProjectionCounts(SourceAnswerModel):
    """A source bundle's projection facts: read from its `projection` object laid over the
    manifest itself, so a key there wins over the same key at the top (4.3.3)."""

    signature: Text = _spelled("signature", "projection_signature", "projectionSignature", default="")
    page_count: Count = _spelled("page_count", "pageCount")
    approved_page_count: Count = _spelled("approved_page_count", "approvedPageCount")
    graph_node_count: Count = _spelled("graph_node_count", "graphNodeCount")
    graph_edge_count: Count = _spelled("graph_edge_count", "graphEdgeCount")


RawList = Annotated[list[Any] | None, _OrNone()]


class SourceManifest(SourceAnswerModel):
    """A source's manifest or bundle (serve's `GET /manifest`, MCP `llmwiki_source_bundle`) as
    the bridge reads it; `raw_origins` stays as sent: an object, a list or a comma string."""

    source_id: Text = _spelled("source_id", "sourceId", default="")
    bundle_id: Text = _spelled("bundle_id", "bundleId", default="")
    title: Text = ""
    adapter: Text = ""
    implementation: Text = ""
    capabilities: RawList = None
    source_refs: RawList = _spelled("source_refs", "sourceRefs")
    raw_origins: Any = _spelled("raw_origins", "rawOrigins")
    projection: Object = None

    def counts(self, raw: dict[str, Any]) -> ProjectionCounts:
        """The projection facts of the manifest `raw` this was read from."""
        return ProjectionCounts.model_validate({**raw, **(self.projection or {})})
