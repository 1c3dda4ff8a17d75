"""The filter rules (issue 27; docs/context-packs.md "Filters"): which pages a `filters` object
admits, by tags, path, kind and date. common/filters.py checks what a request may send; this
module says what each key means for one page."""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from common.filters import FilterError, Filters, parse_filters, tag_key
from serve.errors import UserError
from serve.source.page import Page, tags_and_frontmatter_of

ORIENTATION_ROLES = frozenset({"hot", "index", "overview"})
JOURNAL_SEGMENTS = frozenset({"journal", "daily"})
# The frontmatter fields a page's date comes from, first found first.
DATE_FIELDS = ("updated_at", "last_updated", "updated", "modified", "date", "created")
EPOCH_MILLIS_ABOVE = 10**11  # Dendron writes milliseconds: 10^11 s is the year 5138
_DATE_NAME = re.compile(r"(\d{4})([-_.])(\d{2})\2(\d{2})")
_ISO_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
# A page's file modification time in epoch seconds, or None when serve does not know it.
Modified = Callable[[Page], float | None]


def request_filters(value: Any) -> Filters | None:
    """A request's `filters` checked, or a UserError (HTTP 400, JSON-RPC invalid params)
    that names the key: never ignored."""
    if isinstance(value, Filters) or value is None:
        return value
    try:
        return parse_filters(value)
    except FilterError as exc:
        raise UserError(str(exc)) from None


def _day(year: str, month: str, day: str) -> date | None:
    try:
        return date(int(year), int(month), int(day))
    except ValueError:
        return None


def _stem(page: Page) -> str:
    name = page.path.rpartition("/")[2]
    return name[:-3] if name.lower().endswith(".md") else name


def _dendron_day(segments: Sequence[str]) -> date | None:
    """daily.journal.2021.01.01: the last three segments, when they are a date."""
    if len(segments) < 3:
        return None
    year, month, day = segments[-3:]
    if len(year) == 4 and len(month) == 2 and len(day) == 2 and (year + month + day).isdigit():
        return _day(year, month, day)
    return None


def journal_day(page: Page, adapter: str) -> tuple[bool, date | None]:
    """Whether the page is a journal (its role aside) and the date its file name gives."""
    stem = _stem(page)
    named = _DATE_NAME.fullmatch(stem)
    day = _day(named.group(1), named.group(3), named.group(4)) if named else None
    if day is not None:
        return True, day
    if adapter == "logseq" and page.path.startswith("journals/"):
        return True, None
    if adapter == "dendron":
        segments = stem.split(".")
        if JOURNAL_SEGMENTS.intersection(segments):
            return True, _dendron_day(segments)
    return False, None


def kind_of(page: Page, adapter: str) -> str:
    if page.role in ORIENTATION_ROLES:
        return "orientation"
    return "journal" if journal_day(page, adapter)[0] else "note"


def frontmatter_day(value: Any) -> date | None:
    """A date or datetime string's date; an integer's (epoch seconds, or milliseconds above
    10^11) in UTC; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > EPOCH_MILLIS_ABOVE else value
        try:
            return datetime.fromtimestamp(seconds, UTC).date()
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        found = _ISO_DAY.match(value.strip())
        return _day(*found.groups()) if found else None
    return None


def page_day(page: Page, adapter: str, modified: Modified,
             frontmatter: dict[str, Any] | None = None) -> date | None:
    """The page's date: its frontmatter's first date field that holds a date, else a journal's
    date from its file name, else the file's modification time (UTC)."""
    if frontmatter is None:
        frontmatter = page.frontmatter
    for name in DATE_FIELDS:
        if name in frontmatter and (day := frontmatter_day(frontmatter[name])) is not None:
            return day
    if page.role not in ORIENTATION_ROLES:
        journal, day = journal_day(page, adapter)
        if journal and day is not None:
            return day
    seconds = modified(page)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).date()


def _has_tag(keys: frozenset[str], wanted: str, dotted: bool) -> bool:
    """A tag or one nested under it ('feature' holds 'feature/statuses'; Dendron's 'stage'
    holds 'stage.germ')."""
    if wanted in keys:
        return True
    return any(key.startswith(wanted + "/") or (dotted and key.startswith(wanted + "."))
               for key in keys)


@dataclass(frozen=True, slots=True)
class PageFacts:
    """What the tag and date filters read of each visible page of a snapshot, made once for
    all of them (pages left in the store are read in one pass, not each whole): tag keys
    (one shared empty set for the many pages without tags) and days as ordinals (0: none)."""

    tags: list[frozenset[str]]
    days: array[int]

    @classmethod
    def of(cls, pages: Sequence[Page], adapter: str, modified: Modified) -> PageFacts:
        tags: list[frozenset[str]] = []
        days = array("l")
        for page, (page_tags, frontmatter) in zip(pages, tags_and_frontmatter_of(pages), strict=True):
            tags.append(frozenset(tag_key(tag) for tag in page_tags) if page_tags else NO_TAGS)
            day = page_day(page, adapter, modified, frontmatter)
            days.append(day.toordinal() if day is not None else 0)
        return cls(tags, days)


NO_TAGS: frozenset[str] = frozenset()


class PageFilter:
    """One request's filters over one snapshot's pages: cheap keys (path, kind) first, then the
    ones that read a page's tags or frontmatter."""

    def __init__(self, filters: Filters, adapter: str, modified: Modified) -> None:
        self.filters = filters
        self.adapter = adapter
        self.modified = modified

    @property
    def reads_pages(self) -> bool:
        """Whether the filters read tags or dates (PageFacts), not only paths and kinds."""
        f = self.filters
        return any(v is not None for v in (f.tags_any, f.tags_all, f.date_from, f.date_to))

    def admits(self, page: Page, facts: PageFacts | None = None, at: int = 0) -> bool:
        """Whether the filters admit `page`; its tags and date from `facts` (its position
        `at` there), made for the page alone when not given."""
        f = self.filters
        if facts is None and self.reads_pages:
            facts, at = PageFacts.of((page,), self.adapter, self.modified), 0
        if f.path_prefix is not None and not page.path.startswith(f.path_prefix):
            return False
        if f.kinds is not None and kind_of(page, self.adapter) not in f.kinds:
            return False
        if f.tags_any is not None or f.tags_all is not None:
            assert facts is not None  # (reads_pages)
            keys = facts.tags[at]
            dotted = self.adapter == "dendron"
            if f.tags_any is not None and not any(_has_tag(keys, t, dotted) for t in f.tags_any):
                return False
            if f.tags_all is not None and not all(_has_tag(keys, t, dotted) for t in f.tags_all):
                return False
        if f.date_from is not None or f.date_to is not None:
            assert facts is not None  # (reads_pages)
            day = date.fromordinal(facts.days[at]) if facts.days[at] else None
            if day is None:
                return False  # no date known: a date range cannot admit it
            if f.date_from is not None and day < f.date_from:
                return False
            if f.date_to is not None and day > f.date_to:
                return False
        return True
