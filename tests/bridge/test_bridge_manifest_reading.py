"""Reading a source's manifest through `common.source_answer.SourceManifest` gives the bundle the
key-by-key reading it replaced gave (contract 4.3.3), for odd manifests too."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bridge.config.registry import normalize_inline
from bridge.core.bundle import _raw_origins, safe_uri, source_bundle
from bridge.support.fields import as_object, first, text_of
from common.bridge_schemas import BundleSourceRef, ProjectionSummary, SourceBundle

SOURCE = normalize_inline([{"id": "kb-1", "name": "KB", "protocol": "llmwiki-http", "status": "ready",
                            "url": "http://127.0.0.1:9", "adapter": "A", "implementation": "I"}])[0]
ODD: list[Any] = ["", None, 0, 7, 1.5, True, False, [], {}, ["x", " y ", 3, None, ""], {"k": 1},
                  "x\x00y", "sig", "https://u:p@h/x?q", "llmwiki://kb", "urn:llmwiki:source-ref:a.b",
                  "true", "12", [{"id": "r"}]]
TOP = ("source_id", "sourceId", "bundle_id", "bundleId", "title", "adapter", "implementation",
       "capabilities", "source_refs", "sourceRefs", "raw_origins", "rawOrigins", "projection",
       "signature", "projection_signature", "projectionSignature", "page_count", "pageCount",
       "approved_page_count", "approvedPageCount", "graph_node_count", "graphNodeCount",
       "graph_edge_count", "graphEdgeCount", "other")
PROJECTION = TOP[13:]
REF = ("id", "source_ref_id", "sourceRefId", "label", "name", "type", "kind", "uri", "other")
ORIGINS = ("enabled", "metadata_only", "metadataOnly", "origin_count", "originCount", "count",
           "public_root_labels", "publicRootLabels")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def plain_bundle(raw: dict[str, Any]) -> SourceBundle:
    """The key-by-key reading the model replaced."""
    projection_raw = as_object(raw.get("projection"))
    merged = {**raw, **projection_raw}
    refs_raw = first(raw, "source_refs", "sourceRefs")
    refs = refs_raw if isinstance(refs_raw, list) else []
    capabilities = raw.get("capabilities")
    projection = ProjectionSummary(
        signature=text_of(first(merged, "signature", "projection_signature", "projectionSignature")) or None,
        page_count=_count(first(merged, "page_count", "pageCount")),
        approved_page_count=_count(first(merged, "approved_page_count", "approvedPageCount")),
        graph_node_count=_count(first(merged, "graph_node_count", "graphNodeCount")),
        graph_edge_count=_count(first(merged, "graph_edge_count", "graphEdgeCount")),
        source_ref_count=len(refs) if refs else None)
    return SourceBundle(
        connection_id=SOURCE.id,
        source_id=text_of(first(raw, "source_id", "sourceId")) or SOURCE.id,
        bundle_id=text_of(first(raw, "bundle_id", "bundleId")) or None,
        title=text_of(raw.get("title")) or None,
        capabilities=[c.strip() for c in capabilities if isinstance(c, str) and c.strip()] or None
        if isinstance(capabilities, list) else None,
        adapter=text_of(raw.get("adapter")) or SOURCE.adapter or None,
        implementation=text_of(raw.get("implementation")) or SOURCE.implementation or None,
        projection=projection if projection.model_dump(exclude_none=True) else None,
        raw_origins=_raw_origins(first(raw, "raw_origins", "rawOrigins")),
        source_refs=[BundleSourceRef(
            id=text_of(first(r, "id", "source_ref_id", "sourceRefId")) or None,
            label=text_of(first(r, "label", "name")) or None,
            type=text_of(first(r, "type", "kind")) or None,
            uri=safe_uri(r.get("uri"))) for r in refs[:40] if isinstance(r, dict)] or None,
        source_ref_count=len(refs) if refs else None)


def odd_object(rng: random.Random, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: rng.choice(ODD) for key in rng.sample(keys, rng.randint(0, len(keys)))}


def odd_manifest(rng: random.Random) -> dict[str, Any]:
    raw = odd_object(rng, TOP)
    if rng.random() < 0.5:
        raw["projection"] = odd_object(rng, PROJECTION)
    for key in ("source_refs", "sourceRefs"):
        if rng.random() < 0.4:
            raw[key] = [odd_object(rng, REF) if rng.random() < 0.8 else rng.choice(ODD)
                        for _ in range(rng.randint(0, 45))]
    for key in ("raw_origins", "rawOrigins"):
        if rng.random() < 0.3:
            raw[key] = odd_object(rng, ORIGINS)
    return raw


@pytest.mark.parametrize("seed", range(200))
def test_the_model_reads_a_manifest_as_the_key_by_key_reading_did(seed: int) -> None:
    raw = odd_manifest(random.Random(seed))
    assert source_bundle(raw, SOURCE) == plain_bundle(raw), raw


def test_a_projection_key_wins_over_the_same_key_at_the_top_and_spellings_are_read_in_order() -> None:
    raw = {"signature": "top", "pageCount": 3, "projection": {"signature": "inner", "page_count": None},
           "sourceId": "kb-x", "source_id": "", "source_refs": None,
           "sourceRefs": [{"source_ref_id": "r1", "name": "R", "kind": "doc", "uri": "https://h/x"}, 5]}
    bundle = source_bundle(raw, SOURCE)
    assert bundle.projection is not None
    assert (bundle.projection.signature, bundle.projection.page_count) == ("inner", 3)
    assert bundle.source_id == "kb-x" and bundle.source_ref_count == 2
    assert bundle.source_refs == [BundleSourceRef(id="r1", label="R", type="doc", uri="https://h/x")]
