"""The merged citations of a run ranked by relevance across sources (docs/evidence.md, "Merged order").

Each source ranks its own evidence on its own scale, so neither the sources' scores nor their
order can be compared as they are (measured over the judged multi-source set, bench_fusion):
the fused score of a citation is the same lexical measure for every source (the question's
words in its title, path and snippet, weighted by how rare each word is among the run's
citations), plus how far the source's own score stands out from the source's other scores,
plus a small reciprocal-rank term that keeps each source's order among its own near-equals.
A source answering `answerable: false` ranks after those that can; every source's best
citation keeps a place in the top window; the same page served by two sources becomes one
citation that names both (`alsoIn`)."""

from __future__ import annotations

import math
import statistics
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.support.text import STOP_WORDS, relevance_words
from common.bridge_schemas import Citation, CitationAlias

CITATION_ORDERS = ("relevance", "source")
DEFAULT_CITATION_ORDER = "relevance"
TOP_WINDOW = 10  # the places every source's best citation competes for (MRR@10's window)
RRF_K = 60  # the usual reciprocal-rank constant: rank 1 weighs 0.98, rank 8 0.88
PEAK_WEIGHT = 0.5  # weight of ln(score / the source's median score)
TITLE_WEIGHT = 2.0  # a word in the title or path counts twice a word in the snippet
DUPLICATE_OVERLAP = 0.8  # snippet word overlap (Jaccard) from which two same-titled pages are one
# The digest's stop words and those of the contract's relevance list (3.9) it lacks: "can" or
# "use" in a question would otherwise favour whichever source's snippets say them most.
_STOP = STOP_WORDS | {"can", "did", "should", "that", "use"}

@dataclass(frozen=True)
class Ranked:
    """One source's citations as it ranked them, and whether it says it can answer."""

    citations: Sequence[Citation]
    can_answer: bool


def _words(text: str, memo: dict[str, frozenset[str]] | None = None) -> frozenset[str]:
    """The text's words; `memo` keeps them for one run, where the same page served by several
    sources brings the same texts again."""
    if memo is not None and text in memo:
        return memo[text]
    words = frozenset(relevance_words(unicodedata.normalize("NFC", text), _STOP))
    if memo is not None:
        memo[text] = words
    return words


@dataclass(frozen=True)
class _Item:
    citation: Citation
    order: int  # the source's place in the selection
    rank: int  # 1-based, in its source's own order
    can_answer: bool
    heading: frozenset[str]  # title and path words
    body: frozenset[str]
    title: frozenset[str]


def _items(groups: Sequence[Ranked]) -> list[_Item]:
    items, seen = [], set()
    memo: dict[str, frozenset[str]] = {}
    for order, group in enumerate(groups):
        for rank, citation in enumerate(group.citations, 1):
            if citation.id in seen:  # first wins, as the reference dedupes
                continue
            seen.add(citation.id)
            items.append(_item(citation, order, rank, group.can_answer, memo))
    return items


def _lexical(query: frozenset[str], items: Sequence[_Item]) -> list[float]:
    """The question's words found in each citation, each weighted by its rarity among the run's
    citations (a word every citation has tells nothing), scaled so the best citation has 1."""
    counts: Counter[str] = Counter()
    for item in items:
        counts.update(item.heading | item.body)
    total = len(items)
    weight = {w: math.log(1 + total / (1 + counts[w])) for w in query}
    scores = [sum(weight[w] * (TITLE_WEIGHT if w in item.heading else 1.0) for w in query
                  if w in item.heading or w in item.body) for item in items]
    best = max(scores, default=0.0)
    return [s / best for s in scores] if best > 0 else scores


def _peaks(groups: Sequence[Ranked]) -> dict[str, float]:
    """ln(score / median score of its source) per citation id; 0 where the source gave no scores."""
    peaks: dict[str, float] = {}
    for group in groups:
        scored = [c.score for c in group.citations if c.score is not None and c.score > 0]
        median = statistics.median(scored) if scored else 0.0
        for citation in group.citations:
            score = citation.score
            peaks.setdefault(citation.id, math.log(score / median) if median > 0 and score and score > 0
                             else 0.0)
    return peaks


def fuse(query: str, groups: Sequence[Ranked]) -> list[Citation]:
    """The citations of every source in one relevance order (see the module's docstring);
    near-duplicates merged into the better-placed one."""
    items = _items(groups)
    lexical = _lexical(_words(query), items)
    peaks = _peaks(groups)
    scores = [lexical[i] + PEAK_WEIGHT * peaks[item.citation.id] + RRF_K / (RRF_K + item.rank)
              for i, item in enumerate(items)]
    # A source's own order is kept: a citation ranks as high as the best of those its source put
    # after it, so one source alone comes out as it ranked itself.
    best_after: dict[int, float] = {}
    for i in reversed(range(len(items))):  # items are in source order, then rank order
        order = items[i].order
        scores[i] = best_after[order] = max(scores[i], best_after.get(order, scores[i]))
    keyed = sorted((not item.can_answer, -scores[i], item.order, item.rank, i)
                   for i, item in enumerate(items))
    ordered = _keep_each_best([items[k[-1]] for k in keyed])
    return _merge_duplicates(ordered)


def _keep_each_best(ordered: list[_Item]) -> list[_Item]:
    """Each answering source's best citation inside the top window: a source whose tail would
    fill the window gives up its last places there."""
    best: dict[int, _Item] = {}
    for item in ordered:
        if item.can_answer:
            best.setdefault(item.order, item)
    window = min(TOP_WINDOW, len(ordered))
    if len(best) > window:
        return ordered
    top: list[_Item] = []
    rest: list[_Item] = []
    waiting = set(best)
    for item in ordered:
        firsts = best.get(item.order) is item
        if firsts:
            waiting.discard(item.order)
        if len(top) < window and (firsts or window - len(top) > len(waiting)):
            top.append(item)
        else:
            rest.append(item)
    return top + rest


def _merge_duplicates(ordered: Sequence[_Item]) -> list[Citation]:
    """The same page served by two sources is one citation: the better-placed one, naming the
    others in `alsoIn`."""
    merged: list[Citation] = []
    by_title: dict[frozenset[str], list[tuple[_Item, int]]] = {}
    for item in ordered:
        same_title = by_title.setdefault(item.title, [])
        match = next((place for other, place in same_title if _same(other, item)), None)
        if match is None:
            same_title.append((item, len(merged)))
            merged.append(item.citation)
            continue
        if merged[match].also_in is None:  # the source's own citation stays as it sent it
            merged[match] = merged[match].model_copy()
        merge_into(merged[match], item.citation)
    return merged


def merge_into(kept: Citation, duplicate: Citation) -> None:
    """Name `duplicate` in `kept`'s `alsoIn`."""
    # Built without validation: the three are the duplicate's own, already validated, strings.
    alias = CitationAlias.model_construct(id=duplicate.id, source_id=duplicate.source_id,
                                          page_id=duplicate.page_id)
    kept.also_in = [*(kept.also_in or []), alias]


def same_page(first: Citation, second: Citation) -> bool:
    """Whether two sources' citations are the same page served twice: the same title, and the
    same hash of the cited lines (`origin.sha256`), or nearly the same snippet."""
    return _same(_item(first), _item(second))


def _item(citation: Citation, order: int = 0, rank: int = 1, can_answer: bool = True,
          memo: dict[str, frozenset[str]] | None = None) -> _Item:
    title = _words(citation.title, memo)
    return _Item(citation, order, rank, can_answer, title | _words(citation.path, memo),
                 _words(citation.snippet, memo), title)


def _same(first: _Item, second: _Item) -> bool:
    one, other = first.citation, second.citation
    if one.source_id == other.source_id or first.title != second.title or not first.title:
        return False  # one source's two pages are two pages
    if one.origin is not None and other.origin is not None and one.origin.sha256 \
            and one.origin.sha256 == other.origin.sha256:
        return True
    if not first.body or not second.body:
        return first.body == second.body and one.path == other.path
    return len(first.body & second.body) / len(first.body | second.body) >= DUPLICATE_OVERLAP
