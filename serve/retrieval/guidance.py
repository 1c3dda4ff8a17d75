"""Retrieval guidance (`llmwiki.retrieval_guidance.v1`): bounded advice for an agent's lexical loop."""

from __future__ import annotations

import heapq
import io
import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import chain
from json.encoder import encode_basestring
from typing import Any, Generic, NamedTuple, TypeVar

from common.guidance import (
    CONTENT_TRUST,
    FALLBACK_ORDER,
    MAX_CARD_HEADINGS,
    MAX_CARD_IDENTIFIERS,
    MAX_EXACT_IDENTIFIERS,
    MAX_EXCERPT_CHARS,
    MAX_FOLDER_CARDS,
    MAX_FOLDER_TERMS,
    MAX_HEADING_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_PAGE_CARDS,
    MAX_PAGE_ID_CHARS,
    MAX_PAGE_TERMS,
    MAX_QUERY_VARIANTS,
    MAX_SUGGESTED_TERMS,
    MAX_TERM_CHARS,
    MAX_TITLE_CHARS,
    SCHEMA_VERSION,
    FolderCard,
    OrientationSource,
    PageCard,
    RetrievalGuidance,
)
from serve.retrieval.guidance_text import (
    clean_markdown,
    fold,
    identifiers_in,
    is_sensitive,
    safe_path,
    terms_from_text,
    trim,
    unfenced_lines,
    unique,
)
from serve.source.page import ROLE_RANK, Page

__all__ = ["CHARACTER_BUDGET", "build_guidance"]

CHARACTER_BUDGET = 4000  # what serve emits; the shape allows up to MAX_CHARACTER_BUDGET
AUTHORED_ROLES = frozenset({"hot", "index", "overview"})
EXTRACTIVE_CANDIDATES = 24
MIN_EXCERPT_CHARS = 16
# Excerpt search stops after this many paragraphs: guidance is advisory and must stay cheap
# even for a huge page whose every paragraph is a table or sensitive.
MAX_EXCERPT_PARAGRAPHS = 256

BOILERPLATE_RE = re.compile(r"(?:table of contents|toc|navigation|breadcrumbs|copyright|license)\b")

# ---------------------------------------------------------------------------------------
# Per-page facts (cached: they depend on the page only, never on the query)


class _PageFacts(NamedTuple):
    folder: str | None  # parent folder of a safe path ("." at the root); None when unsafe
    terms: tuple[str, ...]  # page terms, at most 12
    keys: frozenset[str]  # the folded terms, for overlap with query terms


# Keyed by the few fields the facts depend on, so a re-parsed or derived snapshot whose page
# kept its path, title, headings and tags reuses the entry.
@lru_cache(maxsize=131072)
def _page_facts(path: str, title: str, headings: tuple[str, ...], tags: tuple[str, ...]) -> _PageFacts:
    sources = chain((title,), headings, tags)
    terms = unique(chain.from_iterable(terms_from_text(text) for text in sources), MAX_PAGE_TERMS)
    safe = safe_path(path)
    folder = None if safe is None else (posixpath.dirname(safe) or ".")
    return _PageFacts(folder, tuple(terms), frozenset(fold(term) for term in terms))


def _facts_of(page: Page) -> _PageFacts:
    return _page_facts(page.path, page.title, page.headings, page.tags)


def _paragraphs(text: str) -> Iterator[str]:
    """Blank-line-separated paragraphs with fenced code left out, produced lazily."""
    lines: list[str] = []
    for stripped in unfenced_lines(io.StringIO(text)):
        if stripped:
            lines.append(stripped)
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def _excerpt_candidates(page: Page) -> Iterator[str]:
    yield page.summary
    for count, paragraph in enumerate(_paragraphs(page.text)):  # decompressed only if needed
        if count >= MAX_EXCERPT_PARAGRAPHS:
            return
        yield paragraph


def _excerpt(page: Page) -> str | None:
    for candidate in _excerpt_candidates(page):
        cleaned = clean_markdown(candidate)
        if len(cleaned) < MIN_EXCERPT_CHARS or BOILERPLATE_RE.match(cleaned.casefold()):
            continue
        # Checked before trimming, so a secret cut in half by the trim is still caught.
        if is_sensitive(cleaned):
            continue
        return trim(cleaned, MAX_EXCERPT_CHARS)
    return None


_Card = TypeVar("_Card", PageCard, FolderCard)


class _Sized(NamedTuple, Generic[_Card]):
    """A card and the length of its compact JSON, for the budget."""

    card: _Card
    size: int


def _sized(card: _Card) -> _Sized[_Card]:
    return _Sized(card, len(_compact(card.model_dump())))


# Keyed by the whole (immutable, hashable) Page: the card reads the body for its excerpt.
# The cards are query-independent, so the extractive path pays for each page once. A cached
# card is shared by the answers that show it and never changed: each answer dumps a copy.
@lru_cache(maxsize=4096)
def _page_card(page: Page) -> _Sized[PageCard] | None:
    path = safe_path(page.path)
    if path is None:
        return None
    page_id = page.id.strip()
    if not page_id or len(page_id) > MAX_PAGE_ID_CHARS or is_sensitive(page_id):
        return None
    raw_title = page.title.strip() or page_id
    if is_sensitive(raw_title):
        return None
    excerpt = _excerpt(page)
    if excerpt is None:
        return None
    title = trim(raw_title, MAX_TITLE_CHARS)
    headings = unique(
        (trim(h, MAX_HEADING_CHARS) for h in page.headings if not is_sensitive(h)), MAX_CARD_HEADINGS
    )
    found = identifiers_in(title, *headings, excerpt)
    identifiers = unique(
        (item for item in chain((path,), page.source_refs, page.tags, found) if not is_sensitive(item)),
        MAX_CARD_IDENTIFIERS,
        MAX_IDENTIFIER_CHARS,
    )
    terms = _facts_of(page).terms
    # Built by the rules above, which already trim, bound and dedupe: validating again would only
    # cost time on every cold card (the tests validate what this returns).
    return _sized(PageCard.model_construct(
        page_id=page_id, title=title, path=path, headings=headings, terms=list(terms),
        exact_identifiers=identifiers, excerpt=excerpt))


# ---------------------------------------------------------------------------------------
# Query-independent view of one visible-page sequence


class _FolderFacts(NamedTuple):
    path: str
    page_count: int
    terms: tuple[str, ...]
    keys: frozenset[str]


def _folder_facts(pages: Iterable[Page]) -> list[_FolderFacts]:
    """Pages grouped by parent folder; terms by (-pages having them, folded term)."""
    counts: dict[str, int] = {}
    term_counts: dict[str, Counter[str]] = {}
    spellings: dict[str, dict[str, str]] = {}
    for page in pages:
        facts = _facts_of(page)
        if facts.folder is None:
            continue
        counts[facts.folder] = counts.get(facts.folder, 0) + 1
        counter = term_counts.setdefault(facts.folder, Counter())
        first = spellings.setdefault(facts.folder, {})
        for term in facts.terms:
            key = fold(term)
            counter[key] += 1
            first.setdefault(key, term)
    folders: list[_FolderFacts] = []
    for folder, count in counts.items():
        counter = term_counts[folder]
        keys = heapq.nsmallest(MAX_FOLDER_TERMS, counter, key=lambda k: (-counter[k], k))
        terms = tuple(spellings[folder][k] for k in keys)
        folders.append(_FolderFacts(folder, count, terms, frozenset(keys)))
    return folders


class _View:
    """What guidance needs from one visible-page sequence, computed once per sequence.

    Pages and folders are kept in their query-independent order ((role rank, path) and
    (-page_count, path)) and indexed by position, with postings from folded term to
    positions; a query then touches only the postings of its own terms."""

    def __init__(self, pages: Sequence[Page], adapter: str, authored: Sequence[Page]) -> None:
        self.source: OrientationSource = "none"
        self.authored = sorted(authored, key=lambda p: (ROLE_RANK.get(p.role, 3), p.path))
        self.ordered: list[Page] = []  # extractive only: pages by (role rank, path)
        self.postings: dict[str, list[int]] = {}
        self.folders: list[_FolderFacts] = []
        self.folder_postings: dict[str, list[int]] = {}
        if self.authored:
            self.source = "authored"
            folders = _folder_facts(self.authored)
        elif adapter == "generic-markdown" and pages:
            self.source = "projection_extractive"
            folders = _folder_facts(pages)
            self.ordered = sorted(pages, key=lambda p: (ROLE_RANK.get(p.role, 3), p.path))
            self.postings = _postings(_facts_of(page).keys for page in self.ordered)
        else:
            return
        self.folders = sorted(folders, key=lambda f: (-f.page_count, f.path))
        self.folder_postings = _postings(folder.keys for folder in self.folders)

    def extractive_candidates(self, query_keys: frozenset[str]) -> list[Page]:
        """Top pages by (-overlap, role rank, path)."""
        top = _top(self.postings, len(self.ordered), query_keys, EXTRACTIVE_CANDIDATES)
        return [self.ordered[i] for i in top]

    def folder_cards(self, query_keys: frozenset[str]) -> list[_FolderFacts]:
        """Top folders by (-overlap, -page_count, path)."""
        top = _top(self.folder_postings, len(self.folders), query_keys, MAX_FOLDER_CARDS)
        return [self.folders[i] for i in top]


def _postings(keys_in_order: Iterable[frozenset[str]]) -> dict[str, list[int]]:
    postings: dict[str, list[int]] = {}
    for position, keys in enumerate(keys_in_order):
        for key in keys:
            postings.setdefault(key, []).append(position)
    return postings


def _top(postings: dict[str, list[int]], size: int, query_keys: frozenset[str], limit: int) -> list[int]:
    """The first `limit` positions by (-overlap with the query keys, position)."""
    overlap: Counter[int] = Counter()
    for key in query_keys:
        overlap.update(postings.get(key, ()))
    chosen = [position for _, position in heapq.nsmallest(limit, ((-n, p) for p, n in overlap.items()))]
    position = 0
    while len(chosen) < limit and position < size:  # no overlap: fill in base order
        if position not in overlap:
            chosen.append(position)
        position += 1
    return chosen


# The server passes the projection's own tuples (visible pages, entry pages) on every request,
# so views are cached by identity: an entry holds its tuple (an id can't be reused meanwhile).
_VIEW_CACHE: list[tuple[tuple[Page, ...], str, _View]] = []
_VIEW_CACHE_SIZE = 4


def _view_for(pages: Sequence[Page], adapter: str, hubs: Sequence[Page] | None) -> _View:
    """The view of `pages`. With `hubs` (those whose role is not topic, as the snapshot keeps
    them) an authored view is made from them alone and kept while they are the same tuple: an
    edit to another page then costs no pass over every page (5 ms at 100,000 pages)."""
    for cached_key, cached_adapter, view in list(_VIEW_CACHE):
        if (cached_key is pages or cached_key is hubs) and cached_adapter == adapter:
            return view  # (kept by hubs only when made from them alone)
    authored = [p for p in (pages if hubs is None else hubs) if p.role in AUTHORED_ROLES]
    key = hubs if authored and isinstance(hubs, tuple) else pages
    view = _View(pages, adapter, authored)
    if isinstance(key, tuple):
        _VIEW_CACHE.insert(0, (key, adapter, view))
        del _VIEW_CACHE[_VIEW_CACHE_SIZE:]
    return view


# ---------------------------------------------------------------------------------------
# Assembly


def _compact(value: Any) -> str:
    # Characters, not bytes or \u escapes: the budget is what an agent reads.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _size(item: Any) -> int:
    """len(_compact(item)); a string is encoded by json's own C string encoder directly."""
    return len(encode_basestring(item)) if isinstance(item, str) else len(_compact(item))


@lru_cache(maxsize=4096)
def _folder_card(folder: _FolderFacts) -> _Sized[FolderCard]:
    return _sized(FolderCard.model_construct(path=folder.path, page_count=folder.page_count,
                                             terms=list(folder.terms)))


_TRIMMED_LISTS = ("page_cards", "folder_cards", "suggested_terms", "exact_identifiers")  # in drop order


def _fit_budget(guidance: dict[str, Any], budget: int, known: dict[str, list[int]] | None = None) -> None:
    """Drop the last page card, then folder card, then suggested term, then exact identifier
    until the compact JSON fits. Sizes are summed per item (`known` gives the cards' sizes
    already), so this is at most one dump per term."""
    known = known or {}
    sizes = {name: list(known[name]) if name in known else [_size(item) for item in guidance[name]]
             for name in _TRIMMED_LISTS}
    total = len(_compact({**guidance, **{name: [] for name in _TRIMMED_LISTS}}))
    for name in _TRIMMED_LISTS:
        total += sum(sizes[name]) + max(0, len(sizes[name]) - 1)
    for name in _TRIMMED_LISTS:
        items, item_sizes = guidance[name], sizes[name]
        while total > budget and items:
            items.pop()
            total -= item_sizes.pop() + (1 if items else 0)
    while len(_compact(guidance)) > budget:  # a guard; the arithmetic above is exact
        nonempty = [n for n in _TRIMMED_LISTS if guidance[n]]
        if not nonempty:
            break
        guidance[nonempty[0]].pop()


def build_guidance(
    pages: Sequence[Page], adapter: str, query: str, *, vector_available: bool = False,
    hubs: Sequence[Page] | None = None,
) -> dict[str, Any]:
    """The `retrieval_guidance` object for a query over the visible pages (in page order).

    `pages` must already be the request's visible pages (approved only unless drafts are
    allowed), and `hubs`, when given, those of them whose role is not topic (in any order);
    nothing here reads files, calls the network or initialises vector search."""
    view = _view_for(pages, adapter, hubs)
    query_terms = terms_from_text(query)
    # Overlap compares NFC-casefolded terms, for page ranking and folder order alike. The
    # reference compares page ranking terms case-sensitively (contract App. B quirk 8), so
    # "refund" would miss a page titled "Refund"; folding is the deliberate deviation.
    query_keys = frozenset(fold(term) for term in query_terms)

    source = view.source
    cards: list[_Sized[PageCard]] = []
    folders: list[_FolderFacts] = []
    if source != "none":
        candidates = view.authored if source == "authored" else view.extractive_candidates(query_keys)
        for page in candidates:
            card = _page_card(page)
            if card is not None:
                cards.append(card)
                if len(cards) >= MAX_PAGE_CARDS:
                    break
        folders = view.folder_cards(query_keys)
    suggested: list[str] = []
    identifiers: list[str] = []
    if source != "none":
        suggested = unique(
            chain(query_terms, *(c.card.terms for c in cards), *(f.terms for f in folders)),
            MAX_SUGGESTED_TERMS,
            MAX_TERM_CHARS,
        )
        identifiers = unique(
            chain(*(c.card.exact_identifiers for c in cards), (c.card.path for c in cards)),
            MAX_EXACT_IDENTIFIERS,
            MAX_IDENTIFIER_CHARS,
        )
    if source == "projection_extractive" and not (cards or folders or suggested):
        source = "none"
        identifiers = []

    folder_cards = [_folder_card(f) for f in folders]
    guidance = RetrievalGuidance.model_construct(
        schema_version=SCHEMA_VERSION,
        orientation_source=source,
        content_trust=CONTENT_TRUST,
        max_query_variants=MAX_QUERY_VARIANTS,
        character_budget=CHARACTER_BUDGET,
        folder_cards=[f.card for f in folder_cards],
        page_cards=[c.card for c in cards],
        suggested_terms=suggested,
        exact_identifiers=identifiers,
        # Only a verified provider adds the vector modes; building guidance never probes one.
        fallback_modes=list(FALLBACK_ORDER) if vector_available else ["literal"],
    )
    wire = guidance.model_dump(by_alias=False)  # serve's wire form: snake_case, the model's order
    _fit_budget(wire, CHARACTER_BUDGET, {"page_cards": [c.size for c in cards],
                                         "folder_cards": [f.size for f in folder_cards]})
    return wire
