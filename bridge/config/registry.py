"""Knowledge Source descriptors: normalisation, readiness, and the redacted registry views."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bridge.config.policy import SourcePolicy
from bridge.support.clock import now_iso
from bridge.support.text import safe_trace_text

SUPPORTED_PROTOCOLS = ("llmwiki-http", "mcp", "a2a")
SOURCES_SCHEMA = "llmwiki.agent-bridge.sources.v1"
_ABSOLUTE_ROOT = re.compile(r"^(/|\\\\|[A-Za-z]:[\\/])")


class SourceValidationError(ValueError):
    """A registered source is invalid (400 bad_request); the message never echoes its URL."""


class DuplicateSourceError(ValueError):
    """Two registered sources share an id (409 duplicate_source_id)."""


@dataclass(frozen=True)
class SourceDescriptor:
    id: str
    name: str
    title: str
    protocol: str
    status: str
    selected: bool
    url: str
    description: str = ""
    capabilities: tuple[str, ...] = ()
    adapter: str = ""
    implementation: str = ""
    bundle_id: str = ""
    page_count: int | None = None
    approved_page_count: int | None = None
    root: str = ""
    root_label: str = ""

    @property
    def label(self) -> str:
        return self.name or self.id or "Knowledge Source"

    @property
    def safe_label(self) -> str:
        """The label as trace steps and tool texts may show it."""
        return safe_trace_text(self.label) or "Knowledge Source"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str
    basis: str


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = raw.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def _string(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _basename(root: str) -> str:
    parts = [p for p in re.split(r"[\\/]+", root) if p]
    return parts[-1] if parts else ""


def normalize_source(raw: Mapping[str, Any], index: int, default_status: str) -> SourceDescriptor:
    """One descriptor from its JSON form (ids, names, roots and counts under their aliases)."""
    number = index + 1
    root = _string(_first(raw, "root", "path", "rootPath", "root_path", "servedRoot", "served_root"))
    name = _string(_first(raw, "name", "title")) or f"Source {number}"
    capabilities = raw.get("capabilities")
    return SourceDescriptor(
        id=_string(_first(raw, "id", "source_id", "sourceId")) or f"source-{number}",
        name=name,
        title=_string(raw.get("title")) or name,
        protocol=_string(raw.get("protocol")) or "llmwiki-http",
        status=_string(raw.get("status")) or default_status,
        selected=raw.get("selected") is not False,
        url=_string(raw.get("url")),
        description=_string(raw.get("description")),
        capabilities=tuple(c.strip() for c in capabilities if isinstance(c, str) and c.strip())
        if isinstance(capabilities, list) else (),
        adapter=_string(raw.get("adapter")),
        implementation=_string(raw.get("implementation")),
        bundle_id=_string(_first(raw, "bundleId", "bundle_id")),
        page_count=_count(_first(raw, "pageCount", "page_count")),
        approved_page_count=_count(_first(raw, "approvedPageCount", "approved_page_count")),
        root=root,
        root_label=_string(_first(raw, "rootLabel", "root_label", "rootName", "root_name"))
        or _basename(root),
    )


def normalize_registered(body: Any) -> list[SourceDescriptor]:
    """The registry from a PUT body or the settings file: strict, unique ids, status default ready."""
    entries = body
    if isinstance(body, dict):
        entries = next((body[k] for k in ("sources", "knowledgeSources", "knowledge_sources")
                        if isinstance(body.get(k), list)), None)
    if not isinstance(entries, list):
        raise SourceValidationError("Sources body must be an array or an object with a sources array.")
    sources: list[SourceDescriptor] = []
    for index, raw in enumerate(entries):
        number = index + 1
        if not isinstance(raw, dict):
            raise SourceValidationError(f"Source {number} must be a JSON object.")
        source = normalize_source(raw, index, "ready")
        if source.protocol not in SUPPORTED_PROTOCOLS:
            raise SourceValidationError(f"Source {number} has unsupported protocol: {source.protocol}.")
        if not source.url:
            raise SourceValidationError(f"Source {number} url is required.")
        try:
            parts = urlsplit(source.url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise SourceValidationError(f"Source {number} url must be an absolute HTTP(S) URL.") from None
        if not parts.scheme or not parts.netloc:
            raise SourceValidationError(f"Source {number} url must be an absolute HTTP(S) URL.")
        if parts.scheme.lower() not in ("http", "https"):
            raise SourceValidationError(f"Source {number} url must use HTTP or HTTPS.")
        if "@" in parts.netloc:
            raise SourceValidationError(f"Source {number} url must not include credentials.")
        sources.append(source)
    seen: dict[str, int] = {}
    for index, source in enumerate(sources):
        if source.id in seen:
            raise DuplicateSourceError(
                f'Duplicate Knowledge Source id "{source.id}" at positions {seen[source.id] + 1} and '
                f"{index + 1}; source ids must be unique.")
        seen[source.id] = index
    return sources


def normalize_inline(entries: Sequence[Any]) -> list[SourceDescriptor]:
    """Inline `knowledgeSources`: non-objects skipped, status defaults to unknown (must say ready)."""
    return [normalize_source(raw, index, "unknown") for index, raw in enumerate(entries)
            if isinstance(raw, dict)]


def readiness(source: SourceDescriptor, policy: SourcePolicy | None = None) -> Readiness:
    basis = "last_known_status_bridge_policy" if policy is not None else "last_known_status"
    if not source.selected:
        return Readiness(False, "not_selected", "selection")
    if source.status != "ready":
        return Readiness(False, "status_not_ready", "last_known_status")
    if not source.url:
        return Readiness(False, "missing_url", "descriptor")
    if source.protocol not in SUPPORTED_PROTOCOLS:
        return Readiness(False, "unsupported_protocol", "descriptor")
    if policy is not None and not policy.allows(source.url):
        return Readiness(False, "source_policy_blocked", "bridge_policy")
    return Readiness(True, "ready", basis)


def redact_url(url: str) -> str:
    """Drop credentials, query and fragment; bare origins gain a `/`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "[invalid-url]"
    if not parts.scheme or not parts.hostname:
        return "[invalid-url]"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", "", ""))


def settings_view(source: SourceDescriptor, *, redact_url_value: bool = False,
                  redact_root: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": source.id, "name": source.name, "title": source.title, "description": source.description,
        "protocol": source.protocol, "status": source.status, "selected": source.selected,
        "url": redact_url(source.url) if redact_url_value else source.url,
        "capabilities": list(source.capabilities), "adapter": source.adapter,
        "implementation": source.implementation, "bundleId": source.bundle_id,
    }
    if source.page_count is not None:
        view["pageCount"] = source.page_count
    if source.approved_page_count is not None:
        view["approvedPageCount"] = source.approved_page_count
    if source.root:
        if redact_root and _ABSOLUTE_ROOT.match(source.root):
            view.update(rootLabel=source.root_label, rootRedacted=True)
        else:
            view.update(root=source.root, rootLabel=source.root_label, rootRedacted=False)
    elif source.root_label:
        view["rootLabel"] = source.root_label
    return view


def stored_form(source: SourceDescriptor) -> dict[str, Any]:
    """What the settings file keeps for a source (raw URL and root)."""
    return settings_view(source, redact_root=False)


def summary_counts(sources: Sequence[SourceDescriptor], policy: SourcePolicy) -> dict[str, int]:
    ready = sum(1 for s in sources if readiness(s, policy).ready)
    return {"registeredSourceCount": len(sources),
            "selectedSourceCount": sum(1 for s in sources if s.selected),
            "selectedReadySourceCount": ready,
            "unavailableSourceCount": len(sources) - ready}


def _normal_root(root: str) -> str:
    return re.sub(r"[\\/]+", "/", root).rstrip("/")


def registry_warnings(sources: Sequence[SourceDescriptor]) -> list[dict[str, Any]]:
    warnings: list[dict[str, Any]] = []
    by_id: dict[str, list[str]] = {}
    by_bundle: dict[str, list[str]] = {}
    for source in sources:
        by_id.setdefault(source.id, []).append(source.id)
        if source.bundle_id:
            by_bundle.setdefault(source.bundle_id, []).append(source.id)
    for source_id, ids in by_id.items():
        if len(ids) > 1:
            warnings.append({"severity": "warning", "code": "duplicate_source_id",
                             "message": "Duplicate Knowledge Source id is present in the registry.",
                             "sourceIds": [source_id]})
    for ids in by_bundle.values():
        if len(ids) > 1:
            warnings.append({"severity": "warning", "code": "duplicate_bundle_id",
                             "message": "Multiple Knowledge Sources report the same bundle id.",
                             "sourceIds": list(dict.fromkeys(ids))})
    rooted = [s for s in sources if s.root]
    for i, first in enumerate(rooted):
        for second in rooted[i + 1:]:
            a, b = _normal_root(first.root), _normal_root(second.root)
            if a != b and (a.startswith(b + "/") or b.startswith(a + "/")):
                warnings.append({"severity": "warning", "code": "overlapping_source_roots",
                                 "message": "Knowledge Source roots overlap.",
                                 "sourceIds": [first.id, second.id],
                                 "rootLabels": [first.root_label, second.root_label]})
    return warnings


def registry_view(sources: Sequence[SourceDescriptor], policy: SourcePolicy,
                  probes: Mapping[int, dict[str, Any]] | None = None, *,
                  local: bool = False) -> dict[str, Any]:
    """`GET /sources`: redacted descriptors with readiness and health, counts and warnings.
    `local` (the CLI's operator view) keeps raw URLs and absolute roots."""
    entries: list[dict[str, Any]] = []
    for index, source in enumerate(sources):
        state = readiness(source, policy)
        view = settings_view(source, redact_url_value=not local, redact_root=not local)
        view["readiness"] = {"ready": state.ready, "reason": state.reason, "basis": state.basis}
        health: dict[str, Any] = {"ok": state.ready, "basis": state.basis}
        if not state.ready:
            health["reason"] = state.reason
        probe = (probes or {}).get(index)
        if probe is not None:
            health = probe["health"]
            for key, value in probe.get("metadata", {}).items():
                view[key] = value
        view["health"] = health
        entries.append(view)
    ready = sum(1 for e in entries if e["health"].get("ok") is True)
    selected = sum(1 for s in sources if s.selected)
    selected_ready = sum(1 for s, e in zip(sources, entries, strict=True)
                         if s.selected and e["health"].get("ok") is True)
    warnings = registry_warnings(sources)
    return {
        "schemaVersion": SOURCES_SCHEMA, "generatedAt": now_iso(),
        "healthBasis": "live_probe" if probes is not None else "last_known_status_bridge_policy",
        "sources": entries,
        "registeredCount": len(sources), "totalSourceCount": len(sources),
        "selectedCount": selected, "selectedSourceCount": selected,
        "readyCount": ready, "readySourceCount": ready,
        "selectedReadyCount": selected_ready, "selectedReadySourceCount": selected_ready,
        "unavailableCount": len(sources) - ready, "unavailableSourceCount": len(sources) - ready,
        "warningCount": len(warnings), "warnings": warnings,
    }
