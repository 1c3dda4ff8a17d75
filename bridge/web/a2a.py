"""The bridge's A2A surface: the agent card, POST /message:send (legacy and 1.0) and JSON-RPC."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from bridge.core.artifact import ARTIFACT_NAME
from bridge.core.errors import RunFailed
from bridge.core.gather import SourceOutcome
from bridge.service import BridgeService, RunReports
from bridge.support.fields import as_list, as_object
from bridge.support.iolog import io_scope
from bridge.web.errors import http_error
from common import a2a, a2a_stream
from common.a2a import INPUT_MODES, JSONRPC_PATH, OUTPUT_MODES, SEND_PATH, A2aError
from common.a2a_server import (
    A2aOperations,
    Handler,
    Outcome,
    Progress,
    card_response,
    rest_error,
)
from common.a2a_tasks import TaskStore
from common.errors import CodedError, json_response
from common.logging import REQUEST_ID
from common.version import __version__

DESCRIPTION = ("Local A2A-compatible bridge for OpenAI-compatible chat-completions gateways and LLMWiki "
               "Knowledge Source tools.")
STRUCT_TYPE = "type.googleapis.com/google.protobuf.Struct"
# The bridge's own card facts (contract 2.6.2 put them in `capabilities`, where a strict A2A parser
# rejects them): a declared, optional extension carries them instead.
EXTENSION_URI = "urn:llmwiki:a2a-extension:agent-bridge:v1"
BRIDGE_EXTENSION: dict[str, Any] = {
    "uri": EXTENSION_URI,
    "description": "LLMWiki agent bridge: structured llmwiki_agent_result artifacts from local "
                   "Knowledge Sources.",
    "required": False,
    "params": {"structuredArtifacts": True, "localBridge": True,
               "knowledgeSourceProtocols": ["llmwiki-http", "mcp", "a2a"]},
}
# A2A state names of the contract's lower-case task states.
_STATES = {"completed": "TASK_STATE_COMPLETED", "failed": "TASK_STATE_FAILED",
           "canceled": "TASK_STATE_CANCELED", "rejected": "TASK_STATE_REJECTED"}

log = structlog.get_logger("llmwiki.bridge.a2a")
ServiceOf = Callable[[web.Request], BridgeService]
BodyOf = Callable[[web.Request], Awaitable[Any]]
TraceIdOf = Callable[[web.Request], str]


# -- the card -----------------------------------------------------------------------------

def agent_card(service: BridgeService, base_url: str) -> dict[str, Any]:
    """The contract's card (2.6.2) that is also a valid A2A 1.0 card carrying the 0.3 connection
    fields. Every URL is absolute: the official client uses interface URLs verbatim."""
    health = service.health()  # never probes: the card must not touch the runtime or sources
    identity = service.settings.identity()
    return {
        "id": identity["runtimeId"],
        "name": identity["runtimeName"],
        "description": DESCRIPTION,
        "protocol": "a2a",
        "runtime": identity["runtime"],
        "agentRuntime": identity["agentRuntime"],
        "provider": {"organization": identity["providerOrganization"]},
        "version": __version__,
        "capabilities": {"streaming": True, "pushNotifications": False,
                         "extensions": [BRIDGE_EXTENSION]},
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": [{
            "id": ARTIFACT_NAME,
            "name": "LLMWiki evidence answer",
            "description": ("Answers a question from the selected LLMWiki Knowledge Sources and returns "
                            "an llmwiki_agent_result data artifact (answer, citations, merged graph, "
                            "source bundles, trace steps, diagnostics) plus the answer as text. Send the "
                            "question as a text part; orchestrationMode, knowledgeSources and retrieval "
                            "may go in a data part."),
            "tags": ["llmwiki", "knowledge-source", "citations", "evidence"],
            "examples": ["How do we ship a hotfix release?"],
            "inputModes": INPUT_MODES,
            "outputModes": OUTPUT_MODES,
        }],
        "metadata": {
            "bridge": "llmwiki-agent-bridge",
            "runtimeProfile": health["runtimeProfile"],
            "runtimeAdapter": health["runtimeAdapter"],
            "modelConfigured": health["modelConfigured"],
            "hermesModelConfigured": health["hermesModelConfigured"],
            "sourcePolicy": health["sourcePolicy"],
            "settingsUrl": "/settings",
            "runtimeConnection": health["runtimeConnection"],
            "protocolSurface": {"a2a": "compatible", "mcp": "compatible"},
            "sourceRegistry": health["sourceRegistry"],
        },
        # `url` keeps the contract's /message:send, which also answers 0.3 JSON-RPC.
        **a2a.card_interfaces(base_url, base_url + JSONRPC_PATH, base_url + SEND_PATH),
    }


# -- request forms ------------------------------------------------------------------------

def is_jsonrpc(body: Any) -> bool:
    """A JSON-RPC envelope (a 0.3 client posting to the card's `url`), not a run request."""
    return isinstance(body, dict) and "jsonrpc" in body and "method" in body


def is_send_message_request(body: Any, version: str | None) -> bool:
    """An A2A 1.0 SendMessageRequest, answered `{"task": ...}` and validated as one: no legacy
    `data` object or top-level `query`, and either a 1.x `A2A-Version` header or a root `message`
    with the `messageId` A2A requires and a 1.0 role (`ROLE_USER`). A plain client's
    `{"message": {"role": "user", ...}}` stays legacy."""
    if not isinstance(body, dict) or isinstance(body.get("data"), dict) or "query" in body:
        return False
    if (version or "").strip().startswith("1"):
        return True
    message = body.get("message")
    if not isinstance(message, dict) or "messageId" not in message:
        return False
    role = message.get("role")
    return isinstance(role, str) and role.startswith("ROLE_")


# -- answers ------------------------------------------------------------------------------

def _answer(envelope: dict[str, Any]) -> str:
    parts = as_list(as_object(envelope.get("message")).get("parts"))
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _result(envelope: dict[str, Any]) -> tuple[str, Any]:
    """The first artifact's name and data payload."""
    for artifact in (a for a in as_list(envelope.get("artifacts")) if isinstance(a, dict)):
        for part in as_list(artifact.get("parts")):
            if isinstance(part, dict) and "data" in part:
                return str(artifact.get("name") or ARTIFACT_NAME), part["data"]
    return ARTIFACT_NAME, {}


def outcome_of(envelope: dict[str, Any]) -> Outcome:
    """The run's task envelope (contract 4.1) as the A2A task's pieces: same id, the result as a
    data part plus the answer as text, the request and trace ids in `metadata`."""
    name, data = _result(envelope)
    metadata = {k: envelope[k] for k in ("requestId", "traceId") if isinstance(envelope.get(k), str)}
    state = as_object(envelope.get("status")).get("state")
    return Outcome(name, data, _answer(envelope), metadata,
                   _STATES.get(state, "TASK_STATE_COMPLETED") if isinstance(state, str)
                   else "TASK_STATE_COMPLETED", str(envelope.get("id") or ""))


# -- errors -------------------------------------------------------------------------------

def _error_kind(status: int) -> tuple[int, str, str]:
    """(JSON-RPC code, A2A reason, google.rpc status) for a bridge error status."""
    if status < 500:
        return a2a.INVALID_PARAMS, "INVALID_PARAMS", "INVALID_ARGUMENT"
    if status == 501:
        return a2a.UNSUPPORTED_OPERATION, "UNSUPPORTED_OPERATION", "UNIMPLEMENTED"
    return a2a.INTERNAL_ERROR, "INTERNAL_ERROR", "INTERNAL"


def error_details(exc: CodedError) -> list[dict[str, Any]]:
    """An ErrorInfo the official client maps to its error type (bridge code and ids as metadata),
    then the bridge's whole error body, steps and diagnostics included."""
    body = exc.body()
    metadata: dict[str, str] = {"code": exc.code}
    metadata.update({k: str(body[k]) for k in ("requestId", "traceId") if k in body})
    return [a2a.error_info(_error_kind(exc.status)[1], metadata), {"@type": STRUCT_TYPE, "value": body}]


def run_error(exc: CodedError) -> A2aError:
    """A refused or failed run as the A2A error both bindings render, its status kept."""
    kind = {a2a.INVALID_PARAMS: "InvalidParams", a2a.UNSUPPORTED_OPERATION: "UnsupportedOperation"}.get(
        _error_kind(exc.status)[0], "Internal")
    return A2aError(kind, exc.message, extra_details=error_details(exc), http_status=exc.status)


async def logged_run(service: BridgeService, body: Any, request_id: str, trace_id: str,
                     route: str | None, reports: RunReports | None = None) -> dict[str, Any]:
    """The run, with its request and answer (or error, as the client gets it) in the I/O log under
    `route` when the operator turned the log on; `reports` hears a streaming run's progress."""
    io = service.io
    if route is None or not io.enabled:
        return await service.run(body, request_id, trace_id, reports=reports)
    with io_scope(trace_id=trace_id):
        try:
            task = await service.run(body, request_id, trace_id, inbound=route, reports=reports)
        except RunFailed as exc:
            error = http_error(exc)
            io.emit("bridge.error", "inbound", route=route,
                    response={"status": error.status, "body": error.body()})
            raise
        io.emit("bridge.response", "inbound", route=route, response={"status": 200, "body": task})
        return task


# -- streaming --------------------------------------------------------------------------------

SOURCE_STEP = "urn:llmwiki:a2a-extension:agent-bridge:v1#sourceStep"
ANSWER_DELTA = "urn:llmwiki:a2a-extension:agent-bridge:v1#answerDelta"


def source_report(outcome: SourceOutcome) -> dict[str, Any]:
    """One source's completed part as a progress message: its citations, steps and diagnostics."""
    citations = outcome.evidence.citations if outcome.evidence is not None else []
    data = {"sourceId": outcome.source.id, "status": "failed" if outcome.failed else "answered",
            "citations": [c.wire() for c in citations],
            "steps": [s.wire() for s in outcome.steps],
            "diagnostics": [d.wire() for d in outcome.diagnostics]}
    return {"parts": [{"data": data, "mediaType": "application/json"}],
            "metadata": {"event": SOURCE_STEP}}


def stream_reports(progress: Progress) -> RunReports:
    """A streaming run's reports as A2A progress messages."""
    return RunReports(
        source_done=lambda outcome: progress(source_report(outcome)),
        answer_delta=lambda text: progress({"parts": [{"text": text}], "metadata": {"event": ANSWER_DELTA}}))


# -- operations ---------------------------------------------------------------------------

def operations(service_of: ServiceOf, trace_id_of: TraceIdOf) -> A2aOperations:
    """The bridge's A2A operations: each message is one run; finished tasks kept as the settings
    bound them (in memory: a restart forgets them)."""

    async def execute(params: dict[str, Any], request: web.Request, progress: Progress | None) -> Outcome:
        inbound = SEND_PATH if request.path == SEND_PATH else None
        service = service_of(request)
        # The live settings bound the store (a settings change applies from the next run on).
        store.resize(service.settings.a2a_max_tasks, service.settings.a2a_task_ttl_seconds)
        try:
            envelope = await logged_run(service, params, request[REQUEST_ID],
                                        trace_id_of(request), inbound,
                                        None if progress is None else stream_reports(progress))
        except RunFailed as exc:
            # Steps and diagnostics ride in the error's details; the body has the whole envelope.
            raise run_error(http_error(exc)) from None
        return outcome_of(envelope)

    store = TaskStore()
    return A2aOperations(store, execute)


# -- routes -------------------------------------------------------------------------------

def _base_url(request: web.Request, service: BridgeService) -> str:
    """Where clients reach the bridge: the configured public URL, else this request's scheme and
    Host, which must be one the bridge accepts (the pipeline refuses others first; the card never
    hands a client a URL a rebinding page chose)."""
    if service.settings.public_url:
        return service.settings.public_url
    host = request.headers.get("Host", "")
    if not service.browser_policy.host_allowed(host):
        raise CodedError(421, "host_not_allowed", "Request host is not allowed by the bridge.")
    return f"{request.scheme}://{host.strip()}"


def handlers(service_of: ServiceOf, body_of: BodyOf, trace_id_of: TraceIdOf,
             ops: A2aOperations) -> dict[str, Handler]:
    """The card, `/message:send`, the JSON-RPC endpoint and the HTTP+JSON task routes, by route
    name. The pipeline has already checked the origin, the bearer token and the body size."""

    async def card(request: web.Request) -> web.Response:
        service = service_of(request)
        return card_response(request, agent_card(service, _base_url(request, service)))

    async def send(request: web.Request) -> web.StreamResponse:
        request_id, trace_id = request[REQUEST_ID], trace_id_of(request)
        version = request.headers.get(a2a.VERSION_HEADER)
        try:
            a2a.check_version(version)
        except A2aError as exc:
            return rest_error(exc)
        try:
            body = await body_of(request)
        except CodedError as exc:
            return json_response({**exc.body(), "requestId": request_id, "traceId": trace_id},
                                 status=exc.status)
        service = service_of(request)
        if is_jsonrpc(body):
            return await a2a_stream.rpc_response(ops, request, body)
        if not is_send_message_request(body, version):
            # A refused or failed run escapes to the pipeline, which answers its coded body.
            return json_response(await logged_run(service, body, request_id, trace_id, SEND_PATH))
        try:
            return json_response(await ops.send(body, request))
        except A2aError as exc:
            return rest_error(exc)

    return {"agent_card": card, "message_send": send,
            **a2a_stream.handlers(ops, a2a_stream.BodyReader(body_of, (CodedError,)))}
