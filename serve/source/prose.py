"""Where a page's prose is - outside fenced code, inline code and HTML - and the wikilinks
and Markdown links in it. Every scan here is linear in the page size: no pattern may
backtrack over a run of one character (a page of `[` must not take quadratic time), so the
scans are str.find loops and patterns whose repeats stop at the next delimiter."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

# A line that may open or close a fence: container prefixes (blockquote and list markers, as
# in Logseq and Obsidian bullets), three or more backticks or tildes, the info string.
FENCE_LINE_RE = re.compile(
    r"^([ \t]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+|>[ \t]?)*)(`{3,}|~{3,})([^\n]*)", re.MULTILINE)
BACKTICKS_RE = re.compile(r"`+")
# A one-backtick span that stays inside its paragraph: what nearly every page has.
# No possessive quantifiers: Python 3.11 before 3.11.5 gets them wrong inside alternations. The
# two alternatives are disjoint single characters, so a failed span backtracks linearly.
SINGLE_TICK_SPAN_RE = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")
PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t]*\n")
# Elements whose content is never prose, and HTML comments.
RAW_HTML_RE = re.compile(r"<(script|style|pre|code|textarea)\b|<!--", re.IGNORECASE)
# A tag's attributes stop at the next '<' or '>', so a run of '<' costs one step each.
HTML_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:[ \t\n/][^<>]*)?>")
RAW_CLOSERS = {name: re.compile(rf"</{name}\s*>", re.IGNORECASE)
               for name in ("script", "style", "pre", "code", "textarea")}
RAW_CLOSERS["!--"] = re.compile("-->")
MD_ANCHOR_RE = re.compile(r"\.(?:md|org)#")


def fence_spans(body: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each fenced code block, fence lines included; an unclosed
    fence runs to the end of the page (CommonMark). A closing fence has the opening one's
    character, at least as many of them, and nothing else on its line."""
    if "```" not in body and "~~~" not in body:
        return []
    spans: list[tuple[int, int]] = []
    opened: tuple[int, str] | None = None  # (line start, fence) of the open block
    for line in FENCE_LINE_RE.finditer(body):
        prefix, fence, rest = line.groups()
        if opened is None:
            if fence[0] == "`" and "`" in rest:
                continue  # an inline code span, not a fence
            opened = (line.start(), fence)
        elif (fence[0] == opened[1][0] and len(fence) >= len(opened[1])
              and not prefix.strip(" \t>") and not rest.strip()):
            spans.append((opened[0], line.end()))
            opened = None
    if opened is not None:
        spans.append((opened[0], len(body)))
    return spans


def cut(text: str, spans: list[tuple[int, int]], filler: str) -> str:
    """`text` with each (sorted, disjoint) span replaced by `filler`."""
    if not spans:
        return text
    pieces = []
    at = 0
    for start, end in spans:
        pieces.append(text[at:start])
        pieces.append(filler)
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def code_span_spans(text: str) -> list[tuple[int, int]]:
    """Inline code spans: a run of N backticks up to the next run of exactly N in the same
    paragraph (CommonMark); a run without a partner is literal text."""
    if "`" not in text:
        return []
    if "``" not in text:  # every run is one backtick: the pattern pairs them alike
        return [m.span() for m in SINGLE_TICK_SPAN_RE.finditer(text)]
    runs = [(m.start(), m.end()) for m in BACKTICKS_RE.finditer(text)]
    breaks = [m.start() for m in PARAGRAPH_BREAK_RE.finditer(text)]
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    pointer = dict.fromkeys(by_length, 0)
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        at = pointer[end - start]
        while at < len(same) and same[at] <= index:
            at += 1
        pointer[end - start] = at
        if at < len(same):
            partner = same[at]
            paragraph_end = bisect.bisect_left(breaks, end)
            if paragraph_end == len(breaks) or breaks[paragraph_end] >= runs[partner][0]:
                spans.append((start, runs[partner][1]))
                index = partner + 1
                continue
        index += 1
    return spans


def html_spans(text: str) -> list[tuple[int, int]]:
    """HTML comments, raw elements (script, style, pre, code, textarea) and tags."""
    if "<" not in text:
        return []
    raw: list[tuple[int, int]] = []
    unclosed: set[str] = set()  # once a closer is missing after one offset, it is after all
    pos = 0
    while (opener := RAW_HTML_RE.search(text, pos)) is not None:
        name = (opener.group(1) or "!--").lower()
        closer = None if name in unclosed else RAW_CLOSERS[name].search(text, opener.end())
        if closer is None:  # the opening tag alone is masked, as a tag
            unclosed.add(name)
            pos = opener.end()
            continue
        raw.append((opener.start(), closer.end()))
        pos = closer.end()
    spans: list[tuple[int, int]] = []
    rest = 0
    for start, end in [*raw, (len(text), len(text))]:
        spans.extend(m.span() for m in HTML_TAG_RE.finditer(text, rest, start))
        if start < end:
            spans.append((start, end))
        rest = end
    return spans


def prose(body: str, fences: list[tuple[int, int]] | None = None) -> str:
    """The body without fenced code (each block becomes one line break), inline code and
    HTML (each becomes a space): the text links and tags are taken from."""
    text = cut(body, fence_spans(body) if fences is None else fences, "\n")
    text = cut(text, code_span_spans(text), " ")
    return cut(text, html_spans(text), " ")


def wikilink_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each `[[...]]` whose content has no ']' - the matches, in order, of
    the pattern \\[\\[([^\\]]*)\\]\\] - found in one pass."""
    at = text.find("[[")
    while at >= 0:
        close = text.find("]", at + 2)
        if close < 0:
            return
        if text.startswith("]]", close):
            yield at, close + 2
            at = text.find("[[", close + 2)
        else:  # every '[[' before this ']' fails on it too
            at = text.find("[[", close + 1)


def markdown_link_targets(text: str) -> list[str]:
    """The targets of `[label](target.md)` links (label without ']', target without ')',
    ending in .md or .org, optionally followed by a #fragment) - the matches, in order, of
    \\[([^\\]]+)\\]\\(([^)]+?\\.(?:md|org)(?:#[^)]*)?)\\) - found in one pass."""
    found: list[str] = []
    if "](" not in text:
        return found
    low = 0  # labels start at or after this offset
    paren = -2  # cached: the first ')' at or after some offset (monotonic)
    anchors: list[tuple[int, int]] | None = None  # (".md#" start, its '#'), for #fragments
    close = text.find("](")
    while close >= 0:
        # The leftmost candidate label start: the first '[' since the last ']'.
        bracket = text.rfind("]", low, close)
        start = text.find("[", max(low, bracket + 1), close)
        if 0 <= start < close - 1:
            if paren < close + 2:
                paren = text.find(")", close + 2)
            if paren < 0:
                break
            if anchors is None and "#" in text:
                anchors = [(m.start(), m.end() - 1) for m in MD_ANCHOR_RE.finditer(text)]
            if _is_page_target(text, close + 2, paren, anchors or []):
                found.append(text[close + 2 : paren])
                low = paren + 1
                close = text.find("](", low)
                continue
        low = close + 1
        close = text.find("](", low)
    return found


def _is_page_target(text: str, start: int, end: int, anchors: list[tuple[int, int]]) -> bool:
    """Whether text[start:end] (no ')' in it) is a .md/.org target, with an optional
    #fragment after the suffix."""
    if end - start > 3 and text.endswith(".md", start, end):
        return True
    if end - start > 4 and text.endswith(".org", start, end):
        return True
    # A '#' right after a suffix that has a non-empty name before it.
    at = bisect.bisect_left(anchors, (start + 1, -1))
    return at < len(anchors) and anchors[at][1] < end
