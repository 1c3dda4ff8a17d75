"""The core's domain errors: a code and a safe message, never an HTTP status (the web layer maps
them, in `bridge.protocols.errors`, to statuses and the documented envelopes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from common.bridge_schemas import Diagnostic, TraceStep

# What went wrong, in the domain's words; the web layer turns each into a status.
FailureKind = Literal["rejected", "runtime_failed"]


class BridgeError(Exception):
    """A failure the caller may see: `code` is the documented error code, `message` is safe."""

    kind: FailureKind = "rejected"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RequestRejected(BridgeError):
    """The caller's mistake, found before any source was called (a bad body, a bad source draft)."""


class RunFailed(BridgeError):
    """A `/message:send` run that ends without a task: refused (`rejected`) or its runtime failed
    (`runtime_failed`, with every step and diagnostic gathered so far). Every run error carries
    the request and trace ids."""

    def __init__(self, kind: FailureKind, code: str, message: str, request_id: str, trace_id: str,
                 steps: Sequence[TraceStep] = (), diagnostics: Sequence[Diagnostic] = ()) -> None:
        super().__init__(code, message)
        self.kind = kind
        self.request_id = request_id
        self.trace_id = trace_id
        self.steps = list(steps)
        self.diagnostics = list(diagnostics)
