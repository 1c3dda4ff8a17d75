"""The bridge's bearer-token check (contract 2.3), shared by the request pipeline and settings writes."""

from __future__ import annotations

import hmac
import re

_BEARER = re.compile(r"^bearer[ \t]+(.*)$", re.IGNORECASE | re.DOTALL)


def bearer_matches(header: str | None, token: str) -> bool:
    """`Bearer <token>`, scheme case-insensitive, spaces/tabs before the token skipped; the rest
    must equal the token exactly, compared in constant time."""
    match = _BEARER.match(header or "")
    given = match.group(1).lstrip(" \t") if match else ""
    return bool(given) and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))
