"""The retrieval guidance wire shape (`llmwiki.retrieval_guidance.v1`): one model for serve and the bridge.

Field names are serve's snake_case (serve contract 5.8); the aliases are the bridge's camelCase
(bridge contract 6.6). Validation is the closed shape both contracts describe: every key required,
no extra keys, no nulls, strings trimmed and non-empty, lists unique, paths source-relative."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

from common.bounded import Trimmed

# Final, so that type checkers read them as the literals the model's fields are.
SCHEMA_VERSION: Final = "llmwiki.retrieval_guidance.v1"
CONTENT_TRUST: Final = "untrusted_source_evidence"
OrientationSource = Literal["authored", "projection_extractive", "none"]
FALLBACK_ORDER = ("literal", "hybrid", "vector")
# How many query variants a caller may add to a lexical search; guidance announces the same number.
MAX_QUERY_VARIANTS: Final = 2
MAX_CHARACTER_BUDGET = 6000

MAX_FOLDER_CARDS = 8
MAX_FOLDER_TERMS = 8
MAX_PAGE_CARDS = 12
MAX_CARD_HEADINGS = 8
MAX_HEADING_CHARS = 160
MAX_PAGE_TERMS = 12
MAX_TERM_CHARS = 120
MAX_CARD_IDENTIFIERS = 8
MAX_IDENTIFIER_CHARS = 240
MAX_PAGE_ID_CHARS = 512
MAX_TITLE_CHARS = 240
MAX_EXCERPT_CHARS = 240
MAX_SUGGESTED_TERMS = 16
MAX_EXACT_IDENTIFIERS = 16
MAX_PATH_CHARS = 1024
MAX_FALLBACK_MODE_CHARS = 16

_DRIVE = re.compile(r"^[A-Za-z]:")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _unique(items: list[str]) -> list[str]:
    if len({unicodedata.normalize("NFC", item).lower() for item in items}) != len(items):
        raise PydanticCustomError("guidance_unique", "items must be unique.")
    return items


def _relative(path: str) -> str:
    if (path.startswith(("/", "\\")) or "\\" in path or _DRIVE.match(path) or _SCHEME.match(path)
            or ".." in path.split("/")):
        raise PydanticCustomError("guidance_path", "must be a source-relative path.")
    return path


def _in_order(modes: list[str]) -> list[str]:
    if any(m not in FALLBACK_ORDER for m in modes) or modes != [m for m in FALLBACK_ORDER if m in modes]:
        raise PydanticCustomError("guidance_fallback_order",
                                  "must be a subset of literal, hybrid, vector in order.")
    return modes


def _two(value: Any) -> Any:
    # The bridge has always accepted 2.0 here (it compares with ==); it is written back as 2.
    return MAX_QUERY_VARIANTS if type(value) is float and value == MAX_QUERY_VARIANTS else value


def _text(max_chars: int) -> Trimmed:
    return Trimmed(max_chars, "guidance_text", "must be a non-empty string.",
                   "must be at most {max_length} characters.")


_UNIQUE = AfterValidator(_unique)
PageId = Annotated[str, Field(strict=True), _text(MAX_PAGE_ID_CHARS)]
Title = Annotated[str, Field(strict=True), _text(MAX_TITLE_CHARS)]
Excerpt = Annotated[str, Field(strict=True), _text(MAX_EXCERPT_CHARS)]
Heading = Annotated[str, Field(strict=True), _text(MAX_HEADING_CHARS)]
Term = Annotated[str, Field(strict=True), _text(MAX_TERM_CHARS)]
Identifier = Annotated[str, Field(strict=True), _text(MAX_IDENTIFIER_CHARS)]
SourcePath = Annotated[str, Field(strict=True), _text(MAX_PATH_CHARS), AfterValidator(_relative)]
# Checked as a short string, so a wrong item is named as it always was; the schema lists the values.
FallbackMode = Annotated[str, Field(strict=True), _text(MAX_FALLBACK_MODE_CHARS),
                         WithJsonSchema({"type": "string", "enum": list(FALLBACK_ORDER)})]


class GuidanceModel(BaseModel):
    """Snake_case names, camelCase aliases; which one an input uses is chosen per call."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                              extra="forbid")


class FolderCard(GuidanceModel):
    path: SourcePath
    page_count: Annotated[int, Field(strict=True, ge=1)]
    terms: Annotated[list[Term], Field(max_length=MAX_FOLDER_TERMS), _UNIQUE]


class PageCard(GuidanceModel):
    page_id: PageId
    title: Title
    path: SourcePath
    headings: Annotated[list[Heading], Field(max_length=MAX_CARD_HEADINGS), _UNIQUE]
    terms: Annotated[list[Term], Field(max_length=MAX_PAGE_TERMS), _UNIQUE]
    exact_identifiers: Annotated[list[Identifier], Field(max_length=MAX_CARD_IDENTIFIERS), _UNIQUE]
    excerpt: Excerpt

    def counted(self) -> list[str]:
        return [self.page_id, self.title, self.path, *self.headings, *self.terms,
                *self.exact_identifiers, self.excerpt]


class RetrievalGuidance(GuidanceModel):
    """Retrieval guidance (llmwiki.retrieval_guidance.v1): bounded, untrusted lexical search advice."""

    schema_version: Literal["llmwiki.retrieval_guidance.v1"]
    orientation_source: OrientationSource
    content_trust: Literal["untrusted_source_evidence"]
    max_query_variants: Annotated[Literal[2], BeforeValidator(_two)]
    character_budget: Annotated[int, Field(strict=True, ge=1, le=MAX_CHARACTER_BUDGET)]
    folder_cards: Annotated[list[FolderCard], Field(max_length=MAX_FOLDER_CARDS)]
    page_cards: Annotated[list[PageCard], Field(max_length=MAX_PAGE_CARDS)]
    suggested_terms: Annotated[list[Term], Field(max_length=MAX_SUGGESTED_TERMS), _UNIQUE]
    exact_identifiers: Annotated[list[Identifier], Field(max_length=MAX_EXACT_IDENTIFIERS), _UNIQUE]
    fallback_modes: Annotated[list[FallbackMode], Field(max_length=len(FALLBACK_ORDER)),
                              _UNIQUE, AfterValidator(_in_order)]

    @model_validator(mode="after")
    def _within_budget(self) -> RetrievalGuidance:
        # The budget counts code points of every string an agent reads, keys and numbers aside.
        counted = [*(s for f in self.folder_cards for s in (f.path, *f.terms)),
                   *(s for p in self.page_cards for s in p.counted()),
                   *self.suggested_terms, *self.exact_identifiers, *self.fallback_modes]
        if sum(map(len, counted)) > self.character_budget:
            raise PydanticCustomError("guidance_budget", "exceeds its characterBudget.")
        return self
