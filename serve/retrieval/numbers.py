"""One normal form for numbers, so each spelling of the same number meets the others.

A page says "128,000 tokens", "128K" or "100 KB"; a question says "128000-token" or "100000
bytes". The analyzer keeps every token's own terms and adds the number's normal form: the
value in plain digits ("128000"), a size's value in bytes beside the term "byte", and a
version as "v" and its numbers without trailing zeros ("v2.0.0", "2.0" and "version 2" all
give "v2"). Ranges need nothing: "1-10" and "1 to 10" already share "1" and "10".
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Thousands separators: "128,000" and "1,000,000" (groups of three digits exactly), not a
# list such as "1,2,3" or a decimal comma.
GROUPED_RE = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w]|,\d)")
NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
# Connectors that end a number's spelling ("128K-token", "100KB/s"); a dot is inside one (v2.0).
CONNECTOR_RE = re.compile(r"[_\-/:@#+]+")
# A number with its scale or unit glued on: 128K, 1.5M, 100KB, 2GiB, 3만, 500ms, 500밀리초.
SUFFIXED_RE = re.compile(r"(\d+(?:\.\d+)?)([^\W\d_]+)")
CLOCK_RE = re.compile(r"(\d{1,2}):(\d{2})")  # 14:00 is also 1400, as schedules write it
VERSION_RE = re.compile(r"[vV]?(\d+(?:\.\d+)+)|[vV](\d+)")
# Scale letters as written after a number; lower-case m is minutes or metres, not millions.
SCALES: dict[str, int] = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                          "천": 10**3, "만": 10**4, "억": 10**8}
# Sizes, by the unit's lower-case spelling: decimal prefixes as SI, binary ones as IEC.
BYTES: dict[str, int] = {
    "b": 1, "byte": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
BYTE_TERM = "byte"
# Durations by every spelling of their unit, English and Korean; "m" (minutes or metres) is not.
DURATIONS: dict[str, str] = {
    spelling: unit
    for unit, spellings in (
        ("millisecond", ("ms", "msec", "millisecond", "milliseconds", "밀리초")),
        ("second", ("s", "sec", "secs", "second", "seconds", "초")),
        ("minute", ("min", "mins", "minute", "minutes", "분")),
        ("hour", ("h", "hr", "hrs", "hour", "hours", "시간")),
    )
    for spelling in spellings
}
# Words that make the next number a version: "version 2", "버전 3".
VERSION_WORDS = frozenset(
    spelling for word in ("version", "ver", "release", "버전")
    for spelling in (word, word.capitalize(), word.upper()))
# The spellings of a unit after a spaced number that add a form ("100 KB"; "100 bytes" needs
# none), and the version words: a text without any of them skips the neighbour pass.
SPACED_UNITS = frozenset(
    spelling
    for unit in [*(u for u, size in BYTES.items() if size > 1),
                 *(u for u, name in DURATIONS.items() if not u.startswith(name))]
    if len(unit) > 1  # "5 s" is rare and "s" a common token; "5s" is read as written
    for spelling in (unit, unit.upper(), unit.capitalize(), unit[0] + unit[1:].upper(),
                     unit[0].upper() + unit[1:-1] + unit[-1].upper()))
NEIGHBOURS = SPACED_UNITS | VERSION_WORDS
KOREAN_UNITS = sorted((k for k in DURATIONS if k[:1] >= "\uac00"), key=len, reverse=True)
MAX_DIGITS = 24  # beyond this a "number" is an identifier or a hash, not a quantity


GROUPED_HINT_RE = re.compile(r"\d,\d{3}")


def ungroup(text: str) -> str:
    """`text` with thousands separators taken out of its numbers."""
    if "," not in text or GROUPED_HINT_RE.search(text) is None:
        return text
    return GROUPED_RE.sub(lambda m: m.group().replace(",", ""), text)


def neighbour_forms(compounds: list[str]) -> list[str]:
    """Forms of numbers written apart from their unit ("100 KB") or after a version word
    ("version 2"), over a text's tokens in order."""
    out: list[str] = []
    for previous, compound in zip(compounds, compounds[1:], strict=False):
        if previous[:1].isdigit():
            out.extend(unit_forms(previous, compound))
        elif previous in VERSION_WORDS and compound[:1].isdigit():
            out.extend(version_of(compound))
    return out


def plain(value: Decimal) -> str:
    """A value in plain digits: 128000, 1.5, never 1.28E+5."""
    text = format(value.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def scaled(number: str, factor: int) -> str | None:
    if len(number) > MAX_DIGITS:
        return None
    try:
        return plain(Decimal(number) * factor)
    except InvalidOperation:
        return None


def version(numbers: str) -> str:
    """"2.0.0" -> "v2", "3.10" -> "v3.10", "1.2.0" -> "v1.2"."""
    parts = numbers.split(".")
    while len(parts) > 1 and parts[-1].strip("0") == "":
        parts.pop()
    return "v" + ".".join(str(int(p)) if len(p) < MAX_DIGITS else p for p in parts)


def word_forms(word: str) -> tuple[str, ...]:
    """Normal forms of one word as written (connectors kept: "v2.0", "128K", "100KB")."""
    if not word[:1].isdigit() and word[:1] not in "vV":
        return ()
    if (m := VERSION_RE.fullmatch(word)) is not None:
        forms = [version(m[1] or m[2])]
        if m[1] and not word[0].isalpha() and m[1].count(".") == 1:
            forms.append(plain(Decimal(m[1])))  # "1.50" is also the decimal 1.5
        return tuple(forms)
    if (m := SUFFIXED_RE.fullmatch(word)) is not None:
        number, unit = m.groups()
        if unit in SCALES:
            found = scaled(number, SCALES[unit])
            return (found,) if found else ()
        return unit_forms(number, unit, glued=True)
    if (m := CLOCK_RE.fullmatch(word)) is not None:
        return (f"{int(m[1]):02d}{m[2]}",)
    return ()


def unit_forms(number: str, unit: str, *, glued: bool = False) -> tuple[str, ...]:
    """Forms of a number and its unit, glued ("100KB", "500ms") or apart ("100 KB")."""
    if NUMBER_RE.fullmatch(number) is None:
        return ()
    lower = unit.lower()
    if lower[:1] >= "\uac00":  # Hangul: a particle may follow the unit ("500밀리초마다")
        lower = next((k for k in KOREAN_UNITS if lower.startswith(k)), lower)
    if (duration := DURATIONS.get(lower)) is not None:
        # Apart, the number and the unit's own word are terms already: add the unit's name.
        return (duration,) if glued or not lower.startswith(duration) else ()
    size = BYTES.get(lower)
    if size is None or (size == 1 and not glued):
        return ()  # "100000 bytes" is in plain digits and stems to "byte" already
    found = scaled(number, size)
    return (found, BYTE_TERM) if found else (BYTE_TERM,)


def version_of(number: str) -> tuple[str, ...]:
    """The version form of a number after a version word: "version 2" -> "v2"."""
    if NUMBER_RE.fullmatch(number) is None or len(number) > MAX_DIGITS:
        return ()
    return (version(number),)


def number_forms(word: str) -> tuple[str, ...]:
    """The numbers of a word in their normal form: "128000-token" -> ("128000",),
    "128K" -> ("128000",), "v2.0" -> ("v2",), "100KB" -> ("100000", "byte")."""
    out: list[str] = list(word_forms(word)) if CLOCK_RE.fullmatch(word) else []
    for piece in CONNECTOR_RE.split(ungroup(word)):
        forms = word_forms(piece)
        out.extend(forms or ((piece,) if NUMBER_RE.fullmatch(piece) else ()))
    return tuple(out)
