"""One page: the Page record a file is parsed into (source/parse.py), its sections and parse options."""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any, NamedTuple, Protocol

ROLE_RANK = {"hot": 0, "index": 1, "overview": 2, "topic": 3}


class Section(NamedTuple):
    """Where one heading's section sits in the file (1-based, inclusive line numbers)."""

    heading: str
    level: int
    start_line: int
    end_line: int


class ParseOptions(NamedTuple):
    """Adapter-dependent parsing choices (part of the page cache key)."""

    alias_target_last: bool = False  # Dendron: [[Alias|target]]
    logseq_titles: bool = False  # Logseq: '___' in a file stem means '/'
    okf: bool = False  # the OKF v0.2 profile (serve/source/okf.py parses such pages)
    titles: str = ""  # the shape's title rule (names.TITLE_*); "" = by logseq_titles


class BodyRef(Protocol):
    """A page's body and section table left in the store rather than held in memory, read by
    the request that needs them (serve.store.bodies.StoredBody is the one kind)."""

    @property
    def sha1(self) -> bytes: ...  # of the compressed body, as Page.body_sha1

    def load(self) -> tuple[bytes, tuple[Any, ...]]: ...  # (text_z, section_table)


class Page(NamedTuple):
    """A parsed page. Immutable; `role` is assigned by the loader from the page's location.

    A NamedTuple (not a dataclass) because tens of thousands are built, cached and
    restored at start-up, and tuples do that at C speed."""

    id: str
    title: str
    path: str
    role: str
    # The body text, zlib-compressed (most of a large folder's memory), or, for a page read
    # back from the store, where to find it there: read it through `body_z` or `text`.
    text_z: bytes | BodyRef
    summary: str
    frontmatter_json: str  # JSON text: one object instead of a tree per page in memory
    review_state: str
    status: str
    source_refs: tuple[str, ...]
    tags: tuple[str, ...]
    links: tuple[str, ...]
    headings: tuple[str, ...]
    updated_at: str
    approved: bool
    line_count: int
    body_line: int
    # (level, start line, end line) of each heading in `headings`, flattened: one tuple per
    # page instead of a Section per heading (a large folder's pages hold 100,000s of them).
    section_lines: tuple[int, ...] = ()
    wiki_title: str = ""
    description: str = ""
    degraded: str = ""  # why the page was degraded while parsing ("" when clean)
    okf_json: str = ""  # JSON of the OKF v0.2 `okf` object ("" when not an OKF page)
    aliases: tuple[str, ...] = ()  # other names links and reads may use (names.aliases_of)
    # serve.source.sections: lines and hash per section (the store's, as text_z): `packed_sections`
    section_table: tuple[Any, ...] | BodyRef = ()

    @property
    def frontmatter(self) -> dict[str, Any]:
        """The parsed frontmatter mapping, JSON-safe (dates as ISO strings)."""
        value: dict[str, Any] = json.loads(self.frontmatter_json)
        return value

    @property
    def sections(self) -> tuple[Section, ...]:
        """Where each heading's section sits in the file (raw origins for citations)."""
        lines = self.section_lines
        return tuple(Section(heading, *lines[3 * i : 3 * i + 3])
                     for i, heading in enumerate(self.headings))

    @property
    def body_z(self) -> bytes:
        """The compressed body, read from the store when it was left there."""
        z = self.text_z
        return z if isinstance(z, bytes) else z.load()[0]

    @property
    def text(self) -> str:
        """The body (after frontmatter), stripped; raw Markdown."""
        return zlib.decompress(self.body_z).decode("utf-8")

    @property
    def packed_sections(self) -> tuple[Any, ...]:
        """The section table (serve.source.sections), read from the store when left there."""
        table = self.section_table
        return table if isinstance(table, tuple) else table.load()[1]

    @property
    def body_sha1(self) -> bytes:
        """A digest of the body, known without reading a stored body."""
        z = self.text_z
        return hashlib.sha1(z, usedforsecurity=False).digest() if isinstance(z, bytes) else z.sha1

    def payload(self) -> dict[str, Any]:
        """The read payload (WikiPage), in wire order."""
        return {
            "id": self.id,
            "title": self.title,
            "path": self.path,
            "role": self.role,
            "text": self.text,
            "summary": self.summary,
            "frontmatter": self.frontmatter,
            "review_state": self.review_state,
            "status": self.status,
            "source_refs": list(self.source_refs),
            "tags": list(self.tags),
            "links": list(self.links),
            "headings": list(self.headings),
            "updated_at": self.updated_at,
            "okf": json.loads(self.okf_json) if self.okf_json else None,
        }
