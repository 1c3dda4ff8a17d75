"""The core's domain errors: a code and a safe message, never an HTTP status (the web layer maps
them, in `bridge.web.errors`, to statuses and the documented envelopes)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge.support.errors import BridgeError, FailureKind
from common.bridge_schemas import Diagnostic, TraceStep


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
