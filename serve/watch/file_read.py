"""Reading one tracked file: its digest, its bytes when small enough, its parse."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from serve.graph.model import Fragment, page_fragment
from serve.source import okf, sections
from serve.source.page import Page, ParseOptions
from serve.source.parse import parse_page
from serve.source.reading import FileChanging, NotRegularFile, TooLarge, read_regular
from serve.source.sidecar import SidecarEdge, parse_sidecar

# rel, path, page path, options, size limit, digest already known (skip parsing if equal)
# ... and the page's role, so hub pages keep one Page object across snapshots.
ReadJob = tuple[str, str, str | None, ParseOptions, int, str, str]

CONFIG_TEXT_FILES = frozenset({"dendron.yml", ".vscode/extensions.json"})
CHANGING = "changing"  # the problem code of a file that was being written during every read
BINARY = "binary"  # ... and of a page file holding a NUL byte


def digest_file(path: str, limit: int) -> tuple[str, bytes | None]:
    """BLAKE2b-16 and the bytes of a file of at most `limit` bytes. A larger file is never read:
    its digest is that of its size and mtime, and there are no bytes."""
    try:
        data = read_regular(path, limit)
    except TooLarge as big:
        return hashlib.blake2b(f"{big.size}:{big.mtime_ns}".encode(), digest_size=16).hexdigest(), None
    return hashlib.blake2b(data, digest_size=16).hexdigest(), data


def decode_text(data: bytes) -> tuple[str, str]:
    """UTF-8 with universal newlines; invalid bytes are replaced and reported."""
    problem = ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        problem = "not_utf8"
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, problem


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What reading one file produced (picklable: it may come from a worker process)."""

    rel: str
    digest: str
    verified_ns: int
    problem: str = ""
    skipped: bool = False
    page: Page | None = None
    fragment: Fragment | None = None
    text: str | None = None
    sidecar: tuple[SidecarEdge, ...] = ()
    options: ParseOptions | None = None


def read_file(job: ReadJob) -> ReadResult:
    """Read one tracked file: digest it and, for pages of the current layout, parse it."""
    rel, path, page_path, options, limit, known_digest, role = job
    now = time.time_ns()
    try:
        digest, data = digest_file(path, limit)
    except NotRegularFile:
        return ReadResult(rel, "", now, problem="not_regular_file", skipped=True)
    except FileChanging:  # never trusted, so read again at the next check
        return ReadResult(rel, "", 0, problem=CHANGING, skipped=True)
    except OSError:
        return ReadResult(rel, "", now, problem="unreadable", skipped=True)
    if data is None:
        return ReadResult(rel, digest, now, problem="too_large", skipped=True)
    if rel in CONFIG_TEXT_FILES:
        return ReadResult(rel, digest, now, text=decode_text(data)[0])
    if rel.rsplit("/", 1)[-1] == "graph.json":
        return ReadResult(rel, digest, now, sidecar=tuple(parse_sidecar(decode_text(data)[0])))
    if page_path is None or digest == known_digest:
        if rel == okf.MARKER:  # its head is what OKF detection reads, whatever the layout
            return ReadResult(rel, digest, now, text=okf.marker_head(decode_text(data)[0]))
        return ReadResult(rel, digest, now)
    if b"\0" in data:
        # No text file holds a NUL byte: a binary one with a page's name, such as the
        # AppleDouble "._<name>.md" a Mac leaves on shared and removable volumes.
        return ReadResult(rel, digest, now, problem=BINARY, skipped=True)
    text, problem = decode_text(data)
    parse = okf.parse_okf_page if options.okf else parse_page
    page = parse(text, page_path, options, degraded=problem, role=role)
    # Section hashes are of the bytes on disk: redone when decoding changed them.
    if page.packed_sections and (problem or b"\r" in data or data.startswith(b"\xef\xbb\xbf")):
        page = page._replace(section_table=sections.rehash(page.packed_sections, data))
    return ReadResult(rel, digest, now, problem=page.degraded, page=page,
                      fragment=page_fragment(page), options=options,
                      text=okf.marker_head(text) if rel == okf.MARKER else None)
