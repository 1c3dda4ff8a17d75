"""The bridge's domain error: a kind, a documented code and a safe message, never an HTTP status
(the web layer maps each kind to a status in one place, bridge.web.errors)."""

from __future__ import annotations

from typing import Literal

# What went wrong, in the domain's words.
FailureKind = Literal["rejected", "unauthorized", "conflict", "failed", "runtime_failed"]


class BridgeError(Exception):
    """A failure the caller may see: `code` is the documented error code, `message` is safe."""

    kind: FailureKind = "rejected"

    def __init__(self, code: str, message: str, kind: FailureKind | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        if kind is not None:
            self.kind = kind
