"""The `filters` object of a search or context request (issue 27): its keys, the one parser both
services use (serve's snake_case keys, the bridge's camelCase ones), and its JSON schema.

The rules a page must meet live in serve (serve/retrieval/filters.py); here is only what a
request may say. Anything else is refused with a message naming the key, never ignored."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

from pydantic.alias_generators import to_camel

KINDS: Final = ("journal", "orientation", "note")
# What a source advertises when it takes `filters` and the query syntax (the bridge passes them
# only to sources that do).
FILTERS_CAPABILITY: Final = "llmwiki_search_filters_v1"
LISTS: Final = ("tags_any", "tags_all", "path_prefix", "kinds")
DATES: Final = ("date_from", "date_to")
# serve's spelling -> the bridge's (its retrieval intent is camelCase only, contract 3.5), by the
# alias generator its models use (common/bridge_schemas.py).
CAMEL: Final = {key: to_camel(key) for key in (*LISTS, *DATES)}
MAX_ENTRIES = 100  # entries of one list: far above what a caller narrows by
MAX_ENTRY_CHARS = 512
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

# The rules, as docs/context-packs.md states them; the schemas below carry the same words.
HELP: Final = {
    "tags_any": "The page has at least one of these tags. A tag matches case-insensitively, a "
                "leading '#' ignored, and also matches tags nested under it: 'feature' matches "
                "'feature/statuses' and (Dendron) 'stage' matches 'stage.germ'.",
    "tags_all": "The page has every one of these tags (matched as in tags_any).",
    "path_prefix": "The page's path (root-relative, '/'-separated, with '.md', as a read gives "
                   "it) starts with one of these strings: a plain, case-sensitive prefix such as "
                   "'Queries/' or, in Dendron's flat names, 'area.team.'.",
    "kinds": "One of journal, orientation, note. orientation: the page's role is hot, index or "
             "overview. journal: not orientation, and under a Logseq 'journals/' folder, or its "
             "file name is a date (YYYY-MM-DD, YYYY_MM_DD or YYYY.MM.DD), or a Dendron note "
             "whose dotted name has a 'journal' or 'daily' segment. note: every other page.",
    "date_from": "YYYY-MM-DD, inclusive, on the page's date: its frontmatter updated_at, else "
                 "last_updated, updated, modified, date or created (a date or datetime string: "
                 "its date; an integer: epoch seconds, or milliseconds above 10^11, in UTC); "
                 "else a journal's date from its file name; else the file's modification time.",
    "date_to": "YYYY-MM-DD, inclusive, on the page's date (as date_from).",
}
SUMMARY: Final = ("Narrow the pages searched; every key is optional and all given keys must hold. "
                  "Filtering happens before the limit. Unknown keys, wrong types, bad dates and "
                  "unknown kinds are refused (400), never ignored. With filters and no free "
                  "words in the query, the answer lists the admitted pages in orientation order.")
QUERY_SYNTAX: Final = ('Query syntax: "a quoted phrase" must appear in the page\'s title or body '
                       "(case-insensitive, whitespace runs as one space); -word (a word of two or "
                       "more characters, starting with a letter) leaves out pages whose title or "
                       "body has that whole word; the other words rank as usual.")


class FilterError(ValueError):
    """A `filters` object the request may not send; the message names the key (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class Filters:
    """A valid filters object: tags case-folded without their leading '#', dates parsed, every
    list non-empty. None stands for a key not given."""

    tags_any: tuple[str, ...] | None = None
    tags_all: tuple[str, ...] | None = None
    path_prefix: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    date_from: date | None = None
    date_to: date | None = None

    def wire(self, *, camel: bool = False) -> dict[str, Any]:
        """The object as a request sends it (to pass it on to another source)."""
        out: dict[str, Any] = {}
        for key in (*LISTS, *DATES):
            value = getattr(self, key)
            if value is not None:
                out[CAMEL[key] if camel else key] = (list(value) if isinstance(value, tuple)
                                                     else value.isoformat())
        return out


def _shown(value: Any) -> str:
    """A caller's value in a message: short, and only what the caller sent."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _list(raw: Any, name: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise FilterError(f"{name} must be an array of strings.")
    if not raw:
        raise FilterError(f"{name} must name at least one value (omit it to not filter by it).")
    if len(raw) > MAX_ENTRIES:
        raise FilterError(f"{name} accepts at most {MAX_ENTRIES} values.")
    if any(not item.strip() or len(item) > MAX_ENTRY_CHARS for item in raw):
        raise FilterError(f"{name} values must be non-empty strings of at most "
                          f"{MAX_ENTRY_CHARS} characters.")
    return tuple(dict.fromkeys(raw))


def tag_key(tag: str) -> str:
    """A tag as filters compare it: trimmed, one leading '#' dropped, case-folded."""
    return tag.strip().removeprefix("#").strip().casefold()


def _tags(raw: Any, name: str) -> tuple[str, ...]:
    tags = tuple(dict.fromkeys(tag_key(tag) for tag in _list(raw, name)))
    if not all(tags):
        raise FilterError(f"{name} values must name a tag, not '#' alone.")
    return tags


def _kinds(raw: Any, name: str) -> tuple[str, ...]:
    kinds = _list(raw, name)
    for kind in kinds:
        if kind not in KINDS:
            raise FilterError(f"{name} has an unknown kind {_shown(kind)}: expected journal, "
                              "orientation or note.")
    return kinds


def _day(raw: Any, name: str) -> date:
    if isinstance(raw, str) and _DAY.fullmatch(raw):
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
    raise FilterError(f"{name} must be a date written YYYY-MM-DD, not {_shown(raw)}.")


def parse_filters(value: Any, *, camel: bool = False, where: str = "filters") -> Filters | None:
    """The filters a request sent, checked; None when it sent none (absent, null or `{}`).
    `camel`: the keys are spelled as the bridge spells them (tagsAny, ...). Raises FilterError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FilterError(f"{where} must be a JSON object.")
    names = {(CAMEL[key] if camel else key): key for key in (*LISTS, *DATES)}
    unknown = [key for key in value if key not in names]
    if unknown:
        raise FilterError(f"{where} has an unknown key {_shown(unknown[0])}: expected "
                          f"{', '.join(names)}.")
    found: dict[str, Any] = {}
    for spelled, key in names.items():
        if spelled not in value:
            continue
        raw, name = value[spelled], f"{where}.{spelled}"
        if key in ("tags_any", "tags_all"):
            found[key] = _tags(raw, name)
        elif key == "kinds":
            found[key] = _kinds(raw, name)
        elif key == "path_prefix":
            found[key] = _list(raw, name)
        else:
            found[key] = _day(raw, name)
    if not found:
        return None
    start, end = found.get("date_from"), found.get("date_to")
    if start is not None and end is not None and start > end:
        spell = (lambda key: CAMEL[key]) if camel else (lambda key: key)
        raise FilterError(f"{where}.{spell('date_from')} is after {where}.{spell('date_to')}.")
    return Filters(**found)


def filters_schema(*, camel: bool = False) -> dict[str, Any]:
    """The JSON schema of the object (OpenAPI, MCP tool schemas, the bridge's intent)."""
    strings = {"type": "array", "minItems": 1, "maxItems": MAX_ENTRIES,
               "items": {"type": "string", "minLength": 1, "maxLength": MAX_ENTRY_CHARS}}
    properties: dict[str, Any] = {}
    for key in (*LISTS, *DATES):
        if key == "kinds":
            schema: dict[str, Any] = {**strings, "items": {"type": "string", "enum": list(KINDS)}}
        elif key in DATES:
            schema = {"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
        else:
            schema = dict(strings)
        properties[CAMEL[key] if camel else key] = {**schema, "description": HELP[key]}
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "description": SUMMARY}


def optional_filters_schema(*, camel: bool = False) -> dict[str, Any]:
    """The object or null (a request's optional field)."""
    schema = filters_schema(camel=camel)
    return {"anyOf": [schema, {"type": "null"}], "description": schema["description"]}
