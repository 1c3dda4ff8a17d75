"""Evidence at the grain of a section: which section of a page matched a query, where it is
in the file, which of the page's fields matched, and the passage around the matched terms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from serve.handles import section_handle
from serve.retrieval.fields import _aliases
from serve.source import sections as S
from serve.source.page import Page, collapse

LEAD_CHARS = 60  # how much text before the first matched term a passage keeps
MAX_POSITIONS = 64  # matched-term positions a passage window is chosen among
FIELD_ORDER = ("title", "heading", "body", "tag", "path", "alias")


def matched_fields(page: Page, needles: Sequence[str], lowered_text: str) -> list[str]:
    """The page's fields holding at least one needle (lower-case terms or a case-folded
    literal phrase), in FIELD_ORDER."""
    if not needles:
        return []
    fields = {
        "title": page.title.casefold(),
        "heading": "\n".join(page.headings).casefold(),
        "body": lowered_text,
        "tag": "\n".join(page.tags).casefold(),
        "path": page.path.casefold(),
        "alias": "\n".join(_aliases(page)).casefold(),
    }
    return [name for name in FIELD_ORDER if any(n in fields[name] for n in needles)]


def best_section(sections: Sequence[S.Section], texts: Sequence[str],
                 needles: Sequence[str]) -> int:
    """The position of the section that holds the needles best: a needle in the heading path
    counts three times one in the text, rarer needles (across the page's sections) more, and
    repeats a little; the first section when none holds any."""
    if not needles or len(sections) < 2:
        return 0
    heads = [s.path_text.casefold() for s in sections]
    bodies = [t.casefold() for t in texts]
    count = len(sections)
    best, best_score = 0, 0.0
    weights = {}
    for needle in needles:
        df = sum(1 for h, b in zip(heads, bodies, strict=True) if needle in h or needle in b)
        weights[needle] = max(math.log((count + 1) / (df + 1)), 0.1) if df else 0.0
    for at, (head, body) in enumerate(zip(heads, bodies, strict=True)):
        score = 0.0
        for needle, weight in weights.items():
            if not weight:
                continue
            if needle in head:
                score += 3 * weight
            hits = body.count(needle)
            if hits:
                score += weight * (1 + 0.25 * min(hits - 1, 4))
        if score > best_score:
            best, best_score = at, score
    return best


def passage(text: str, needles: Sequence[str], size: int) -> str:
    """The window of `text` (whitespace-collapsed, at most `size` chars) that holds the most
    distinct needles, starting a little before the first of them; the text's start when it
    holds none."""
    if size <= 0:
        return ""
    lowered = text.casefold()
    if len(lowered) != len(text):  # case folding changed lengths: positions would drift
        lowered = text.lower()
    positions: list[tuple[int, str]] = []
    for needle in needles:
        at = lowered.find(needle)
        while at >= 0 and len(positions) < MAX_POSITIONS:
            positions.append((at, needle))
            at = lowered.find(needle, at + len(needle))
    start = 0
    if positions:
        positions.sort()
        best = -1
        for i, (at, _) in enumerate(positions):
            covered = {n for p, n in positions[i:] if p + len(n) <= at + size - LEAD_CHARS}
            if len(covered) > best:
                best, start = len(covered), at
        start = max(0, start - LEAD_CHARS)
        if start:  # begin at a word rather than inside one
            space = text.rfind(" ", max(0, start - 24), start)
            newline = text.rfind("\n", max(0, start - 24), start)
            start = max(space, newline) + 1 if max(space, newline) >= 0 else start
    window = collapse(text[start:start + size * 2 + 64])
    if len(window) <= size:
        return window
    return window[: size - 1].rstrip() + "..."


def file_path(page_root: str, page_path: str) -> str:
    """A page's file relative to the served folder (page paths are relative to the layout's
    page root, such as a Dendron vault)."""
    return f"{page_root}/{page_path}" if page_root else page_path


def locate(page: Page, needles: Sequence[str], size: int, *, source_id: str, bundle_id: str,
           page_root: str = "", text: str | None = None) -> dict[str, Any]:
    """The keys an evidence item adds for its page: `section`, `origin`, `matched_fields` and
    `passage` (needles: lower-case query terms, or one case-folded literal phrase)."""
    body = page.text if text is None else text
    table = page.section_table
    sections = S.sections_of(table)
    if sections:
        texts = S.section_texts(body, table, sections)
        at = best_section(sections, texts, needles)
        chosen, chosen_text = sections[at], texts[at]
    else:
        chosen, chosen_text = S.page_span(table), body
    return {
        "section": {"handle": section_handle(source_id, page.id, chosen.anchor),
                    "heading_path": chosen.path_text, "anchor": chosen.anchor},
        "origin": {"path": file_path(page_root, page.path), "line_start": chosen.line_start,
                   "line_end": chosen.line_end, "sha256": chosen.sha256, "bundle_id": bundle_id},
        "matched_fields": matched_fields(page, needles, body.casefold()),
        "passage": passage(chosen_text, needles, size),
    }
