"""serve's opt-in A2A surface: the agent card, POST /message:send and the JSON-RPC endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web

from common.errors import ValidationFailed, issue, json_response
from common.version import __version__
from serve.protocols.params import json_body
from serve.service import KnowledgeSource

CARD_PATH = "/.well-known/agent-card.json"
SEND_PATH = "/message:send"
JSONRPC_PATH = "/a2a/jsonrpc"
ARTIFACT_NAME = "llmwiki_context"
DEFAULT_DESCRIPTION = "LLMWiki Serve A2A endpoint"
NO_EVIDENCE = "No approved LLMWiki evidence matched the request."
INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["application/json", "text/plain"]

# JSON-RPC 2.0 error codes (A2A keeps them; errors travel with HTTP 200).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

log = structlog.get_logger("llmwiki.serve.a2a")
SourceOf = Callable[[web.Request], KnowledgeSource]


# -- pure request parsing ---------------------------------------------------------------

def is_v1_request(body: dict[str, Any]) -> bool:
    """An A2A SendMessageRequest (1.0, or 0.3 over REST) rather than the documented legacy
    forms: its `message` is an object carrying `messageId`, which A2A requires. A simple
    client's `{"message": {"role": "user", "parts": [...]}}` envelope stays legacy."""
    message = body.get("message")
    return isinstance(message, dict) and "messageId" in message


def legacy_query(body: dict[str, Any]) -> str:
    """Query text of a legacy request; first match wins (contract 7.2)."""
    data = body.get("data")
    if isinstance(data, dict) and data.get("query"):
        return _text(data["query"])
    if body.get("text"):
        return _text(body["text"])
    message = body.get("message")
    if isinstance(message, dict) and isinstance(message.get("parts"), list):
        texts = [_text(part.get("text") or "") for part in message["parts"] if isinstance(part, dict)]
        return " ".join(texts).strip()
    return ""


def message_query(message: object) -> str:
    """Query text of an A2A message: its text parts joined, else a data part's `query`.
    Anything malformed counts as no text (an empty query, never an error)."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return ""
    parts = [part for part in message["parts"] if isinstance(part, dict)]
    texts = [part["text"] for part in parts if isinstance(part.get("text"), str)]
    joined = " ".join(texts).strip()
    if joined:
        return joined
    for part in parts:
        data = part.get("data")
        if isinstance(data, dict) and isinstance(data.get("query"), str) and data["query"].strip():
            return str(data["query"]).strip()
    return ""


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else str(value).strip()


# -- pure response shaping --------------------------------------------------------------

def render_summary(pack: dict[str, Any]) -> str:
    """The readable text part: up to 3 orientation and 5 evidence lines (contract 7.2)."""
    orientation = pack.get("orientation") or []
    evidence = pack.get("evidence") or []
    if not orientation and not evidence:
        return NO_EVIDENCE
    lines = [f"{pack.get('wiki_title', '')} context:"]
    if orientation:
        lines.append("Orientation:")
        lines.extend(f"[{i}] {item.get('title', '')} ({item.get('role', '')}) - {item.get('snippet', '')}"
                     for i, item in enumerate(orientation[:3], 1))
    if evidence:
        lines.append("Evidence:")
        lines.extend(f"[{i}] {item.get('title', '')} - {item.get('snippet', '')}"
                     for i, item in enumerate(evidence[:5], 1))
    return "\n".join(lines)


def legacy_response(pack: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "completed",
        "message": {"role": "agent", "parts": [{"kind": "text", "text": render_summary(pack)}]},
        "artifacts": [{"name": ARTIFACT_NAME, "parts": [{"kind": "data", "data": pack}]}],
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ids(message: object) -> tuple[str, str]:
    """A fresh task id, and the caller's context id when it gave a usable one."""
    context_id = message.get("contextId") if isinstance(message, dict) else None
    if not isinstance(context_id, str) or not context_id:
        context_id = str(uuid.uuid4())
    return str(uuid.uuid4()), context_id


def task_v1(pack: dict[str, Any], message: object) -> dict[str, Any]:
    """An A2A 1.0 Task (ProtoJSON, camelCase) holding the context pack."""
    task_id, context_id = _ids(message)
    summary = render_summary(pack)
    return {
        "id": task_id,
        "contextId": context_id,
        "status": {
            "state": "TASK_STATE_COMPLETED",
            "timestamp": _now(),
            "message": {"messageId": str(uuid.uuid4()), "contextId": context_id, "taskId": task_id,
                        "role": "ROLE_AGENT", "parts": [{"text": summary}]},
        },
        "artifacts": [{
            "artifactId": str(uuid.uuid4()),
            "name": ARTIFACT_NAME,
            "parts": [{"data": pack, "mediaType": "application/json"},
                      {"text": summary, "mediaType": "text/plain"}],
        }],
    }


def task_v03(pack: dict[str, Any], message: object) -> dict[str, Any]:
    """The same task in the 0.3 shape (`kind` discriminators, lower-case state and role)."""
    task_id, context_id = _ids(message)
    summary = render_summary(pack)
    return {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": {
            "state": "completed",
            "timestamp": _now(),
            "message": {"kind": "message", "messageId": str(uuid.uuid4()), "contextId": context_id,
                        "taskId": task_id, "role": "agent",
                        "parts": [{"kind": "text", "text": summary}]},
        },
        "artifacts": [{
            "artifactId": str(uuid.uuid4()),
            "name": ARTIFACT_NAME,
            "parts": [{"kind": "data", "data": pack}, {"kind": "text", "text": summary}],
        }],
    }


def agent_card(manifest: dict[str, Any], base_url: str) -> dict[str, Any]:
    """A valid A2A 1.0 card that also carries the 0.3 connection fields. Interface URLs are
    absolute: the official client uses them verbatim."""
    jsonrpc_url = base_url + JSONRPC_PATH
    title = manifest.get("title") or "LLMWiki"
    return {
        "name": title,
        "description": manifest.get("description") or DEFAULT_DESCRIPTION,
        "version": __version__,
        "supportedInterfaces": [
            {"url": base_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": jsonrpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ],
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": [{
            "id": ARTIFACT_NAME,
            "name": "LLMWiki context",
            "description": (f"Approved evidence from {title}: a context pack (orientation pages, "
                            "ranked evidence with snippets, source refs, graph) for a question. "
                            "Send the question as a text part."),
            "tags": ["llmwiki", "knowledge-source", "retrieval", "context"],
            "examples": ["How do we cut a release?"],
            "inputModes": INPUT_MODES,
            "outputModes": OUTPUT_MODES,
        }],
        # 0.3 clients read these; 1.x clients use them only when supportedInterfaces is absent.
        "url": jsonrpc_url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": jsonrpc_url, "transport": "JSONRPC"}],
    }


# -- handlers ---------------------------------------------------------------------------

def _base_url(request: web.Request) -> str:
    # The Host header has already passed the security middleware's allowlist.
    return f"{request.scheme}://{request.host}"


def _pack(source: KnowledgeSource, query: str) -> dict[str, Any]:
    # Always approved-only: A2A never passes include_drafts.
    return source.context(source.request(query=query))


def routes(source_of: SourceOf) -> list[web.RouteDef]:
    """The A2A routes; registered only when A2A is enabled."""

    async def card(request: web.Request) -> web.Response:
        return json_response(agent_card(source_of(request).manifest(), _base_url(request)))

    async def send(request: web.Request) -> web.Response:
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ValidationFailed([issue("model_attributes_type", ["body"],
                                          "Input should be a valid dictionary or object to extract "
                                          "fields from", body)])
        source = source_of(request)
        if is_v1_request(body):
            message = body["message"]
            return json_response({"task": task_v1(_pack(source, message_query(message)), message)})
        return json_response(legacy_response(_pack(source, legacy_query(body))))

    async def jsonrpc(request: web.Request) -> web.Response:
        try:
            payload = await json_body(request)
        except ValidationFailed:
            return json_response(_rpc_error(None, PARSE_ERROR, "Parse error"))
        return json_response(_dispatch(source_of(request), payload))

    return [web.get(CARD_PATH, card), web.post(SEND_PATH, send), web.post(JSONRPC_PATH, jsonrpc)]


def _rpc_error(rpc_id: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def _dispatch(source: KnowledgeSource, payload: object) -> dict[str, Any]:
    """One JSON-RPC request: SendMessage (1.0) or message/send (0.3)."""
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0" \
            or not isinstance(payload.get("method"), str):
        rpc_id = payload.get("id") if isinstance(payload, dict) else None
        return _rpc_error(rpc_id if isinstance(rpc_id, str | int) else None,
                          INVALID_REQUEST, "Invalid Request")
    rpc_id = payload.get("id")
    method = payload["method"]
    if method not in ("SendMessage", "message/send"):
        return _rpc_error(rpc_id, METHOD_NOT_FOUND, "Method not found")
    params = payload.get("params", {})
    if not isinstance(params, dict):
        return _rpc_error(rpc_id, INVALID_PARAMS, "Invalid params: expected an object")
    message = params.get("message")
    pack = _pack(source, message_query(message))
    result = {"task": task_v1(pack, message)} if method == "SendMessage" else task_v03(pack, message)
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def openapi_paths() -> dict[str, Any]:
    """OpenAPI entries for the A2A routes (added to /openapi.json only when enabled)."""
    json_object = {"content": {"application/json": {"schema": {"type": "object"}}}}
    return {
        CARD_PATH: {"get": {
            "summary": "A2A agent card (1.0, with the 0.3 connection fields)",
            "responses": {"200": {"description": "Agent card", **json_object}}}},
        SEND_PATH: {"post": {
            "summary": "A2A message: legacy {data: {query}} / {text} / {message: {parts}} forms "
                       "or an A2A 1.0 SendMessageRequest; approved pages only",
            "requestBody": {"required": True, **json_object},
            "responses": {"200": {"description": "Legacy completed response, or {task: Task} for a "
                                                 "1.0 request", **json_object},
                          "422": {"description": "Body is not a JSON object"}}}},
        JSONRPC_PATH: {"post": {
            "summary": "A2A JSON-RPC: SendMessage (1.0) and message/send (0.3)",
            "requestBody": {"required": True, **json_object},
            "responses": {"200": {"description": "JSON-RPC response (errors also use 200)",
                                  **json_object}}}},
    }
