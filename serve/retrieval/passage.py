"""Evidence at the grain of a section: which section of a page matched a query, where it is
in the file, which of the page's fields matched, and the passage around the matched terms.

An item is compact on the wire (docs/evidence.md): its `passage` is left out when the
`snippet` it is sent with already holds it (without_repeated_passage())."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from serve.retrieval.fields import page_aliases
from serve.source import sections as S
from serve.source.handles import section_handle
from serve.source.page import Page
from serve.source.parse import collapse

LEAD_CHARS = 60  # how much text before the first matched term a passage keeps
MAX_POSITIONS = 48  # matched-term positions a passage window is chosen among
FIELD_ORDER = ("title", "heading", "body", "tag", "path", "alias")
ITEM_KEYS = ("section", "origin", "matched_fields", "passage")  # what locate() adds
CUT = "..."  # how a passage or snippet cut short ends


def _lowered_fields(title: str, headings: tuple[str, ...], tags: tuple[str, ...], path: str,
                    aliases: tuple[str, ...]) -> tuple[str, str, str, str, str]:
    """A page's fields but the body, lower-cased, in FIELD_ORDER."""
    return (title.lower(), "\n".join(headings).lower(), "\n".join(tags).lower(), path.lower(),
            "\n".join(aliases).lower())


def matched_fields(page: Page, needles: Sequence[str], lowered_text: str) -> list[str]:
    """The page's fields holding at least one needle (lower-case terms or a lower-cased
    literal phrase), in FIELD_ORDER; `lowered_text`: the body, lower-cased."""
    if not needles:
        return []
    title, heading, tag, path, alias = _lowered_fields(page.title, page.headings, page.tags,
                                                       page.path, page_aliases(page))
    fields = (title, heading, lowered_text, tag, path, alias)
    return [name for name, text in zip(FIELD_ORDER, fields, strict=True)
            if any(n in text for n in needles)]


def _outline(table: tuple[Any, ...]) -> tuple[tuple[S.Section, ...], tuple[str, ...]]:
    """A page's sections and their lower-cased heading paths."""
    sections = tuple(S.sections_of(table))
    return sections, tuple(s.path_text.lower() for s in sections)


def _bounds(text: str, table: tuple[Any, ...], sections: Sequence[S.Section]) -> list[tuple[int, int]]:
    """Each section's (start, end) offsets in the page's stripped body `text`."""
    # Where each line starts, and len(text) + 1 after the last one.
    starts = list(accumulate(map(len, text.split("\n")), lambda total, n: total + n + 1, initial=0))
    base = S.page_span(table).line_start
    last = len(starts) - 1
    return [(starts[min(max(s.line_start - base, 0), last)],
             starts[min(max(s.line_end - base + 1, 0), last)] - 1) for s in sections]


def best_section(heads: Sequence[str], lowered: str, bounds: Sequence[tuple[int, int]],
                 needles: Sequence[str]) -> int:
    """The position of the section that holds the needles best: a needle in the heading path
    counts three times one in the text, rarer needles (across the page's sections) more, and
    repeats a little; the first section when none holds any."""
    count = len(bounds)
    if not needles or count < 2:
        return 0
    scores = [0.0] * count
    joined_heads = "\n".join(heads)
    for needle in needles:
        in_text, in_heads = needle in lowered, needle in joined_heads
        if not in_text and not in_heads:
            continue  # most needles of a query miss most of its evidence pages
        in_head = [needle in head for head in heads] if in_heads else [False] * count
        hits = [lowered.count(needle, a, b) for a, b in bounds] if in_text else [0] * count
        df = sum(1 for h, n in zip(in_head, hits, strict=True) if h or n)
        if not df:
            continue
        weight = max(math.log((count + 1) / (df + 1)), 0.1)
        for at in range(count):
            if in_head[at]:
                scores[at] += 3 * weight
            if hits[at]:
                scores[at] += weight * (1 + 0.25 * min(hits[at] - 1, 4))
    best = max(range(count), key=lambda at: (scores[at], -at))
    return best if scores[best] > 0 else 0


def passage(text: str, needles: Sequence[str], size: int, lowered: str | None = None) -> str:
    """The window of `text` (whitespace-collapsed, at most `size` chars) that holds the most
    distinct needles, starting a little before the first of them; the text's start when it
    holds none (`lowered`: text.lower() when the caller has it)."""
    if size <= 0:
        return ""
    if lowered is None or len(lowered) != len(text):
        lowered = text.lower()
    if len(lowered) != len(text):  # lower-casing changed lengths: positions would drift
        lowered = text
    positions: list[tuple[int, str]] = []
    for needle in needles:
        at = lowered.find(needle)
        while at >= 0 and len(positions) < MAX_POSITIONS:
            positions.append((at, needle))
            at = lowered.find(needle, at + len(needle))
    start = 0
    if positions:
        positions.sort()
        lead = min(LEAD_CHARS, size // 4)  # a short passage keeps less before its terms
        reach = size - lead
        held: dict[str, int] = {}  # needles inside the window, with their counts
        best, inside, j = -1, 0, 0
        for i, (at, _) in enumerate(positions):  # windows starting at each position
            while j < len(positions) and positions[j][0] + len(positions[j][1]) <= at + reach:
                needle = positions[j][1]
                held[needle] = held.get(needle, 0) + 1
                inside += held[needle] == 1
                j += 1
            if inside > best:
                best, start = inside, at
            if j > i:  # the window moves on past this position
                needle = positions[i][1]
                held[needle] -= 1
                inside -= held[needle] == 0
        start = max(0, start - lead)
        if start:  # begin at a word rather than inside one
            cut = max(text.rfind(" ", max(0, start - lead // 2), start),
                      text.rfind("\n", max(0, start - lead // 2), start))
            start = cut + 1 if cut >= 0 else start
    window = collapse(text[start:start + size * 2 + 64])
    if len(window) <= size:
        return window
    return window[: size - 1].rstrip() + CUT


def file_path(page_root: str, page_path: str) -> str:
    """A page's file relative to the served folder (page paths are relative to the layout's
    page root, such as a Dendron vault)."""
    return f"{page_root}/{page_path}" if page_root else page_path


def locate(page: Page, needles: Sequence[str], size: int, *, source_id: str, bundle_id: str,
           page_root: str = "", text: str | None = None, lowered: str | None = None) -> dict[str, Any]:
    """The keys an evidence item adds for its page (ITEM_KEYS: `section`, `origin`,
    `matched_fields` and `passage`); needles: lower-case query terms, or one case-folded
    literal phrase; `text` and `lowered`: the page's text and text.lower(), when the caller
    has them."""
    body = page.text if text is None else text
    table = page.packed_sections
    if lowered is None:
        lowered = body.lower()
    if len(lowered) != len(body):  # lower-casing changed lengths: offsets would drift
        lowered = body
    sections, heads = _outline(table)
    if sections:
        bounds = _bounds(body, table, sections)
        at = best_section(heads, lowered, bounds, needles)
        chosen, (start, end) = sections[at], bounds[at]
    else:
        chosen, start, end = S.page_span(table), 0, len(body)
    return {
        "section": {"handle": section_handle(source_id, page.id, chosen.anchor),
                    "heading_path": chosen.path_text, "anchor": chosen.anchor},
        "origin": {"path": file_path(page_root, page.path), "line_start": chosen.line_start,
                   "line_end": chosen.line_end, "sha256": chosen.sha256, "bundle_id": bundle_id},
        "matched_fields": matched_fields(page, needles, lowered),
        "passage": passage(body[start:end], needles, size, lowered[start:end]),
    }


def without_repeated_passage(item: dict[str, Any]) -> dict[str, Any]:
    """The item without its `passage` when its `snippet` holds it word for word (the
    passage, less the `...` of a cut one, is part of the snippet): most passages of a page's
    first sections are, and an agent reads them there. An item without a snippet (`fields`
    leaving it out) keeps its passage."""
    text, snippet = item.get("passage"), item.get("snippet")
    if text is None or snippet is None or text.removesuffix(CUT) not in snippet:
        return item
    return {key: value for key, value in item.items() if key != "passage"}
