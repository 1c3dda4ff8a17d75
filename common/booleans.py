"""The one boolean parser both services use: one set of words, and what an unknown word means."""

from __future__ import annotations

from typing import Any

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
# pydantic's (so FastAPI's, whose query strings the reference reads) one-letter forms.
LETTER_WORDS = {"t": True, "y": True, "f": False, "n": False}
BOOLEAN_HELP = "must be a boolean (true/false, 1/0, yes/no, on/off)"


def parse_bool(text: str, *, strict: bool = True, letters: bool = False) -> bool:
    """The truth value of a word, trimmed and in any case. An unknown word raises ValueError
    when `strict` (settings, query strings, the bridge's HTTP writes), else it is false (the
    reference's environment variables and MCP-style arguments read any other word as false).
    `letters` also reads t/y/f/n, as pydantic does."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    if letters and word in LETTER_WORDS:
        return LETTER_WORDS[word]
    if strict:
        raise ValueError(BOOLEAN_HELP)
    return False


def coerce_bool(value: Any) -> bool:
    """A lenient JSON argument (contract 6.1): a boolean as it is, a string by its word (any
    other word false), anything else by its truthiness."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return parse_bool(value, strict=False)
    return bool(value)
