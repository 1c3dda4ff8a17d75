"""The judged sets of questions worded as people ask them (issue 27), over the real folders
and the tldr corpus: what each set is, where its folders are, and its figures.

Every question was written from reading the pages before any search ran (the files'
history shows them committed before the ranking changes that answer them):

| set | what its questions do |
| --- | --- |
| ``paraphrase`` | word the question unlike its page (synonyms, the user's situation) |
| ``korean`` | natural spoken Korean; ``kx`` asks in Korean over English pages |
| ``numbers`` | write numbers, sizes, versions and times another way than the page |
| ``unanswerable-natural`` | plausible near misses no page answers (``relevant`` is empty) |
| ``filtered`` | a query with ``filters`` and query syntax, and every page they admit |

``filtered.jsonl`` lines carry two more keys: ``filters`` (the object a request sends) and
``matching`` (every visible page the filters and the query's quoted phrases and ``-word``
exclusions admit, the free words aside). The other sets use judged.py's format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import judged as J
from tests.support import real_folders as R

SETS: dict[str, Path] = {name: J.JUDGED_DIR / f"{name}.jsonl" for name in (
    "real-natural", "paraphrase", "korean", "numbers", "unanswerable-natural")}
FILTERED_SET: Path = J.JUDGED_DIR / "filtered.jsonl"
FILTER_KEYS = frozenset(("tags_any", "tags_all", "path_prefix", "kinds", "date_from", "date_to"))


def folder_root(folder: str, real_root: Path, tldr_root: Path | None) -> Path:
    """The served root of a judged folder: ``corpus:tldr`` or ``corpus:real/<name>``."""
    if folder == J.TLDR_FOLDER:
        if tldr_root is None:
            raise FileNotFoundError("the tldr corpus is not extracted")
        return tldr_root
    return R.resolve(folder, real_root)


def folder_name(folder: str) -> str:
    return "tldr" if folder == J.TLDR_FOLDER else R.name_of(folder)


def load(name: str) -> list[J.Judgement]:
    return J.load_judged(SETS[name])


@dataclass(frozen=True)
class Filtered:
    """One filtered query: the judgement, the filters it sends and every page they admit."""

    judgement: J.Judgement
    filters: Mapping[str, Any]
    matching: frozenset[str]


def load_filtered(path: Path = FILTERED_SET) -> list[Filtered]:
    out: list[Filtered] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            keys = {"id", "folder", "query", "filters", "relevant", "matching"}
            if set(raw) != keys:
                raise ValueError(f"{path.name}:{number}: expected keys {sorted(keys)}")
            if not raw["filters"] or not set(raw["filters"]) <= FILTER_KEYS:
                raise ValueError(f"{path.name}:{number}: filters must use {sorted(FILTER_KEYS)}")
            if not set(raw["relevant"]) <= set(raw["matching"]):
                raise ValueError(f"{path.name}:{number}: a relevant page the filters exclude")
            judgement = J.Judgement(raw["id"], raw["folder"], raw["query"], dict(raw["relevant"]),
                                    "filtered", "filtered")
            out.append(Filtered(judgement, dict(raw["filters"]), frozenset(raw["matching"])))
    return out


def language_of(judgement: J.Judgement) -> str:
    """``en`` or ``ko`` by the question's own script (ids differ between the sets)."""
    return "ko" if any("\uac00" <= c <= "\ud7a3" for c in judgement.query) else "en"


def grouped(scores: Sequence[J.QueryScore], k: int = 10) -> dict[str, dict[str, float | int]]:
    """Figures for the whole set, per language and per folder (real_folders.figures)."""
    groups: dict[str, list[J.QueryScore]] = {"all": list(scores)}
    for s in scores:
        groups.setdefault(f"all/{language_of(s.judgement)}", []).append(s)
        groups.setdefault(folder_name(s.judgement.folder), []).append(s)
    return {key: R.figures(items, k) for key, items in sorted(groups.items())}


def score_set(name: str, search_ids: Callable[[J.Judgement], Sequence[str]],
              k: int = 10) -> list[J.QueryScore]:
    return J.score_queries(search_ids, load(name), k)


def answerable_shares(judgements: Sequence[J.Judgement],
                      source_of: Callable[[str], Any]) -> dict[str, float | int]:
    """Share of unanswerable questions refused and of answerable ones kept by the context
    packs of ``source_of(folder)`` (a KnowledgeSource); a pack with no evidence is a refusal."""
    refused: list[bool] = []
    kept: list[bool] = []
    for j in judgements:
        source = source_of(j.folder)
        pack = source.context(source.request(query=j.query))
        says = bool(pack["answerable"]) and bool(pack["evidence"])
        if j.is_leak:
            refused.append(not says)
        else:
            kept.append(says)
    return {"unanswerable": len(refused), "refused": sum(refused) / len(refused) if refused else 0.0,
            "answerable": len(kept), "kept": sum(kept) / len(kept) if kept else 0.0}


class Sources:
    """A KnowledgeSource per judged folder, made when first asked for (the folders never
    change here: the snapshot is reused), closed together."""

    def __init__(self, real_root: Path, tldr_root: Path | None) -> None:
        self.roots = (real_root, tldr_root)
        self.sources: dict[str, Any] = {}

    def __call__(self, folder: str) -> Any:
        if folder not in self.sources:
            from serve.service import KnowledgeSource
            from serve.settings import ServeSettings

            self.sources[folder] = KnowledgeSource(ServeSettings(
                root=folder_root(folder, *self.roots), page_cache=False, inotify=False,
                refresh_interval_seconds=3600.0))
        return self.sources[folder]

    def close(self) -> None:
        for source in self.sources.values():
            source.close()
        self.sources.clear()
