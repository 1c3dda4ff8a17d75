"""A2A wire pieces both services share: task shapes (1.0 and 0.3), card interfaces, JSON-RPC errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CARD_PATH = "/.well-known/agent-card.json"
JSONRPC_PATH = "/a2a/jsonrpc"
INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["application/json", "text/plain"]

# JSON-RPC 2.0 codes, and the A2A ones the official client maps to its error types.
# A2A keeps JSON-RPC errors on HTTP 200: the client checks the status before the body.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_OPERATION = -32004
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"

# Methods A2A defines (1.0 names, then 0.3 names) besides sending one message: known, so they are
# "unsupported operations" rather than "method not found".
OTHER_METHODS = frozenset({
    "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
    "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard",
    "message/stream", "tasks/get", "tasks/list", "tasks/cancel", "tasks/resubscribe",
    "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard"})
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
