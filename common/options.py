"""The shape of one service option: flag, environment variable, parser and documentation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One setting of a service's typed settings object, and how it is given."""

    name: str
    flag: str
    env: str
    parse: Callable[[str], Any]
    help: str
    repeatable: bool = False
    is_flag: bool = False
    aliases: tuple[str, ...] = ()  # other accepted spellings of the flag
    legacy_env: tuple[str, ...] = ()  # older environment variable names still honoured
    file_keys: tuple[str, ...] = ()  # keys in a settings file (the bridge has one)
    secret: bool = False  # never echoed back (tokens, API keys)
