"""Korean words by a morphological analyzer (mecab-ko, its dictionary shipped in
python-mecab-ko-dic): the stems and nouns of a word, not a list of particles of our own.

"컴포넌트를" is 컴포넌트 and a particle; "동기화하려면" is 동기 + 화 (a noun and its suffix: also
동기화) and endings; "써요" is the verb 쓰; "명령어" is one compound noun of 명령 and 어. The
analyzer sees one word at a time (the analyzer's cache holds each distinct word once), which
is what an index needs: its nouns and stems, not a parse of the sentence.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, NamedTuple

# Parts of speech that carry content: nouns, numerals, roots, verb and adjective stems,
# Chinese characters, foreign words. Particles (J*), endings (E*), the light verbs 하/되 as
# suffixes (XSV, XSA), interjections and determiners say nothing about a page's topic.
CONTENT = frozenset(("NNG", "NNP", "NR", "XR", "VV", "VA", "SH", "SL", "SN"))
NOUNS = frozenset(("NNG", "NNP", "NR", "XR", "SH"))
# Particles, endings, suffixes, the copula and the S tags (symbols; foreign words and numbers
# never come out of a run of Hangul syllables): what a word's stems are dressed in.
DRESS = ("J", "E", "XS", "VCP", "S")
NOUNISH = frozenset(("NNG", "NNP", "NR", "XR", "XSN", "SH"))  # parts of a noun as written
CONTRACTED_ENDINGS = frozenset(("니다", "니까", "시다"))
# The copula, the light verbs and -습니다, which the analyzer reads right: "문서입니다", "합니다".
PARSED_WELL = frozenset("입합됩습")
# Hangul syllables are numbered by (initial * 21 + medial) * 28 + final from U+AC00.
HANGUL_FIRST, HANGUL_COUNT, FINAL_B = 0xAC00, 11172, 17
PARSES_KEPT = 4096  # words whose parse is kept (parse())
# The analyzer is not safe across threads (searches and index updates run on the event loop
# and in worker threads): one per thread, made when first needed (English folders never pay).
_local = threading.local()


def _tagger() -> Any:
    tagger = getattr(_local, "tagger", None)
    if tagger is None:
        import mecab  # python-mecab-ko; imported here so a start without Korean skips it

        tagger = _local.tagger = mecab.MeCab()
    return tagger


class Morpheme(NamedTuple):
    """One morpheme of a parse: as written, its first tag, whether the dictionary calls it a
    compound, and its parts' (form, tag): of an inflected or compound one, each part ("써요"
    is 쓰/VV + 어요/EC; "명령어" is 명령/NNG + 어/NNG), else itself."""

    surface: str
    tag: str
    compound: bool
    parts: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=PARSES_KEPT)
def parse(word: str) -> tuple[Morpheme, ...] | None:
    """mecab-ko's reading of one word, or None when the analyzer fails (which must stop no
    indexing and no search). Kept for the last words parsed: a question's words are read
    for their stems, their terms and their nouns."""
    try:
        morphemes = _tagger().parse(word)
    except Exception:  # noqa: BLE001 - see above
        return None
    out = []
    for morpheme in morphemes:
        feature = morpheme.feature
        tag = feature.pos.split("+", 1)[0]
        if feature.expression and feature.type in ("Inflect", "Compound"):
            parts = tuple((form, part_tag) for form, part_tag, *_ in
                          (part.split("/") for part in feature.expression.split("+")))
        else:
            parts = ((morpheme.surface, tag),)
        out.append(Morpheme(morpheme.surface, tag, feature.type == "Compound", parts))
    return tuple(out)


def word_terms(word: str) -> list[str]:
    """Terms of one run of Hangul syllables, beyond the word as written: its content
    morphemes and the noun it begins with ("의존성을" -> 의존, 의존성)."""
    morphemes = parse(word)
    if morphemes is None:
        return []
    terms: list[str] = []
    noun = ""
    noun_open = True
    for morpheme in morphemes:
        if noun_open and morpheme.tag in NOUNISH:
            noun += morpheme.surface
        else:
            noun_open = False
        for form, part_tag in morpheme.parts:
            if part_tag in CONTENT and form not in terms:
                terms.append(form)
        if morpheme.compound and morpheme.surface not in terms:
            terms.append(morpheme.surface)
    if len(noun) >= 2 and noun != word and noun not in terms:
        terms.append(noun)
    stem = _contracted_stem(word)
    if stem and stem not in terms:
        terms.append(stem)
    return terms


def _contracted_stem(word: str) -> str:
    """The stem of a verb in the formal -ㅂ니다 form, which mecab-ko's dictionary often misses
    for stems of two syllables or more ("미룹니다" read as three unknown nouns): the syllable
    before 니다 (니까, 시다) with its final ㅂ taken off ("미룹니다" -> "미루"). One-syllable
    stems ("씁니다") the analyzer reads itself."""
    if len(word) < 4 or word[-2:] not in CONTRACTED_ENDINGS or word[-3] in PARSED_WELL:
        return ""
    offset = ord(word[-3]) - HANGUL_FIRST
    if not 0 <= offset < HANGUL_COUNT or offset % 28 != FINAL_B:
        return ""
    return word[:-3] + chr(HANGUL_FIRST + offset - FINAL_B)


def nouns(word: str) -> list[str]:
    """The nouns of one Hangul word, compounds whole and in parts ("구글캘린더랑" -> 구글,
    캘린더): what a question is about, beside its verbs and endings."""
    out: list[str] = []
    for morpheme in parse(word) or ():
        if morpheme.tag in NOUNS:
            if morpheme.surface not in out:
                out.append(morpheme.surface)
            out.extend(form for form, tag in morpheme.parts if tag in NOUNS and form not in out)
    return out


def stems(word: str) -> list[str]:
    """What one Hangul word is made of, particles and endings aside: its nouns, pronouns,
    stems and adverbs ("무엇인가요" -> 무엇; "공유하려면" -> 공유; "따로" -> 따로)."""
    morphemes = parse(word)
    if morphemes is None:
        return [word]
    out: list[str] = []
    for morpheme in morphemes:
        out.extend(form for form, tag in morpheme.parts if not tag.startswith(DRESS) and form not in out)
    return out
