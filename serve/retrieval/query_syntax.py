"""Query syntax (issue 27): "quoted phrases" a page must hold and -words it must not; the
other words rank as they always did. A query without either is left exactly as it was."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property

from serve.source.page import Page

_PHRASE = re.compile(r'"([^"]*)"')
# -word: a token of its own, a letter first and at least two characters, so that a command's
# flags (`tail -f`, `get -o yaml`) and negative numbers stay search words.
_EXCLUSION = re.compile(r"(?<!\S)-([^\W\d_][\w'.-]*\w)[.,;:!?)\]}]*(?!\S)")


def _folded(text: str) -> str:
    """Case-folded, NFC, whitespace runs as one space: how phrases are compared."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


@dataclass(frozen=True, slots=True)
class QuerySyntax:
    """A query split into what ranks and what constrains."""

    query: str  # as sent
    ranked: str  # what ranks: the query without its -words, phrases quoted as sent
    free: str  # the free words alone: neither a phrase nor a -word
    phrases: tuple[str, ...] = ()  # folded (_folded)
    excluded: tuple[str, ...] = ()  # case-folded words

    @property
    def constrains(self) -> bool:
        return bool(self.phrases or self.excluded)


def parse_query(query: str) -> QuerySyntax:
    phrases: list[str] = []
    words: list[str] = []
    ranked: list[str] = []  # pieces of the query, -words left out
    free: list[str] = []

    def outside(text: str) -> None:
        def drop(match: re.Match[str]) -> str:
            words.append(unicodedata.normalize("NFC", match.group(1)).casefold())
            return " "
        rest = _EXCLUSION.sub(drop, text)
        ranked.append(rest)
        free.append(rest)

    at = 0
    for match in _PHRASE.finditer(query):  # -words inside a phrase are the phrase's words
        outside(query[at:match.start()])
        if phrase := _folded(match.group(1)):
            phrases.append(phrase)
        ranked.append(match.group(0))
        free.append(" ")
        at = match.end()
    outside(query[at:])
    if not phrases and not words:
        return QuerySyntax(query, query, query)
    return QuerySyntax(query, " ".join("".join(ranked).split()), " ".join("".join(free).split()),
                       tuple(dict.fromkeys(phrases)), tuple(dict.fromkeys(words)))


class PageText:
    """A page's title and body as the syntax reads them, each made once."""

    def __init__(self, page: Page) -> None:
        self.page = page

    @cached_property
    def title(self) -> str:
        return _folded(self.page.title)

    @cached_property
    def body(self) -> str:
        return _folded(self.page.text)

    def has_phrase(self, phrase: str) -> bool:
        return phrase in self.title or phrase in self.body

    def has_word(self, word: str) -> bool:
        pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
        return bool(pattern.search(self.title) or pattern.search(self.body))


def satisfies(page: Page, syntax: QuerySyntax) -> bool:
    """Every phrase in the title or body, and none of the -words as a whole word in either."""
    if not syntax.constrains:
        return True
    text = PageText(page)
    return (all(text.has_phrase(p) for p in syntax.phrases)
            and not any(text.has_word(w) for w in syntax.excluded))
