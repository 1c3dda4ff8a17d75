"""One `/message:send` (or A2A SendMessage) body normalised into a RunRequest, before any I/O."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.config.registry import SourceDescriptor, normalize_inline
from bridge.core.errors import RequestRejected
from bridge.core.fusion import CITATION_ORDERS, DEFAULT_CITATION_ORDER
from bridge.core.guidance import GuidanceError, map_guidance
from bridge.core.retrieval import IntentError, parse_intent
from common.bridge_schemas import RetrievalIntent
from common.options import reference_text as query_text

MODES = ("evidence-only", "delegated-runtime", "hybrid")
DEFAULT_MODE = "delegated-runtime"
MAX_MESSAGE_CHARS = 6000
MAX_HISTORY = 12
CONVERSATION_SCHEMA = "llmwiki-agent-bridge.conversation-context.v1"
# Keys an A2A data part may carry; they are read as if they were sent under `data`.
_DATA_PART_KEYS = ("query", "knowledgeSources", "knowledge_sources", "orchestrationMode", "mode",
                   "retrieval", "retrievalGuidance", "messages", "threadId", "sessionId", "turnId",
                   "runtimeContext", "citationOrder")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_USER_ROLES = ("user", "role_user")
_AGENT_ROLES = ("agent", "role_agent")


class RunRequestError(RequestRejected):
    """A request the bridge refuses before touching any source."""


@dataclass(frozen=True)
class ConversationContext:
    """Identifiers and counts of the caller's conversation (contract 3.3); runtime-only."""

    thread_id: str = ""
    session_id: str = ""
    turn_id: str = ""
    message_count: int = 0
    history_length: int = 0
    history_limit: int = MAX_HISTORY
    descriptor: Mapping[str, Any] | None = None

    @property
    def provided(self) -> bool:
        """Whether the caller sent any context at all (messages, ids, an A2A message, a descriptor)."""
        return bool(self.message_count or self.thread_id or self.session_id or self.turn_id
                    or self.descriptor)

    def wire(self) -> dict[str, Any] | None:
        """The prompt's `conversationContext`: present only when an id or a descriptor exists."""
        if not (self.thread_id or self.session_id or self.turn_id or self.descriptor):
            return None
        out: dict[str, Any] = {"schema": CONVERSATION_SCHEMA}
        for key, value in (("threadId", self.thread_id), ("sessionId", self.session_id),
                           ("turnId", self.turn_id)):
            if value:
                out[key] = value
        out.update(messageCount=self.message_count, historyLength=self.history_length,
                   historyLimit=self.history_limit)
        if self.descriptor:
            out["descriptor"] = dict(self.descriptor)
        return out


@dataclass(frozen=True)
class RunRequest:
    """What a run needs from the request: validated, bounded, protocol-neutral."""

    query: str
    mode: str
    intent: RetrievalIntent | None
    # None: use the registered sources; an empty tuple: the caller asked for no sources.
    inline_sources: tuple[SourceDescriptor, ...] | None
    # Forwarded runtime history as (role, text), role "user" or "assistant"; never sent to sources.
    conversation: tuple[tuple[str, str], ...] = ()
    context: ConversationContext = ConversationContext()
    # "relevance" (fused across sources) or "source" (the reference's selected-order array).
    citation_order: str = DEFAULT_CITATION_ORDER


def too_many_sources(count: int, limit: int) -> RunRequestError:
    """A run would call more sources than the bridge allows (`maxSourcesPerRun`)."""
    return RunRequestError("bad_request", f"A run may call at most {limit} Knowledge Sources; this one "
                                          f"names {count}. Name fewer, or raise maxSourcesPerRun.")


def parse_run_request(envelope: Any, default_mode: str = DEFAULT_MODE,
                      max_sources: int | None = None) -> RunRequest:
    """Normalise every accepted request form (contract 3.1): `data.*`, root-level fields, an A2A
    message (0.3 or 1.0, text and data parts) and the A2A 1.0 SendMessageRequest. Raises
    RunRequestError with the contract's code and message; more than `max_sources` inline
    sources are refused before any of them is normalised."""
    if not isinstance(envelope, dict):
        raise RunRequestError("bad_request", "A2A request body must be a JSON object.")
    data: dict[str, Any] = envelope["data"] if isinstance(envelope.get("data"), dict) else envelope
    message = data.get("message") if data.get("message") is not None else envelope.get("message")
    # Explicit `data` (or root) fields win over the same keys in the message's data parts.
    data = {**message_data(message), **data}

    # Validation order matters (contract 3.1): retrieval and guidance before the query check.
    if "retrieval" in data:
        _intent(data["retrieval"], "")
    if "retrievalGuidance" in data:  # validated only: never forwarded (contract 3.6)
        try:
            map_guidance(data["retrievalGuidance"], snake=False, where="data.retrievalGuidance")
        except GuidanceError as exc:
            raise RunRequestError("invalid_retrieval_guidance", str(exc)) from None

    query = query_text(data.get("query")) or message_text(message)
    if not query:
        raise RunRequestError("bad_request", "A2A request data.query or message text is required.")
    mode = _mode(data, envelope, message, default_mode)
    citation_order = _citation_order(data.get("citationOrder"))
    intent = _intent(data["retrieval"], query) if "retrieval" in data else None
    inline = data.get("knowledgeSources", data.get("knowledge_sources"))
    if inline is not None and not isinstance(inline, list):
        raise RunRequestError("bad_request", "knowledgeSources must be an array.")
    if inline is not None and max_sources is not None and len(inline) > max_sources:
        raise too_many_sources(len(inline), max_sources)
    conversation, context = _conversation(data, envelope, message, query)
    return RunRequest(query=query, mode=mode, intent=intent,
                      inline_sources=tuple(normalize_inline(inline)) if inline is not None else None,
                      conversation=conversation, context=context, citation_order=citation_order)


EXCLUDED_FOREIGN_MESSAGE = ("retrieval.search.excludePageIds contains a source-prefixed page id for an "
                            "unselected source.")


def check_excluded_page_ids(intent: RetrievalIntent | None, selected_ids: Sequence[str]) -> None:
    """Contract 3.10: an excluded id that contains `:` must start with a selected source's id and
    `:` (so an unprefixed `page:x` is refused too, as the reference refuses it)."""
    excluded = intent.search.exclude_page_ids if intent is not None and intent.search is not None else None
    prefixes = tuple(f"{source_id}:" for source_id in selected_ids)
    for page_id in excluded or ():
        if ":" in page_id and not page_id.startswith(prefixes):
            raise RunRequestError("invalid_retrieval_intent", EXCLUDED_FOREIGN_MESSAGE)


# ----------------------------------------------------------------------------- the A2A message

def message_role(message: Any) -> str | None:
    """`user` or `assistant` for an A2A message from the user or the agent (0.3 and 1.0 role
    spellings, any case); None for anything else, which then counts as no message."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return None
    role = message["role"].strip().lower()
    return "user" if role in _USER_ROLES else "assistant" if role in _AGENT_ROLES else None


def _parts(message: Any) -> list[dict[str, Any]]:
    if message_role(message) is None or not isinstance(message.get("parts"), list):
        return []
    return [p for p in message["parts"] if isinstance(p, dict)]


def message_text(message: Any) -> str:
    """The text parts (0.3 `kind: "text"` or 1.0 bare `text`), `\\n`-joined, trimmed, bounded."""
    texts = [p["text"] for p in _parts(message)
             if isinstance(p.get("text"), str) and p.get("kind", "text") == "text"]
    return "\n".join(texts).strip()[:MAX_MESSAGE_CHARS]


def message_data(message: Any) -> dict[str, Any]:
    """The request fields carried by the message's data parts (0.3 `kind: "data"` or 1.0 bare
    `data`); later parts win. Other keys in a data part are ignored."""
    merged: dict[str, Any] = {}
    for part in _parts(message):
        if isinstance(part.get("data"), dict) and part.get("kind", "data") == "data":
            merged.update({k: v for k, v in part["data"].items() if k in _DATA_PART_KEYS})
    return merged


# ----------------------------------------------------------------------------- mode and intent

def _metadata(value: Any) -> dict[str, Any]:
    metadata = value.get("metadata") if isinstance(value, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _mode(data: dict[str, Any], envelope: dict[str, Any], message: Any, default_mode: str) -> str:
    """First non-empty of the contract's four places, then A2A metadata (request, then message),
    where an SDK client can put it without a data part."""
    candidates = (data.get("orchestrationMode"), data.get("mode"), envelope.get("orchestrationMode"),
                  envelope.get("mode"), _metadata(envelope).get("orchestrationMode"),
                  _metadata(message).get("orchestrationMode"))
    mode = next((text for text in map(query_text, candidates) if text), default_mode)
    if mode not in MODES:
        raise RunRequestError("bad_request",
                              "orchestrationMode must be one of: evidence-only, delegated-runtime, hybrid.")
    return mode


def _citation_order(value: Any) -> str:
    """`data.citationOrder`: absent means relevance; anything but a known order is refused."""
    if value is None:
        return DEFAULT_CITATION_ORDER
    if value not in CITATION_ORDERS:
        raise RunRequestError("bad_request", f"citationOrder must be one of: {', '.join(CITATION_ORDERS)}.")
    return str(value)


def _intent(raw: Any, query: str) -> RetrievalIntent:
    try:
        return parse_intent(raw, query)
    except IntentError as exc:
        raise RunRequestError("invalid_retrieval_intent", str(exc)) from None


# ----------------------------------------------------------------------------- conversation (3.3)

def _messages(data: dict[str, Any], message: Any) -> list[tuple[str, str]]:
    """`data.messages` (user/assistant/system) then the A2A message, each trimmed and bounded."""
    out: list[tuple[str, str]] = []
    raw = data.get("messages")
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            continue
        role = item["role"].strip().lower()
        content = item.get("content")
        if role in ("user", "assistant", "system") and isinstance(content, str):
            text = content.strip()[:MAX_MESSAGE_CHARS]
            if text:
                out.append((role, text))
    role = message_role(message)
    text = message_text(message)
    if role is not None and text:
        out.append((role, text))
    return out


def _history_limit(data: dict[str, Any], envelope: dict[str, Any]) -> int:
    for holder in (data, envelope):
        configuration = holder.get("configuration")
        value = configuration.get("historyLength") if isinstance(configuration, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return min(value, MAX_HISTORY)
    return MAX_HISTORY


def runtime_history(messages: list[tuple[str, str]], query: str, limit: int) -> list[tuple[str, str]]:
    """Contract 3.3: an alternating user/assistant history that ends with the assistant, without
    the current question repeated at its end, at most `limit` entries."""
    if limit == 0:
        return []
    kept = [m for m in messages if m[0] in ("user", "assistant")]
    while kept and kept[-1][0] == "user" and kept[-1][1].strip() == query.strip():
        kept.pop()
    alternating: list[tuple[str, str]] = []
    for entry in kept:
        if not alternating and entry[0] == "assistant":
            continue
        if alternating and alternating[-1][0] == entry[0]:
            alternating[-1] = entry  # the latest of two same-role messages wins
        else:
            alternating.append(entry)
    if alternating and alternating[-1][0] == "user":
        alternating.pop()
    window = alternating[-limit:]
    while window and window[0][0] == "assistant":
        window.pop(0)
    if window and window[-1][0] == "user":
        window.pop()
    return window


def _first_id(*candidates: Any) -> str:
    """The first non-empty candidate, kept only if it is a safe id (no further fallback)."""
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip() if _SAFE_ID.match(value.strip()) else ""
    return ""


def bounded_descriptor(value: Any, depth: int = 1) -> Any:
    """A caller-supplied descriptor cut to the contract's bounds; None when nothing is left."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip()[:1000] or None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if depth > 3:
        return None
    if isinstance(value, dict):
        out = {}
        for key, item in list(value.items())[:40]:
            bounded = bounded_descriptor(item, depth + 1)
            if bounded is not None:
                out[str(key)[:80]] = bounded
        return out or None
    if isinstance(value, list):
        items = [bounded_descriptor(item, depth + 1) for item in value[:20]]
        return [item for item in items if item is not None] or None
    return None


def _conversation(data: dict[str, Any], envelope: dict[str, Any], message: Any, query: str
                  ) -> tuple[tuple[tuple[str, str], ...], ConversationContext]:
    messages = _messages(data, message)
    limit = _history_limit(data, envelope)
    history = runtime_history(messages, query, limit)
    data_meta, envelope_meta = _metadata(data), _metadata(envelope)
    llmwiki = _metadata(message).get("llmwiki")
    message_meta = llmwiki if isinstance(llmwiki, dict) else {}
    msg = message if isinstance(message, dict) else {}
    runtime_context = data.get("runtimeContext")
    if not isinstance(runtime_context, dict):
        runtime_context = envelope.get("runtimeContext")
    raw_descriptor = runtime_context.get("conversation") if isinstance(runtime_context, dict) else None
    descriptor = bounded_descriptor(raw_descriptor) if isinstance(raw_descriptor, dict) else None
    context = ConversationContext(
        thread_id=_first_id(data.get("threadId"), data_meta.get("threadId"), msg.get("contextId"),
                            message_meta.get("threadId"), envelope_meta.get("threadId")),
        session_id=_first_id(data.get("sessionId"), data_meta.get("sessionId"),
                             message_meta.get("sessionId"), envelope_meta.get("sessionId")),
        turn_id=_first_id(data.get("turnId"), data_meta.get("turnId"), message_meta.get("turnId"),
                          msg.get("messageId"), envelope_meta.get("turnId")),
        message_count=len(messages), history_length=len(history), history_limit=limit,
        descriptor=descriptor)
    return tuple(history), context
