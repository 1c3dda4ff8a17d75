"""Retrieval guidance from a source (snake_case) or a caller (camelCase), checked with the shared
model and mapped to the bridge's camelCase (contract 6.6), with the reference's messages. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from common.bridge_schemas import Diagnostic, Observation
from common.guidance import (
    CONTENT_TRUST,
    MAX_CHARACTER_BUDGET,
    MAX_QUERY_VARIANTS,
    SCHEMA_VERSION,
    PageCard,
    RetrievalGuidance,
)

# Each level's fields in the order they are checked; the first failing check names the error.
# A folder card checks pageCount last (the reference's order).
_CHECK_ORDER = {
    "": [str(field.alias) for field in RetrievalGuidance.model_fields.values()],
    "folderCards": ["path", "terms", "pageCount"],
    "pageCards": [str(field.alias) for field in PageCard.model_fields.values()],
}
_FIELD_MESSAGES = {
    "schemaVersion": f"must be {SCHEMA_VERSION}.",
    "orientationSource": "is not supported.",
    "contentTrust": f"must be {CONTENT_TRUST}.",
    "maxQueryVariants": f"must be {MAX_QUERY_VARIANTS}.",
    "characterBudget": f"must be an integer between 1 and {MAX_CHARACTER_BUDGET}.",
    "pageCount": "must be an integer between 1 and any.",
}
# The model's own checks (`guidance_*` errors) carry their words; these are pydantic's.
_TYPE_MESSAGES = {"model_type": "must be an object.", "list_type": "must be an array.",
                  "string_type": "must be a non-empty string.",
                  "too_long": "must have at most {max_length} items."}


class GuidanceError(ValueError):
    """The guidance object is not the closed shape; the message names the field path."""


def _public(loc: tuple[int | str, ...], snake: bool, keep_last: bool) -> list[int | str]:
    """The error's location in camelCase names; an unknown or missing key keeps the input's spelling."""
    names = [to_camel(p) if snake and isinstance(p, str) else p for p in loc]
    if keep_last and loc:
        names[-1] = loc[-1]
    return names


def _rank(names: list[int | str], kind: str) -> list[tuple[int, ...]]:
    """Where the sequential check would meet this error: per level, the object or array itself
    first, then unknown keys, then missing keys, then fields in check order (items by index)."""
    rank: list[tuple[int, ...]] = []
    level = ""
    for depth, name in enumerate(names):
        if isinstance(name, int):
            rank.append((1, name))
        elif depth == len(names) - 1 and kind in ("extra_forbidden", "missing"):
            rank.append((1, 0 if kind == "extra_forbidden" else 1))
        else:
            order = _CHECK_ORDER.get(level, [])
            rank.append((2, order.index(name) if name in order else len(order)))
            level = name
    return [*rank, (0,)]


def _message(error: ErrorDetails, where: str, snake: bool) -> str:
    kind = error["type"]
    names = _public(error["loc"], snake, kind in ("extra_forbidden", "missing"))
    path = where + "".join(f"[{n}]" if isinstance(n, int) else f".{n}" for n in names)
    if kind == "extra_forbidden":
        return f"{path} is not a supported field."
    if kind == "missing":
        return f"{path} is required."
    if kind.startswith("guidance_"):
        return f"{path} {error['msg']}"
    field = names[-1] if names else ""
    if isinstance(field, str) and field in _FIELD_MESSAGES:
        return f"{path} {_FIELD_MESSAGES[field]}"
    template = _TYPE_MESSAGES.get(kind, "is invalid.")
    return f"{path} {template.format(**error.get('ctx', {}))}"


def parse_guidance(raw: Any, *, snake: bool, where: str = "retrievalGuidance") -> RetrievalGuidance:
    """Validate `raw`: source snake_case keys when `snake`, else public camelCase keys, never a mix.
    Any violation raises GuidanceError naming the first field the checks meet."""
    try:
        return RetrievalGuidance.model_validate(raw, by_alias=not snake, by_name=snake)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = min(errors, key=lambda e: _rank(_public(e["loc"], snake, False), e["type"]))
        raise GuidanceError(_message(first, where, snake)) from None


def map_guidance(raw: Any, *, snake: bool, where: str = "retrievalGuidance") -> dict[str, Any]:
    """The public camelCase object of valid guidance, values (trimmed) and order preserved."""
    return parse_guidance(raw, snake=snake, where=where).model_dump(by_alias=True)


@dataclass(frozen=True)
class GuidanceCheck:
    """A source payload's retrieval guidance: `absent`, `valid`, or `omitted` (dropped) and why."""

    state: Literal["absent", "valid", "omitted"]
    reason: str = ""


def check_guidance(payload: dict[str, Any]) -> GuidanceCheck:
    if "retrieval_guidance" not in payload:
        return GuidanceCheck("absent")
    try:
        parse_guidance(payload["retrieval_guidance"], snake=True, where="retrieval_guidance")
    except GuidanceError as exc:
        return GuidanceCheck("omitted", str(exc))
    return GuidanceCheck("valid")


def guidance_diagnostic(payload: dict[str, Any], advertised: bool, subject: str, protocol: str,
                        check: GuidanceCheck | None = None) -> Diagnostic | None:
    """A warning when a guided source sends no guidance, or any source sends guidance that is not
    the closed shape (it is then dropped whole). Valid guidance needs no note. `check` is the
    payload's `check_guidance`, when it was made already."""
    check = check if check is not None else check_guidance(payload)
    if check.state == "valid" or (check.state == "absent" and not advertised):
        return None
    if check.state == "absent":
        state, reason = "absent", "The source advertises guided lexical retrieval but sent no guidance."
    else:
        state, reason = "omitted", check.reason
    return Diagnostic(
        severity="warning", scope="source", phase="retrieval", protocol=protocol, subject=subject,
        retryable=False, observations=[Observation(name="guidance", value=state),
                                       Observation(name="reason", value=reason[:160]),
                                       Observation(name="redaction", value="urls, queries")],
        message=f"Source retrieval guidance is {state}.")
