"""What the mirror knows about each tracked file, and its codec (builtins only, for marshal)."""

from __future__ import annotations

from typing import Any, NamedTuple

from serve.graph.model import Fragment, shared_strings
from serve.source.page import Page, ParseOptions
from serve.source.sidecar import SidecarEdge
from serve.source.tree import FileStat
from serve.watch.file_read import ReadResult

# A file whose ctime is this close to when it was verified may still change without a
# visible stat difference (coarse timestamps); such records are re-read, never trusted.
RACY_WINDOW_NS = 2_000_000_000
_new = tuple.__new__


class FileRecord(NamedTuple):
    """What the mirror knows about one tracked file (a tuple: restored in bulk at start)."""

    stat: FileStat
    digest: str
    verified_ns: int  # wall clock when the bytes were last read
    page: Page | None = None
    fragment: Fragment | None = None
    parse_key: tuple[str, ParseOptions] | None = None
    text: str | None = None  # small config files kept for detection
    sidecar: tuple[SidecarEdge, ...] = ()
    problem: str = ""  # reason code when skipped or degraded
    skipped: bool = False

    def trusted_for(self, st: FileStat) -> bool:
        """Equal stat and not racily fresh: the bytes cannot have changed since reading."""
        return st == self.stat and st.ctime_ns + RACY_WINDOW_NS < self.verified_ns


def encode_record(record: FileRecord) -> tuple[Any, ...]:
    """A record as builtin values only (marshal-able; nothing can run when it is loaded)."""
    parse_key = None
    if record.parse_key is not None:
        parse_key = (record.parse_key[0], tuple(record.parse_key[1]))
    # Field order is FileRecord's; decode_record rebuilds it positionally.
    return (
        tuple(record.stat), record.digest, record.verified_ns,
        tuple(record.page) if record.page is not None else None,
        tuple(record.fragment) if record.fragment is not None else None, parse_key,
        record.text, tuple(tuple(e) for e in record.sidecar), record.problem, record.skipped,
    )


# One ParseOptions per distinct value: every record parsed for a layout shares it.
_options: dict[tuple[bool, ...], ParseOptions] = {}


def _fields(raw: Any, kind: type[tuple[Any, ...]]) -> Any:
    """`raw` when it has exactly the fields of the named tuple `kind` (a cache record that does
    not would fail later, far from here)."""
    if not isinstance(raw, tuple) or len(raw) != len(kind._fields):  # type: ignore[attr-defined]
        raise ValueError(f"a cached {kind.__name__} has the wrong shape")
    return raw


def decode_record(raw: tuple[Any, ...]) -> FileRecord:
    stat, digest, verified_ns, flat_page, fragment, parse_key, text, sidecar, problem, skipped = (
        _fields(raw, FileRecord))
    _fields(stat, FileStat)
    if flat_page is not None:
        _fields(flat_page, Page)
    if fragment is not None:
        _fields(fragment, Fragment)
    for edge in sidecar:
        _fields(edge, SidecarEdge)
    # No interning here: parse_page and record_from interned the strings pages repeat, and
    # marshal keeps that, so loading shares them again at C speed.
    if parse_key is not None:
        options = _options.get(parse_key[1])
        if options is None:
            options = _options[parse_key[1]] = _new(ParseOptions, parse_key[1])
        parse_key = (parse_key[0], options)
    return _new(FileRecord, (
        _new(FileStat, stat), digest, verified_ns,
        _new(Page, flat_page) if flat_page is not None else None,
        _new(Fragment, fragment) if fragment is not None else None,
        parse_key, text, tuple(_new(SidecarEdge, e) for e in sidecar) if sidecar else (),
        problem, skipped,
    ))


def record_from(result: ReadResult, st: FileStat) -> FileRecord:
    parse_key = None
    page, fragment = result.page, result.fragment
    if page is not None and result.options is not None:
        parse_key = (page.path, result.options)
    if page is not None and fragment is not None:
        fragment = shared_strings(fragment)
    return _new(FileRecord, (st, result.digest, result.verified_ns, page, fragment, parse_key,
                             result.text, result.sidecar, result.problem, result.skipped))
