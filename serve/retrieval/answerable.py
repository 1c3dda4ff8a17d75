"""Whether a context pack's evidence covers what the question is about.

Lexical search returns a page as soon as one query term matches, so "Where is the quantum
catering policy?" finds the page that says "policy". Evidence answers a question only
when it holds the question's distinctive content: its quoted phrases, its identifiers
(snake_case, camelCase, dotted or numbered names, ALL-CAPS codes) and its rare words. A
distinctive term that no evidence page holds is named in the pack's limitations, and the
pack is not answerable.

Natural questions are worded differently from the pages that answer them ("how can users
check that a download came from us" against a page on signature verification), so a plain
word that the evidence lacks is not enough on its own: only words the whole folder never
uses count ("quantum", "catering"), and only when they are nearly all the question says
(in a large folder, which has nearly every ordinary word, one is enough). Protocol-free:
judge() reaches the index through `Lookup`; IndexLookup is that over the lexical index.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from serve.retrieval import korean
from serve.retrieval.analyzer import analyze
from serve.retrieval.index import LexicalIndex
from serve.retrieval.numbers import number_forms
from serve.retrieval.pairs import literal_haystack
from serve.retrieval.question import content_text
from serve.source.page import Page

QUOTED_RE = re.compile(r"\"([^\"]{2,200})\"|“([^”]{2,200})”|「([^」]{2,200})」")
# An identifier as written: connectors inside a word, letters and digits mixed, a number of
# three digits or more (a year, an amount, a port), an inner capital (camelCase), or a code
# in capitals (BLUEHERON, INC-4471).
CONNECTED_RE = re.compile(r"\w[_./:@#+]\w|[A-Za-z]\d|\d[A-Za-z]|\d{3}")
CAMEL_RE = re.compile(r"[a-z][A-Z]")
CAPS_RE = re.compile(r"^[A-Z][A-Z0-9_-]{3,}$")
NAME_RE = re.compile(r"^[A-Z][a-z]+[A-Za-z]*$")  # Todoist, Notion, GitHub; not PDF, not "I"
LATIN_RE = re.compile(r"^[A-Za-z]+$")
HANGUL_RE = re.compile(r"^[\uac00-\ud7a3]+$")
# A Latin word with a Korean particle or ending on it: "FreeDOS에서만" names "FreeDOS".
LATIN_HANGUL_RE = re.compile(r"^([\x21-\x7e]+)[\uac00-\ud7a3]+$")
ALPHA_RE = re.compile(r"[^\W\d_]{3,}")  # the words of an identifier beside its numbers
CJK_RE = re.compile(r"^[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+$")
EDGE = "?!.,;:()[]{}\"'“”‘’「」『』？！。、"
CURRENCY = "$€£¥₩"  # "$1.5k" is the amount 1500, as "1,500" on the page
# A major version as written and its bare number: "v17" is also "React 17" (not "9.0.0": a
# release is named whole, and a bare 9 is on any page).
MAJOR_RE = re.compile(r"[vV](\d+)")
# Terms on nearly any page written in Korean (endings and particles): a folder indexed
# under none of them has no Korean pages.
SCRIPT_PROBES = {"hangul": ("니다", "하는", "에서", "있는", "으로")}
MIN_WORD = 3  # shorter Latin words are too often abbreviations or filler to judge by
# Words the folder never uses decide only when the question has at most this many words
# the folder does use: a small folder lacks plenty of ordinary words ("often", "replace"),
# so an answerable question can have several unknown words beside the ones that matched.
MAX_KNOWN = 1
COMMON_SHARE = 0.25
COMMON_MIN_FOLDER = 50  # in a smaller folder every known word counts as specific
LARGE_FOLDER = 1000


class Lookup(Protocol):
    """What the rule asks of the index and the evidence."""

    def in_evidence(self, term: str) -> bool:
        """Whether any evidence page is indexed under the (analysed) term."""

    def folder_share(self, term: str) -> float:
        """The share of the folder's visible pages indexed under the term (0.0: none)."""

    @property
    def folder_size(self) -> int:
        """How many visible pages the folder has."""

    def phrase_in_evidence(self, phrase: str) -> bool:
        """Whether any evidence page's text holds the case-folded phrase (whitespace runs
        in the page read as one space)."""


@dataclass(frozen=True)
class Coverage:
    """The verdict: answerable, and the distinctive terms that found nothing."""

    answerable: bool
    missing: tuple[str, ...] = ()

    def limitation(self) -> str:
        names = ", ".join(f'"{term}"' for term in self.missing)
        return (f"The evidence does not mention {names}: no page found covers "
                f"{'this term' if len(self.missing) == 1 else 'these terms'} of the question.")


@dataclass(frozen=True)
class Term:
    """One content word of the question: as written, and the index terms it stands for."""

    text: str
    terms: tuple[str, ...]
    identifier: bool
    script: str = ""  # "hangul" or "cjk" for words in those scripts, else ""
    # Its numbers in normal form and its other words: "128000-token" is also
    # ("128000",) and ("token",), as a page that says "128,000 tokens" holds them.
    numbers: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    # A capitalised word inside the question: a product, a tool, a person ("Todoist").
    name: bool = False


def is_identifier(word: str) -> bool:
    return bool(CONNECTED_RE.search(word) or CAMEL_RE.search(word) or CAPS_RE.match(word))


def content_words(query: str) -> list[Term]:
    """The question's content words (filler words gone, question.py), quoted phrases aside."""
    unquoted = QUOTED_RE.sub(" ", query)
    out: list[Term] = []
    seen: set[str] = set()
    # A capital opens an English sentence; a Korean one has none, so its first word can be a name.
    english = not any("\uac00" <= c <= "\ud7a3" for c in unquoted)
    first_word = (unquoted.split() or [""])[0].strip(EDGE) if english else ""
    for raw in content_text(unquoted).split():
        word = raw.strip(EDGE)
        first = word == first_word
        if word[:1] in CURRENCY and word[1:2].isdigit():
            word = word[1:]
        if (latin := LATIN_HANGUL_RE.match(word)) is not None:
            word = latin[1].strip(EDGE)
        key = word.casefold()
        if not word or key in seen:
            continue
        seen.add(key)
        hangul = HANGUL_RE.match(word) is not None
        # A Korean word counts by its nouns: its verbs and endings ("써요", "싶은데",
        # "뭐예요") say how the question is asked, as English filler words do.
        terms = tuple(korean.nouns(word)) if hangul else tuple(analyze(word))
        if not terms:
            continue  # a stopword, or a Korean word without a noun
        identifier = is_identifier(word)
        if not identifier and ((LATIN_RE.match(word) and len(word) < MIN_WORD)
                               or (HANGUL_RE.match(word) and len(word) < 2)):
            continue  # too short to judge by: "and", "및", "더"
        script = "hangul" if HANGUL_RE.match(word) else "cjk" if CJK_RE.match(word) else ""
        found = number_forms(word) if identifier else ()
        words = tuple(analyze(" ".join(ALPHA_RE.findall(word)))) if found else ()
        name = not identifier and not first and NAME_RE.match(word) is not None
        out.append(Term(word, terms, identifier, script, found, words, name))
    return out


def quoted_phrases(query: str) -> list[str]:
    return [" ".join(next(g for g in m.groups() if g).split()) for m in QUOTED_RE.finditer(query)]


def _found(word: Term, has: Callable[[str], bool]) -> bool:
    """Whether the word is indexed where `has` looks (see _share), or, for a word holding
    numbers, its numbers in normal form and its other words are; a major version ("v17")
    also by its bare number."""
    if _share(word, lambda term: 1.0 if has(term) else 0.0) > 0.0:
        return True
    if (major := MAJOR_RE.fullmatch(word.text)) is not None and has(major[1]):
        return True
    return bool(word.numbers) and all(has(term) for term in (*word.numbers, *word.words))


def _share(word: Term, share: Callable[[str], float]) -> float:
    """The share of pages indexed under the word: an identifier as a whole, a Hangul word by
    its first two syllables or more (particles and endings vary: "등급은", "등급을"), any
    other word by its first term (its stem)."""
    terms = word.terms
    if word.script == "hangul" and not word.identifier:
        return max((share(t) for t in terms), default=0.0)  # its nouns (content_words)
    return share(terms[0])


def judge(query: str, lookup: Lookup) -> Coverage:
    """The rule: answerable unless
    - a quoted phrase or an identifier is in no evidence page, or
    - the folder never uses two or more of the question's words while it uses at most one
      of its specific words (in a folder of COMMON_MIN_FOLDER pages or more, those on fewer
      than COMMON_SHARE of its pages: the words of the folder's own topic, on most pages,
      tell nothing), or never uses any of them, or
    - the folder is large (LARGE_FOLDER pages) and never uses one of the question's words:
      a large folder has nearly every ordinary word somewhere.
    Words of a script the folder has no pages in (a Korean question over English pages) are
    not counted: their absence says nothing about the topic."""
    missing: list[str] = []
    words = content_words(query)
    # A name no evidence page has: the question is about something the pack does not cover
    # ("sync with Todoist"), however many of its other words the evidence has.
    missing.extend(w.text for w in words if w.name and not _found(w, lookup.in_evidence))
    for phrase in quoted_phrases(query):
        if not lookup.phrase_in_evidence(phrase.casefold()):
            missing.append(phrase)
    for word in words:
        if word.identifier and not (_found(word, lookup.in_evidence)
                                    or lookup.phrase_in_evidence(word.text.casefold())):
            missing.append(word.text)
    # A Chinese or Japanese run is a phrase, not a word (no spaces): no folder holds a
    # question's phrasing, so such runs are not judged.
    plain = [w for w in words if not w.identifier and w.script != "cjk" and w.text not in missing]
    shares = {w.text: _share(w, lookup.folder_share) for w in plain}
    spoken = {w.script for w in plain if shares[w.text] > 0.0}
    spoken |= {script for script in {w.script for w in plain} - spoken - {""}
               if any(lookup.folder_share(t) > 0.0 for t in SCRIPT_PROBES[script])}
    plain = [w for w in plain if not w.script or w.script in spoken]
    unknown = [w.text for w in plain if shares[w.text] == 0.0]
    common = COMMON_SHARE if lookup.folder_size >= COMMON_MIN_FOLDER else 1.01
    specific = [w for w in plain if 0.0 < shares[w.text] < common]
    if unknown and (lookup.folder_size >= LARGE_FOLDER
                    or (len(specific) <= MAX_KNOWN and (len(unknown) >= 2 or not specific))):
        missing.extend(unknown)
    return Coverage(not missing, tuple(missing))


class IndexLookup:
    """Lookup over the lexical index, for the evidence pages of one pack. Called under the
    index's lock (the index may move on to a newer snapshot)."""

    def __init__(self, index: LexicalIndex, evidence: Sequence[Page], *, approved_only: bool) -> None:
        self.index = index
        self.pages = evidence
        docs = [d for page in evidence if (d := index.by_path.get(page.path)) is not None]
        self.docs = np.array(sorted(docs), dtype=np.int64)
        self.df = index.df_approved if approved_only else index.df_all
        self.size = index.n_approved if approved_only else index.n_all

    def in_evidence(self, term: str) -> bool:
        tid = self.index.vocab.get(term)
        if tid is None or not len(self.docs):
            return False
        return any(bool(np.isin(self.docs, docs, assume_unique=True).any())
                   for docs, _ in self.index.postings_of(tid))

    def folder_share(self, term: str) -> float:
        tid = self.index.vocab.get(term)
        if tid is None or tid >= len(self.df) or not self.size:
            return 0.0
        return int(self.df[tid]) / self.size

    @property
    def folder_size(self) -> int:
        return self.size

    def phrase_in_evidence(self, phrase: str) -> bool:
        # Whitespace as in the phrase (a line break or two spaces in the page still match).
        return any(phrase in " ".join(literal_haystack(page).split()) for page in self.pages)
