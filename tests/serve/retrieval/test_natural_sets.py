"""Questions worded as people ask them (issue 27): paraphrases, natural spoken Korean, numbers
written another way, near-miss unanswerable questions and filtered queries, over the real
folders and the tldr corpus (tests/support/natural_sets.py).

Floors are the figures when the sets were written, less about 0.02: later work may only raise
them. Targets not met yet are ``xfail(strict=True)``: each turns into a failure the day it
passes, so whoever meets it removes the mark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.errors import KnowledgeSourceError
from serve.service import KnowledgeSource
from tests.support import judged as J
from tests.support import natural_sets as N
from tests.support import real_folders as R

K = 10
# Sizes the issue asks of each set, and the ids' kinds.
MIN_SIZE = {"paraphrase": 40, "korean": 30, "numbers": 20, "unanswerable-natural": 20}
MIN_FILTERED = 20
# (set, group) -> metric -> floor.
FLOORS: dict[tuple[str, str], dict[str, float]] = {
    ("paraphrase", "all"): {"mrr@10": 0.41},
    ("korean", "all"): {"mrr@10": 0.76},  # 0.739 first, 0.758 with mecab-ko, 0.778 by question stems
    ("numbers", "all"): {"mrr@10": 0.83},  # 0.774 first, 0.833 with number forms, 0.856 with mecab-ko
}
# Issue 27's targets: MRR@10 overall and in Korean, the answering page in the top 3, numbers.
TARGETS: dict[tuple[str, str], dict[str, float]] = {
    ("real-natural", "all"): {"mrr@10": 0.90, "top3": 0.93},
    ("korean", "all"): {"mrr@10": 0.85, "top3": 0.93},
    ("numbers", "all"): {"mrr@10": 0.90},
}
NOT_YET = ("issue 27: questions worded unlike their page, and Korean questions over English "
           "pages, need a semantic mode; the bundled static model measured loses to lexical "
           "(tests/benchmarks/bench_semantic.py), so none ships yet")


@pytest.fixture(scope="session")
def roots() -> tuple[Path, Path | None]:
    real_root = R.extract()
    if real_root is None:
        pytest.skip(f"real folders not found: {R.TARBALL} (or ${R.ENV})")
    return real_root, J.extract_tldr()


@pytest.fixture(scope="session")
def source_of(roots: tuple[Path, Path | None]) -> Iterator[Callable[[str], KnowledgeSource]]:
    sources = N.Sources(*roots)
    yield sources
    sources.close()


@pytest.fixture(scope="module")
def figures(source_of: Callable[[str], KnowledgeSource]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in N.SETS:
        scores = N.score_set(name, lambda j: R.ranked_ids(source_of(j.folder), j.query, K), K)
        out[name] = N.grouped(scores, K)
    return out


# -- the sets themselves ------------------------------------------------------------------


def test_the_sets_are_well_formed_and_large_enough() -> None:
    ids: list[str] = []
    for name, least in MIN_SIZE.items():
        judgements = N.load(name)
        ids += [j.id for j in judgements]
        assert len(judgements) >= least, (name, len(judgements))
        for j in judgements:
            N.folder_name(j.folder)  # a known folder
            assert j.is_leak or 2 in j.relevant.values(), f"{j.id}: no answering page"
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    languages = Counter(N.language_of(j) for j in N.load("paraphrase"))
    assert languages["en"] >= 10 and languages["ko"] >= 10, languages
    assert all(j.is_leak for j in N.load("unanswerable-natural"))
    filtered = N.load_filtered()
    assert len(filtered) >= MIN_FILTERED
    used = Counter(key for f in filtered for key in f.filters)
    assert set(used) == N.FILTER_KEYS, used


# real-natural's pages are checked in test_real_folders.py (one is withheld there on purpose).
@pytest.mark.parametrize("name", [*MIN_SIZE, "filtered"])
def test_every_judged_page_is_served(name: str, source_of: Callable[[str], KnowledgeSource]) -> None:
    if name == "filtered":
        wanted = [(f.judgement.folder, pid) for f in N.load_filtered()
                  for pid in (*f.judgement.relevant, *f.matching)]
    else:
        wanted = [(j.folder, pid) for j in N.load(name) for pid in j.relevant]
    missing = [(folder, pid) for folder, pid in wanted
               if source_of(folder).read(pid).outcome != "found"]
    assert not missing, missing[:10]


# -- ranking --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "group"), sorted(FLOORS))
def test_floors(name: str, group: str, figures: dict[str, dict[str, dict[str, Any]]]) -> None:
    got = figures[name][group]
    for metric, floor in FLOORS[name, group].items():
        assert got[metric] >= floor, f"{name}/{group}: {metric} {got[metric]:.4f} < {floor}"


@pytest.mark.parametrize(("name", "group"), [
    pytest.param(*key, marks=pytest.mark.xfail(strict=True, reason=NOT_YET,
                                               raises=(AssertionError, KnowledgeSourceError)))
    for key in sorted(TARGETS)])
def test_targets(name: str, group: str, figures: dict[str, dict[str, dict[str, Any]]]) -> None:
    got = figures[name][group]
    for metric, target in TARGETS[name, group].items():
        assert got[metric] >= target, f"{name}/{group}: {metric} {got[metric]:.4f} < {target}"


# -- answerable -----------------------------------------------------------------------------

# The share of unanswerable questions refused and of answerable ones kept, over every set.
# refused 0.500 / kept 0.793 when written; 0.500 / 0.839 with number forms; 0.625 / 0.925 with
# Korean words judged by their nouns and names the evidence must have.
ANSWERABLE_FLOORS = {"refused": 0.60, "kept": 0.90}
ANSWERABLE_TARGETS = {"refused": 0.85, "kept": 0.98}


@pytest.fixture(scope="module")
def answerable(source_of: Callable[[str], KnowledgeSource]) -> dict[str, float | int]:
    return N.answerable_shares([j for name in N.SETS for j in N.load(name)], source_of)


def test_answerable_floors(answerable: dict[str, float | int]) -> None:
    for key, floor in ANSWERABLE_FLOORS.items():
        assert answerable[key] >= floor, (key, answerable)


@pytest.mark.xfail(strict=True, reason=NOT_YET, raises=AssertionError)
def test_answerable_targets(answerable: dict[str, float | int]) -> None:
    for key, target in ANSWERABLE_TARGETS.items():
        assert answerable[key] >= target, (key, answerable)
