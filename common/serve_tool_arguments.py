"""serve's MCP tool argument models (contract 6.1 and 6.2.5): validated once, strictly on the
standard surfaces and, with the LENIENT context, as the reference's bare /mcp accepts them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError, PydanticUseDefault

from common.booleans import coerce_bool
from common.filters import FilterError, Filters, optional_filters_schema, parse_filters
from common.guidance import MAX_QUERY_VARIANTS
from common.limits import (
    DEFAULT_NEIGHBORHOOD_DEPTH,
    DEFAULT_NEIGHBORHOOD_LIMIT,
    GRAPH_LIMIT,
    NEIGHBORHOOD_DEPTH,
    NEIGHBORHOOD_LIMIT,
    SEARCH_LIMIT,
    SNIPPET_CHARS,
    Limit,
    TooManyNames,
    name_list,
)
from common.schemas import Direction, SearchMode, query_variants

# model_validate(..., context=LENIENT): the bare /mcp endpoint's coercions (contract 6.1).
LENIENT = {"lenient": True}
# The error type of a rule's own message (the contract's words), as against pydantic's text.
USER_ERROR = "llmwiki_user_error"
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
DIRECTIONS: tuple[str, ...] = get_args(Direction)
MODE_MESSAGE = "unknown search mode: expected lexical, literal, vector, or hybrid"
MIN_SCORE_MESSAGE = "min_score must be a non-negative number"
VARIANTS_HELP = ("At most two agent-written lexical rewrites of the query (mode=lexical only), "
                 "e.g. terms chosen from retrieval_guidance. Omit when not needed.")
GRAPH_HELP = ("Whether the pack carries the graph around its evidence; false gives an empty "
              "graph and a smaller pack.")


def user_error(message: str) -> PydanticCustomError:
    return PydanticCustomError(USER_ERROR, message)


def user_messages(exc: ValidationError) -> list[str]:
    return [e["msg"] for e in exc.errors(include_url=False) if e["type"] == USER_ERROR]


def _lenient(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("lenient"))


def _rule(lenient: Callable[[Any, str], Any] | None = None,
          after: Callable[[Any, str], Any] | None = None) -> WrapValidator:
    """One field's validation: on bare /mcp `lenient` first turns any JSON value into the
    field's type (or raises PydanticUseDefault); then the type's own validation; then `after`,
    the rule both surfaces share (clamps, name lists, the contract's checks)."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        if lenient is not None and _lenient(info):
            value = lenient(value, name)
        value = handler(value)
        return value if after is None else after(value, name)

    return WrapValidator(validate)


# -- the lenient coercions (contract 6.1) --------------------------------------------------


def _whole(value: Any, _: str) -> int:
    """int() of anything; what it cannot read (null included) leaves the default."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise PydanticUseDefault() from None


def _text(value: Any, _: str) -> str:
    return "" if value is None else str(value)


def _optional_text(value: Any, _: str) -> str | None:
    return None if value is None else str(value)


def _flag(value: Any, _: str) -> bool:
    return coerce_bool(value)


def _optional_flag(value: Any, _: str) -> bool | None:
    return None if value is None else coerce_bool(value)


def _mode(value: Any, _: str) -> str:
    mode = "lexical" if value is None else str(value).strip().lower()
    if mode not in SEARCH_MODES:
        raise user_error(MODE_MESSAGE)
    return mode


def _direction(value: Any, _: str) -> Any:
    return value if value in DIRECTIONS else "both"  # unknown words read as both, silently


def _names(value: Any, field: str) -> list[str]:
    """A comma-separated string or a list: items as text, trimmed, empties dropped, once each."""
    try:
        return name_list(value, field, stringify=True)
    except TooManyNames as exc:
        raise user_error(str(exc)) from None


def _optional_names(value: Any, field: str) -> list[str] | None:
    return None if value is None else _names(value, field)


def _joined_names(value: Any, field: str) -> str:
    """A name list kept as one comma-separated string (the schema says string; bare /mcp
    also takes a list): split, trimmed and de-duplicated like the lists."""
    return ",".join(_names(value, field))


def _min_score(value: Any, _: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise user_error(MIN_SCORE_MESSAGE)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise user_error(MIN_SCORE_MESSAGE) from None


def _variants(value: Any, _: str) -> list[str]:
    try:
        return query_variants(value)
    except ValueError as exc:
        raise user_error(str(exc)) from None


# -- the rules both surfaces share ------------------------------------------------------


def _filters(value: Any, _: str) -> Filters | None:
    """The same check on both surfaces (a filter is never read leniently: never ignored)."""
    try:
        return parse_filters(value)
    except FilterError as exc:
        raise user_error(str(exc)) from None


def _clamped(limit: Limit) -> Callable[[Any, str], Any]:
    return lambda value, _: None if value is None else limit.clamp(value)


def _non_negative(value: float | None, _: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise user_error(MIN_SCORE_MESSAGE)
    return value


Text = Annotated[str, _rule(_text)]
OptionalText = Annotated[str | None, _rule(_optional_text)]
Flag = Annotated[bool, _rule(_flag)]
OptionalFlag = Annotated[bool | None, _rule(_optional_flag)]
Mode = Annotated[SearchMode, _rule(_mode)]
Names = Annotated[list[str] | str | None, _rule(_optional_names, _optional_names)]
NameText = Annotated[str, _rule(_joined_names, _joined_names)]
NameArray = Annotated[list[str] | None, _rule(_optional_names, _optional_names)]
SearchLimit = Annotated[int, _rule(_whole, _clamped(SEARCH_LIMIT))]
SnippetChars = Annotated[int | None, _rule(_whole, _clamped(SNIPPET_CHARS))]
MinScore = Annotated[float | None, _rule(_min_score, _non_negative)]
Variants = Annotated[list[str], _rule(_variants, _variants)]
FiltersArg = Annotated[Any, _rule(after=_filters), WithJsonSchema(optional_filters_schema())]
MaxChars = Annotated[int | None, _rule(_whole)]  # the read clamps it, as GET /read's
GraphLimit = Annotated[int, _rule(_whole, _clamped(GRAPH_LIMIT))]
Depth = Annotated[int, _rule(_whole, _clamped(NEIGHBORHOOD_DEPTH))]
NeighborhoodLimit = Annotated[int, _rule(_whole, _clamped(NEIGHBORHOOD_LIMIT))]
DirectionArg = Annotated[Direction, _rule(_direction)]


class ToolArguments(BaseModel):
    """Unknown keys are ignored, as the reference's tools ignore them."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any, info: ValidationInfo) -> Any:
        """The bare endpoint's alternative spellings (contract 6.1), per model."""
        if not (_lenient(info) and isinstance(data, dict)):
            return data
        data = dict(data)
        for name, alias in cls.lenient_aliases().items():
            if data.get(name) is None:  # absent or null: the alias (absent too: null)
                data[name] = data.get(alias)
        return data

    @classmethod
    def lenient_aliases(cls) -> dict[str, str]:
        return {}


class SearchArguments(ToolArguments):
    query: Text = ""
    limit: SearchLimit = 8  # the server's context_default_limit (the registry binds it)
    include_drafts: Flag = False
    mode: Mode = "lexical"
    fields: Names = None
    snippet_chars: SnippetChars = None
    min_score: MinScore = None
    exclude_page_ids: Names = None
    query_variants: Variants = Field(default_factory=list, max_length=MAX_QUERY_VARIANTS,
                                     description=VARIANTS_HELP)
    filters: FiltersArg = None

    @model_validator(mode="before")
    @classmethod
    def _singular_exclusion(cls, data: Any, info: ValidationInfo) -> Any:
        """Bare /mcp also reads exclude_page_id, before exclude_page_ids."""
        if not (_lenient(info) and isinstance(data, dict)) or "exclude_page_id" not in data:
            return data
        merged = (_names(data["exclude_page_id"], "exclude_page_id")
                  + _names(data.get("exclude_page_ids"), "exclude_page_ids"))
        return {**data, "exclude_page_ids": merged}


class ContextArguments(SearchArguments):
    include_graph: Flag = Field(True, description=GRAPH_HELP)


class ReadArguments(ToolArguments):
    page_id: Text
    include_drafts: Flag = False
    fields: Names = None
    query: OptionalText = None
    sections: Names = None
    max_chars: MaxChars = None
    include_links: OptionalFlag = None

    @classmethod
    def lenient_aliases(cls) -> dict[str, str]:
        return {"page_id": "id", "sections": "section"}


class GraphArguments(ToolArguments):
    limit: GraphLimit = 100  # the server's graph_default_limit (the registry binds it)
    include_drafts: Flag = False


class NeighborhoodArguments(ToolArguments):
    seed: NameText = ""
    seeds: NameArray = None
    depth: Depth = DEFAULT_NEIGHBORHOOD_DEPTH
    direction: DirectionArg = "both"
    relation: NameText = ""
    relations: NameArray = None
    limit: NeighborhoodLimit = DEFAULT_NEIGHBORHOOD_LIMIT
    include_drafts: Flag = False

    def all_seeds(self) -> list[str]:
        """seed and seeds are one list on both surfaces."""
        return _merged(self.seed, self.seeds)

    def all_relations(self) -> list[str]:
        return _merged(self.relation, self.relations)


def _merged(joined: str, names: list[str] | None) -> list[str]:
    return list(dict.fromkeys([n for n in joined.split(",") if n] + (names or [])))


class DraftsArguments(ToolArguments):
    include_drafts: Flag = False
