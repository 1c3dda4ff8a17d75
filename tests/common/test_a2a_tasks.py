"""The A2A task store: its bounds (count and age), ListTasks' filters and paging, and refusals."""

from __future__ import annotations

from typing import Any

import pytest

from common import a2a
from common.a2a import A2aError
from common.a2a_tasks import TaskStore
from common.json_wire import json_bytes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def task(task_id: str, context: str = "c", stamp: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    built = a2a.task_v1(task_id, context, "a", {"k": 1}, "text")
    built["status"]["timestamp"] = stamp
    built["history"] = [{"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": str(i)}]}
                        for i in range(3)]
    return built


def kind(exc: pytest.ExceptionInfo[A2aError]) -> str | None:
    return exc.value.kind.reason


def test_the_oldest_task_goes_first_past_the_count() -> None:
    store = TaskStore(max_tasks=2)
    for name in ("a", "b", "c"):
        store.put(task(name))
    assert store.find("a") is None and store.find("b") and store.find("c") and len(store) == 2


def test_tasks_older_than_the_age_limit_are_gone() -> None:
    clock = Clock()
    store = TaskStore(max_age_seconds=60, clock=clock)
    store.put(task("old"))
    clock.now += 30
    store.put(task("young"))
    clock.now += 31
    with pytest.raises(A2aError) as caught:
        store.get({"id": "old"})
    assert kind(caught) == "TASK_NOT_FOUND"
    assert store.get({"id": "young"})["id"] == "young"


def test_the_byte_budget_drops_the_oldest_and_refuses_a_task_larger_than_all_of_it() -> None:
    store = TaskStore()
    store.max_bytes = 3 * len(json_bytes(task("a"), exact_floats=False)) + 10  # three tasks fit
    for name in ("a", "b", "c", "d"):
        store.put(task(name))
    assert store.find("a") is None and [n for n in "bcd" if store.find(n)] == ["b", "c", "d"]
    huge = task("huge")
    huge["artifacts"][0]["parts"][0]["data"] = {"k": "x" * store.max_bytes}
    store.put(huge)
    assert store.find("huge") is None and store.find("d") is not None
    store.put(task("d"))  # replacing a task does not count it twice
    assert [n for n in "bcd" if store.find(n)] == ["b", "c", "d"]


def test_a_zero_sized_store_keeps_nothing() -> None:
    store = TaskStore(max_tasks=0)
    store.put(task("a"))
    assert len(store) == 0


def test_get_trims_history_and_returns_a_copy() -> None:
    store = TaskStore()
    store.put(task("a"))
    got = store.get({"id": "a", "historyLength": 1})
    assert [m["messageId"] for m in got["history"]] == ["m2"]
    got["status"]["state"] = "TASK_STATE_FAILED"
    assert store.get({"id": "a"})["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "history" not in store.get({"id": "a", "historyLength": 0})


def test_list_filters_sorts_newest_first_and_pages_to_an_empty_token() -> None:
    store = TaskStore()
    store.put(task("a", stamp="2026-01-01T00:00:01.000000Z"))
    store.put(task("b", stamp="2026-01-01T00:00:03.000000Z"))
    store.put(task("c", stamp="2026-01-01T00:00:02.000000Z"))
    store.put(task("x", context="other"))
    first = store.list({"contextId": "c", "pageSize": 2})
    assert [t["id"] for t in first["tasks"]] == ["b", "c"] and first["totalSize"] == 3
    assert all("artifacts" not in t for t in first["tasks"])
    second = store.list({"contextId": "c", "pageSize": 2, "pageToken": first["nextPageToken"],
                         "includeArtifacts": True})
    assert [t["id"] for t in second["tasks"]] == ["a"] and second["nextPageToken"] == ""
    assert second["tasks"][0]["artifacts"]
    after = store.list({"statusTimestampAfter": "2026-01-01T00:00:02.000000Z"})
    assert [t["id"] for t in after["tasks"]] == ["b"]
    assert store.list({"status": "TASK_STATE_FAILED"})["tasks"] == []


@pytest.mark.parametrize("params", [{"pageSize": 0}, {"pageSize": 101}, {"pageToken": "junk!"},
                                    {"status": "DONE"}, {"includeArtifacts": "maybe"},
                                    {"historyLength": -1}])
def test_list_refuses_bad_parameters(params: dict[str, Any]) -> None:
    with pytest.raises(A2aError) as caught:
        TaskStore().list(params)
    assert caught.value.kind.code == -32602


def test_cancel_and_follow_ups() -> None:
    store = TaskStore()
    store.put(task("a"))
    with pytest.raises(A2aError) as caught:
        store.cancel({"id": "a"})
    assert kind(caught) == "TASK_NOT_CANCELABLE"
    with pytest.raises(A2aError) as caught:
        store.cancel({"id": "nope"})
    assert kind(caught) == "TASK_NOT_FOUND"
    store.check_follow_up({"messageId": "m"})  # no taskId: a new task
    for follow_up, reason in (({"taskId": "nope"}, "TASK_NOT_FOUND"),
                              ({"taskId": "a", "contextId": "other"}, None),
                              ({"taskId": "a", "contextId": "c"}, "UNSUPPORTED_OPERATION")):
        with pytest.raises(A2aError) as caught:
            store.check_follow_up(follow_up)
        assert kind(caught) == reason


@pytest.mark.parametrize(("header", "ok"), [(None, True), ("", True), ("1.0", True), ("1", True),
                                            ("0.3", True), ("0.3.0", True), ("1.0.2", True),
                                            ("99.0", False), ("2.0", False), ("junk", False)])
def test_version_negotiation(header: str | None, ok: bool) -> None:
    if ok:
        a2a.check_version(header)
        return
    with pytest.raises(A2aError) as caught:
        a2a.check_version(header)
    assert caught.value.kind.code == -32009 and caught.value.rest_body()["error"]["code"] == 400
