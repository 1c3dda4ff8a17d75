"""What every `retrieval_guidance` serve emits must be: the shared model's closed shape, written
exactly as the model writes it, plus serve's own redaction and budget rules."""

from __future__ import annotations

import json
from typing import Any

from common.guidance import RetrievalGuidance
from serve.retrieval.guidance_text import is_sensitive, safe_path


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def assert_serve_guidance(value: Any) -> RetrievalGuidance:
    """Fail unless `value` is guidance as serve must emit it; return it parsed."""
    guidance = RetrievalGuidance.model_validate(value, by_alias=False, by_name=True)  # snake_case only
    # Nothing trimmed, reordered or coerced by parsing: the key order and values are the model's.
    assert compact(guidance.model_dump()) == compact(value)
    # serve's budget is stricter than the shared one: the compact JSON itself.
    assert len(compact(value)) <= guidance.character_budget
    assert not [s for s in _strings(value) if is_sensitive(s)]
    assert all(safe_path(card.path) == card.path for card in guidance.page_cards)
    assert all(card.path == "." or safe_path(card.path) == card.path for card in guidance.folder_cards)
    if guidance.orientation_source == "none":
        assert not (guidance.folder_cards or guidance.page_cards or guidance.suggested_terms
                    or guidance.exact_identifiers)
    return guidance
