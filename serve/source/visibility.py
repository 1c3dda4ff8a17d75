"""Whether a page may be served: the contract's withholding rules over its frontmatter."""

from __future__ import annotations

from typing import Any

REVIEW_STATES = frozenset({"approved", "reviewed", "verified", "draft", "proposed", "needs_review"})
WITHHELD_REVIEW_STATES = frozenset({"draft", "proposed", "needs_review"})
WITHHELD_STATUSES = frozenset(
    {
        "draft",
        "proposed",
        "needs_review",
        "blocked",
        "unpublished",
        "private",
        "hidden",
        "embargoed",
        "confidential",
        "internal",
        "withheld",
    }
)
TRUE_WORDS = frozenset({"1", "true", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "n", "off"})

def is_truthy(value: Any) -> bool:
    if value is True:
        return True
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


def is_falsy(value: Any) -> bool:
    if value is False:
        return True
    return isinstance(value, str) and value.strip().lower() in FALSE_WORDS


def normalized_status(status: str) -> str:
    return "_".join(status.lower().replace("-", " ").split())


def approved_for_serving(frontmatter: dict[str, Any], review_state: str, status: str) -> bool:
    """The contract's visibility rules: any withholding signal withholds the page."""
    if is_truthy(frontmatter.get("draft")):
        return False
    if is_falsy(frontmatter.get("published")) or is_falsy(frontmatter.get("publish")):
        return False
    if review_state in WITHHELD_REVIEW_STATES:
        return False
    return normalized_status(status) not in WITHHELD_STATUSES
