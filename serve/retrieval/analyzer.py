"""Text analysis for lexical search: English words, code identifiers, numbers, Korean (by a
morphological analyzer), Chinese and Japanese."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

import snowballstemmer

from serve.retrieval import korean, numbers

# A run of word characters joined by identifier connectors (publish.yml, v1.2.3,
# REFUND_WINDOW_DAYS, ExportJob.rotateToken, 2026-07-10). Trailing punctuation is never
# part of a token ("release." is "release", unlike the reference).
COMPOUND_RE = re.compile(r"\w+(?:[._\-/:@#+]+\w+)*")
CONNECTOR_RE = re.compile(r"[._\-/:@#+]+")
DIGIT_RE = re.compile(r"\d")
HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")
CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# Scripts inside a word: Hangul syllables, CJK ideographs and kana, everything else.
SCRIPT_RE = re.compile(
    r"(?P<hangul>[\uac00-\ud7a3]+)"
    r"|(?P<cjk>[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+)"
    r"|(?P<other>[^\uac00-\ud7a3\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+)"
)
STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
))
# A snowball stemmer keeps the word it works on in itself: one per thread, since searches and
# index updates run both on the event loop and in worker threads.
_stemmers = threading.local()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball English stem of a lowercase ASCII word (cached: words repeat a lot)."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def _hangul_terms(run: str, morphology: bool = True) -> Iterator[str]:
    """A Korean word as written and its nouns and stems by the morphological analyzer
    (korean.py): "컴포넌트를" is also 컴포넌트, "동기화하려면" 동기 and 동기화."""
    yield run
    if morphology:
        yield from (term for term in korean.word_terms(run) if term != run)


def _cjk_terms(run: str) -> Iterator[str]:
    # Chinese and Japanese have no spaces: overlapping character bigrams, the standard
    # trick for lexical CJK search; a single character stands for itself.
    if len(run) == 1:
        yield run
        return
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def _word_terms(word: str, morphology: bool = True) -> Iterator[str]:
    """Terms of one connector-free word, which may mix scripts ("3차", "v2版")."""
    pieces = [(m.lastgroup, m.group()) for m in SCRIPT_RE.finditer(word)]
    if len(pieces) > 1:
        yield word.lower()
    for kind, piece in pieces:
        if kind == "hangul":
            yield from _hangul_terms(piece, morphology)
        elif kind == "cjk":
            yield from _cjk_terms(piece)
        else:
            yield from _latin_terms(piece)


def _latin_terms(piece: str) -> Iterator[str]:
    lower = piece.lower()
    # camelCase splitting is for ASCII identifiers; other scripts' words stay whole.
    parts = CAMEL_RE.findall(piece) if piece.isascii() and not piece.isdigit() else [piece]
    if len(parts) > 1:
        yield lower  # the whole camelCase word: "rotatetoken"
    for part in parts:
        low = part.lower()
        if low in STOPWORDS:
            continue
        if low.isascii() and low.isalpha() and len(low) > 2:
            stemmed = stem(low)
            yield stemmed
            if stemmed != low:
                # The word as written too: an exact form is stronger evidence than a stem.
                yield low
        else:
            yield low


def compound_terms(compound: str, morphology: bool = True) -> tuple[str, ...]:
    """Terms of one token as written: an identifier yields itself and its parts, and a number
    its normal forms (numbers.py); Korean words also their morphemes unless `morphology` is
    off (see analyze)."""
    if CONNECTOR_RE.search(compound):
        terms = [compound.lower()]
        for word in CONNECTOR_RE.split(compound):
            if word:
                terms.extend(_word_terms(word, morphology))
    else:
        terms = list(_word_terms(compound, morphology))
    if DIGIT_RE.search(compound) is not None:
        pieces = numbers.CONNECTOR_RE.split(compound)
        for piece in (compound, *pieces) if len(pieces) > 1 else pieces:
            terms.extend(form for form in numbers.word_forms(piece) if form not in terms)
    return tuple(terms)


# Words repeat across a folder: analysing each distinct token once makes indexing a
# dictionary lookup per token. Bounded so odd inputs cannot grow it without limit.
_TERMS_CACHE: dict[str, tuple[str, ...]] = {}
_PLAIN_CACHE: dict[str, tuple[str, ...]] = {}  # terms without Korean morphemes (analyze)
_TERMS_CACHE_MAX = 500_000


def analyze(text: str, *, morphology: bool = True) -> list[str]:
    """Index and query terms of `text`, in order, with repeats (term frequency matters).
    Without `morphology`, a Korean word gives only itself as written: what a question with
    no Korean in it can match of a page's fields is then the same, in the same order, and
    the analyzer (and its dictionary's 50 MB) is not loaded for it."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    plain = not morphology and HANGUL_RE.search(text) is not None
    cache = _PLAIN_CACHE if plain else _TERMS_CACHE
    terms: list[str] = []
    compounds = COMPOUND_RE.findall(numbers.ungroup(text))
    for compound in compounds:
        found = cache.get(compound)
        if found is None:
            found = compound_terms(compound, not plain)
            if len(cache) >= _TERMS_CACHE_MAX:
                cache.clear()
            cache[compound] = found
        terms.extend(found)
    # A number and the word beside it ("100 KB", "version 2"): looked for only in the few
    # texts that have such a word at all (the check runs in C, the loop would not).
    if not numbers.NEIGHBOURS.isdisjoint(compounds):
        terms.extend(numbers.neighbour_forms(compounds))
    return terms


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, first occurrence order."""
    return list(dict.fromkeys(analyze(text)))
