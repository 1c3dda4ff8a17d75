"""The judged multi-source set: six Knowledge Sources over the corpora beside the project, and
how a merged `citations` array is scored against it.

``fixtures/judged/multi-source.jsonl`` (folder ``corpus:multi-source``) judges
``<sourceId>:<pageId>`` keys. Its sources, each served by its own ``llmwiki-serve``:

==================  =======================================  ===============================
source id           served root                              archive (``../shared/corpora``)
==================  =======================================  ===============================
obsidian-tasks      ``real/obsidian-tasks``                  real-folders.tar.gz
ezdxf-notes         ``real/ezdxf-notes``                     real-folders.tar.gz
dendron-handbook    ``real/dendron-handbook``                real-folders.tar.gz
react-ko            ``real/react-ko``                        real-folders.tar.gz
tldr-linux          ``tldr/pages/linux``                     tldr-en-ko.tar.gz
tldr-osx            ``tldr/pages/osx``                       tldr-en-ko.tar.gz
==================  =======================================  ===============================

The questions: the answerable questions of ``real-natural.jsonl`` (written from reading the
pages), 26 tldr known-item questions of ``tldr-known-item.jsonl`` (Linux and macOS pages), and
12 questions written for commands both tldr-linux and tldr-osx document (answered by two
sources). The set was written before the bridge's ranking changed. Nothing here imports a
product module: the e2e tier and the benchmark both use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import judged as J

SET: Path = J.JUDGED_DIR / "multi-source.jsonl"
FOLDER = "corpus:multi-source"
REAL_TARBALL: Path = J.REPO.parent / "shared" / "corpora" / "real-folders.tar.gz"
REAL_ENV = "LLMWIKI_REAL_FOLDERS"
K = 10


@dataclass(frozen=True)
class SourceRoot:
    """One source of the set: its id and where its root is inside its archive."""

    id: str
    archive: str  # "real" or "tldr"
    relative: str


SOURCES: tuple[SourceRoot, ...] = (
    SourceRoot("obsidian-tasks", "real", "obsidian-tasks"),
    SourceRoot("ezdxf-notes", "real", "ezdxf-notes"),
    SourceRoot("dendron-handbook", "real", "dendron-handbook"),
    SourceRoot("react-ko", "real", "react-ko"),
    SourceRoot("tldr-linux", "tldr", "pages/linux"),
    SourceRoot("tldr-osx", "tldr", "pages/osx"),
)
SOURCE_IDS: tuple[str, ...] = tuple(s.id for s in SOURCES)


def load() -> list[J.Judgement]:
    return J.load_judged(SET)


def _real_root() -> Path | None:
    env = os.environ.get(REAL_ENV)
    origin = Path(env).expanduser() if env else REAL_TARBALL
    if not origin.exists():
        return None
    if origin.is_dir():
        return origin / "real" if (origin / "real").is_dir() else origin
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    dest = Path(base) / "llmwiki-serve-tests" / "real-folders" / J.file_sha256(origin)[:16]
    return J.extract_once(origin, dest, "real")


def roots() -> dict[str, Path] | None:
    """Every source's served root (the archives unpacked once outside the tree), or None when an
    archive is missing here."""
    real, tldr = _real_root(), J.extract_tldr()
    if real is None or tldr is None:
        return None
    base = {"real": real, "tldr": tldr}
    return {s.id: base[s.archive] / s.relative for s in SOURCES}


# -- scoring a merged citations array ---------------------------------------------------------

def citation_keys(citation: Mapping[str, Any]) -> set[str]:
    """The ``<sourceId>:<pageId>`` keys one wire citation stands for: its own, and those of the
    near-duplicates merged into it (``alsoIn``)."""
    keys = {f"{citation['sourceId']}:{citation['pageId']}"}
    for other in citation.get("alsoIn") or ():
        keys.add(f"{other['sourceId']}:{other['pageId']}")
    return keys


def reciprocal_rank(ranked: Sequence[set[str]], relevant: Mapping[str, int], k: int = K) -> float:
    """1/rank of the first item among the first `k` that stands for a relevant page, else 0."""
    for rank, keys in enumerate(ranked[:k], 1):
        if any(relevant.get(key, 0) > 0 for key in keys):
            return 1.0 / rank
    return 0.0


def merged_rr(citations: Sequence[Mapping[str, Any]], judgement: J.Judgement, k: int = K) -> float:
    return reciprocal_rank([citation_keys(c) for c in citations], judgement.relevant, k)


def answering_sources(judgement: J.Judgement) -> list[str]:
    """The sources holding a relevant page of the question, in the set's source order."""
    wanted = {key.split(":", 1)[0] for key in judgement.relevant}
    return [sid for sid in SOURCE_IDS if sid in wanted]


def single_source_rr(source_id: str, page_ids: Sequence[str], judgement: J.Judgement, k: int = K) -> float:
    """The question's reciprocal rank in one source's own ranking (its pack's page ids)."""
    return reciprocal_rank([{f"{source_id}:{pid}"} for pid in page_ids], judgement.relevant, k)
