"""What every source client shares and the run reads: the call failure and the bundle read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SourceCallError(Exception):
    """A source call failed. `message` is safe to show (no URL, no body); the flags feed diagnostics."""

    def __init__(self, message: str, *, http_status: int | None = None, timeout: bool = False,
                 invalid_json: bool = False, policy: bool = False, json_rpc_error: bool = False,
                 upstream_error: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.timeout = timeout
        self.invalid_json = invalid_json
        self.policy = policy
        self.json_rpc_error = json_rpc_error
        # The source answered and said it failed (MCP isError, an A2A error or failed task state).
        self.upstream_error = upstream_error

    @property
    def retryable(self) -> bool:
        if self.policy or self.invalid_json or self.json_rpc_error or self.upstream_error:
            return False
        if self.http_status is None:
            return True
        return self.http_status in (408, 409, 425, 429) or self.http_status >= 500


@dataclass(frozen=True)
class BundleRead:
    """The outcome of source-bundle discovery. `attempted` is false when the policy allowed no
    candidate URL (then there is no step); `raw` is None when every candidate failed."""

    attempted: bool
    raw: dict[str, Any] | None = None
    endpoint: str | None = None
    error: SourceCallError | None = None


def bundle_capabilities(raw: dict[str, Any] | None) -> tuple[str, ...]:
    """The capability strings a bundle (or a context payload) advertises, trimmed."""
    caps = (raw or {}).get("capabilities")
    return tuple(c.strip() for c in caps if isinstance(c, str)) if isinstance(caps, list) else ()
