"""The OKF v0.2 input profile: detection, strict validation and the page's `okf` object."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Any

from serve.source.frontmatter import MAX_FRONTMATTER_CHARS, load_block, split_block
from serve.source.page import Page, ParseOptions
from serve.source.parse import collapse, dedupe_casefold, page_id_from, parse_page, string_list
from serve.source.visibility import approved_for_serving

PROFILE = "okf-v0.2"
VERSION = "0.2"
IMPLEMENTATION = "Open Knowledge Format v0.2"
MARKER = "index.md"  # root-relative: the file whose frontmatter declares the version
VERSION_KEYS = ("okf_version", "okfVersion")
INVALID_PREFIX = "okf_invalid"  # Page.degraded of a page that fails validation
CAPABILITIES = ("okf-v0.2", "okf_read_only_consumer", "okf_structured_provenance",
                "okf_trust_lifecycle_metadata")
SOURCE_FIELDS = frozenset({"id", "resource", "title", "author", "usage_count", "last_modified",
                           "usage_window"})
# Keys the profile interprets; every other frontmatter key travels in `okf.extra`.
METADATA_FIELDS = frozenset({"type", "title", "description", "resource", "tags", "generated",
                             "verified", "status", "stale_after", "sources", "usage_window",
                             "runtime", "parameters", "computation", "executor", "attester"})


class OkfInvalid(ValueError):
    """A document breaks the profile; the message names the file (operator output only)."""


# -- detection ------------------------------------------------------------------------------

# The marker's frontmatter sits within its first MAX_FRONTMATTER_CHARS + 8 characters, so
# detection reads at most this many bytes (4 per character in the worst case).
MARKER_READ_BYTES = 4 * (MAX_FRONTMATTER_CHARS + 8) + 16


def marker_head(text: str) -> str:
    """The part of root/index.md detection looks at: its frontmatter block with the
    delimiters, or "" when it has none (the same answer for a truncated read)."""
    if not text.startswith("---\n"):
        return ""
    end = text.find("\n---", 4, MAX_FRONTMATTER_CHARS + 8)
    return text[: end + 4] if end >= 0 else ""


def declared_version(head: str) -> str:
    """okf_version (or okfVersion) of a strictly parsed frontmatter head, "" when none."""
    if not head:
        return ""
    try:
        data, _ = split_strict(head, MARKER)
    except OkfInvalid:
        return ""
    return root_version(data)


def root_version(frontmatter: dict[str, Any]) -> str:
    for key in VERSION_KEYS:
        value = scalar_text(frontmatter.get(key))
        if value:
            return value
    return ""


# -- strict parsing -------------------------------------------------------------------------


def split_strict(text: str, rel: str) -> tuple[dict[str, Any], str]:
    """Frontmatter and body; an unclosed block, invalid YAML or a non-mapping is an error
    (the lenient page parser would degrade the page instead)."""
    if not text.startswith("---\n"):
        return {}, text
    parts = split_block(text)
    if parts is None:
        raise OkfInvalid(f"OKF frontmatter is not closed in {rel}")
    block, body = parts
    try:
        data = load_block(block)
    except ValueError:
        raise OkfInvalid(f"OKF frontmatter is invalid in {rel}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise OkfInvalid(f"OKF frontmatter must be a mapping in {rel}")
    return data, body


def scalar_text(value: Any) -> str:
    """Datetimes as ISO (UTC as 'Z'), dates as ISO, anything else str() and collapsed."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return collapse(str(value))


def json_value(value: Any) -> Any:
    """JSON-mode dump of a nested value (what the reference's pydantic dump produces)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # JSON has no NaN or infinity
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_value(v) for v in value]
    return str(value)


def _mapping(value: Any) -> dict[str, Any]:
    return {str(k): json_value(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _event(value: Any, field: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise OkfInvalid(f"OKF {field} must be a mapping")
    by = scalar_text(value.get("by"))
    if not by:
        raise OkfInvalid(f"OKF {field}.by is required")
    return {"by": by, "at": scalar_text(value.get("at"))}


def _verified(value: Any) -> list[dict[str, str]]:
    if value is None:
        return []
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise OkfInvalid("OKF verified must be a mapping or list")
    return [event for item in value if (event := _event(item, "verified")) is not None]


def _mappings(value: Any, field: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OkfInvalid(f"OKF {field} must be a list")
    if not all(isinstance(item, dict) for item in value):
        raise OkfInvalid(f"OKF {field} entries must be mappings")
    return [_mapping(item) for item in value]


def _usage_count(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _sources(value: Any, usage_window: dict[str, Any]) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OkfInvalid("OKF sources must be a list")
    sources = []
    for item in value:
        if not isinstance(item, dict):
            raise OkfInvalid("OKF sources entries must be mappings")
        resource = scalar_text(item.get("resource"))
        if not resource:
            raise OkfInvalid("OKF sources entries require resource")
        sources.append({
            "id": scalar_text(item.get("id")),
            "resource": resource,
            "title": scalar_text(item.get("title")),
            "author": scalar_text(item.get("author")),
            "usage_count": _usage_count(item.get("usage_count")),
            "last_modified": scalar_text(item.get("last_modified")),
            # A source without its own window inherits the document's.
            "usage_window": _mapping(item.get("usage_window")) or usage_window,
            "extra": {str(k): json_value(v) for k, v in item.items() if str(k) not in SOURCE_FIELDS},
        })
    return sources


def trust_tier(verified: list[dict[str, str]]) -> str:
    if not verified:
        return "unverified"
    if any(event["by"].startswith("human:") for event in verified):
        return "human-reviewed"
    return "machine-confirmed"


def document_role(path: str) -> str:
    name = path.rpartition("/")[2].casefold()
    if name == "index.md":
        return "index"
    if name == "log.md":
        return "log"
    return "concept"


def okf_metadata(frontmatter: dict[str, Any], role: str, rel: str) -> dict[str, Any]:
    """The `okf` object of one document, validating it on the way (first error raised)."""
    concept_type = ""
    if role == "concept":
        concept_type = scalar_text(frontmatter.get("type"))
        if not concept_type:
            raise OkfInvalid(f"OKF concept {rel} is missing required type")
    usage_window = _mapping(frontmatter.get("usage_window"))
    sources = _sources(frontmatter.get("sources"), usage_window)
    generated = _event(frontmatter.get("generated"), "generated")
    verified = _verified(frontmatter.get("verified"))
    runtime = scalar_text(frontmatter.get("runtime"))
    if concept_type.casefold() == "attested computation" and not runtime:
        raise OkfInvalid("OKF Attested Computation is missing required runtime")
    parameters = _mappings(frontmatter.get("parameters"), "parameters")
    return {
        "version": VERSION,
        "role": role,
        "concept_type": concept_type,
        "description": scalar_text(frontmatter.get("description")),
        "resource": scalar_text(frontmatter.get("resource")),
        "generated": generated,
        "verified": verified,
        "trust_tier": trust_tier(verified),
        "status": scalar_text(frontmatter.get("status")) or "stable",
        "stale_after": scalar_text(frontmatter.get("stale_after")),
        "usage_window": usage_window,
        "runtime": runtime,
        "parameters": parameters,
        "computation": scalar_text(frontmatter.get("computation")),
        "executor": _mapping(frontmatter.get("executor")),
        "attester": _mapping(frontmatter.get("attester")),
        "sources": sources,
        "extra": {str(k): json_value(v) for k, v in frontmatter.items()
                  if str(k) not in METADATA_FIELDS and str(k) not in VERSION_KEYS},
    }


def source_key(source: dict[str, Any]) -> str:
    return str(source["id"] or source["resource"])


def source_label(source: dict[str, Any]) -> str:
    return str(source["title"] or source["id"] or source["resource"])


# -- pages ----------------------------------------------------------------------------------


def parse_okf_page(text: str, path: str, options: ParseOptions, *, degraded: str = "",
                   role: str = "topic") -> Page:
    """parse_page under the profile. A document that breaks it still yields a Page, whose
    `degraded` starts with INVALID_PREFIX and names the first error: the folder mirror then
    rejects the whole bundle (records are parsed one by one, possibly in workers)."""
    page = parse_page(text, path, options, degraded=degraded, role=role)
    try:
        frontmatter, _ = split_strict(text, path)
        if path == MARKER:
            version = root_version(frontmatter)
            if version and version != VERSION:
                raise OkfInvalid("root index.md declares an unsupported OKF version")
        okf = okf_metadata(frontmatter, document_role(path), path)
    except OkfInvalid as exc:
        return page._replace(degraded=f"{INVALID_PREFIX}: {exc}", approved=False)
    raw_id = scalar_text(frontmatter.get("id"))
    status = okf["status"]
    generated = okf["generated"]
    refs = dedupe_casefold([*(source_key(s) for s in okf["sources"]),
                            *string_list(frontmatter.get("source_refs"))])
    return page._replace(
        id=page_id_from(raw_id or path),
        summary=scalar_text(frontmatter.get("description")) or page.summary,
        review_state="unknown",
        status=status,
        source_refs=tuple(refs),
        updated_at=generated["at"] if generated else "",
        approved=approved_for_serving(frontmatter, "unknown", status),
        okf_json=json.dumps(okf, ensure_ascii=False, separators=(",", ":")),
    )


def invalid_reason(page: Page) -> str:
    """The validation error of a page parsed under the profile, "" when it is valid."""
    if not page.degraded.startswith(INVALID_PREFIX):
        return ""
    return page.degraded[len(INVALID_PREFIX) + 2 :]


def signature(base: str) -> str:
    """The projection signature under the profile (keeps it apart from a generic one)."""
    if not base:
        return base
    payload = "\t".join((base, PROFILE, VERSION))
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()
