"""A search result's item: its snippet, the section it cites, the fields a request keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.limits import SNIPPET_CHARS
from serve.retrieval.passage import ITEM_KEYS, locate, without_repeated_passage
from serve.source.page import Page
from serve.source.parse import collapse

DEFAULT_SNIPPET_CHARS = 280


def snippet_size(limit: int | None) -> int:
    """The snippet length a request's snippet_chars asks for."""
    return DEFAULT_SNIPPET_CHARS if limit is None else SNIPPET_CHARS.clamp(limit)


def snippet(page: Page, needles: Sequence[str], limit: int | None, *, literal: str = "",
            text: str | None = None, lowered: str | None = None) -> str:
    """A window of the page around the first hit, whitespace-collapsed, at most `limit`
    (`text`, `lowered`: the page's text and text.lower() when the caller has them already)."""
    size = snippet_size(limit)
    if size == 0:
        return ""
    base = (page.text if text is None else text) or page.summary
    if literal:
        lowered = base.casefold()
    elif lowered is None or base is not text:
        lowered = base.lower()
    positions = []
    if literal:
        found = lowered.find(literal)
        if found >= 0:
            positions.append(found)
    else:
        for needle in needles:
            found = lowered.find(needle)
            if found >= 0:
                positions.append(found)
    if positions:
        start = max(0, min(positions) - 100)
        if start:  # start at a word boundary rather than mid-word
            space = base.rfind(" ", max(0, start - 24), start)
            start = space + 1 if space >= 0 else start
        window = base[start : start + size + 100]
    else:
        window = base[: size * 2 + 64]
    text = collapse(window)
    if len(text) <= size:
        return text
    return text[: size - 1].rstrip() + "..."


def result(page: Page, score: float, route: str, snippet_text: str) -> dict[str, Any]:
    return {"page_id": page.id, "title": page.title, "path": page.path, "score": score,
            "snippet": snippet_text, "role": page.role, "source_refs": list(page.source_refs),
            "route": route}


def section_item(page: Page, score: float, route: str, needles: Sequence[str],
                 snippet_chars: int | None, *, source_id: str, bundle_id: str,
                 page_root: str = "", literal: str = "",
                 fields: Sequence[str] | None = None) -> dict[str, Any]:
    """A result with the section it cites: the page fields (the page-level snippet as the
    contract has it), then section, origin, matched_fields and passage (passage.locate).
    With `fields`, what project_fields() would drop is not made (a snippet left out is "")."""
    wanted = None if fields is None else set(fields)
    with_snippet = wanted is None or "snippet" in wanted
    with_section = wanted is None or not wanted.isdisjoint(ITEM_KEYS)
    text = page.text if with_snippet or with_section else ""  # one decompression for both
    lowered = text.lower() if with_section and not literal else None  # and one lower-casing
    item = result(page, score, route, snippet(page, needles, snippet_chars, literal=literal,
                                              text=text, lowered=lowered) if with_snippet else "")
    if with_section:
        item.update(locate(page, (literal,) if literal else needles, snippet_size(snippet_chars),
                           source_id=source_id, bundle_id=bundle_id, page_root=page_root,
                           text=text, lowered=lowered))
    return item


def project_fields(item: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """Keep the requested fields in canonical order; page_id always stays. A passage its
    snippet holds is left out (passage.without_repeated_passage)."""
    if fields is not None:
        wanted = set(fields) | {"page_id"}
        item = {k: v for k, v in item.items() if k in wanted}
    return without_repeated_passage(item)
