"""Retrieval intent (`data.retrieval`): parsing the closed shape and what each source is sent."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from common.bridge_schemas import Diagnostic, Observation, RetrievalIntent
from common.filters import FILTERS_CAPABILITY, parse_filters
from common.guidance import MAX_QUERY_VARIANTS

RETRIEVAL_V1 = "llmwiki_retrieval_v1"
GUIDED_LEXICAL = "llmwiki_agent_guided_lexical_v1"
UNFILTERED = ("The source does not advertise search filters; the bridge asked it without them, so its "
              "evidence is not filtered.")


class IntentError(ValueError):
    """`data.retrieval` is invalid (400 invalid_retrieval_intent); the message names the field."""


def parse_intent(raw: Any, query: str) -> RetrievalIntent:
    """Validate the closed camelCase shape (list items trimmed by the model) and dedupe query variants
    against the query."""
    if not isinstance(raw, dict):
        raise IntentError("retrieval must be a JSON object.")
    try:
        intent = RetrievalIntent.model_validate(raw)
    except ValidationError as exc:
        # A wrong type or an unknown field is named before an empty or overlong list item.
        errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] == "retrieval_item")
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise IntentError(f"retrieval.{where} is not a supported retrieval field.") from None
        if first["type"] == "retrieval_filter":  # its message names the filter key
            raise IntentError(first["msg"]) from None
        if first["type"] == "retrieval_item":
            raise IntentError(f"retrieval.{where.rsplit('.', 1)[0]} {first['msg']}") from None
        raise IntentError(f"retrieval.{where} is invalid.") from None
    search = intent.search
    if search is None:
        return intent
    variants = search.query_variants
    if variants and intent.search_mode != "lexical":
        raise IntentError("retrieval.search.queryVariants require searchMode lexical.")
    seen = {unicodedata.normalize("NFC", query).lower()}
    kept: list[str] = []
    for variant in variants or []:
        key = unicodedata.normalize("NFC", variant).lower()
        if key not in seen:
            seen.add(key)
            kept.append(variant)
    search.query_variants = kept[:MAX_QUERY_VARIANTS] or None
    return intent


@dataclass(frozen=True)
class SourceRetrievalPlan:
    """What one source receives given its capabilities (fresh bundle, else descriptor)."""

    fields: dict[str, Any]
    diagnostic: Diagnostic | None
    mode_supported: bool = True
    fallback: str = "lexical"  # A2A forwards the whole intent, fallback included
    guided_supported: bool = True  # query variants asked for and advertised (or none asked for)
    filters_supported: bool = True  # filters asked for and advertised (or none asked for)


def plan_for(intent: RetrievalIntent, capabilities: Sequence[str], capability_source: str,
             source_id: str, selected_ids: Sequence[str], protocol: str) -> SourceRetrievalPlan:
    caps = set(capabilities)
    mode = intent.search_mode
    search = intent.search
    variants = (search.query_variants if search else None) or []
    mode_matched = RETRIEVAL_V1 in caps and f"llmwiki_search_mode_{mode}" in caps
    guided_matched = not variants or GUIDED_LEXICAL in caps
    filters = parse_filters(search.filters, camel=True) if search is not None else None
    filters_matched = filters is None or FILTERS_CAPABILITY in caps
    fields: dict[str, Any] = {}
    if mode_matched:
        fields["mode"] = mode
        if search is not None:
            if search.limit is not None:
                fields["limit"] = search.limit
            if search.snippet_chars is not None:
                fields["snippet_chars"] = search.snippet_chars
            if search.fields:
                fields["fields"] = search.fields
            excluded = _excluded_for(search.exclude_page_ids or [], source_id, selected_ids)
            if excluded:
                fields["exclude_page_ids"] = excluded
            if variants and guided_matched:
                fields["query_variants"] = variants
            if filters is not None and filters_matched:
                fields["filters"] = filters.wire()  # serve's snake_case
    if mode_matched and guided_matched and filters_matched:
        return SourceRetrievalPlan(fields, None, fallback=intent.fallback)
    if not caps:
        status = "unknown"
    elif RETRIEVAL_V1 not in caps:
        status = "missing_retrieval_v1"
    elif not mode_matched:
        status = "missing_search_mode"
    elif not guided_matched:
        status = "missing_guided_lexical_v1"
    else:
        status = "missing_filters_v1"
    missing = (RETRIEVAL_V1 if RETRIEVAL_V1 not in caps
               else f"llmwiki_search_mode_{mode}" if not mode_matched
               else GUIDED_LEXICAL if not guided_matched else FILTERS_CAPABILITY)
    observations = [("requestedMode", mode), ("appliedMode", mode if mode_matched else "legacy"),
                    ("fallback", intent.fallback), ("capabilityMatched", "false"),
                    ("capabilityStatus", status), ("capabilityMetadataSource", capability_source),
                    ("missingCapability", missing), ("redaction", "urls, queries")]
    diagnostic = Diagnostic(
        severity="warning", scope="source", phase="retrieval", protocol=protocol,
        subject=re.sub(r"[^A-Za-z0-9]+", "_", source_id) or "source",
        retryable=False, observations=[Observation(name=n, value=v) for n, v in observations],
        remediation="Choose sources that advertise the requested retrieval capability.",
        message=UNFILTERED if missing == FILTERS_CAPABILITY else
        "The source does not advertise the requested retrieval capability; the bridge used "
        "the lexical fallback.")
    return SourceRetrievalPlan(fields, diagnostic, mode_matched, intent.fallback,
                               guided_supported=guided_matched, filters_supported=filters_matched)


def unsupported_message(intent: RetrievalIntent, mode_unsupported: Sequence[str],
                        guided_unsupported: Sequence[str], filters_unsupported: Sequence[str] = ()) -> str:
    """The `fallback: "none"` refusal: lists `<id> (<protocol>)` only, never URLs or the query."""
    if not mode_unsupported and not guided_unsupported:
        return (f"Retrieval filters require selected source(s) to advertise {FILTERS_CAPABILITY}: "
                f"{', '.join(filters_unsupported)}. Omit filters, set fallback to lexical (those "
                "sources are then asked without filters), or choose sources that advertise filters.")
    also = (f" Retrieval filters also require selected source(s) to advertise {FILTERS_CAPABILITY}: "
            f"{', '.join(filters_unsupported)}." if filters_unsupported else "")
    return _unsupported(intent, mode_unsupported, guided_unsupported) + also


def _unsupported(intent: RetrievalIntent, mode_unsupported: Sequence[str],
                 guided_unsupported: Sequence[str]) -> str:
    guided = (f"llmwiki_agent_guided_lexical_v1: {', '.join(guided_unsupported)}.")
    if not mode_unsupported:
        return (f"Retrieval queryVariants require selected source(s) to advertise exact {guided} Omit "
                "queryVariants, set fallback to lexical, or choose sources that advertise guided lexical "
                "query-variant support.")
    message = (f"Retrieval searchMode {intent.search_mode} is not supported by selected source(s): "
               f"{', '.join(mode_unsupported)}. Set fallback to lexical or choose sources that advertise "
               "the requested retrieval capability.")
    if guided_unsupported:
        message += (" Retrieval queryVariants also require selected source(s) to advertise exact "
                    f"{guided}")
    return message


def _excluded_for(ids: Sequence[str], source_id: str, selected_ids: Sequence[str]) -> list[str]:
    """Ids prefixed `<source>:` go only to that source (prefix stripped); others go to every source."""
    prefix = f"{source_id}:"
    out: list[str] = []
    for page_id in ids:
        if page_id.startswith(prefix):
            out.append(page_id[len(prefix):])
        elif not any(page_id.startswith(f"{other}:") for other in selected_ids):
            out.append(page_id)
    return list(dict.fromkeys(out))
