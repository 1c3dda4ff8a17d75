"""The `llmwiki-http` source client: source bundle (manifest fallback) and `POST /query`."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import structlog

from bridge.sources.base import BundleRead, SourceCallError
from bridge.sources.transport import SourceTransport, call_json, endpoint_url
from bridge.support.text import markdown_readable

BUNDLE_KEYS = frozenset({
    "source_id", "sourceId", "bundle_id", "bundleId", "public_uri", "publicUri", "projection",
    "raw_origins", "rawOrigins", "source_refs", "sourceRefs", "capabilities", "adapter",
    "implementation", "page_count", "pageCount", "approved_page_count", "approvedPageCount", "title"})
BUNDLE_ENDPOINTS = (("source-bundle", "/source-bundle"), ("manifest", "/manifest"))
log = structlog.get_logger("llmwiki.bridge.sources")


def has_bundle_metadata(payload: Any) -> bool:
    return isinstance(payload, dict) and any(key in payload for key in BUNDLE_KEYS)


async def read_bundle(transport: SourceTransport, base_url: str, label: str) -> BundleRead:
    """`GET /source-bundle`, then `GET /manifest`: the first JSON object with bundle metadata wins."""
    candidates = [(name, endpoint_url(base_url, path)) for name, path in BUNDLE_ENDPOINTS]
    candidates = [(name, url) for name, url in candidates if transport.policy.allows(url)]
    if not candidates:
        return BundleRead(attempted=False)
    return await _first_answer(transport, candidates, label, has_bundle_metadata)


async def _first_answer(transport: SourceTransport, candidates: list[tuple[str, str]], label: str,
                        accept: Callable[[Any], bool]) -> BundleRead:
    """GET each candidate in turn; the first JSON answer `accept` takes wins (as an object)."""
    last_error: SourceCallError | None = None
    for name, url in candidates:
        try:
            payload = await call_json(transport, "GET", url, f"{label} {name}")
        except SourceCallError as exc:
            last_error = exc
            continue
        if accept(payload):
            return BundleRead(attempted=True, raw=payload if isinstance(payload, dict) else {}, endpoint=name)
        last_error = SourceCallError(f"{label} {name} has no source bundle metadata")
    return BundleRead(attempted=True, error=last_error)


async def query(transport: SourceTransport, base_url: str, label: str,
                body: dict[str, Any]) -> dict[str, Any]:
    """`POST /query` with `{"query", "limit", ...retrieval fields}`; the answer must be an object."""
    payload = await call_json(transport, "POST", endpoint_url(base_url, "/query"), f"{label} query", body)
    if not isinstance(payload, dict):
        raise SourceCallError(f"{label} query returned invalid JSON", invalid_json=True)
    return payload


async def probe(transport: SourceTransport, base_url: str, label: str) -> BundleRead:
    """A live health probe is a bundle read: the first JSON 200 answer counts as reachable."""
    candidates = [(name, endpoint_url(base_url, path)) for name, path in BUNDLE_ENDPOINTS]
    return await _first_answer(transport, candidates, label, lambda _payload: True)


_RELEVANCE_STOP = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "did", "do", "does", "for", "from", "how",
    "in", "is", "it", "of", "on", "or", "should", "that", "the", "to", "use", "what", "when", "where",
    "which", "who", "why", "with"))
_AUGMENT_STOP = frozenset((
    "about", "answer", "answered", "brief", "briefly", "citation", "citations", "cite", "cited", "page",
    "pages", "record", "recorded", "records", "relevant", "result", "results", "say", "says", "show",
    "tell", "was", "were", "wiki"))
_DECISION = frozenset({"decision", "decisions"})
AUGMENT_LIMIT = 4


def _search_text(text: str) -> str:
    text = unicodedata.normalize("NFC", markdown_readable(text)).lower()
    text = text.replace("'", "").replace("`", "")
    text = "".join(ch if unicodedata.category(ch)[0] in "LMN" or ch in "_./#:+-" else " " for ch in text)
    return re.sub(r"\.(?=\s|$)", "", text).strip()


def augmentation_queries(query: str) -> list[str]:
    """Up to two compact keyword variants of the question for `/search` (contract 3.9): one with
    decision words last ("subject first"), one in the original order; none if nothing is left."""
    # Every HTTP source of a run asks for the same question's variants; long texts are not kept.
    return list(_cached_variants(query) if len(query) <= 2048 else _variants(query))


def _variants(query: str) -> tuple[str, ...]:
    tokens = [t for t in _search_text(query).split() if t not in _RELEVANCE_STOP and t not in _AUGMENT_STOP]
    tokens = list(dict.fromkeys(tokens))
    if not tokens:
        return ()
    subject_first = [t for t in tokens if t not in _DECISION] + [t for t in tokens if t in _DECISION]
    variants = [" ".join(subject_first[:6]), " ".join(tokens[:6])]
    return tuple(dict.fromkeys(v for v in variants if v))[:2]


_cached_variants = functools.lru_cache(maxsize=256)(_variants)


def _evidence_keys(item: dict[str, Any]) -> set[str]:
    return {str(item[k]).strip().lower() for k in ("page_id", "pageId", "path", "id")
            if isinstance(item.get(k), (str, int)) and str(item[k]).strip()}


async def search_augmentation(transport: SourceTransport, base_url: str, label: str, text: str,
                              extra: dict[str, Any]) -> list[dict[str, Any]]:
    """One augmentation search's results. A failed search only loses its extra evidence: it never
    raises."""
    body = {"query": text, "limit": AUGMENT_LIMIT, **extra}
    try:
        result = await call_json(transport, "POST", endpoint_url(base_url, "/search"), f"{label} search",
                                 body)
    except SourceCallError as exc:
        log.warning("search_augmentation_failed", error=exc.message)
        return []
    results = result.get("results") if isinstance(result, dict) else None
    return [item for item in (results if isinstance(results, list) else []) if isinstance(item, dict)]


def merge_search_results(payload: dict[str, Any], found: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Add search results the payload does not have yet, in search order (contract 3.8 step 4);
    returns them."""
    seen: set[str] = set()
    for key in ("evidence", "citations"):
        items = payload.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                seen |= _evidence_keys(item)
    target = "evidence" if isinstance(payload.get("evidence"), list) or not isinstance(
        payload.get("citations"), list) else "citations"
    additions: list[dict[str, Any]] = []
    for results in found:
        for item in results:
            keys = _evidence_keys(item)
            if keys and not keys & seen:
                seen |= keys
                additions.append(item)
    if additions:
        current = payload.get(target)
        payload[target] = [*(current if isinstance(current, list) else []), *additions]
    return additions
