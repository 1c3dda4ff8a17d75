"""Real public folders for the natural-question set and the per-shape metadata rules.

Four public folders, snapshots of their repositories, live outside the source tree in
``../shared/corpora/real-folders.tar.gz`` (the tldr corpus's home; fetched material
is not committed here). The archive holds ``real/<name>/`` (the served root),
``real/<name>.SOURCE.txt`` (repository, commit, licence, subset) and
``real/<name>.LICENSE.txt``:

==================  ===============  ===============================  ==========
name                shape            repository                       licence
==================  ===============  ===============================  ==========
obsidian-tasks      Obsidian vault   obsidian-tasks-group/obsidian-tasks (docs/)  MIT
ezdxf-notes         Logseq graph     mozman/ezdxf (notes/)            MIT
dendron-handbook    Dendron          dendronhq/handbook               CC-BY-4.0
react-ko            generic docs     reactjs/ko.react.dev (src/content)  CC-BY-4.0
==================  ===============  ===============================  ==========

``LLMWIKI_REAL_FOLDERS`` may name another copy of the archive, or a directory that
already holds ``real/``. Judged folders are spelled ``corpus:real/<name>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from serve.errors import KnowledgeSourceError
from tests.support import judged as J

ENV = "LLMWIKI_REAL_FOLDERS"
TARBALL: Path = J.REPO.parent / "shared" / "corpora" / "real-folders.tar.gz"
REAL_SET: Path = J.JUDGED_DIR / "real-natural.jsonl"
PREFIX = "corpus:real/"
NAMES = ("obsidian-tasks", "ezdxf-notes", "dendron-handbook", "react-ko")
SHAPES = {"obsidian-tasks": "obsidian", "ezdxf-notes": "logseq", "dendron-handbook": "dendron",
          "react-ko": "generic-markdown"}


def source() -> Path | None:
    """The archive or extracted directory to use, or None when there is none here."""
    env = os.environ.get(ENV)
    if env:
        path = Path(env).expanduser()
        return path if path.exists() else None
    return TARBALL if TARBALL.is_file() else None


def extract(dest: Path | None = None) -> Path | None:
    """The directory holding ``<name>/`` roots (``.../real``), or None without a source.

    An archive is unpacked once into ``~/.cache/llmwiki-serve-tests/real-folders/<sha[:16]>``
    (or ``dest``), never into the repository, and reused while it is unchanged."""
    origin = source()
    if origin is None:
        return None
    if origin.is_dir():
        root = origin / "real" if (origin / "real").is_dir() else origin
        return root
    if dest is None:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        dest = Path(base) / "llmwiki-serve-tests" / "real-folders" / J.file_sha256(origin)[:16]
    return J.extract_once(origin, Path(dest), "real")


def name_of(folder: str) -> str:
    if not folder.startswith(PREFIX) or folder[len(PREFIX):] not in NAMES:
        raise ValueError(f"not a real folder: {folder!r}")
    return folder[len(PREFIX):]


def resolve(folder: str, real_root: Path) -> Path:
    """The served root of ``corpus:real/<name>`` under an extracted ``real/`` directory."""
    path = real_root / name_of(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{folder} is missing from {real_root}")
    return path


def load() -> list[J.Judgement]:
    return J.load_judged(REAL_SET)


# -- figures -------------------------------------------------------------------------------

# Targets of issue 15 for natural questions (answerable ones only).
TARGET_MRR = 0.85
TARGET_TOP3 = 0.90


def language_of(judgement: J.Judgement) -> str:
    return judgement.id.split("-", 1)[0]


def figures(scores: list[J.QueryScore], k: int = 10) -> dict[str, float | int]:
    """nDCG@k, MRR@k (any relevant grade, as in judged.py), and top-1 / top-3: the share of
    answerable questions whose answering page (grade 2) is among the first 1 / 3 results.
    Questions without a relevant page are only counted (``unanswerable``)."""
    answerable = [s for s in scores if not s.judgement.is_leak]
    out: dict[str, float | int] = {"questions": len(answerable),
                                   "unanswerable": len(scores) - len(answerable)}
    if answerable:
        n = len(answerable)
        out[f"ndcg@{k}"] = sum(s.ndcg for s in answerable) / n
        out[f"mrr@{k}"] = sum(s.mrr for s in answerable) / n
        out["top1"] = sum(J.answer_in_top(s.ranked_ids, s.judgement.relevant, 1) for s in answerable) / n
        out["top3"] = sum(J.answer_in_top(s.ranked_ids, s.judgement.relevant, 3) for s in answerable) / n
    return out


def grouped(scores: list[J.QueryScore], k: int = 10) -> dict[str, dict[str, float | int]]:
    """Figures per folder, per folder and language, and for the whole set (``all``)."""
    groups: dict[str, list[J.QueryScore]] = {"all": list(scores)}
    for s in scores:
        name = name_of(s.judgement.folder)
        groups.setdefault(name, []).append(s)
        groups.setdefault(f"{name}/{language_of(s.judgement)}", []).append(s)
        groups.setdefault(f"all/{language_of(s.judgement)}", []).append(s)
    return {key: figures(items, k) for key, items in sorted(groups.items())}


def ranked_ids(source: object, query: str, limit: int = 10) -> list[str]:
    """Ranked page ids through the service API; nothing when the folder cannot be served
    (e.g. a shape serve does not read yet), so its questions score 0 instead of erroring."""
    try:
        return J.service_search_ids(source, query, limit)
    except KnowledgeSourceError:
        return []
