"""A source's bundle metadata as the artifact may carry it: the strict allow-list (contract 4.3.3)."""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bridge.config.registry import SourceDescriptor
from common.bridge_schemas import (
    BundleSourceRef,
    JsonObject,
    ProjectionSummary,
    RawOriginsSummary,
    SourceBundle,
)
from common.source_answer import ManifestRef, SourceManifest

_SAFE_REF = re.compile(r"^urn:llmwiki:source-ref:[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$")


def safe_uri(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("urn:"):
        return value if _SAFE_REF.match(value) else None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https", "llmwiki") or not parts.netloc:
        return None
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _flag(value: Any) -> bool | None:
    """A JSON boolean, or the strings "true"/"false" as the reference reads them."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _number(value: Any) -> int | None:
    """A count given as a number or a numeric string (fractions truncated)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def _raw_origins(origins: Any) -> RawOriginsSummary | None:
    """An object gives its flags and counts (a label list counts even when empty); a list or a
    comma string gives how many origins it names."""
    if isinstance(origins, (list, str)):
        items = origins if isinstance(origins, list) else origins.split(",")
        count = sum(1 for item in items if str(item).strip())
        return RawOriginsSummary(origin_count=count) if count else None
    if not isinstance(origins, dict):
        return None
    labels = next((origins[key] for key in ("public_root_labels", "publicRootLabels")
                   if isinstance(origins.get(key), list)), None)
    counts = (_number(origins.get(key)) for key in ("origin_count", "originCount", "count"))
    metadata_only = (_flag(origins.get(key)) for key in ("metadata_only", "metadataOnly"))
    summary = RawOriginsSummary(
        enabled=_flag(origins.get("enabled")),
        metadata_only=next((f for f in metadata_only if f is not None), None),
        origin_count=next((c for c in counts if c is not None), None),
        public_root_label_count=len(labels) if labels is not None else None)
    return summary if summary.model_dump(exclude_none=True) else None


def source_bundle(raw: JsonObject, source: SourceDescriptor) -> SourceBundle:
    """The strict allow-list: roots, locators, linked pages and unknown keys are dropped."""
    manifest = SourceManifest.model_validate(raw)
    counts = manifest.counts(raw)
    refs = manifest.source_refs or []
    capabilities = manifest.capabilities
    projection = ProjectionSummary(
        signature=counts.signature or None, page_count=counts.page_count,
        approved_page_count=counts.approved_page_count, graph_node_count=counts.graph_node_count,
        graph_edge_count=counts.graph_edge_count, source_ref_count=len(refs) if refs else None)
    return SourceBundle(
        connection_id=source.id,
        source_id=manifest.source_id or source.id,
        bundle_id=manifest.bundle_id or None,
        title=manifest.title or None,
        capabilities=[c.strip() for c in capabilities if isinstance(c, str) and c.strip()] or None
        if capabilities is not None else None,
        adapter=manifest.adapter or source.adapter or None,
        implementation=manifest.implementation or source.implementation or None,
        projection=projection if projection.model_dump(exclude_none=True) else None,
        raw_origins=_raw_origins(manifest.raw_origins),
        source_refs=[_ref(ManifestRef.model_validate(r)) for r in refs[:40] if isinstance(r, dict)]
        or None,
        source_ref_count=len(refs) if refs else None)


def _ref(ref: ManifestRef) -> BundleSourceRef:
    return BundleSourceRef(id=ref.id or None, label=ref.label or None, type=ref.type or None,
                           uri=safe_uri(ref.uri))
