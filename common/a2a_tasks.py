"""The bounded in-memory store of A2A tasks behind GetTask, ListTasks, CancelTask and follow-ups."""

from __future__ import annotations

import base64
import copy
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.a2a import A2aError
from common.json_wire import json_bytes

TERMINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                             "TASK_STATE_REJECTED"})
STATES = TERMINAL_STATES | {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED",
                            "TASK_STATE_AUTH_REQUIRED"}
DEFAULT_MAX_TASKS = 1000
DEFAULT_MAX_AGE_SECONDS = 3600.0
# Whatever the count limit, the kept tasks' JSON stays under this many bytes (a bridge result may
# be megabytes): the oldest go first, and a task larger than all of it is not kept.
MAX_BYTES = 64 << 20
MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 50


@dataclass
class _Entry:
    task: dict[str, Any]
    stored_at: float  # monotonic: the age limit is immune to clock changes
    sequence: int  # ties in status timestamps keep the newest first
    size: int  # its JSON's bytes, for the store's byte budget


def _not_found(task_id: object) -> A2aError:
    return A2aError("TaskNotFound", "The task does not exist or is no longer kept.",
                    {"taskId": str(task_id)[:128]})


def _int_param(params: dict[str, Any], key: str, low: int, high: int | None) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise A2aError("InvalidParams", f"{key} must be an integer {bound}.")
    return value


def _bool_param(params: dict[str, Any], key: str) -> bool | None:
    value = params.get(key)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise A2aError("InvalidParams", f"{key} must be a boolean.")


def shaped(task: dict[str, Any], history_length: int | None,
           include_artifacts: bool = True) -> dict[str, Any]:
    """A stored task as a client asked for it: at most `history_length` recent messages
    (0: none), artifacts only when asked for. Always a copy: callers never share the stored dict."""
    out = copy.deepcopy(task)
    history = out.get("history")
    if history_length is not None and isinstance(history, list):
        if history_length == 0:
            out.pop("history", None)
        else:
            out["history"] = history[-history_length:]
    if not include_artifacts:
        out.pop("artifacts", None)
    return out


class TaskStore:
    """Tasks by id, oldest dropped first past `max_tasks` or `max_age_seconds`. In memory only:
    a restart forgets them (docs/configuration.md says so). Holds no text in logs."""

    def __init__(self, max_tasks: int = DEFAULT_MAX_TASKS,
                 max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_tasks = max_tasks
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._tasks: OrderedDict[str, _Entry] = OrderedDict()
        self._sequence = 0
        self._bytes = 0
        self.max_bytes = MAX_BYTES

    def resize(self, max_tasks: int, max_age_seconds: float) -> None:
        self.max_tasks = max_tasks
        self.max_age_seconds = max_age_seconds
        self._expire()

    def __len__(self) -> int:
        self._expire()
        return len(self._tasks)

    def _expire(self) -> None:
        cutoff = self._clock() - self.max_age_seconds
        while self._tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.stored_at >= cutoff and len(self._tasks) <= self.max_tasks \
                    and self._bytes <= self.max_bytes:
                break
            self._bytes -= self._tasks.popitem(last=False)[1].size

    def _drop(self, task_id: str) -> None:
        entry = self._tasks.pop(task_id, None)
        if entry is not None:
            self._bytes -= entry.size

    def put(self, task: dict[str, Any]) -> None:
        """Keep (or replace) a task; a store of size 0 keeps nothing."""
        self._drop(task["id"])
        size = len(json_bytes(task, exact_floats=False))
        if self.max_tasks <= 0 or size > self.max_bytes:
            return
        self._sequence += 1
        self._tasks[task["id"]] = _Entry(copy.deepcopy(task), self._clock(), self._sequence, size)
        self._bytes += size
        self._expire()

    def find(self, task_id: object) -> dict[str, Any] | None:
        self._expire()
        entry = self._tasks.get(task_id) if isinstance(task_id, str) else None
        return entry.task if entry else None

    def get(self, params: dict[str, Any]) -> dict[str, Any]:
        """GetTask: the task, or TaskNotFound."""
        task = self.find(params.get("id"))
        if task is None:
            raise _not_found(params.get("id"))
        return shaped(task, _int_param(params, "historyLength", 0, None))

    def cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        """CancelTask: every task here has finished (runs are kept once they end), so a known
        task is TaskNotCancelable and an unknown one TaskNotFound."""
        task = self.find(params.get("id"))
        if task is None:
            raise _not_found(params.get("id"))
        state = task.get("status", {}).get("state")
        if state in TERMINAL_STATES:
            raise A2aError("TaskNotCancelable", f"The task has already finished ({state}).",
                           {"taskId": task["id"]})
        raise A2aError("TaskNotCancelable", "The task cannot be canceled.", {"taskId": task["id"]})

    def list(self, params: dict[str, Any]) -> dict[str, Any]:
        """ListTasks (spec 3.1.4): filtered by context, state and status time, newest status
        first, paged by an opaque cursor; `nextPageToken` is "" on the last page."""
        self._expire()
        context_id = params.get("contextId")
        state = params.get("status")
        if state is not None and state not in STATES:
            raise A2aError("InvalidParams", "status must be a TaskState such as TASK_STATE_COMPLETED.")
        after = params.get("statusTimestampAfter")
        if after is not None and not isinstance(after, str):
            raise A2aError("InvalidParams", "statusTimestampAfter must be an RFC 3339 timestamp.")
        page_size = _int_param(params, "pageSize", 1, MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE
        history_length = _int_param(params, "historyLength", 0, None)
        include_artifacts = _bool_param(params, "includeArtifacts") or False
        offset = _cursor(params.get("pageToken"))
        matching = [
            entry for entry in self._tasks.values()
            if (not context_id or entry.task.get("contextId") == context_id)
            and (state is None or entry.task["status"].get("state") == state)
            and (after is None or str(entry.task["status"].get("timestamp", "")) > after)]
        matching.sort(key=lambda e: (str(e.task["status"].get("timestamp", "")), e.sequence),
                      reverse=True)
        page = matching[offset:offset + page_size]
        more = offset + page_size < len(matching)
        return {"tasks": [shaped(e.task, history_length, include_artifacts) for e in page],
                "nextPageToken": _token(offset + page_size) if more else "",
                "pageSize": page_size, "totalSize": len(matching)}

    def check_follow_up(self, message: dict[str, Any]) -> None:
        """A message naming a `taskId` continues that task (spec 3.4.2-3.4.3): the task must be
        known, a `contextId` given with it must be the task's, and a finished task takes no
        further messages."""
        task_id = message.get("taskId")
        if task_id is None or task_id == "":
            return
        task = self.find(task_id)
        if task is None:
            raise _not_found(task_id)
        context_id = message.get("contextId")
        if context_id and context_id != task.get("contextId"):
            raise A2aError("InvalidParams", "message.contextId does not match the task's contextId.",
                           {"taskId": task["id"]})
        state = task["status"].get("state")
        if state in TERMINAL_STATES:
            raise A2aError("UnsupportedOperation",
                           f"The task has already finished ({state}) and takes no further messages.",
                           {"taskId": task["id"]})


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _cursor(token: object) -> int:
    if token is None or token == "":
        return 0
    try:
        text = base64.urlsafe_b64decode(str(token) + "=" * (-len(str(token)) % 4)).decode()
        if text.startswith("o:") and text[2:].isdigit():
            return int(text[2:])
    except (ValueError, UnicodeDecodeError):
        pass
    raise A2aError("InvalidParams", "pageToken is not one this agent issued.")
