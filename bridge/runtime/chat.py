"""The OpenAI-compatible runtime adapter: chat completions through `openai.AsyncOpenAI`, and its probe."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

import openai

from bridge.config.settings import BridgeSettings
from bridge.runtime.base import PROTOCOL, TOO_LARGE_MESSAGE, ChatReply, RuntimeFailure, ToolCall
from bridge.runtime.capped import CappedTransport, RuntimeAnswerTooLarge
from bridge.support.clock import now_iso
from bridge.support.iolog import IoCall, IoLog

TEMPERATURE = 0.2
PROBE_TIMEOUT_SECONDS = 5.0
# Headers the openai client would fill from OPENAI_* environment variables: the bridge sends the
# runtime only what its own settings say.
_ENV_HEADERS = ("OpenAI-Organization", "OpenAI-Project")
_NO_KEY = "llmwiki-agent-bridge-no-key"  # the client insists on a key; its header is omitted


def runtime_base(base_url: str) -> str:
    """The API root the client appends `/chat/completions` and `/models` to: trailing slashes
    trimmed, and a configured endpoint path (`.../chat/completions`, `.../models`) cut back.
    Raises `RuntimeFailure` for a base URL that is not an http(s) URL with a host."""
    base = base_url.strip().rstrip("/")
    for suffix in ("/chat/completions", "/models"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    try:
        parts = urlsplit(base)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        usable = False
    if not usable:
        raise RuntimeFailure("The configured runtime base URL is not a usable http(s) URL.",
                             configuration=True)
    return base


class ChatRuntime:
    """One OpenAI-compatible endpoint for the length of one run, configured from the live settings.
    `max_retries=0` keeps every call inside the timeout; env proxies and redirects are not followed;
    answers larger than `max_runtime_answer_bytes` are cut off while they arrive."""

    def __init__(self, settings: BridgeSettings, timeout_seconds: float | None = None, *,
                 io: IoLog | None = None, on_delta: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.io = io
        # Given: the answer is asked for with stream=True and each piece of text is passed on as
        # it arrives (the same cap and timeout apply to the whole stream).
        self.on_delta = on_delta
        self.timeout_seconds = timeout_seconds or settings.timeout_seconds
        base_url = runtime_base(settings.base_url)  # first: it may raise before anything is opened
        http_client = openai.DefaultAsyncHttpxClient(
            trust_env=False, follow_redirects=False,
            transport=CappedTransport(settings.max_runtime_answer_bytes))
        self.client = openai.AsyncOpenAI(base_url=base_url,
                                         api_key=settings.api_key or _NO_KEY,
                                         timeout=self.timeout_seconds, max_retries=0,
                                         http_client=http_client)
        self.headers: dict[str, Any] = {name: openai.omit for name in _ENV_HEADERS}
        if not settings.api_key:
            self.headers["Authorization"] = openai.omit  # no key: no Authorization header at all

    async def __aenter__(self) -> ChatRuntime:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.client.close()

    async def complete(self, messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]] | None = None) -> ChatReply:
        """One non-streaming chat completion, bounded by the timeout as a whole."""
        extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
        if self.io is None:
            return await self._complete(messages, extra)
        url = self.settings.base_url.rstrip("/") + "/chat/completions"
        call = IoCall(self.io, "runtime", "chat.completions", url,
                      {"model": self.settings.model, "messages": list(messages), **extra})
        try:
            reply = await self._complete(messages, extra)
        except RuntimeFailure as exc:
            call.failed(exc, timeout=exc.timeout)
            raise
        call.answered(reply.as_message())
        return reply

    async def _complete(self, messages: Sequence[dict[str, Any]], extra: dict[str, Any]) -> ChatReply:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                if self.on_delta is not None:
                    return await self._streamed(messages, extra, self.on_delta)
                completion = await self.client.chat.completions.create(
                    model=self.settings.model, messages=list(messages),  # type: ignore[arg-type]
                    temperature=TEMPERATURE, stream=False, extra_headers=self.headers, **extra)
        except (TimeoutError, openai.APITimeoutError):
            raise RuntimeFailure("Chat completions request timed out.", timeout=True) from None
        except RuntimeAnswerTooLarge:  # an error answer's body, which the client reads itself
            raise RuntimeFailure(TOO_LARGE_MESSAGE) from None
        except openai.APIStatusError as exc:
            mentions_tools = any(word in f"{exc.message} {exc.body}".lower() for word in ("tool", "function"))
            raise RuntimeFailure(f"Chat completions endpoint returned HTTP {exc.status_code}.",
                                 http_status=exc.status_code,
                                 tools_rejected="tools" in extra and mentions_tools
                                 and exc.status_code in (400, 404, 422)) from None
        except openai.APIConnectionError as exc:
            if isinstance(exc.__cause__, RuntimeAnswerTooLarge):
                raise RuntimeFailure(TOO_LARGE_MESSAGE) from None
            raise RuntimeFailure("Chat completions endpoint could not be reached.") from None
        except (ValueError, RecursionError, openai.APIResponseValidationError):
            raise RuntimeFailure("Chat completions endpoint returned invalid JSON.",
                                 invalid_json=True) from None
        return _reply(completion)


    async def _streamed(self, messages: Sequence[dict[str, Any]], extra: dict[str, Any],
                        on_delta: Callable[[str], None]) -> ChatReply:
        """One streamed completion: text passed on chunk by chunk, tool calls put together from
        their fragments; the reply is what the non-streamed call would have returned."""
        stream = await self.client.chat.completions.create(
            model=self.settings.model, messages=list(messages),  # type: ignore[arg-type]
            temperature=TEMPERATURE, stream=True, extra_headers=self.headers, **extra)
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        async for chunk in cast("openai.AsyncStream[Any]", stream):
            for choice in getattr(chunk, "choices", None) or []:
                delta = getattr(choice, "delta", None)
                piece = getattr(delta, "content", None)
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    on_delta(piece)
                for call in getattr(delta, "tool_calls", None) or []:
                    slot = calls.setdefault(int(getattr(call, "index", 0) or 0),
                                            {"id": "", "name": "", "arguments": ""})
                    function = getattr(call, "function", None)
                    slot["id"] = slot["id"] or str(getattr(call, "id", "") or "")
                    slot["name"] += str(getattr(function, "name", "") or "")
                    slot["arguments"] += str(getattr(function, "arguments", "") or "")
        tool_calls = [ToolCall(slot["id"] or f"call_{index + 1}", slot["name"], slot["arguments"])
                      for index, slot in sorted(calls.items()) if slot["name"]]
        return ChatReply("".join(text).strip(), tool_calls)


def _text(content: Any) -> str | None:
    """A string, or text parts joined by newlines; None for anything that is not text."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None
                 for p in content]
        if all(isinstance(p, str) for p in parts):
            return "\n".join(str(p) for p in parts).strip()
    return None


def _reply(completion: Any) -> ChatReply:
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise RuntimeFailure("Chat completions endpoint returned a malformed reply.", invalid_json=True)
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        text = _text(getattr(choice, "text", None))
        if text is None:
            raise RuntimeFailure("Chat completions endpoint returned a malformed reply.", invalid_json=True)
        return ChatReply(text)
    calls: list[ToolCall] = []
    for call in getattr(message, "tool_calls", None) or []:
        function = getattr(call, "function", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        if isinstance(name, str) and isinstance(arguments, str):
            calls.append(ToolCall(str(getattr(call, "id", "") or f"call_{len(calls) + 1}"), name, arguments))
    content = message.content
    text = "" if content is None else _text(content)
    if text is None:
        raise RuntimeFailure("Chat completions endpoint returned a non-text answer.", invalid_json=True)
    return ChatReply(text, calls)


async def probe(settings: BridgeSettings) -> dict[str, Any]:
    """`/health?probe=1`: one `GET <base>/models`, at most 5 s, redirects treated as failures."""
    checked: dict[str, Any] = {"checked": True, "basis": "live_probe", "protocol": PROTOCOL,
                               "checkedAt": now_iso()}
    if not settings.base_url.strip():
        return {**checked, "ok": False, "reachable": False, "reason": "missing_base_url"}
    timeout = min(settings.timeout_seconds, PROBE_TIMEOUT_SECONDS)
    try:
        runtime = ChatRuntime(settings, timeout)
    except RuntimeFailure:
        return {**checked, "ok": False, "reachable": False, "reason": "request_failed", "retryable": False,
                "redacted": True}
    async with runtime:
        try:
            async with asyncio.timeout(timeout):
                response = await runtime.client.models.with_raw_response.list(
                    extra_headers={**runtime.headers, "Accept": "application/json"})
            status = response.status_code
        except openai.APIStatusError as exc:
            status = exc.status_code
        except (TimeoutError, openai.APITimeoutError):
            return {**checked, "ok": False, "reachable": False, "reason": "timeout", "retryable": True,
                    "redacted": True}
        except (openai.APIError, ValueError, RuntimeAnswerTooLarge):
            return {**checked, "ok": False, "reachable": False, "reason": "request_failed",
                    "retryable": True, "redacted": True}
    if 300 <= status < 400:  # a redirect is not followed, so the runtime was not really reached
        return {**checked, "ok": False, "reachable": False, "reason": "request_failed", "retryable": False,
                "redacted": True}
    return {**checked, "ok": 200 <= status < 300, "reachable": True, "httpStatus": status}


