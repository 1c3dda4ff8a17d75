"""A2A wire pieces both services share: task shapes (1.0 and 0.3), card interfaces, JSON-RPC errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from common import jsonrpc

CARD_PATH = "/.well-known/agent-card.json"
JSONRPC_PATH = "/a2a/jsonrpc"
SEND_PATH = "/message:send"
# The HTTP+JSON routes besides the card and /message:send (name, method, path, summary): both
# services route and document them from this table.
REST_ROUTES: tuple[tuple[str, str, str, str], ...] = (
    ("a2a_message_stream", "POST", "/message:stream", "A2A SendStreamingMessage (SSE)"),
    ("a2a_list_tasks", "GET", "/tasks", "A2A ListTasks: kept tasks, newest first, paged"),
    ("a2a_get_task", "GET", "/tasks/{task_id}", "A2A GetTask (`{id}:subscribe`: SubscribeToTask)"),
    ("a2a_task_action", "POST", "/tasks/{task_id}", "A2A CancelTask (`{id}:cancel`) or "
                                                   "SubscribeToTask (`{id}:subscribe`)"),
    ("a2a_create_push_config", "POST", "/tasks/{task_id}/pushNotificationConfigs",
     "Push notifications: not supported"),
    ("a2a_list_push_configs", "GET", "/tasks/{task_id}/pushNotificationConfigs",
     "Push notifications: not supported"),
    ("a2a_get_push_config", "GET", "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
     "Push notifications: not supported"),
    ("a2a_delete_push_config", "DELETE", "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
     "Push notifications: not supported"),
    ("a2a_extended_card", "GET", "/extendedAgentCard", "A2A GetExtendedAgentCard: not supported"),
)
INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["application/json", "text/plain"]

# A2A keeps JSON-RPC errors on HTTP 200: the official client checks the status before the body.
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"


@dataclass(frozen=True)
class ErrorKind:
    """One A2A error (spec 5.4): its JSON-RPC code, HTTP status, google.rpc status and the
    ErrorInfo reason (None for the plain JSON-RPC errors)."""

    code: int
    http_status: int
    status: str
    reason: str | None = None


# The one table of A2A errors: both services' bindings render every error from it.
ERRORS: dict[str, ErrorKind] = {
    "TaskNotFound": ErrorKind(-32001, 404, "NOT_FOUND", "TASK_NOT_FOUND"),
    "TaskNotCancelable": ErrorKind(-32002, 409, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
    "PushNotificationNotSupported": ErrorKind(-32003, 400, "UNIMPLEMENTED",
                                              "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    "UnsupportedOperation": ErrorKind(-32004, 400, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION"),
    "ContentTypeNotSupported": ErrorKind(-32005, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"),
    "VersionNotSupported": ErrorKind(-32009, 400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED"),
    "ParseError": ErrorKind(jsonrpc.PARSE_ERROR, 400, "INVALID_ARGUMENT"),
    "InvalidRequest": ErrorKind(jsonrpc.INVALID_REQUEST, 400, "INVALID_ARGUMENT"),
    "MethodNotFound": ErrorKind(jsonrpc.METHOD_NOT_FOUND, 404, "NOT_FOUND"),
    "InvalidParams": ErrorKind(jsonrpc.INVALID_PARAMS, 400, "INVALID_ARGUMENT"),
    "Internal": ErrorKind(jsonrpc.INTERNAL_ERROR, 500, "INTERNAL"),
}
# Kept for callers that name the codes.
PARSE_ERROR = jsonrpc.PARSE_ERROR
INVALID_REQUEST = jsonrpc.INVALID_REQUEST
METHOD_NOT_FOUND = jsonrpc.METHOD_NOT_FOUND
INVALID_PARAMS = jsonrpc.INVALID_PARAMS
INTERNAL_ERROR = jsonrpc.INTERNAL_ERROR
UNSUPPORTED_OPERATION = ERRORS["UnsupportedOperation"].code


class A2aError(Exception):
    """An A2A error by its table name, with a safe message and optional ErrorInfo metadata."""

    def __init__(self, kind: str, message: str, metadata: dict[str, str] | None = None,
                 extra_details: list[dict[str, Any]] | None = None,
                 http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = ERRORS[kind]
        self.message = message
        self.metadata = metadata or {}
        self.extra_details = extra_details or []
        # A run's own failure keeps its status (401, 409, 502) over HTTP+JSON.
        self.http_status = http_status or self.kind.http_status

    def details(self) -> list[dict[str, Any]]:
        info = [error_info(self.kind.reason, self.metadata)] if self.kind.reason else []
        return info + self.extra_details

    def rpc(self, rpc_id: object) -> dict[str, Any]:
        """The JSON-RPC error response (sent with HTTP 200)."""
        return rpc_error(rpc_id, self.kind.code, self.message, self.details() or None)

    def rest_body(self) -> dict[str, Any]:
        """The HTTP+JSON body: google.rpc.Status in AIP-193's JSON form (spec 11.6)."""
        return {"error": {"code": self.http_status, "status": self.kind.status,
                          "message": self.message, "details": self.details()}}


# What a 1.0 request names in `A2A-Version` (absent means 0.3, which we also speak).
SUPPORTED_VERSIONS = ("1.0", "0.3")
VERSION_HEADER = "A2A-Version"


def check_version(header: str | None) -> None:
    """Raise VersionNotSupported for an `A2A-Version` we do not speak (spec 3.6.2)."""
    if header is None or not header.strip():
        return
    value = header.strip()
    major_minor = ".".join(value.split(".")[:2]) if value.count(".") <= 2 else value
    if major_minor not in SUPPORTED_VERSIONS and value != "1":
        raise A2aError("VersionNotSupported", f"A2A version {value[:32]!r} is not supported; "
                       f"supported: {', '.join(SUPPORTED_VERSIONS)}.",
                       {"supportedVersions": ",".join(SUPPORTED_VERSIONS)})


SEND_V1 = "SendMessage"
SEND_V03 = "message/send"


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def context_id_of(message: object) -> str:
    """The caller's context id when it gave a usable one, else a fresh one."""
    context_id = message.get("contextId") if isinstance(message, dict) else None
    return context_id if isinstance(context_id, str) and context_id else str(uuid.uuid4())


def task_v1(task_id: str, context_id: str, artifact_name: str, data: Any, text: str,
            metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A completed A2A 1.0 Task (ProtoJSON, camelCase): the payload as a data part plus a
    readable text part, and the text as the status message."""
    task: dict[str, Any] = {
        "id": task_id,
        "contextId": context_id,
        "status": {
            "state": "TASK_STATE_COMPLETED",
            "timestamp": timestamp(),
            "message": {"messageId": str(uuid.uuid4()), "contextId": context_id, "taskId": task_id,
                        "role": "ROLE_AGENT", "parts": [{"text": text}]},
        },
        "artifacts": [{
            "artifactId": str(uuid.uuid4()),
            "name": artifact_name,
            "parts": [{"data": data, "mediaType": "application/json"},
                      {"text": text, "mediaType": "text/plain"}],
        }],
    }
    if metadata:
        task["metadata"] = metadata
    return task


def task_v03(task_id: str, context_id: str, artifact_name: str, data: Any, text: str,
             metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The same task in the 0.3 shape (`kind` discriminators, lower-case state and role)."""
    task: dict[str, Any] = {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": {
            "state": "completed",
            "timestamp": timestamp(),
            "message": {"kind": "message", "messageId": str(uuid.uuid4()), "contextId": context_id,
                        "taskId": task_id, "role": "agent",
                        "parts": [{"kind": "text", "text": text}]},
        },
        "artifacts": [{
            "artifactId": str(uuid.uuid4()),
            "name": artifact_name,
            "parts": [{"kind": "data", "data": data}, {"kind": "text", "text": text}],
        }],
    }
    if metadata:
        task["metadata"] = metadata
    return task


def card_interfaces(rest_url: str, jsonrpc_url: str, v03_url: str) -> dict[str, Any]:
    """The connection fields of a card for both client generations. 1.x clients read
    `supportedInterfaces` (absolute URLs, used verbatim); 0.3 clients read `url`,
    `preferredTransport` and `additionalInterfaces`, which 1.x maps only when
    `supportedInterfaces` is absent. `v03_url` must speak 0.3 JSON-RPC."""
    return {
        "supportedInterfaces": [
            {"url": rest_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": jsonrpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ],
        "url": v03_url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": v03_url, "transport": "JSONRPC"}],
    }


def error_info(reason: str, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """A `google.rpc.ErrorInfo` detail: the official client maps `reason` to its error type."""
    return {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": A2A_DOMAIN, "metadata": metadata or {}}


def rpc_error(rpc_id: object, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rpc_id if isinstance(rpc_id, (str, int)) else None, "error": error}


def rpc_result(rpc_id: object, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


@dataclass(frozen=True)
class RpcCall:
    """One valid JSON-RPC 2.0 request object."""

    id: str | int | None
    method: str
    params: Any


def parse_rpc(payload: object) -> RpcCall | dict[str, Any]:
    """The routed call, or the error response for anything that is not one request object
    (batches included: A2A never sends them)."""
    if not isinstance(payload, dict):
        return rpc_error(None, INVALID_REQUEST, "Invalid Request")
    rpc_id = payload.get("id")
    method = payload.get("method")
    if payload.get("jsonrpc") != "2.0" or not isinstance(method, str) \
            or isinstance(rpc_id, bool) or not isinstance(rpc_id, (str, int, type(None))):
        return rpc_error(rpc_id, INVALID_REQUEST, "Invalid Request")
    return RpcCall(rpc_id, method, payload.get("params", {}))
