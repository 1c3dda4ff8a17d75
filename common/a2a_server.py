"""The A2A 1.0 operations both services answer the same way, on both bindings: request
validation, version negotiation, the task store's operations, and the refusals of what neither
service declares (push notifications, the extended card)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web

from common import a2a
from common.a2a import A2aError
from common.a2a_tasks import TaskStore, shaped
from common.errors import json_bytes, json_response

log = structlog.get_logger("llmwiki.a2a")

PART_KINDS_V1 = ("text", "raw", "url", "data")
PART_KINDS_V03 = ("text", "file", "data")
USER_ROLES = ("ROLE_USER", "user")
MESSAGE_FIELDS = ("messageId", "role", "parts", "metadata", "extensions", "referenceTaskIds")


@dataclass(frozen=True)
class Outcome:
    """What a service's run made of one message: the pieces of the task the client gets."""

    artifact_name: str
    data: Any
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    state: str = "TASK_STATE_COMPLETED"
    task_id: str = ""  # "" : a fresh id


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# What a streaming run reports while it works: one status message's `parts` and `metadata`.
Progress = Callable[[dict[str, Any]], None]
# The service's run of one validated SendMessageRequest (its `message` checked), for the HTTP
# request that carried it; `progress` is given when the client streams.
Execute = Callable[[dict[str, Any], web.Request, Progress | None], Awaitable[Outcome]]


def _invalid(message: str) -> A2aError:
    return A2aError("InvalidParams", message)


def validate_send(params: object, *, v03: bool = False) -> dict[str, Any]:
    """The request's `message`, checked as spec 3.3.2 asks before anything runs: an object with a
    non-empty `messageId`, a role, and parts each holding exactly one kind of content."""
    if not isinstance(params, dict):
        raise _invalid("params must be a SendMessageRequest object.")
    message = params.get("message")
    if not isinstance(message, dict):
        raise _invalid("message is required and must be an object.")
    if not isinstance(message.get("messageId"), str) or not message["messageId"].strip():
        raise _invalid("message.messageId is required.")
    role = message.get("role")
    if role not in ("ROLE_USER", "ROLE_AGENT", "user", "agent"):
        raise _invalid("message.role must be ROLE_USER or ROLE_AGENT.")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _invalid("message.parts must be a non-empty list.")
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _invalid(f"message.parts[{index}] must be an object.")
        kinds = [k for k in (PART_KINDS_V03 if v03 and "kind" in part else PART_KINDS_V1) if k in part]
        if len(kinds) != 1:
            raise _invalid(f"message.parts[{index}] must hold exactly one of text, raw, url or data.")
        if kinds[0] == "text" and not isinstance(part["text"], str):
            raise _invalid(f"message.parts[{index}].text must be a string.")
        media_type = part.get("mediaType")
        if isinstance(media_type, str) and media_type.split(";")[0].strip().lower() not in a2a.INPUT_MODES \
                and not media_type.lower().startswith("text/"):
            raise A2aError("ContentTypeNotSupported",
                           f"message.parts[{index}] has media type {media_type[:64]!r}; this agent "
                           f"reads {', '.join(a2a.INPUT_MODES)}.")
    for key in ("configuration", "metadata"):
        if params.get(key) is not None and not isinstance(params[key], dict):
            raise _invalid(f"{key} must be an object.")
    for key in ("taskId", "contextId"):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise _invalid(f"message.{key} must be a string.")
    return message


class A2aOperations:
    """One service's A2A operations over its task store; `execute` is the service's run."""

    def __init__(self, store: TaskStore, execute: Execute) -> None:
        self.store = store
        self.execute = execute
        # Streaming runs in progress by task id: CancelTask stops them.
        self.running: dict[str, asyncio.Future[Outcome]] = {}

    async def send(self, params: object, request: web.Request, *, v03: bool = False) -> dict[str, Any]:
        """SendMessage: validated, checked against the tasks it may continue, run, kept. The 1.0
        result (`{"task": ...}`), or the 0.3 task for `message/send`."""
        message = self.accept(params, v03=v03)
        assert isinstance(params, dict)
        outcome = await self.execute(params, request, None)
        task_id = outcome.task_id or str(uuid.uuid4())
        context_id = a2a.context_id_of(message)
        task = self.finish(task_id, context_id, message, outcome)
        if v03:
            task03 = a2a.task_v03(task_id, context_id, outcome.artifact_name, outcome.data,
                                  outcome.text, outcome.metadata)
            task03["status"]["state"] = _V03_STATES.get(outcome.state, "completed")
            return task03
        configuration = params.get("configuration") or {}
        return {"task": _trimmed(task, configuration.get("historyLength"))}

    def accept(self, params: object, *, v03: bool = False) -> dict[str, Any]:
        """The request's message once it is valid and may start (or continue) a task."""
        message = validate_send(params, v03=v03)
        self.store.check_follow_up(message)
        return message

    def finish(self, task_id: str, context_id: str, message: dict[str, Any],
               outcome: Outcome) -> dict[str, Any]:
        """The finished task, kept in the store."""
        task = a2a.task_v1(task_id, context_id, outcome.artifact_name, outcome.data, outcome.text,
                           outcome.metadata)
        task["status"]["state"] = outcome.state
        task["history"] = [history_message(message, task_id, context_id)]
        self.store.put(task)
        return task

    async def call(self, method: str, params: object, request: web.Request) -> Any:
        """A JSON-RPC method's result; A2aError for every refusal."""
        if method in (a2a.SEND_V1, a2a.SEND_V03):
            return await self.send(params, request, v03=method == a2a.SEND_V03)
        if method in REFUSED:
            kind, text = REFUSED[method]
            raise A2aError(kind, text)
        task_op = TASK_OPERATIONS.get(method)
        if task_op is None:
            raise A2aError("MethodNotFound", "Method not found")
        if not isinstance(params, dict):
            raise _invalid("params must be an object.")
        task_id = params.get("id")
        run = self.running.get(task_id) if method == "CancelTask" and isinstance(task_id, str) else None
        if run is not None:
            return await self.cancel_running(str(task_id), run)
        return task_op(self.store, params)

    async def cancel_running(self, task_id: str, run: asyncio.Future[Outcome]) -> dict[str, Any]:
        """CancelTask of a task still working: its run is stopped and the task answered canceled."""
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await run
        task = self.store.find(task_id) or {"id": task_id}
        canceled = {**task, "status": {"state": "TASK_STATE_CANCELED", "timestamp": a2a.timestamp()}}
        self.store.put(canceled)
        return shaped(canceled, None)

    async def rpc(self, payload: object, request: web.Request) -> dict[str, Any]:
        """One JSON-RPC request to its response (errors included: all sent with HTTP 200)."""
        call = a2a.parse_rpc(payload)
        if not isinstance(call, a2a.RpcCall):
            return call
        try:
            a2a.check_version(request.headers.get(a2a.VERSION_HEADER))
            return a2a.rpc_result(call.id, await self.call(call.method, call.params, request))
        except A2aError as exc:
            return exc.rpc(call.id)
        except Exception:
            log.exception("a2a_request_failed", method=call.method[:64])
            return a2a.rpc_error(call.id, a2a.INTERNAL_ERROR, "The request failed.")

    def rest_handlers(self) -> dict[str, Handler]:
        """The handlers of `a2a.REST_ROUTES` by name (each service answers `/message:send` itself,
        legacy forms included)."""

        async def answer(request: web.Request, method: str, params: dict[str, Any]) -> web.Response:
            try:
                a2a.check_version(request.headers.get(a2a.VERSION_HEADER))
                return json_response(await self.call(method, params, request))
            except A2aError as exc:
                return rest_error(exc)

        async def list_tasks(request: web.Request) -> web.Response:
            return await answer(request, "ListTasks", dict(request.query))

        async def get_task(request: web.Request) -> web.Response:
            task_id = request.match_info["task_id"]
            if task_id.endswith(":subscribe"):
                return await answer(request, "SubscribeToTask", {"id": task_id[:-10]})
            return await answer(request, "GetTask", {**request.query, "id": task_id})

        async def task_action(request: web.Request) -> web.Response:
            task_id = request.match_info["task_id"]
            for suffix, method in ((":cancel", "CancelTask"), (":subscribe", "SubscribeToTask")):
                if task_id.endswith(suffix):
                    return await answer(request, method, {"id": task_id[:-len(suffix)]})
            return rest_error(A2aError("MethodNotFound", "Not Found"))

        async def push_config(request: web.Request) -> web.Response:
            return await answer(request, "CreateTaskPushNotificationConfig", {})

        async def extended_card(request: web.Request) -> web.Response:
            return await answer(request, "GetExtendedAgentCard", {})

        return {"a2a_list_tasks": list_tasks, "a2a_get_task": get_task,
                "a2a_task_action": task_action, "a2a_create_push_config": push_config,
                "a2a_list_push_configs": push_config, "a2a_get_push_config": push_config,
                "a2a_delete_push_config": push_config, "a2a_extended_card": extended_card}


CARD_MAX_AGE_SECONDS = 60


def card_response(request: web.Request, card: dict[str, Any]) -> web.Response:
    """The agent card with the caching headers spec 8.6.1 asks for: a short max-age and an ETag of
    its bytes (a matching If-None-Match gets 304)."""
    body = json_bytes(card, exact_floats=False)
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"Cache-Control": f"public, max-age={CARD_MAX_AGE_SECONDS}", "ETag": etag}
    given = request.headers.get("If-None-Match", "")
    if etag in (tag.strip().removeprefix("W/") for tag in given.split(",")):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type="application/json", charset="utf-8", headers=headers)


def check_content_type(request: web.Request) -> None:
    """JSON-RPC requests are JSON (spec 9.1): a body declared as anything else is refused."""
    if request.headers.get("Content-Type") and request.content_type not in ("application/json",) \
            and not request.content_type.endswith("+json"):
        raise A2aError("ContentTypeNotSupported", "JSON-RPC requests must be application/json.")


def history_message(message: dict[str, Any], task_id: str, context_id: str) -> dict[str, Any]:
    """The client's message as A2A defines it (unknown fields are not echoed back)."""
    kept = {k: message[k] for k in MESSAGE_FIELDS if k in message}
    return {**kept, "taskId": task_id, "contextId": context_id}


def rest_error(exc: A2aError, status: int | None = None) -> web.Response:
    return json_response(exc.rest_body(), status=status or exc.http_status)


def _trimmed(task: dict[str, Any], history_length: object) -> dict[str, Any]:
    if isinstance(history_length, int) and not isinstance(history_length, bool) and history_length >= 0:
        return shaped(task, history_length)
    return task


_V03_STATES = {"TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
               "TASK_STATE_CANCELED": "canceled", "TASK_STATE_REJECTED": "rejected"}

# Tasks are kept once they end; a stream in progress belongs to the client that opened it.
_RESUBSCRIBE = ("UnsupportedOperation", "Only the client that opened a stream receives its events; "
                "use GetTask to read a task.")
TaskOperation = Callable[[TaskStore, dict[str, Any]], Any]
def _subscribe(store: TaskStore, params: dict[str, Any]) -> Any:
    store.get({"id": params.get("id")})  # TaskNotFound first
    raise A2aError(*_RESUBSCRIBE)


TASK_OPERATIONS: dict[str, TaskOperation] = {
    "SubscribeToTask": _subscribe,
    "GetTask": TaskStore.get,
    "ListTasks": TaskStore.list,
    "CancelTask": TaskStore.cancel,
}
_PUSH = ("PushNotificationNotSupported", "Push notifications are not supported (the agent card "
         "declares pushNotifications: false).")
# Methods A2A defines that are refused with the spec's error for an undeclared capability.
REFUSED: dict[str, tuple[str, str]] = {
    "tasks/resubscribe": _RESUBSCRIBE,
    "CreateTaskPushNotificationConfig": _PUSH, "GetTaskPushNotificationConfig": _PUSH,
    "ListTaskPushNotificationConfigs": _PUSH, "DeleteTaskPushNotificationConfig": _PUSH,
    "tasks/pushNotificationConfig/set": _PUSH, "tasks/pushNotificationConfig/get": _PUSH,
    "tasks/pushNotificationConfig/list": _PUSH, "tasks/pushNotificationConfig/delete": _PUSH,
    "GetExtendedAgentCard": ("UnsupportedOperation", "There is no extended agent card (the card "
                             "declares no extendedAgentCard capability)."),
    "agent/getAuthenticatedExtendedCard": ("UnsupportedOperation", "There is no extended agent card."),
    "tasks/get": ("UnsupportedOperation", "0.3 task operations are not supported; use GetTask."),
    "tasks/list": ("UnsupportedOperation", "0.3 task operations are not supported; use ListTasks."),
    "tasks/cancel": ("UnsupportedOperation", "0.3 task operations are not supported; use CancelTask."),
}
