"""Parsing one file's text into a Page: title, id, review state, tags, links, headings, sections."""

from __future__ import annotations

import bisect
import json
import re
import sys
import zlib
from typing import Any

from serve.source import names, prose, sections
from serve.source.frontmatter import json_safe, split_frontmatter
from serve.source.page import Page, ParseOptions
from serve.source.visibility import REVIEW_STATES, approved_for_serving

# A heading is one line: '#' to '######', a space or tab, then its text; matched after a
# line break (the body gets one in front), which the engine finds at C speed.
HEADING_LINE_RE = re.compile(r"\n(#{1,6})[^\S\n]([^\n]*)")
HEADING_PREFIX_RE = re.compile(r"^#{1,6}\s+", re.MULTILINE)
# The '#' must not follow a word character or '/'; checked by hand because a leading
# look-behind makes the regex engine test it at every position of the body.
INLINE_TAG_RE = re.compile(r"#([A-Za-z0-9\uac00-\ud7a3][A-Za-z0-9\uac00-\ud7a3_./-]*)")
WORD_CHAR_RE = re.compile(r"[\w/]")
LOGSEQ_TAGS_RE = re.compile(r"^[ \t]*tags::(.*)$", re.MULTILINE | re.IGNORECASE)
URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s<>]*")
CSS_COLOUR_RE = re.compile(r"[0-9A-Fa-f]{3,4}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8}")
LOGSEQ_PRIORITIES = frozenset({"A", "B", "C"})

MAX_HEADINGS = 40
SUMMARY_CHARS = 360


def collapse(text: str) -> str:
    """Collapse every whitespace run to one space and trim."""
    return " ".join(text.split())


def strip_page_suffix(value: str) -> str:
    lower = value.lower()
    if lower.endswith(".md") or lower.endswith(".org"):
        return value[: value.rfind(".")]
    return value


def page_id_from(value: str) -> str:
    return strip_page_suffix(value.strip().replace("\\", "/"))


def string_list(value: Any) -> list[str]:
    """Frontmatter list rule: a string is one item, a list is stringified, else nothing;
    collapsed, empties dropped, de-duplicated case-insensitively (first spelling kept)."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = [str(json_safe(v)) if not isinstance(v, str) else v for v in value]
    else:
        return []
    return dedupe_casefold(collapse(item) for item in items)


def dedupe_casefold(items: Any) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if not item:
            continue
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _scalar_text(value: Any) -> str:
    """Python-str rendering of a scalar (dates as str(date), as the reference does)."""
    if value is None:
        return ""
    return collapse(str(value))


def extract_tags(frontmatter_tags: Any, text: str,
                 wikilinks: list[tuple[int, int]] | None = None) -> list[str]:
    """Frontmatter tags, then `#tag`s of the prose `text` (see prose.prose) in order, then
    Logseq `tags::` properties. Not tags: '#' after a word character or '/', inside a
    wikilink ([[#Heading]]) or a URL, a link to an anchor ([x](#part)), a heading id
    ({#id}), a CSS colour (#ccc, #1a2b3c) and a Logseq priority ([#A])."""
    inline = []
    if "#" in text:
        if wikilinks is None:
            wikilinks = list(prose.wikilink_spans(text))
        has_urls = "://" in text
        urls: list[tuple[int, int]] | None = None  # found when a tag needs them
        for match in INLINE_TAG_RE.finditer(text):
            start = match.start()
            if start and (WORD_CHAR_RE.match(text, start - 1) or text[start - 1] == "{"
                          or text.startswith("](", start - 2)):
                continue
            tag = match.group(1).rstrip(".,;:!?")
            if not any(ch.isalpha() for ch in tag) or _is_colour(tag):
                continue
            if tag in LOGSEQ_PRIORITIES and text[start - 1 : start] == "[" \
                    and text.startswith("]", match.end()):
                continue
            if wikilinks and _inside(wikilinks, start):
                continue
            if has_urls:
                if urls is None:
                    urls = [m.span() for m in URL_RE.finditer(text)]
                if _inside(urls, start):
                    continue
            inline.append(tag)
    logseq: list[str] = []
    # A multi-line `^` regex tries every offset; most bodies have no "::" at all.
    for match in LOGSEQ_TAGS_RE.finditer(text) if "::" in text else ():
        logseq.extend(part.strip("#") for part in match.group(1).replace(",", " ").split())
    items = [*string_list(frontmatter_tags), *inline, *logseq]
    return dedupe_casefold(collapse(t.lstrip("#")) for t in items)


def _is_colour(tag: str) -> bool:
    """#ccc or #e5e5e5: hex of a colour's length with a digit or one repeated letter
    (#bad and #cafe stay tags)."""
    return (CSS_COLOUR_RE.fullmatch(tag) is not None
            and (any(ch.isdigit() for ch in tag) or len(set(tag.lower())) == 1))


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    index = bisect.bisect_right(spans, (at, sys.maxsize)) - 1
    return index >= 0 and spans[index][0] <= at < spans[index][1]


DENDRON_VAULT_RE = re.compile(r"dendron://[^/]*/")
BLOCK_REF_RE = re.compile(r"\^[A-Za-z0-9-]+$")


def normalize_link(target: str) -> str:
    """A link's page: without its `#heading` or `^block`, suffix and leading `./`; a
    Dendron cross-vault link `dendron://<vault>/<note>` names the note."""
    target = target.split("#", 1)[0].strip().replace("\\", "/")
    if "^" in target:
        target = BLOCK_REF_RE.sub("", target).rstrip()
    if target.startswith("dendron://"):
        target = DENDRON_VAULT_RE.sub("", target, count=1)
    target = strip_page_suffix(target)
    if target.startswith("./"):
        target = target[2:]
    return target


def wikilink_target(content: str, *, alias_target_last: bool) -> str:
    """The target of a wikilink's inner text (`target|label`, Dendron `label|target`)."""
    if "|" in content:
        content = content.rpartition("|")[2] if alias_target_last else content.partition("|")[0]
    return normalize_link(content)


def extract_links(text: str, *, alias_target_last: bool,
                  wikilinks: list[tuple[int, int]] | None = None,
                  properties: list[str] | None = None) -> list[str]:
    """Wikilink targets, then Markdown .md/.org link targets, of the prose `text`, then
    the wikilinks of frontmatter properties (names.property_links)."""
    found: list[str] = []
    for start, end in prose.wikilink_spans(text) if wikilinks is None else wikilinks:
        found.append(wikilink_target(text[start + 2 : end - 2], alias_target_last=alias_target_last))
    for target in prose.markdown_link_targets(text):
        found.append(normalize_link(target))
    for content in properties or ():
        found.append(wikilink_target(content, alias_target_last=alias_target_last))
    return dedupe_casefold(found)


def headings_of(body: str, fences: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """(text, level, offset) of each heading line outside fenced code, in order."""
    found: list[tuple[str, int, int]] = []
    fence_at = 0
    if "#" not in body:
        return found
    for hit in HEADING_LINE_RE.finditer("\n" + body):
        start = hit.start()  # the line's offset in the body
        while fence_at < len(fences) and fences[fence_at][1] <= start:
            fence_at += 1
        if fence_at < len(fences) and fences[fence_at][0] <= start:
            continue
        text = collapse(hit.group(2))
        if text:
            found.append((text, len(hit.group(1)), start))
    return found


def summarize(body: str) -> str:
    # Only the start of the body can reach the summary; work on a growing prefix that ends
    # at a line break, so heading markers and whitespace runs are handled as in the whole
    # (the first line break after SUMMARY_CHARS is usually far enough already).
    size = SUMMARY_CHARS
    while True:
        cut = body.find("\n", size)
        head = body if cut < 0 else body[:cut]
        summary = collapse(HEADING_PREFIX_RE.sub("", head))
        if cut < 0 or len(summary) > SUMMARY_CHARS:
            break
        size *= 4
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "..."
    return summary


def review_state_of(frontmatter: dict[str, Any]) -> str:
    raw = frontmatter.get("review_state") or frontmatter.get("state")
    value = _scalar_text(raw).lower()
    return value if value in REVIEW_STATES else "unknown"


_intern = sys.intern


def _interned(values: list[str]) -> tuple[str, ...]:
    return tuple(map(_intern, values))


def parse_page(text: str, path: str, options: ParseOptions, *, degraded: str = "",
               role: str = "topic") -> Page:
    """Parse one file's text (already decoded) into a Page.

    The strings pages repeat (role, states, tags, refs, link targets) are interned: tens of
    thousands of pages otherwise hold separate copies of the same few words, and marshal
    keeps the interning when records travel from parse workers or the restart cache."""
    split = split_frontmatter(text)
    fm = split.data
    if split.broken and not degraded:
        degraded = "frontmatter_invalid"
    body = split.body
    body_stripped = body.strip()

    # Headings with their file line numbers (raw origins for citations).
    line_count = text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0
    fences = prose.fence_spans(body)
    raw_headings: list[tuple[str, int, int]] = []  # (text, level, line)
    offsets: list[int] = []
    line = split.body_line
    pos = 0
    for heading, level, offset in headings_of(body, fences):
        line += body.count("\n", pos, offset)
        pos = offset
        raw_headings.append((heading, level, line))
        offsets.append(offset)
    headings = tuple(h[0] for h in raw_headings[:MAX_HEADINGS])
    section_lines = _section_lines(raw_headings, line_count)

    stem = path.rsplit("/", 1)[-1]
    stem = stem[: stem.rfind(".")] if "." in stem else stem
    rule = options.titles or (names.TITLE_LOGSEQ if options.logseq_titles else names.TITLE_HEADING)
    properties = names.page_properties(body) if rule == names.TITLE_LOGSEQ else {}
    title_value = fm.get("title")
    fm_title = (collapse(str(json_safe(title_value))) or None
                if title_value not in (None, "") else None)
    title = names.title_of(rule, fm_title, properties, raw_headings, stem)
    if raw_headings and raw_headings[0][0] == title:
        title = raw_headings[0][0]  # the same text, often: keep one string
    aliases = dedupe_casefold(a for a in names.aliases_of(fm, properties) if a != title)

    raw_id = fm.get("id")
    if raw_id in (None, ""):
        raw_id = fm.get("object_id")
    page_id = page_id_from(str(json_safe(raw_id)) if raw_id not in (None, "") else path)

    review_state = review_state_of(fm)
    status = _scalar_text(fm.get("status"))
    refs_value = fm.get("source_refs")
    if not refs_value:
        refs_value = fm.get("sources")
    source_refs = string_list(refs_value)
    updated = fm.get("updated_at")
    if updated in (None, ""):
        updated = fm.get("last_updated")
    description = fm.get("description")
    safe_fm = json_safe(fm)
    # Links need a '[[' or '](', tags a '#' before a letter or digit, Logseq tags a '::': a
    # body with none of them has nothing in its prose to find.
    if ("[[" in body or "](" in body or "::" in body
            or ("#" in body and INLINE_TAG_RE.search(body))):
        prose_text = prose.prose(body, fences)
        wikilinks = list(prose.wikilink_spans(prose_text))
    else:
        prose_text, wikilinks = "", []

    return Page(
        id=page_id,
        title=title,
        path=path,
        role=_intern(role),
        text_z=compress_text(body_stripped),
        summary=summarize(body),
        frontmatter_json=json.dumps(safe_fm, ensure_ascii=False, separators=(",", ":")),
        review_state=_intern(review_state),
        status=_intern(status),
        source_refs=_interned(source_refs),
        tags=_interned(extract_tags(fm.get("tags"), prose_text, wikilinks)),
        links=_interned(extract_links(prose_text, alias_target_last=options.alias_target_last,
                                      wikilinks=wikilinks, properties=names.property_links(fm))),
        headings=headings,
        updated_at=_scalar_text(updated),
        approved=approved_for_serving(fm, review_state, status),
        line_count=line_count,
        body_line=split.body_line,
        section_lines=section_lines,
        wiki_title=_scalar_text(fm.get("wiki_title")),
        description=str(json_safe(description)) if description else "",
        degraded=degraded,
        aliases=_interned(aliases),
        section_table=sections.section_table(text, body, split.body_line, raw_headings, offsets),
    )


def compress_text(text: str) -> bytes:
    """A zlib stream of the text, Huffman-coded only: 40 % faster to build than the fastest
    LZ level, for texts about a fifth larger (Markdown prose has few long repeats)."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 15, 8, zlib.Z_HUFFMAN_ONLY)
    return packer.compress(text.encode("utf-8")) + packer.flush()


def _section_lines(headings: list[tuple[str, int, int]], line_count: int) -> tuple[int, ...]:
    """(level, start, end) for the first MAX_HEADINGS headings, flattened. A heading's
    section runs until the next heading (of all of them) of the same or a higher level."""
    out: list[int] = []
    for i, (_, level, start) in enumerate(headings[:MAX_HEADINGS]):
        end = line_count
        for _, other_level, other_start in headings[i + 1 :]:
            if other_level <= level:
                end = other_start - 1
                break
        out += (level, start, max(start, end))
    return tuple(out)
