"""Text made safe for traces and ids (markdown made readable, control characters and length
bounded), and the words a question is matched on."""

from __future__ import annotations

import re
from typing import Any

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_HEADING = re.compile(r"(?m)^\s{0,3}#{1,6}\s+")
_ALIASED_LINK = re.compile(r"\[\[([^\]|]+)\|([^\]]+)\]\]")
_LINK = re.compile(r"\[\[([^\]]+)\]\]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORD = re.compile(r"[0-9a-z]+|[^\W\d_a-z]+")
# Words that say nothing of what a question is about (the prompt's digest; the merged order adds some).
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "i", "in", "is",
    "it", "of", "on", "or", "the", "this", "to", "we", "what", "when", "where", "which", "who", "why",
    "with", "you", "your"))


def safe_id(value: str) -> str:
    return _NOT_ALNUM.sub("_", value) or "source"


def markdown_readable(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    # Each pattern needs its marker, so most snippets skip the regexes; without a "\n" a heading can
    # only start the text. `\s` and str.split() agree on what whitespace is.
    if "#" in text:
        if "\n" in text:
            text = _HEADING.sub("", text)
        elif (heading := _HEADING.match(text)) is not None:
            text = text[heading.end():]
    if "[[" in text:
        text = _LINK.sub(r"\1", _ALIASED_LINK.sub(r"\2", text))
    return " ".join(text.split())


def safe_trace_text(text: Any, limit: int = 160) -> str:
    clean = markdown_readable(text)
    if not clean.isprintable():  # markdown_readable already turned \t, \n and the like into spaces
        clean = _CONTROL.sub(" ", clean).strip()
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def relevance_words(text: str, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """The lower-cased words and numbers of `text` (a run of letters of one script is a word),
    without stop words, in order."""
    return [w for w in _WORD.findall(text.lower()) if w not in stop]
