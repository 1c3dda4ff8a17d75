"""The one place the core's domain errors become HTTP statuses and the documented error bodies."""

from __future__ import annotations

from typing import Any

from bridge.core.errors import RunFailed
from bridge.support.errors import BridgeError, FailureKind
from common.errors import CodedError

STATUS: dict[FailureKind, int] = {"rejected": 400, "unauthorized": 401, "conflict": 409, "failed": 500,
                                  "runtime_failed": 502}


class MappedError(CodedError):
    """A core error as the coded body (contract 2.5); a run's carries its ids, steps and diagnostics."""

    def __init__(self, error: BridgeError) -> None:
        super().__init__(STATUS[error.kind], error.code, error.message)
        self.error = error

    def body(self) -> dict[str, Any]:
        body = super().body()
        error = self.error
        if isinstance(error, RunFailed):
            body.update(requestId=error.request_id, traceId=error.trace_id)
            if error.steps:
                body["steps"] = [s.wire() for s in error.steps]
            if error.diagnostics:
                body["diagnostics"] = [d.wire() for d in error.diagnostics]
        return body


def http_error(error: BridgeError) -> CodedError:
    return MappedError(error)
