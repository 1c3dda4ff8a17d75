"""serve's opt-in A2A surface: the agent card, POST /message:send and the JSON-RPC endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from common import a2a, a2a_stream
from common.a2a import INPUT_MODES, OUTPUT_MODES, A2aError
from common.a2a_server import (
    A2aOperations,
    Handler,
    Outcome,
    Progress,
    card_response,
    rest_error,
)
from common.a2a_tasks import TaskStore
from common.errors import ValidationFailed, issue, json_response
from common.schemas import WikiManifest
from common.version import __version__
from serve.protocols import off_loop
from serve.protocols.params import read_json_body
from serve.routes import path_of
from serve.service import KnowledgeSource

ARTIFACT_NAME = "llmwiki_context"
DEFAULT_DESCRIPTION = "LLMWiki Serve A2A endpoint"
NO_EVIDENCE = "No approved LLMWiki evidence matched the request."

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


def agent_card(manifest: WikiManifest, base_url: str) -> dict[str, Any]:
    """A valid A2A 1.0 card that also carries the 0.3 connection fields. Interface URLs are
    absolute: the official client uses them verbatim."""
    jsonrpc_url = base_url + path_of("a2a_jsonrpc")
    title = manifest.title or "LLMWiki"
    return {
        "name": title,
        "description": manifest.description or DEFAULT_DESCRIPTION,
        "version": __version__,
        "capabilities": {"streaming": True, "pushNotifications": False},
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
        **a2a.card_interfaces(base_url, jsonrpc_url, jsonrpc_url),
    }


# -- handlers ---------------------------------------------------------------------------

def _base_url(request: web.Request, public_url: str | None) -> str:
    """The configured public URL, else this request's scheme and Host (which has already passed
    the security middleware's allowlist)."""
    return public_url or f"{request.scheme}://{request.host}"


async def _pack(source: KnowledgeSource, query: str) -> dict[str, Any]:
    # Always approved-only: A2A never passes include_drafts.
    return await off_loop.search(source, source.request(query=query), source.context)


def request_form(body: dict[str, Any], version: str | None) -> str:
    """"legacy" for the documented forms (contract 7.2: `data`, `text`, or a `message` without
    the `messageId` A2A requires), "a2a" for a SendMessageRequest (or any body sent with an
    `A2A-Version` header and no legacy key), "" for a body that names no form at all (`{}`):
    spec 3.3.2 asks for it to be refused rather than answered as an empty query."""
    if isinstance(body.get("data"), dict) or "text" in body:
        return "legacy"
    if version or is_v1_request(body):
        return "a2a"
    return "legacy" if "message" in body or "data" in body else ""


def operations(source: KnowledgeSource) -> A2aOperations:
    """serve's A2A operations: each message is one context pack, approved pages only; finished
    tasks kept as the settings bound them."""

    async def execute(params: dict[str, Any], request: web.Request, progress: Progress | None) -> Outcome:
        pack = await _pack(source, message_query(params["message"]))
        return Outcome(ARTIFACT_NAME, pack, render_summary(pack))

    settings = source.settings
    return A2aOperations(TaskStore(settings.a2a_max_tasks, settings.a2a_task_ttl_seconds), execute)


def handlers(source_of: SourceOf, ops: A2aOperations) -> dict[str, Handler]:
    """The A2A handlers by route name (the route table routes them only when A2A is enabled)."""

    async def card(request: web.Request) -> web.Response:
        source = source_of(request)
        return card_response(request, agent_card(source.manifest(),
                                                 _base_url(request, source.settings.public_url)))

    async def send(request: web.Request) -> web.Response:
        version = request.headers.get(a2a.VERSION_HEADER)
        try:
            a2a.check_version(version)
            body = await read_json_body(request)
        except A2aError as exc:
            return rest_error(exc)
        except ValidationFailed:
            return rest_error(A2aError("ParseError", "The request body is not valid JSON."))
        if not isinstance(body, dict):
            raise ValidationFailed([issue("model_attributes_type", ["body"],
                                          "Input should be a valid dictionary or object to extract "
                                          "fields from", body)])
        form = request_form(body, version)
        if form == "legacy":
            return json_response(legacy_response(await _pack(source_of(request), legacy_query(body))))
        try:
            if not form:
                raise A2aError("InvalidParams", "The body is neither a SendMessageRequest (message "
                               "is required) nor a documented {\"data\": {\"query\": ...}} message.")
            return json_response(await ops.send(body, request))
        except A2aError as exc:
            return rest_error(exc)

    return {"a2a_agent_card": card, "a2a_message_send": send,
            **a2a_stream.handlers(ops, a2a_stream.BodyReader(read_json_body, (ValidationFailed,)))}


def openapi_paths() -> dict[str, Any]:
    """OpenAPI entries for the A2A routes (added to /openapi.json only when enabled)."""
    json_object = {"content": {"application/json": {"schema": {"type": "object"}}}}
    a2a_error = {"description": "A2A error: google.rpc.Status (AIP-193) with an ErrorInfo detail",
                 **json_object}
    jsonrpc = {"post": {
        "summary": "A2A JSON-RPC: SendMessage, GetTask, ListTasks, CancelTask (1.0) and "
                   "message/send (0.3)",
        "requestBody": {"required": True, **json_object},
        "responses": {"200": {"description": "JSON-RPC response (errors also use 200)",
                              **json_object}}}}
    paths: dict[str, Any] = {
        path_of("a2a_agent_card"): {"get": {
            "summary": "A2A agent card (1.0, with the 0.3 connection fields); Cache-Control and ETag",
            "responses": {"200": {"description": "Agent card", **json_object},
                          "304": {"description": "Not modified (If-None-Match)"}}}},
        path_of("a2a_message_send"): {"post": {
            "summary": "A2A message: legacy {data: {query}} / {text} / {message: {parts}} forms "
                       "or an A2A 1.0 SendMessageRequest; approved pages only",
            "requestBody": {"required": True, **json_object},
            "responses": {"200": {"description": "Legacy completed response, or {task: Task} for a "
                                                 "1.0 request", **json_object},
                          "400": a2a_error,
                          "422": {"description": "Body is not a JSON object"}}}},
        path_of("a2a_jsonrpc"): jsonrpc,
        path_of("a2a_jsonrpc_slash"): jsonrpc,
    }
    for _, method, path, summary in a2a.REST_ROUTES:
        paths.setdefault(path, {})[method.lower()] = {
            "summary": summary, "responses": {"200": {"description": "OK", **json_object},
                                              "4XX": a2a_error}}
    return paths
