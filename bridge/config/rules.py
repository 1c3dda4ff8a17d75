"""The rules that turn one given value into a bridge setting, the same whichever source gave it."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import PlainValidator, ValidationInfo

from common.booleans import FALSE_WORDS, TRUE_WORDS, parse_bool
from common.hosts import host_of_authority, normalize_origin
from common.options import parse_public_url, reference_text

# Where a value came from: the command line or the caller's code, the environment, the
# settings file's `config`, or the body of `PUT /settings/config.json`.
Source = Literal["option", "env", "settings", "http"]
SOURCE_POLICIES = ("private-http", "allowlist", "public-https")
IO_LOG_MODES = ("off", "file", "logger")
ORCHESTRATION_MODES = ("evidence-only", "delegated-runtime", "hybrid")
RUNTIME_ADAPTERS = ("chat-completions", "deepagents-acp")
_POLICY_ALIASES = {"private-http": "private-http", "default": "private-http", "open": "private-http",
                   "allowlist": "allowlist", "public-https": "public-https"}
_PROFILE_ALIASES = {"hermes": "hermes", "deepagents": "deepagents", "generic": "generic",
                    "openaicompatible": "generic"}
_ADAPTER_ALIASES = {"chatcompletions": "chat-completions", "openai": "chat-completions",
                    "openaicompatible": "chat-completions", "deepagentsacp": "deepagents-acp",
                    "acp": "deepagents-acp"}
_IO_LOG_ALIASES = {**dict.fromkeys((*FALSE_WORDS, "disable", "disabled", "none"), "off"),
                   **dict.fromkeys((*TRUE_WORDS, "file", "jsonl"), "file"),
                   **dict.fromkeys(("logger", "log", "stdout"), "logger")}


class SettingsError(Exception):
    """A setting is invalid or the bind policy refuses it; the message names the setting.

    Not a ValueError on purpose: pydantic passes other exceptions through its validators
    unwrapped, so the message a rule writes is the message the caller sees."""


@dataclass(frozen=True)
class Given:
    """Which source gave a field its value, and under which name (variable, file key, body key)."""

    source: Source
    key: str

    def where(self) -> str:
        return f"settings file config.{self.key}" if self.source == "settings" else self.key


class Refused(Exception):
    """A rule's refusal: `phrase` follows the name the value was given under ("must be ..."),
    unless `whole`, a sentence that names the value instead (an unsupported policy, say)."""

    def __init__(self, phrase: str, *, whole: bool = False) -> None:
        super().__init__(phrase)
        self.phrase = phrase
        self.whole = whole


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def rule(parse: Callable[[Any, Source], Any], display: str | None = None) -> PlainValidator:
    """A field validator that runs `parse` with the value's source (from the validation context;
    a model built directly is the caller's code) and turns a refusal into a SettingsError that
    names the setting as it was given."""

    def validate(value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        context: Mapping[str, Any] = info.context or {}
        given: Given = context.get("given", {}).get(name) or Given("option", display or _camel(name))
        try:
            return parse(value, given.source)
        except Refused as refused:
            message = refused.phrase if refused.whole else f"{given.where()} {refused.phrase}."
            raise SettingsError(message) from None

    return PlainValidator(validate)


# ----------------------------------------------------------------------------- the rules

def flag(value: Any, source: Source) -> bool:
    """The one boolean parser. Contract 1.3: from the environment `1/true/yes/on` are true and any
    other word false; the settings file takes JSON booleans only; over HTTP the words must be one
    of `1/0/true/false/yes/no/on/off` (2.6.5), so a typo is refused, not read as false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and source != "settings":
        with contextlib.suppress(ValueError):  # the words are common/booleans.py's
            return parse_bool(value, strict=source == "http")
    raise Refused("must be a JSON boolean" if source == "settings" else "must be a boolean")


def whole_number(low: int, high: int, phrase: str) -> Callable[[Any, Source], int]:
    """A JSON number or a numeric string that is whole (`3000`, `"3000"`, `3000.0`, `"3e3"`)
    and within [low, high]."""

    def parse(value: Any, source: Source) -> int:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise Refused(phrase) from None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise Refused(phrase)
        return value

    return parse


def text(value: Any, source: Source) -> str:
    """Text, trimmed; a number or a boolean is read as the reference reads it (`42` is "42").
    Given over HTTP it must not be empty (elsewhere an empty value never gets here: it is unset)."""
    if isinstance(value, (dict, list)) or (not isinstance(value, str) and source == "option"):
        raise Refused("must be a non-empty string")
    given = reference_text(value)
    if not given and source == "http":
        raise Refused("must be a non-empty string")
    return given


def optional_text(value: Any, source: Source) -> str | None:
    """Like `text`, but None is allowed (the profile's value, say)."""
    return None if value is None and source == "option" else text(value, source)


def clearable_text(value: Any, source: Source) -> str | None:
    """A secret (API key, bearer token): `""` or null clears it."""
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise Refused("must be a non-empty string")
    return reference_text(value) or None


def _choice(aliases: Mapping[str, str], what: str, *, squeeze: bool = True
            ) -> Callable[[Any, Source], str]:
    """One of a few values, by its aliases; spaces, `_` and `-` ignored when `squeeze`."""

    def parse(value: Any, source: Source) -> str:
        given = text(value, source)
        key = given.lower()
        if squeeze:
            key = key.replace(" ", "").replace("_", "").replace("-", "")
        choice = aliases.get(key)
        if choice is None:
            raise Refused(f"Unsupported LLMWiki Agent Bridge {what}: {given}.", whole=True)
        return choice

    return parse


source_policy = _choice(_POLICY_ALIASES, "source policy", squeeze=False)
runtime_profile = _choice(_PROFILE_ALIASES, "runtime profile")
runtime_adapter = _choice(_ADAPTER_ALIASES, "runtime adapter")
_io_log_word = _choice(_IO_LOG_ALIASES, "I/O log mode")


def io_log_mode(value: Any, source: Source) -> str:
    """Contract 1.3: off/file/logger and their aliases; JSON true is `file`, false is `off`."""
    if isinstance(value, bool):
        return "file" if value else "off"
    if not isinstance(value, str):
        raise Refused("must be off, file or logger")
    return _io_log_word(value, source)


def orchestration_mode(value: Any, source: Source) -> str:
    mode = text(value, source).lower()
    if mode not in ORCHESTRATION_MODES:
        raise Refused(f"must be one of: {', '.join(ORCHESTRATION_MODES)}")
    return mode


def log_format(value: Any, source: Source) -> str:
    given = text(value, source)
    if given not in ("auto", "json", "console"):
        raise Refused("must be auto, json or console")
    return given


def public_url(value: Any, source: Source) -> str:
    try:
        return parse_public_url(text(value, source))
    except ValueError as exc:
        raise Refused(str(exc), whole=True) from None


def command_args(value: Any, source: Source) -> tuple[str, ...]:
    """A JSON string array (when it starts with `[`) or a whitespace-separated list with quotes."""
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    given = text(value, source)
    if given.startswith("["):
        try:
            parsed = json.loads(given)
        except ValueError:
            raise Refused("must be a JSON array of strings") from None
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise Refused("must be a JSON array of strings")
        return tuple(parsed)
    try:
        return tuple(shlex.split(given))
    except ValueError:
        raise Refused("has an unclosed quote") from None


def path(value: Any, source: Source) -> Path | None:
    if value is None and source == "option":
        return None
    return Path(value if isinstance(value, Path) else text(value, source)).expanduser()


def directory(value: Any, source: Source) -> Path | None:
    """A working directory, made absolute when it is given."""
    given = path(value, source)
    return given.resolve() if given is not None else None


def _items(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    raise Refused("must be an array or a comma-separated string")


def origins(value: Any, source: Source) -> tuple[str, ...]:
    """Contract 1.3: browser origins, normalized; unusable entries are dropped."""
    return tuple(dict.fromkeys(o for o in (normalize_origin(i) for i in _items(value)) if o))


def source_origins(value: Any, source: Source) -> tuple[str, ...]:
    """Like `origins`, http and https only."""
    return tuple(dict.fromkeys(o for o in (normalize_origin(i, http_only=True) for i in _items(value)) if o))


def hosts(value: Any, source: Source) -> tuple[str, ...]:
    """Host names (a port, if given, is ignored), normalized; an entry that is not one is refused."""
    names: list[str] = []
    for item in (i.strip() for i in _items(value)):
        if not item:
            continue
        host = host_of_authority(item)
        if host is None:
            raise Refused(f"allowed host is not a host name: {item}", whole=True)
        names.append(host)
    return tuple(dict.fromkeys(names))
