"""Retrieval guidance: the closed `llmwiki.retrieval_guidance.v1` shape, validated and mapped from a
source's snake_case to the bridge's camelCase (contract 6.6). Pure functions, no I/O."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from common.bridge_schemas import Diagnostic, Observation

SCHEMA = "llmwiki.retrieval_guidance.v1"
FALLBACK_ORDER = ("literal", "hybrid", "vector")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# public key -> source key, for every level
_TOP = {"schemaVersion": "schema_version", "orientationSource": "orientation_source",
        "contentTrust": "content_trust", "maxQueryVariants": "max_query_variants",
        "characterBudget": "character_budget", "folderCards": "folder_cards", "pageCards": "page_cards",
        "suggestedTerms": "suggested_terms", "exactIdentifiers": "exact_identifiers",
        "fallbackModes": "fallback_modes"}
_FOLDER = {"path": "path", "pageCount": "page_count", "terms": "terms"}
_PAGE = {"pageId": "page_id", "title": "title", "path": "path", "headings": "headings", "terms": "terms",
         "exactIdentifiers": "exact_identifiers", "excerpt": "excerpt"}


class GuidanceError(ValueError):
    """The guidance object is not the closed shape; the message names the field path."""


def _keys(raw: Any, names: dict[str, str], snake: bool, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise GuidanceError(f"{where} must be an object.")
    wanted = {(source if snake else public): public for public, source in names.items()}
    extra = [k for k in raw if k not in wanted]
    if extra:
        raise GuidanceError(f"{where}.{extra[0]} is not a supported field.")
    missing = [k for k in wanted if k not in raw]
    if missing:
        raise GuidanceError(f"{where}.{missing[0]} is required.")
    return {wanted[k]: v for k, v in raw.items()}


def _at(where: str, name: str | int) -> str:
    """A field path, built only when an error names it: `where.name` or `where[index]`."""
    return f"{where}[{name}]" if isinstance(name, int) else f"{where}{name}"


def _string(value: Any, where: str, limit: int, name: str | int = "") -> str:
    if not isinstance(value, str) or not (text := value.strip()):
        raise GuidanceError(f"{_at(where, name)} must be a non-empty string.")
    if len(text) > limit:
        raise GuidanceError(f"{_at(where, name)} must be at most {limit} characters.")
    return text


def _array(value: Any, where: str, count: int) -> list[Any]:
    if not isinstance(value, list):
        raise GuidanceError(f"{where} must be an array.")
    if len(value) > count:
        raise GuidanceError(f"{where} must have at most {count} items.")
    return value


def _strings(value: Any, where: str, count: int, limit: int, name: str = "") -> list[str]:
    if name:
        where += name
    values = _array(value, where, count)
    # Usually every item is a plain string that is fine; otherwise `_string` per item names the first
    # bad one (or accepts an unusual but valid one).
    items = [v.strip() if type(v) is str else "" for v in values]
    if not all(items) or (items and max(map(len, items)) > limit):
        items = [_string(v, where, limit, i) for i, v in enumerate(values)]
    if "".join(items).isascii():  # NFC leaves ASCII as it is
        unique = len({i.lower() for i in items}) == len(items)
    else:
        unique = len({unicodedata.normalize("NFC", i).lower() for i in items}) == len(items)
    if not unique:
        raise GuidanceError(f"{where} items must be unique.")
    return items


def _path(value: Any, where: str, limit: int, name: str = "") -> str:
    path = _string(value, where, limit, name)
    if (path.startswith(("/", "\\")) or "\\" in path or _DRIVE.match(path) or _SCHEME.match(path)
            or ".." in path.split("/")):
        raise GuidanceError(f"{_at(where, name)} must be a source-relative path.")
    return path


def _count(value: Any, where: str, low: int, high: int | None = None, name: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        raise GuidanceError(f"{_at(where, name)} must be an integer between {low} and {high or 'any'}.")
    return value


def map_guidance(raw: Any, *, snake: bool, where: str = "retrievalGuidance") -> dict[str, Any]:
    """Validate `raw` (source snake_case when `snake`, else public camelCase) and return the public
    camelCase object, values and order preserved. Any violation raises GuidanceError."""
    top = _keys(raw, _TOP, snake, where)
    if top["schemaVersion"] != SCHEMA:
        raise GuidanceError(f"{where}.schemaVersion must be {SCHEMA}.")
    if top["orientationSource"] not in ("authored", "projection_extractive", "none"):
        raise GuidanceError(f"{where}.orientationSource is not supported.")
    if top["contentTrust"] != "untrusted_source_evidence":
        raise GuidanceError(f"{where}.contentTrust must be untrusted_source_evidence.")
    if top["maxQueryVariants"] != 2 or isinstance(top["maxQueryVariants"], bool):
        raise GuidanceError(f"{where}.maxQueryVariants must be 2.")
    budget = _count(top["characterBudget"], f"{where}.characterBudget", 1, 6000)
    counted: list[str] = []
    folders_raw = _array(top["folderCards"], f"{where}.folderCards", 8)
    folders: list[dict[str, Any]] = []
    for i, card in enumerate(folders_raw):
        at = f"{where}.folderCards[{i}]"
        fields = _keys(card, _FOLDER, snake, at)
        path = _path(fields["path"], at, 1024, ".path")
        terms = _strings(fields["terms"], at, 8, 120, ".terms")
        folders.append({"path": path, "pageCount": _count(fields["pageCount"], at, 1, None, ".pageCount"),
                        "terms": terms})
        counted += [path, *terms]
    pages_raw = _array(top["pageCards"], f"{where}.pageCards", 12)
    pages: list[dict[str, Any]] = []
    for i, card in enumerate(pages_raw):
        at = f"{where}.pageCards[{i}]"
        fields = _keys(card, _PAGE, snake, at)
        texts = {"pageId": _string(fields["pageId"], at, 512, ".pageId"),
                 "title": _string(fields["title"], at, 240, ".title"),
                 "path": _path(fields["path"], at, 1024, ".path")}
        lists = {"headings": _strings(fields["headings"], at, 8, 160, ".headings"),
                 "terms": _strings(fields["terms"], at, 12, 120, ".terms"),
                 "exactIdentifiers": _strings(fields["exactIdentifiers"], at, 8, 240, ".exactIdentifiers")}
        excerpt = _string(fields["excerpt"], at, 240, ".excerpt")
        pages.append({**texts, **lists, "excerpt": excerpt})
        counted += [*texts.values(), *(t for items in lists.values() for t in items), excerpt]
    suggested = _strings(top["suggestedTerms"], f"{where}.suggestedTerms", 16, 120)
    identifiers = _strings(top["exactIdentifiers"], f"{where}.exactIdentifiers", 16, 240)
    modes = _strings(top["fallbackModes"], f"{where}.fallbackModes", 3, 16)
    if any(m not in FALLBACK_ORDER for m in modes) or modes != [m for m in FALLBACK_ORDER if m in modes]:
        raise GuidanceError(f"{where}.fallbackModes must be a subset of literal, hybrid, vector in order.")
    counted += [*suggested, *identifiers, *modes]
    if sum(map(len, counted)) > budget:
        raise GuidanceError(f"{where} exceeds its characterBudget.")
    return {"schemaVersion": SCHEMA, "orientationSource": top["orientationSource"],
            "contentTrust": top["contentTrust"], "maxQueryVariants": 2, "characterBudget": budget,
            "folderCards": folders, "pageCards": pages, "suggestedTerms": suggested,
            "exactIdentifiers": identifiers, "fallbackModes": modes}


@dataclass(frozen=True)
class GuidanceCheck:
    """A source payload's retrieval guidance: `absent`, `valid`, or `omitted` (dropped) and why."""

    state: Literal["absent", "valid", "omitted"]
    reason: str = ""


def check_guidance(payload: dict[str, Any]) -> GuidanceCheck:
    if "retrieval_guidance" not in payload:
        return GuidanceCheck("absent")
    try:
        map_guidance(payload["retrieval_guidance"], snake=True, where="retrieval_guidance")
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
