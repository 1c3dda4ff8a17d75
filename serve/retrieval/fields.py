"""Field weighting of lexical hits: a page named after what the question asks beats a hub that
merely mentions it.

BM25 over one bag of words counts a term the same wherever it sits, so a long FAQ or a hub
that lists every topic collects the question's words from a dozen sections. Each candidate's
score is multiplied by how much of the question's weight (its terms' idf) its fields hold:

- the name field (title, aliases, path without its suffix) most: it says what the page is;
- the headings less: they say what its sections are;

and hub pages (index and hot roles, FAQs, and pages that are mostly a list of
links) are lowered unless their name holds most of the question: then they are the answer.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from serve.retrieval.analyzer import COMPOUND_RE, CONNECTOR_RE, STOPWORDS, analyze, stem
from serve.retrieval.question import KOREAN_PARTICLES
from serve.source.names import ALIAS_KEYS

NAME_WEIGHT = 0.6  # factor added when the name holds all of the question's weight
NAMED_WORD_BONUS = 0.25  # name credit per further title word a question holds whole
NAMED_MAX = 1.5
NAME_PRECISION = 0.5  # how much of the name credit depends on the name holding little else
HEADING_WEIGHT = 0.4  # the same for the headings (terms already in the name do not count)
LEAD_WEIGHT = 0.6  # the same for the lead (the page's first lines, its summary)
HUB_FACTOR = 0.6  # a hub whose name does not answer the question
HUB_ANSWER_SHARE = 0.5  # share of the question's weight a hub's name must hold to be the answer
# Overview pages explain the wiki in prose (who owns what, how it is organised): often
# the answer, so only the navigation roles count as hubs. All three stay in orientation.
HUB_ROLES = frozenset(("hot", "index"))
HUB_NAMES = frozenset(("faq", "faqs", "index", "readme", "home", "contents", "toc", "sitemap"))
HUB_MIN_LINKS = 10  # a page with this many links or more ...
HUB_LINES_PER_LINK = 10  # ... and at most this many lines per link is a list of links
# Lower-case words joined by dots, two or more: a note's place in a hierarchy.
HIERARCHY_RE = re.compile(r"[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]*[a-z][a-z0-9_-]*)+")


class Hit(Protocol):
    page: Any
    score: float



def page_aliases(page: Any) -> tuple[str, ...]:
    """The page's aliases: its own field when the parser gives one, else frontmatter's."""
    own = getattr(page, "aliases", None)
    if own:
        return tuple(own)
    return _frontmatter_aliases(page.frontmatter_json)


@lru_cache(maxsize=16384)
def _frontmatter_aliases(frontmatter_json: str) -> tuple[str, ...]:
    if '"alias' not in frontmatter_json:  # most pages have none: skip the parse
        return ()
    try:
        data = json.loads(frontmatter_json)
    except ValueError:
        return ()
    found: list[str] = []
    for key in ALIAS_KEYS:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str):
            found.extend(v.strip() for v in value.split(","))
        elif isinstance(value, list):
            found.extend(str(v) for v in value if isinstance(v, (str, int, float)))
    return tuple(v for v in found if v)


def _file_name(path: str) -> str:
    """The path's last part without its suffix: folders name a group of pages, not this one.
    A dotted hierarchy ("handbook.people.offboarding", Dendron's folders) is named by its
    last part for the same reason."""
    base = path.rsplit("/", 1)[-1]
    if base.endswith((".md", ".org", ".markdown")):
        base = base.rsplit(".", 1)[0]
    if HIERARCHY_RE.fullmatch(base):
        base = base.rsplit(".", 1)[-1]
    return base


def _joined(terms: list[str]) -> str:
    """Terms as "\0a\0b\0" (`"\0" + t + "\0" in it` tests membership): a string takes a
    tenth of a set's memory, which keeps the caches below small."""
    return "\0" + "\0".join(dict.fromkeys(terms)) + "\0"


@lru_cache(maxsize=8192)
def name_terms(title: str, path: str, aliases: tuple[str, ...], morphology: bool = True) -> str:
    """Terms of a page's name field, joined."""
    return _joined(analyze(" ".join((title, _file_name(path), *aliases)), morphology=morphology))


@lru_cache(maxsize=8192)
def title_terms(title: str, morphology: bool = True) -> frozenset[str]:
    return frozenset(analyze(title, morphology=morphology))


@lru_cache(maxsize=8192)
def title_words(title: str) -> tuple[frozenset[str], ...]:
    """Per word of a title, the forms that say the question holds it: the word as written,
    its stem, and a Korean word without its particle. Parts of an identifier are words of
    their own ("DXF-Internals" is "dxf" and "internals"); stop words are left out."""
    words: list[frozenset[str]] = []
    if not title.isascii():  # as analyze() reads it
        title = unicodedata.normalize("NFKC", title)
    for compound in COMPOUND_RE.findall(title):
        for word in CONNECTOR_RE.split(compound):
            low = word.lower()
            if not low or low in STOPWORDS:
                continue
            forms = {low}
            if not low.isascii():  # "Effect가", "컴포넌트를": the word without its particle
                bare = next((low[: -len(p)] for p in KOREAN_PARTICLES
                             if low.endswith(p) and len(low) > len(p) + 1), low)
                forms.add(bare)
                low = bare
            if low.isascii() and low.isalpha():
                forms.add(stem(low))
            words.append(frozenset(forms))
    return tuple(words)


def names_page(title: str, asked: frozenset[str]) -> bool:
    """Whether the question holds every word of the title, in one of its forms ("group"
    holds "Grouping"): the question names the page."""
    words = title_words(title)
    return bool(words) and all(forms & asked for forms in words)


@lru_cache(maxsize=4096)
def heading_terms(headings: tuple[str, ...], morphology: bool = True) -> str:
    """Terms of a page's headings, joined."""
    return _joined(analyze(" ".join(headings), morphology=morphology))


def _names_something(term: str) -> bool:
    """Whether a term can say what a page is about by itself: not a digit run, nor a one- or
    two-letter piece of an identifier ("pi" of "pi3topbm"); Korean bigrams are words."""
    if term.isdigit():
        return False
    return len(term) >= 3 or not term.isascii()


def is_hub(page: Any) -> bool:
    """Whether a page is for finding other pages rather than for reading."""
    if page.role in HUB_ROLES:
        return True
    base = page.path.rsplit("/", 1)[-1].rsplit(".", 1)[0].casefold()
    if base in HUB_NAMES:
        return True
    links = len(page.links)
    return links >= HUB_MIN_LINKS and page.line_count <= HUB_LINES_PER_LINK * links


def _profile(page: Any, morphology: bool = True) -> tuple[str, str, bool]:
    """The fields of a page field_factor() reads whatever the question (without Korean
    morphemes for a question with no Korean in it: analyzer.analyze)."""
    return (name_terms(page.title, page.path, page_aliases(page), morphology),
            heading_terms(page.headings, morphology), is_hub(page))


Keyed = Sequence[tuple[str, float, bool]]  # per query term: "\0term\0", weight, names something


def keyed_terms(weights: Mapping[str, float]) -> list[tuple[str, float, bool]]:
    """The query's terms as field_factor reads them (made once a query, not once a page)."""
    return [(f"\0{term}\0", weight, _names_something(term)) for term, weight in weights.items()]


def field_factor(page: Any, keyed: Keyed, total: float, asked: frozenset[str] = frozenset(),
                 lead: str = "\0", morphology: bool = True) -> float:
    """The multiplier of one page's score for the query terms in `keyed` (keyed_terms(); their
    weights sum to `total`); `asked`: every term of the question, filler words included;
    `lead`: the lead's terms joined as "\0a\0b\0"."""
    name, heads, hub = _profile(page, morphology)
    in_name = in_heads = in_lead = 0.0
    for key, weight, names in keyed:
        if key in lead:
            in_lead += weight
        if not names:
            continue
        if key in name:
            in_name += weight
        elif key in heads:
            in_heads += weight
    in_name /= total
    if in_name and asked:
        title = title_terms(page.title, morphology)
        if names_page(page.title, asked):
            # The question names the page; a longer name it holds whole says more of it
            # ("What is DXF?" over "DXF" for "What is DXF?").
            in_name = min(1.0 + NAMED_WORD_BONUS * (len(title_words(page.title)) - 1),
                          NAMED_MAX)
        elif title:
            # A name that is mostly the question's words is about it; one that has many other
            # words only touches it ("DXF" over "DXF Ground Truth" for "What is DXF?").
            precision = len(title & asked) / len(title)
            in_name *= 1.0 - NAME_PRECISION + NAME_PRECISION * precision
    factor = (1.0 + NAME_WEIGHT * in_name + HEADING_WEIGHT * in_heads / total
              + LEAD_WEIGHT * in_lead / total)
    if in_name < HUB_ANSWER_SHARE and hub:
        factor *= HUB_FACTOR
    return factor


def weigh_fields(hits: Sequence[Hit], weights: Mapping[str, float],
                 asked: frozenset[str] = frozenset(),
                 lead_of: Callable[[str], str] = lambda summary: "\0", morphology: bool = True) -> None:
    """Multiply each hit's score by its page's field factor, in place (`lead_of`: a page
    summary's terms joined as "\0a\0b\0", from the index's own cache; `morphology` off for
    a question with no Korean in it)."""
    total = sum(weights.values())
    if total <= 0.0:
        return
    keyed = keyed_terms(weights)
    for hit in hits:
        hit.score *= field_factor(hit.page, keyed, total, asked, lead_of(hit.page.summary),
                                  morphology)
