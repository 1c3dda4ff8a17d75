"""The projection signature as the contract defines it (2.4), made whole: what serve's
line-by-line signature (serve/watch/signature.py) must equal."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def signature_of(lines: Iterable[str]) -> str:
    """`sha256:<hex>` over the walk-ordered entry lines, or "" for no entries."""
    body = "\n".join(lines)
    if not body:
        return ""
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()
