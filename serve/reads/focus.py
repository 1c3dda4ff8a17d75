"""Focused and budgeted page reads (contract 4.10): sections, outline, matching, scoring, clipping."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from common.limits import READ_MAX_CHARS
from common.schemas import ReadOptions as ReadOptions  # its home: the request shapes
from serve.retrieval.passage import file_path
from serve.source import sections as S
from serve.source.handles import section_handle
from serve.source.page import Page

FOCUSED_DEFAULT_MAX_CHARS = 8000
MAX_QUERY_SECTIONS = 6
CLIP_NEWLINE_SHARE = 0.6
SEPARATOR = "\n\n"
PREAMBLE = "(preamble)"
# Longest first, so 에서는 is stripped whole rather than as 는.
KOREAN_PARTICLES = tuple(sorted(
    ("에서는", "으로는", "에서", "으로", "에게", "까지", "부터", "처럼", "보다", "이란", "라는", "이다",
     "입니다", "은", "는", "이", "가", "을", "를", "의", "에", "로", "와", "과", "도", "만", "란"),
    key=len, reverse=True))

# Closing '#'s count only after a space or tab (CommonMark), so `C#` keeps its '#'.
HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
SECTION_NUMBER_RE = re.compile(r"\d+(?:\.\d+)*")
WORD_RE = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class TextSection:
    """One section of a page body: a heading's own text up to the next heading of any level."""

    index: str  # "0" for the preamble, else hierarchical: "1", "1.2", ...
    heading: str
    path: tuple[str, ...]  # headings of the ancestors and of the section itself
    start: int  # offsets into the body; `end` excludes trailing whitespace
    end: int
    text: str  # the heading line and what follows it
    body: str  # the text after the heading line

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def label(self) -> str:
        return f"{self.index} {self.heading} ({self.chars})"


def fold(text: str) -> str:
    """The case-insensitive comparison form (NFKC, case-folded)."""
    return unicodedata.normalize("NFKC", text).casefold()


def clamp_max_chars(value: int) -> int:
    return READ_MAX_CHARS.clamp(value)


# -- sections ---------------------------------------------------------------------------


def heading_lines(body: str) -> list[tuple[int, int, str]]:
    """(offset, level, heading) of each ATX heading line outside fenced code blocks."""
    found: list[tuple[int, int, str]] = []
    fence = ""  # the opening marker of the fence we are inside, if any
    offset = 0
    for line in body.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        marker = FENCE_RE.match(content)
        if fence:
            # A fence closes with the same character, at least as long, and nothing after.
            if (marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence)
                    and not content[marker.end():].strip()):
                fence = ""
        elif marker:
            fence = marker.group(1)
        else:
            heading = HEADING_RE.match(content)
            if heading is not None:
                found.append((offset, len(heading.group(1)), " ".join(heading.group(2).split())))
        offset += len(line)
    return found


def split_sections(body: str) -> list[TextSection]:
    """The body's sections in document order, numbered by heading nesting."""
    heads = heading_lines(body)
    sections: list[TextSection] = []
    first = heads[0][0] if heads else len(body)
    preamble = body[:first]
    if preamble.strip():
        start = len(preamble) - len(preamble.lstrip())
        text = preamble.strip()
        sections.append(TextSection("0", PREAMBLE, (), start, start + len(text), text, text))
    stack: list[tuple[int, str, tuple[str, ...]]] = []  # (level, index, path) of open ancestors
    children: dict[str, int] = {}
    for n, (offset, level, heading) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        parent, parent_path = (stack[-1][1], stack[-1][2]) if stack else ("", ())
        children[parent] = children.get(parent, 0) + 1
        index = f"{parent}.{children[parent]}" if parent else str(children[parent])
        path = (*parent_path, heading)
        stack.append((level, index, path))
        stop = heads[n + 1][0] if n + 1 < len(heads) else len(body)
        text = body[offset:stop].rstrip()
        _, _, rest = text.partition("\n")
        sections.append(TextSection(index, heading, path, offset, offset + len(text), text,
                                    rest.strip()))
    return sections


def outline(sections: Sequence[TextSection]) -> list[str]:
    return [s.label for s in sections]


def descendants(sections: Sequence[TextSection], parent: TextSection) -> list[TextSection]:
    prefix = parent.index + "."
    return [s for s in sections if s.index.startswith(prefix)]


def match_sections(sections: Sequence[TextSection],
                   specs: Sequence[str]) -> tuple[list[TextSection], list[str]]:
    """Sections named by the specs (with their descendants), and the specs matching none."""
    chosen: list[TextSection] = []
    unmatched: list[str] = []
    for spec in specs:
        hits = _match_spec(sections, spec)
        if not hits:
            unmatched.append(spec)
        for hit in hits:
            for section in (hit, *descendants(sections, hit)):
                if section not in chosen:
                    chosen.append(section)
    return chosen, unmatched


def _match_spec(sections: Sequence[TextSection], spec: str) -> list[TextSection]:
    wanted = " ".join(spec.strip().lstrip("#").split())
    if not wanted:
        return []
    if SECTION_NUMBER_RE.fullmatch(wanted):
        numbered = [s for s in sections if s.index == wanted]
        if numbered:
            return numbered
    key = fold(wanted)
    exact = [s for s in sections if fold(s.heading) == key]
    return exact or [s for s in sections if key in fold(s.heading)]


# -- query scoring ----------------------------------------------------------------------


def strip_particle(term: str) -> str:
    for particle in KOREAN_PARTICLES:
        if term.endswith(particle) and len(term) - len(particle) >= 2:
            return term[: -len(particle)]
    return term


def is_hangul(term: str) -> bool:
    return all("\uac00" <= ch <= "\ud7a3" for ch in term)


def query_terms(query: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each query term with its character bigrams (Hangul terms longer than 2 chars only)."""
    terms: list[str] = []
    for token in WORD_RE.findall(fold(query)):
        term = strip_particle(token)
        if len(term) >= 2 and term not in terms:
            terms.append(term)
    out: list[tuple[str, tuple[str, ...]]] = []
    for term in terms:
        grams: tuple[str, ...] = ()
        if len(term) > 2 and is_hangul(term):
            grams = tuple(dict.fromkeys(term[i:i + 2] for i in range(len(term) - 1)))
        out.append((term, grams))
    return out


def score_sections(sections: Sequence[TextSection], query: str) -> list[float]:
    """The contract's section score for each section, rounded to 3 decimals."""
    terms = query_terms(query)
    heads = [fold("\n".join(s.path)) for s in sections]
    bodies = [fold(s.body) for s in sections]
    count = len(sections)
    weights: dict[str, float] = {}

    def weight(term: str) -> float:
        if term not in weights:
            df = sum(1 for h, b in zip(heads, bodies, strict=True) if term in h or term in b)
            weights[term] = max(math.log((count + 1) / (df + 1)), 0.1)
        return weights[term]

    scores: list[float] = []
    for head, body in zip(heads, bodies, strict=True):
        score = 0.0
        for term, grams in terms:
            w = weight(term)
            if term in head:
                score += 3 * w
            hits = body.count(term)
            if hits:
                score += w * (1 + 0.25 * min(hits - 1, 4))
            for gram in grams:
                share = weight(gram) / len(grams)
                score += share * (1.5 * (gram in head) + (gram in body))
        scores.append(round(score, 3))
    return scores


def select_by_score(sections: Sequence[TextSection], scores: Sequence[float]) -> list[TextSection]:
    """Sections scoring at least max(0.35 x top, 1.0), best first (ties in document order)."""
    if not scores:
        return []
    threshold = max(0.35 * max(scores), 1.0)
    ranked = sorted((i for i, s in enumerate(scores) if s >= threshold), key=lambda i: -scores[i])
    return [sections[i] for i in ranked[:MAX_QUERY_SECTIONS]]


# -- budgets ----------------------------------------------------------------------------


def clip(text: str, budget: int) -> str:
    """At most `budget` chars; ends after a newline when one lies in the last 40 %."""
    if len(text) <= budget:
        return text
    cut = text[:budget]
    newline = cut.rfind("\n")
    if newline >= 0 and newline >= CLIP_NEWLINE_SHARE * budget:
        return cut[: newline + 1]
    return cut


def plain_read(page: Page, fields: Sequence[str] | None, *, max_chars: int | None = None,
               default_max_chars: int | None = None,
               include_links: bool | None = None) -> dict[str, Any]:
    """The WikiPage payload, clipped to a budget when one applies, then projected."""
    payload = page.payload()
    if include_links is False:
        del payload["links"]
    budget = clamp_max_chars(max_chars) if max_chars is not None else default_max_chars
    extra: dict[str, Any] = {}
    text: str = payload["text"]
    if budget is not None and len(text) > budget:
        clipped = clip(text, budget)
        payload["text"] = clipped
        sections = split_sections(text)
        extra = {"truncated": True, "total_chars": len(text), "returned_chars": len(clipped),
                 "remaining_sections": [s.label for s in sections if s.end > len(clipped)]}
    if fields is not None:
        wanted = set(fields)
        payload = {k: v for k, v in payload.items() if k in wanted}
    # Truncation keys survive `fields`: a client must learn that the text is partial.
    return {**payload, **extra}


def focused_read(page: Page, options: ReadOptions) -> dict[str, Any]:
    """The focused payload: chosen sections of the page within a budget, with its outline."""
    text = page.text
    sections = split_sections(text)
    query = options.query.strip() if options.query and options.query.strip() else None
    requested, unmatched = match_sections(sections, options.sections)
    scores = score_sections(sections, query) if query is not None else []
    ranked = list(requested)
    ranked += [s for s in select_by_score(sections, scores) if s not in ranked]
    matched = bool(ranked)
    if not ranked and sections:
        ranked = [sections[0]]
    budget = (clamp_max_chars(options.max_chars) if options.max_chars is not None
              else FOCUSED_DEFAULT_MAX_CHARS)

    included: list[TextSection] = []
    pieces: dict[str, str] = {}
    remaining: list[TextSection] = []
    used = 0
    clipped = False
    for section in ranked:
        cost = section.chars + (len(SEPARATOR) if included else 0)
        if not remaining and used + cost <= budget:
            included.append(section)
            pieces[section.index] = section.text
            used += cost
        elif not included:  # the best section alone is over budget: return its start
            included.append(section)
            pieces[section.index] = clip(section.text, budget)
            used = len(pieces[section.index])
            clipped = True
        else:
            remaining.append(section)
    returned = SEPARATOR.join(pieces[s.index] for s in sections if s.index in pieces)

    score_of = {s.index: score for s, score in zip(sections, scores, strict=False)}
    selected = []
    for section in included:
        item: dict[str, Any] = {"index": section.index, "heading": section.heading,
                                "chars": section.chars}
        if query is not None:
            item["score"] = score_of.get(section.index, 0.0)
        selected.append(item)

    payload: dict[str, Any] = {
        "id": page.id, "title": page.title, "path": page.path, "role": page.role,
        "summary": page.summary, "review_state": page.review_state, "status": page.status,
        "updated_at": page.updated_at, "tags": list(page.tags), "read_mode": "focused",
    }
    if query is not None:
        payload["query"] = query
    if options.sections:
        payload["requested_sections"] = list(options.sections)
    payload.update({
        "matched": matched,
        "outline": outline(sections),
        "selected_sections": selected,
        "text": returned,
        "total_chars": len(text),
        "returned_chars": len(returned),
        "max_chars": budget,
        "truncated": clipped or bool(remaining),
        "remaining_sections": [s.label for s in remaining],
    })
    if unmatched:
        payload["unmatched_sections"] = unmatched
    if options.include_links:
        payload["links"] = list(page.links)
    return payload


def read_payload(page: Page, fields: Sequence[str] | None, options: ReadOptions,
                 default_max_chars: int | None = None) -> dict[str, Any]:
    """The payload of a visible page: focused when asked for, else plain (maybe budgeted)."""
    if options.focused:
        return focused_read(page, options)
    return plain_read(page, fields, max_chars=options.max_chars,
                      default_max_chars=default_max_chars, include_links=options.include_links)


# -- handles ----------------------------------------------------------------------------


def section_read(page: Page, anchor: str, *, source_id: str, bundle_id: str,
                 page_root: str = "") -> dict[str, Any] | None:
    """A SectionRead of the page's section with this anchor (the whole body for ""), or None
    when the page has no such section."""
    table = page.packed_sections
    sections = S.sections_of(table)

    def handle_of(section: S.Section) -> str:
        return section_handle(source_id, page.id, section.anchor)

    if anchor:
        found = [s for s in sections if s.anchor == anchor]
        if not found:
            return None
        chosen = found[0]
        text = S.section_texts(page.text, table, [chosen])[0]
        at = chosen.position
        previous = handle_of(sections[at - 1]) if at > 0 else None
        following = handle_of(sections[at + 1]) if at + 1 < len(sections) else None
        parent = next((handle_of(s) for s in reversed(sections[:at])
                       if 0 < s.level < chosen.level), handle_of(S.page_span(table)))
        listed = None
    else:
        chosen = S.page_span(table)
        text = page.text
        previous, parent = None, None
        following = handle_of(sections[0]) if sections else None
        listed = [{"handle": handle_of(s), "heading_path": s.path_text, "anchor": s.anchor}
                  for s in sections]
    payload: dict[str, Any] = {
        "handle": handle_of(chosen), "page_id": page.id, "title": page.title, "path": page.path,
        "role": page.role, "heading_path": chosen.path_text, "anchor": chosen.anchor,
        "level": chosen.level, "text": text,
        "origin": {"path": file_path(page_root, page.path), "line_start": chosen.line_start,
                   "line_end": chosen.line_end, "sha256": chosen.sha256, "bundle_id": bundle_id},
        "neighbours": {"previous": previous, "next": following, "parent": parent},
    }
    if listed is not None:
        payload["sections"] = listed
    return payload
