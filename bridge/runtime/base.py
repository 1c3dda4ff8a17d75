"""What a run needs to know of the chat-completions runtime, without the client that calls it
(bridge.runtime.chat, which the application hands to the run): the failure, a reply and its tool
calls, the runtime's diagnostic, and the shape of a chat session."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from bridge.config.settings import BridgeSettings
from bridge.support.facts import CallFailure, observations, retryable_status
from bridge.support.iolog import IoLog
from bridge.support.text import safe_id, safe_trace_text
from common.bridge_schemas import Diagnostic

ADAPTER = "chat-completions"
PROTOCOL = "openai-compatible"
TOO_LARGE_MESSAGE = "Chat completions answer is larger than the bridge accepts."
CHAT_FAILED_MESSAGE = ("Chat completions request failed. Check the configured OpenAI-compatible runtime at "
                       "/settings, or retry with orchestrationMode: \"evidence-only\".")


class RuntimeFailure(CallFailure):
    """The runtime call failed. `message` is safe (no URL, body or key); the flags feed diagnostics."""

    def __init__(self, message: str, *, http_status: int | None = None, timeout: bool = False,
                 invalid_json: bool = False, tools_rejected: bool = False,
                 configuration: bool = False) -> None:
        super().__init__(message, http_status=http_status, timeout=timeout, invalid_json=invalid_json)
        self.tools_rejected = tools_rejected
        self.configuration = configuration  # not called at all: no model or base URL

    @property
    def retryable(self) -> bool:
        if self.invalid_json or self.configuration:
            return False
        return retryable_status(self.http_status)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ChatReply:
    """One assistant turn: text and/or tool calls, plus the message to send back next round."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in self.tool_calls]
        return message


def runtime_diagnostic(settings: BridgeSettings, failure: RuntimeFailure, *, severity: str = "error",
                       message: str | None = None, remediation: str | None = None,
                       extra: Sequence[tuple[str, str]] = ()) -> Diagnostic:
    """Contract 4.5's runtime diagnostic: facts about the failure, never the URL, key or body."""
    facts = failure.facts()
    facts += list(extra)
    facts += [("runtimeProfile", settings.runtime_profile), ("runtimeAdapter", ADAPTER),
                     ("runtimeModelConfigured", "true" if settings.model.strip() else "false"),
                     ("runtimeBaseUrlSource", settings.base_url_source),
                     ("runtimeModelSource", settings.model_source),
                     ("timeoutMs", str(settings.request_timeout_ms)),
                     ("redaction", "urls, headers, credentials, bodies, queries")]
    return Diagnostic(
        severity="warning" if severity == "warning" else "error", scope="runtime", phase=ADAPTER,
        protocol=PROTOCOL, subject=safe_id(settings.identity()["runtimeId"]), retryable=failure.retryable,
        observations=observations((n, v) for n, v in facts if v),
        remediation=remediation or ("Check the runtime base URL, model and API key at /settings, or retry "
                                    "with orchestrationMode evidence-only."),
        message=message or safe_trace_text(failure.message))


def model_configured(settings: BridgeSettings) -> bool:
    """A runtime-backed run needs a model name; evidence-only runs do not (contract 2.6.1)."""
    return bool(settings.model.strip())


def tool_arguments(call: ToolCall) -> dict[str, Any]:
    """The model's JSON arguments; anything that is not a JSON object counts as no arguments."""
    try:
        parsed = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class ChatSession(Protocol):
    """One runtime endpoint for the length of a run (`bridge.runtime.chat.ChatRuntime`)."""

    async def __aenter__(self) -> ChatSession: ...

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None: ...

    async def complete(self, messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]] | None = None) -> ChatReply: ...


# How the run opens a chat session: handed in, so the core never imports the runtime's client.
OpenChat = Callable[[BridgeSettings, IoLog | None], ChatSession]
