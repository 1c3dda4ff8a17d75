"""The search index in the restart cache, beside the parsed pages, trusted only for the very
snapshot it was built from.

One file per root: checksummed sections (the page cache's framing) holding a JSON head, the
terms, raw numpy arrays whose type and shape the head names, then the snapshot's link views the
first context pack needs (JSON: who links to each page, the owner of each shared node, the link
lookup), which take about as long to compute as loading the index. The pair signatures' section,
which only literal search reads, is left in the file (unread, unchecked) until a literal search
first needs it. Nothing in it is executable (no pickle): a tampered file can only fail a check,
which makes it a miss, and the index is built again (for that section, the signatures are made
again from the pages). The head names the projection's signature (every file's path, size and
digest) and a digest of the page paths in index order: the index and the views are used as they
are only for the snapshot they were built from. For a later snapshot in which few pages changed,
each document's fingerprint (documents.fingerprint) says which pages it still stands for; the
others are dead, and the changed pages are indexed as edits are."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import structlog

from common.version import __version__
from serve.page_cache import (
    SectionRef,
    cache_key,
    read_section,
    read_sections,
    section_header,
    write_atomically,
)
from serve.retrieval.documents import fingerprint
from serve.retrieval.index import COMPACT_DEAD_SHARE, LexicalIndex, PairColumns
from serve.retrieval.pairs import SIGNATURE_BITS, PairSignatures, page_signature_columns
from serve.source.page import Page

log = structlog.get_logger("llmwiki.serve.cache")

# Bump when what the index holds for a page changes (analysis, fields, signatures).
INDEX_FORMAT = 4  # 4: approvals and fingerprints; 3: SHA-1 section checksums (page_cache)
ARRAYS = ("indptr", "main_docs", "main_tfs", "df_all", "df_approved", "doc_len", "pair_columns",
          "approved", "fingerprints")
PAIR_SECTION = 2 + ARRAYS.index("pair_columns")  # after the head and the terms
FINGERPRINT_BYTES = 16
DTYPES = frozenset({"int64", "int32", "uint16", "uint8", "float32"})
TERM_SEPARATOR = "\0"  # never part of an analysed term (see save)


def paths_digest(pages: Sequence[Page]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for page in pages:
        digest.update(page.path.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


class IndexCache:
    """The index file of one root, in the restart cache directory."""

    def __init__(self, cache_dir: Path, root: Path) -> None:
        self.path = cache_dir / f"index-{cache_key(root)}.bin"
        self.root = str(root)
        self.saved_signature = ""  # the snapshot whose index the file holds, once known
        # The snapshot last written and where its pair signatures sit in the file.
        self.written_pairs: tuple[str, SectionRef | None] | None = None

    def _base(self) -> dict[str, object]:
        return {"format": INDEX_FORMAT, "version": __version__, "root": self.root}

    def _head(self, signature: str, pages: Sequence[Page]) -> dict[str, object]:
        return {**self._base(), "signature": signature, "documents": len(pages),
                "paths": paths_digest(pages)}

    def load(self, signature: str, pages: Sequence[Page]) -> Loaded | None:
        """The index (and link views) built for the snapshot with this signature and pages, or
        for an earlier one most of whose pages it still holds (no views then, and the pages it
        lacks are to be indexed); None (logged) when the file is absent, for a snapshot too
        different, damaged or altered."""
        started = time.perf_counter()
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("index_cache_unreadable", error=type(exc).__name__)
            return None
        try:
            with handle:
                loaded = self._decode(read_sections(handle, unread={PAIR_SECTION}), signature, pages)
        except _Stale:
            log.info("index_cache_stale")
            return None
        except Exception as exc:  # damaged or altered: a miss, never served
            log.warning("index_cache_rejected", error=type(exc).__name__, reason=str(exc)[:200])
            return None
        seconds = round(time.perf_counter() - started, 3)
        if loaded.views is not None:
            self.saved_signature = signature
            log.info("index_cache_loaded", documents=len(pages), terms=len(loaded.index.vocab),
                     seconds=seconds)
        else:
            log.info("index_cache_reused", documents=len(pages), kept=loaded.index.n_all,
                     dead=loaded.index.dead, to_index=len(loaded.missing), seconds=seconds)
        return loaded

    def _decode(self, parts: Iterator[bytearray | SectionRef | None], signature: str,
                pages: Sequence[Page]) -> Loaded:
        head_bytes = next(parts, None)
        if not isinstance(head_bytes, bytearray):
            raise ValueError("the head is missing or fails its checksum")
        head = json.loads(bytes(head_bytes))
        if not isinstance(head, dict) or any(head.get(k) != v for k, v in self._base().items()):
            raise _Stale
        exact = all(head.get(k) == v for k, v in self._head(signature, pages).items())
        shapes = head.get("arrays")
        if not isinstance(shapes, dict) or set(shapes) != set(ARRAYS):
            raise ValueError("the head does not list the arrays")
        terms_bytes = next(parts, None)
        if not isinstance(terms_bytes, bytearray):
            raise ValueError("the terms fail their checksum")
        text = terms_bytes.decode("utf-8", "surrogatepass")
        del terms_bytes
        terms = text.split(TERM_SEPARATOR) if text else []
        del text
        arrays: dict[str, np.ndarray] = {}
        pairs: SectionRef | None = None
        for name in ARRAYS:
            payload = next(parts, None)
            dtype, shape = shapes[name]
            if dtype not in DTYPES or not isinstance(shape, list) or not all(
                    isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(f"{name} has an unknown type or shape")
            if name == "pair_columns" and isinstance(payload, SectionRef):
                # Left in the file, its checksum unchecked until a literal search reads it.
                if dtype != "uint8" or payload.length != math.prod(shape):
                    raise ValueError("pair_columns does not fit its section")
                pairs = payload
            elif isinstance(payload, bytearray):
                # Each section is a buffer of its own, writable: the array keeps only that alive.
                arrays[name] = np.frombuffer(payload, dtype=np.dtype(dtype)).reshape(shape)
            else:
                raise ValueError(f"{name} is missing or fails its checksum")
        if pairs is None:
            raise ValueError("pair_columns is missing")
        views_bytes = next(parts, None)
        if not isinstance(views_bytes, bytearray):
            raise ValueError("the link views fail their checksum")
        if next(parts, None) is not None:
            raise ValueError("trailing sections")
        if shapes["pair_columns"][1] != [SIGNATURE_BITS, -(-len(arrays["doc_len"]) // 8)]:
            raise ValueError("pair_columns does not fit the documents")
        columns = self._pair_columns(pairs)
        if exact:
            views = Views.decoded(json.loads(views_bytes), pages)
            return Loaded(LexicalIndex.restored(pages, terms, arrays, columns), views, [])
        return self._reused(pages, terms, arrays, columns)

    def _pair_columns(self, ref: SectionRef) -> PairColumns:
        """What gives the pair signatures left at `ref` in this file, when a literal search first
        needs them: the section read and checked then; if it is gone, damaged or replaced since,
        they are made again from the documents' pages, as a bulk build makes them (never served
        from a section that fails its check), and the file is to be written again (see
        prepare): the next start would otherwise make them again."""
        path = self.path

        def read(documents: Sequence[Page | None]) -> np.ndarray:
            started = time.perf_counter()
            try:
                payload = read_section(path, ref)
                columns = np.frombuffer(payload, dtype=np.uint8).reshape(SIGNATURE_BITS, -1)
                log.info("index_cache_signatures_read", bytes=ref.length,
                         seconds=round(time.perf_counter() - started, 3))
                return columns
            except (OSError, ValueError) as exc:
                columns = page_signature_columns(documents)
                self.saved_signature = ""
                log.warning("index_cache_signatures_remade", error=type(exc).__name__,
                            reason=str(exc)[:200], documents=len(documents),
                            seconds=round(time.perf_counter() - started, 3))
                return columns

        return read

    @staticmethod
    def _reused(pages: Sequence[Page], terms: list[str], arrays: dict[str, np.ndarray],
                columns: PairColumns) -> Loaded:
        """The file's index for a later snapshot, when few of its documents died and few pages
        are new to it (else _Stale: a bulk build is quicker than that many edits)."""
        prints = arrays["fingerprints"]
        if prints.shape != (len(arrays["doc_len"]), FINGERPRINT_BYTES):
            raise ValueError("the fingerprints do not fit the documents")
        position = {fingerprint(page): i for i, page in enumerate(pages)}
        kept = [position.get(row, -1) for row in map(bytes, prints)]
        standing = len(kept) - kept.count(-1)
        limit = COMPACT_DEAD_SHARE * max(len(kept), len(pages))
        if not standing or len(kept) - standing > limit or len(pages) - standing > limit:
            raise _Stale
        index = LexicalIndex.reused(pages, terms, arrays, kept, columns)
        covered = set(kept)
        return Loaded(index, None, [page for i, page in enumerate(pages) if i not in covered])

    def prepare(self, signature: str, pages: Sequence[Page], index: LexicalIndex,
                views: Views) -> Pending | None:
        """What write() needs for the index of the snapshot with this signature (a bulk build
        of `pages`), or None when the file already holds it. Cheap (exported() copies only
        what edits change in place): a caller may hold the index lock for this alone."""
        if signature == self.saved_signature:
            return None
        terms, arrays = index.exported()
        return Pending(signature, tuple(pages), terms, arrays, views, index.pair_signatures)

    def write(self, pending: Pending) -> bool:
        """Write the file (atomically), one section at a time so that no more than one
        section's bytes are held at once; whether it was written."""
        terms, pages = pending.terms, pending.pages
        prints = b"".join(map(fingerprint, pages))
        arrays = {**pending.arrays, "fingerprints": np.frombuffer(prints, dtype=np.uint8).reshape(
            len(pages), FINGERPRINT_BYTES)}
        if any(TERM_SEPARATOR in term for term in terms):
            log.warning("index_cache_not_written", reason="a term holds the separator")
            return False
        head = {**self._head(pending.signature, pages), "terms": len(terms),
                "arrays": {name: [str(arrays[name].dtype), list(arrays[name].shape)]
                           for name in ARRAYS}}
        at = 0
        pairs: SectionRef | None = None

        def parts() -> Iterator[bytes | memoryview]:
            nonlocal at, pairs
            for name in ("head", "terms", *ARRAYS, "views"):
                chunks = self._chunks(name, head, terms, arrays, pending)
                header = section_header(*chunks)
                if name == "pair_columns":
                    pairs = SectionRef.after(at, header)
                at += len(header) + sum(chunk.nbytes for chunk in chunks)
                yield header
                yield from chunks
                del chunks

        if not write_atomically(self.path, parts(), ".index-"):
            return False
        self.saved_signature = pending.signature
        self.written_pairs = (pending.signature, pairs)
        log.info("index_cache_written", documents=len(pages), bytes=at)
        return True

    @staticmethod
    def _chunks(name: str, head: dict[str, object], terms: list[str],
                arrays: dict[str, np.ndarray], pending: Pending) -> list[memoryview]:
        """One section's payload as byte views of what it is made of, copied only where it must
        be encoded (JSON, the terms): the arrays are written from their own memory."""
        if name == "head":
            return [memoryview(json.dumps(head).encode("ascii"))]
        if name == "terms":
            return [memoryview(TERM_SEPARATOR.join(terms).encode("utf-8", "surrogatepass"))]
        if name == "views":
            link_views = json.dumps(pending.views.encoded(pending.pages), ensure_ascii=False)
            return [memoryview(link_views.encode("utf-8", "surrogatepass"))]
        array = arrays[name]
        if array.ndim == 2 and not array.flags.c_contiguous:  # the pair columns: row by row
            return [np.ascontiguousarray(row).data.cast("B") for row in array]
        return [np.ascontiguousarray(array).data.cast("B")]

    def leave_signatures(self, pending: Pending, index: LexicalIndex) -> bool:
        """After write(pending): let the pair signatures of `index` go from memory, to be read
        back from the file when a literal search first needs them (only literal search reads
        them), when it still holds exactly the documents written (else they stay, as after
        edits). Whether they went. Call it under the index lock."""
        written = self.written_pairs
        signatures = index.pair_signatures
        if (written is None or written[0] != pending.signature or written[1] is None
                or signatures is not pending.pair_signatures or not signatures.is_read
                or signatures.count != len(pending.pages) or not index.is_bulk_of(pending.pages)):
            return False
        index.unread_pair_signatures(self._pair_columns(written[1]))
        return True


@dataclass(frozen=True, slots=True)
class Loaded:
    """What IndexCache.load found: the index; the link views when it is the snapshot's own
    (else None); the pages it lacks, to be indexed with LexicalIndex.update."""

    index: LexicalIndex
    views: Views | None
    missing: list[Page]


@dataclass(frozen=True, slots=True)
class Pending:
    """An index and its snapshot's link views, taken for writing (see IndexCache.prepare)."""

    signature: str
    pages: tuple[Page, ...]
    terms: list[str]
    arrays: dict[str, np.ndarray]
    views: Views
    pair_signatures: PairSignatures  # the index's, which leave_signatures may let go


@dataclass(frozen=True, slots=True)
class Views:
    """A snapshot's link views (see Projection.incoming, .owners(False) and .lookup)."""

    incoming: dict[str, list[int]]
    owners: dict[str, str]
    lookup: dict[str, Page]

    def encoded(self, pages: Sequence[Page]) -> dict[str, object]:
        position = {id(page): i for i, page in enumerate(pages)}
        return {"incoming": self.incoming, "owners": self.owners,
                "lookup": {key: position[id(page)] for key, page in self.lookup.items()}}

    @classmethod
    def decoded(cls, data: object, pages: Sequence[Page]) -> Views:
        """The views from encoded() data; ValueError when anything is not of its shape or
        points past the pages."""
        if not isinstance(data, dict):
            raise ValueError("link views: not an object")
        incoming, owners, lookup = data.get("incoming"), data.get("owners"), data.get("lookup")
        if not (isinstance(incoming, dict) and isinstance(owners, dict) and isinstance(lookup, dict)):
            raise ValueError("link views: missing parts")
        n = len(pages)
        paths = {page.path for page in pages}
        for path, positions in incoming.items():
            if path not in paths or not isinstance(positions, list) or not all(
                    type(i) is int and 0 <= i < n for i in positions):
                raise ValueError("link views: an incoming list does not fit the pages")
        if not all(isinstance(nid, str) and owner in paths for nid, owner in owners.items()):
            raise ValueError("link views: an owner is not a page")
        if not all(type(i) is int and 0 <= i < n for i in lookup.values()):
            raise ValueError("link views: a lookup entry does not fit the pages")
        return cls(incoming, owners, {key: pages[i] for key, i in lookup.items()})


class _Stale(Exception):
    """The file holds another snapshot's index: expected after any change to the folder."""
