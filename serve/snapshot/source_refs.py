"""Typed source-reference handles over a snapshot's visible pages."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from serve.graph.model import slug
from serve.source import okf
from serve.source.page import Page


def source_refs(pages: Iterable[Page], public_uri: str) -> list[dict[str, Any]]:
    """One handle per distinct source (structured OKF sources first, keyed by id else
    resource, then plain refs), with the pages citing it, sorted by id."""
    refs: dict[str, dict[str, Any]] = {}
    used: set[str] = set()
    for page in pages:
        okf_keys: set[str] = set()
        if page.okf_json:
            document = json.loads(page.okf_json)
            for source in document["sources"]:
                key = okf.source_key(source)
                okf_keys.add(key)
                ref = refs.get(key)
                if ref is None:
                    ref_id = _unique_ref_id(key, used)
                    ref = refs[key] = {
                        "id": ref_id, "label": okf.source_label(source), "kind": "okf_source",
                        "uri": f"{public_uri}/source-refs/{ref_id}",
                        "linked_pages": [], "linked_page_ids": [],
                        "locator": _okf_locator(source, page, document)}
                _link(ref, page)
        for label in page.source_refs:
            if label in okf_keys:
                continue
            ref = refs.get(label)
            if ref is None:
                ref_id = _unique_ref_id(label, used)
                ref = {"id": ref_id, "label": label, "kind": "source_ref",
                       "uri": f"{public_uri}/source-refs/{ref_id}",
                       "linked_pages": [], "linked_page_ids": [], "locator": {}}
                refs[label] = ref
            _link(ref, page)
    return sorted(refs.values(), key=lambda r: str(r["id"]))


def _link(ref: dict[str, Any], page: Page) -> None:
    if page.path not in ref["linked_pages"]:
        ref["linked_pages"].append(page.path)
    if page.id not in ref["linked_page_ids"]:
        ref["linked_page_ids"].append(page.id)


def _okf_locator(source: dict[str, Any], page: Page, document: dict[str, Any]) -> dict[str, Any]:
    """Where an OKF source was first seen, with the citing document's trust lifecycle."""
    return {
        "source_profile": okf.PROFILE,
        "source": source,
        "first_seen_page": {"id": page.id, "path": page.path},
        "document": {key: document[key]
                     for key in ("concept_type", "status", "trust_tier", "stale_after")},
    }


def _unique_ref_id(label: str, used: set[str]) -> str:
    base = slug(label).lower()
    candidate = base
    if candidate in used:
        candidate = f"{base}-{hashlib.sha256(label.encode('utf-8')).hexdigest()[:8]}"
        n = 2
        stem = candidate
        while candidate in used:
            candidate = f"{stem}-{n}"
            n += 1
    used.add(candidate)
    return candidate


