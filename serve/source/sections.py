"""A page's sections as they sit in its file: heading path, anchor, line range and hash.

A section is a heading line and what follows it up to the next heading of any level (the
text before the first heading is the preamble), without trailing blank lines. Its range is
1-based and inclusive, counted in the file as it is on disk (frontmatter included), so the
file's lines line_start..line_end are the section's text exactly; `sha256` is the hash of
those lines' bytes, each with its line break ("\\n", or "\\r\\n" as the file has it).

A Page keeps its sections packed (`Page.section_table`): the whole body first (level -1: from
its first to its last non-blank line, the lines Page.text holds), then each section, as
(level, first line, last line) int32 triples in one bytes object, their SHA-256 digests
concatenated in another, then their headings. Large folders hold 100,000s of sections: two
bytes objects per page instead of a tuple, ints and a digest object per section. A blank
body has an empty table."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

MAX_SECTIONS = 200  # past this, the last section runs to the end of the page
DIGEST = 32
PAGE_LEVEL = -1  # the table's first entry: the whole body
PREAMBLE_ANCHOR = "preamble"
PATH_SEPARATOR = " > "
CLOSING_HASHES_RE = re.compile(r"[ \t]+#+$")
# GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
ANCHOR_DROP_RE = re.compile(r"[^\w\- ]")
# An explicit heading id at the end of the line: `{#id}` (Pandoc, kramdown, Docusaurus, Hugo)
# or MDX's `{/*id*/}` (the React docs); it is the anchor and not part of the heading's text.
HEADING_ID_RE = re.compile(r"[ \t]+\{(?:#([\w.:-]+)|/\*([\w.:-]+)\*/)\}$")


class Section(NamedTuple):
    """One section of a page, as evidence and reads cite it."""

    position: int  # in document order, from 0
    heading: str  # "" for the preamble
    level: int  # 0 for the preamble
    line_start: int
    line_end: int
    sha256: str  # hex
    anchor: str
    heading_path: tuple[str, ...]  # the headings of its ancestors and its own

    @property
    def path_text(self) -> str:
        return PATH_SEPARATOR.join(self.heading_path)


def section_table(text: str, body: str, body_line: int,
                  headings: Sequence[tuple[str, int, int]], offsets: Sequence[int]) -> tuple[Any, ...]:
    """The section table of a file's decoded `text` whose body (a suffix of it) starts on
    `body_line`; `headings` are (text, level, line) of its headings outside fenced code, in
    order, and `offsets` where each heading's line starts in the body
    (serve.source.parse.headings_of)."""
    body_start = len(text) - len(body)
    lead = len(body) - len(body.lstrip())
    if lead == len(body):
        return ()
    begin = text.rfind("\n", 0, body_start + lead) + 1  # the first non-blank line
    begin_line = (body_line + body.count("\n", 0, begin - body_start) if begin >= body_start
                  else body_line)
    entries: list[tuple[str, int, int, int, bytes]] = []
    _add(entries, text, "", PAGE_LEVEL, begin, begin_line, len(text))
    starts = [(heading, level, line, body_start + offset)
              for (heading, level, line), offset in zip(headings[:MAX_SECTIONS],
                                                        offsets[:MAX_SECTIONS], strict=True)]
    first = starts[0][3] if starts else len(text)
    if text[body_start + lead:first].strip():
        _add(entries, text, "", 0, begin, begin_line, first)
    for n, (heading, level, heading_line, offset) in enumerate(starts):
        stop = starts[n + 1][3] if n + 1 < len(starts) else len(text)
        _add(entries, text, heading, level, offset, heading_line, stop)
    return pack(entries)


def _add(entries: list[tuple[str, int, int, int, bytes]], text: str, heading: str, level: int,
         begin: int, line: int, stop: int) -> None:
    """Append the section text[begin:stop] (begin at a line start, on `line`) without its
    trailing blank lines."""
    content = text[begin:stop].rstrip()
    end = begin + len(content)
    newline = text.find("\n", end)
    end = len(text) if newline < 0 else newline + 1
    entries.append((heading, level, line, line + content.count("\n"),
                    hashlib.sha256(text[begin:end].encode("utf-8", "surrogatepass")).digest()))


def pack(entries: Sequence[tuple[str, int, int, int, bytes]]) -> tuple[Any, ...]:
    """The table of (heading, level, first line, last line, SHA-256 digest) entries."""
    lines = array("i")
    for _, level, first, last, _ in entries:
        lines.extend((level, first, last))
    return (lines.tobytes(), b"".join(e[4] for e in entries), *(e[0] for e in entries))


def entries(table: tuple[Any, ...]) -> list[tuple[str, int, int, int, bytes]]:
    """The entries pack() made the table of, in order."""
    if not table:
        return []
    lines = array("i")
    lines.frombytes(table[0])
    digests = table[1]
    return [(heading, lines[3 * i], lines[3 * i + 1], lines[3 * i + 2],
             digests[DIGEST * i:DIGEST * (i + 1)]) for i, heading in enumerate(table[2:])]


def rehash(table: tuple[Any, ...], data: bytes) -> tuple[Any, ...]:
    """The table with each section's hash taken over the file's bytes rather than its decoded
    text (they differ when the file has a byte-order mark, CRLF line breaks or bytes that are
    not UTF-8). Lines are the file's "\\n"-separated ones; a file that breaks lines with a lone
    CR (numbered as decoded) keeps the hashes of its decoded text."""
    if not table:
        return table
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data.replace(b"\r\n", b""):
        return table
    lines = data.split(b"\n")
    out = []
    for heading, level, first, last, _ in entries(table):
        chunk = b"\n".join(lines[first - 1:last])
        if last < len(lines):
            chunk += b"\n"
        out.append((heading, level, first, last, hashlib.sha256(chunk).digest()))
    return pack(out)


def anchor_of(heading: str, used: set[str], explicit: str = "") -> str:
    """A heading's anchor: its explicit id when it has one, else as GitHub writes it; made
    unique with -1, -2, ... suffixes."""
    base = explicit or _github_anchor(heading) or "section"
    anchor, n = base, 0
    while anchor in used:
        n += 1
        anchor = f"{base}-{n}"
    used.add(anchor)
    return anchor


def _github_anchor(heading: str) -> str:
    return ANCHOR_DROP_RE.sub("", unicodedata.normalize("NFC", heading).lower()).replace(" ", "-")


def heading_text(heading: str) -> tuple[str, str]:
    """A heading without its closing '#'s (CommonMark: only after a space or tab) and its
    explicit id, and that id ("" when it has none)."""
    heading = CLOSING_HASHES_RE.sub("", heading)
    found = HEADING_ID_RE.search(heading)
    if found is None:
        return heading, ""
    return heading[:found.start()], found.group(1) or found.group(2)


def page_span(table: tuple[Any, ...], position: int = -1) -> Section:
    """The whole body as one span (no heading, anchor "": the page handle's)."""
    whole = entries(table[:3])
    if not whole:
        return Section(position, "", PAGE_LEVEL, 1, 0, hashlib.sha256(b"").hexdigest(), "", ())
    _, level, first, last, digest = whole[0]
    return Section(position, "", level, first, last, digest.hex(), "", ())


def sections_of(table: tuple[Any, ...]) -> list[Section]:
    """The sections of a page's table, with their anchors and heading paths."""
    found: list[Section] = []
    used: set[str] = set()
    stack: list[tuple[int, str]] = []  # (level, heading) of the open ancestors
    preamble_at = -1
    for position, (heading, level, first, last, digest) in enumerate(entries(table)[1:]):
        if level == 0:
            preamble_at = position
            found.append(Section(position, "", 0, first, last, digest.hex(), "", ()))
            continue
        heading, explicit = heading_text(heading)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        found.append(Section(position, heading, level, first, last, digest.hex(),
                             anchor_of(heading, used, explicit), tuple(h for _, h in stack)))
    if preamble_at >= 0:  # named after the headings, so theirs stay GitHub's
        found[preamble_at] = found[preamble_at]._replace(anchor=anchor_of(PREAMBLE_ANCHOR, used))
    return found


def section_texts(text: str, table: tuple[Any, ...], sections: Sequence[Section]) -> list[str]:
    """Each section's text out of the page's stripped body `text` (the file's lines, except
    that the body's first line has lost its leading whitespace and its last its trailing)."""
    lines = text.split("\n")
    base = page_span(table).line_start
    return ["\n".join(lines[max(0, s.line_start - base):max(0, s.line_end - base + 1)])
            for s in sections]
