"""The safe facts of a failed call, as every diagnostic of the bridge reports them: the failure
every source and runtime call raises, which failures are worth retrying, and observations."""

from __future__ import annotations

from collections.abc import Iterable

from bridge.support.text import safe_trace_text
from common.bridge_schemas import Observation

# Statuses a later try may not get: timeouts, conflicts, too early, rate limits, server errors.
RETRYABLE_STATUSES = (408, 409, 425, 429)


def retryable_status(http_status: int | None) -> bool:
    """A failed call may succeed when tried again: no answer at all, or a status above."""
    return http_status is None or http_status in RETRYABLE_STATUSES or http_status >= 500


class CallFailure(Exception):
    """A call out of the bridge failed (a source, the runtime, the ACP adapter). `message` is safe
    to show (no URL, body or key); the flags feed diagnostics."""

    def __init__(self, message: str, *, http_status: int | None = None, timeout: bool = False,
                 invalid_json: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.timeout = timeout
        self.invalid_json = invalid_json

    def facts(self) -> list[tuple[str, str]]:
        """`httpStatus`, `timeout` and `invalidJson`, the ones that apply, in that order."""
        facts: list[tuple[str, str]] = []
        if self.http_status is not None:
            facts.append(("httpStatus", str(self.http_status)))
        if self.timeout:
            facts.append(("timeout", "true"))
        if self.invalid_json:
            facts.append(("invalidJson", "true"))
        return facts


def observations(facts: Iterable[tuple[str, str]]) -> list[Observation]:
    """The facts as a diagnostic's observations, each value made safe to show."""
    return [Observation(name=name, value=safe_trace_text(value)) for name, value in facts]
