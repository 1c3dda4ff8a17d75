"""The `a2a` source client: the agent card, then one A2A-style message that answers with a context pack."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from bridge.config.registry import SourceDescriptor
from bridge.sources.base import BundleRead, ContextAnswer, SourceCallError
from bridge.sources.client import TransportClient
from bridge.sources.transport import SourceTransport, call_json, endpoint_url
from bridge.support.text import safe_id
from common.filters import CAMEL

log = structlog.get_logger("llmwiki.bridge.sources")

CARD_SUFFIX = "/.well-known/agent-card.json"
CARD_ENDPOINT = "agent-card"  # the probe endpoint name, and the mark of a card read
DEFAULT_MESSAGE_PATH = "/message:send"
CONTEXT_ARTIFACT = "llmwiki_context"
RETRIEVAL_SCHEMA = "llmwiki.retrieval.v1"
MESSAGE_URL_BLOCKED = "A2A source agent card message URL is not allowed."
SOURCE_ERROR = "A2A source returned an error."
FAILED_STATE = "A2A source returned a failed task state."
NO_ARTIFACT = "A2A response did not include a llmwiki_context data artifact."
FAILED_STATES = frozenset({"failed", "canceled", "cancelled", "rejected"})
_ABSOLUTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Plan fields (serve's snake_case) and their names in `data.retrieval.search` (contract 3.10).
_SEARCH_FIELDS = (("limit", "limit"), ("snippet_chars", "snippetChars"), ("fields", "fields"),
                  ("exclude_page_ids", "excludePageIds"), ("query_variants", "queryVariants"))


def agent_card_url(base: str) -> str:
    """The card URL: the source URL itself if it names the card, else `<url>/.well-known/...`."""
    return base if urlsplit(base).path.endswith(CARD_SUFFIX) else endpoint_url(base, CARD_SUFFIX)


def _interface_url(card: Mapping[str, Any]) -> str | None:
    """An A2A 1.0 card's HTTP+JSON interface: messages go to `<url>/message:send`. Preferred over
    the 0.3 top-level `url`, which our serve points at its JSON-RPC endpoint."""
    interfaces = card.get("supportedInterfaces")
    for item in interfaces if isinstance(interfaces, list) else []:
        if isinstance(item, dict) and item.get("protocolBinding") == "HTTP+JSON" \
                and isinstance(item.get("url"), str) and item["url"].strip():
            return str(item["url"]).strip().rstrip("/") + DEFAULT_MESSAGE_PATH
    return None


def message_url(card_url: str, card: Mapping[str, Any]) -> str:
    """Where the message goes: absolute URLs as given; `/path` against the card's host; other
    relative paths against the card's directory (the card URL minus the well-known suffix)."""
    raw = card.get("url")
    target = _interface_url(card) or (raw.strip() if isinstance(raw, str) and raw.strip()
                                      else DEFAULT_MESSAGE_PATH)
    if _ABSOLUTE.match(target):
        return target  # any scheme: the source policy refuses what is not http(s)
    parts = urlsplit(card_url)
    if target.startswith("/"):
        return urlunsplit((parts.scheme, parts.netloc, "", "", "")) + target
    directory = parts.path.removesuffix(CARD_SUFFIX).rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, f"{directory}/{target}", "", ""))


def card_capabilities(card: Mapping[str, Any]) -> tuple[str, ...]:
    """Capability strings from `capabilities` (when a list), `metadata` and `metadata.llmwiki`."""
    metadata = card.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    llmwiki = metadata.get("llmwiki")
    llmwiki = llmwiki if isinstance(llmwiki, dict) else {}
    found: list[str] = []
    for holder in (card, metadata, llmwiki):
        caps = holder.get("capabilities")
        if isinstance(caps, list):
            found += [c.strip() for c in caps if isinstance(c, str) and c.strip()]
    return tuple(dict.fromkeys(found))


def forwarded_retrieval(fields: Mapping[str, Any], fallback: str) -> dict[str, Any] | None:
    """`data.retrieval` for a capable source, rebuilt from the plan's fields; None when the plan
    forwards no mode (an incapable source gets `data.query` only)."""
    if "mode" not in fields:
        return None
    retrieval: dict[str, Any] = {"schemaVersion": RETRIEVAL_SCHEMA, "searchMode": fields["mode"],
                                 "fallback": fallback}
    search = {camel: fields[snake] for snake, camel in _SEARCH_FIELDS if snake in fields}
    if isinstance(fields.get("filters"), dict):  # the intent's own spelling, as it came in
        search["filters"] = {CAMEL.get(key, key): value for key, value in fields["filters"].items()}
    if search:
        retrieval["search"] = search
    return retrieval


def _holders(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The payload and the task it may wrap (`result` for JSON-RPC, `task` for A2A 1.0 REST)."""
    return [payload, *(payload[k] for k in ("result", "task") if isinstance(payload.get(k), dict))]


def _failed(payload: Mapping[str, Any]) -> bool:
    for holder in _holders(payload):
        status = holder.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        if isinstance(state, str) and state.strip().lower().removeprefix("task_state_") in FAILED_STATES:
            return True
    return False


def _object_part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("data"), dict):
        return dict(part["data"])
    if isinstance(part.get("text"), str):
        try:
            parsed = json.loads(part["text"])
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def context_artifact(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first `llmwiki_context` artifact's data (its `data`, else its first object part)."""
    for holder in _holders(payload):
        artifacts = holder.get("artifacts")
        for artifact in artifacts if isinstance(artifacts, list) else []:
            if not isinstance(artifact, dict) or artifact.get("name") != CONTEXT_ARTIFACT:
                continue
            if isinstance(artifact.get("data"), dict):
                return dict(artifact["data"])
            parts = artifact.get("parts")
            return next((found for part in (parts if isinstance(parts, list) else [])
                         if (found := _object_part(part)) is not None), None)
    return None


def message_text(payload: Mapping[str, Any]) -> str:
    """The readable text the agent sent back (`message`, else `status.message`), if any."""
    for holder in _holders(payload):
        status = holder.get("status")
        for message in (holder.get("message"), status.get("message") if isinstance(status, dict) else None):
            parts = message.get("parts") if isinstance(message, dict) else None
            texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                     and p.get("kind", "text") == "text"] if isinstance(parts, list) else []
            if text := "\n".join(texts).strip():
                return text
    return ""


def synthetic_context(payload: Mapping[str, Any], source_name: str) -> dict[str, Any]:
    """A context pack without evidence that says why: the agent answered without the artifact."""
    text = message_text(payload)
    return {"wiki_title": source_name,
            "orientation": [{"title": "A2A message", "role": "message", "snippet": text}] if text else [],
            "evidence": [],
            "limitations": [f"{NO_ARTIFACT} Message: {text}" if text else NO_ARTIFACT]}


class A2aSourceClient(TransportClient):
    """`a2a`: an agent that answers an A2A-style `{"data": {"query"}}` message. Context only."""

    protocol = "a2a"

    def __init__(self, transport: SourceTransport, source: SourceDescriptor) -> None:
        super().__init__(transport, source)
        self.card: dict[str, Any] | None = None

    @property
    def card_url(self) -> str:
        return agent_card_url(self.source.url)

    async def fetch_card(self) -> dict[str, Any]:
        """The agent card, fetched once per client (retrieval discovery hands it on via `card`)."""
        if self.card is None:
            card = await call_json(self.transport, "GET", self.card_url, f"{self.label} agent card")
            if not isinstance(card, dict):
                raise SourceCallError(f"{self.label} agent card returned invalid JSON", invalid_json=True)
            self.card = card
        return self.card

    def capabilities(self) -> tuple[str, ...]:
        return card_capabilities(self.card) if self.card is not None else ()

    def run_capabilities(self) -> tuple[str, ...]:
        return self.capabilities()

    async def discover(self) -> BundleRead | None:
        """The card, not a bundle (no step, no sourceBundle); `adopt` hands it to the run."""
        try:
            card = await self.fetch_card()
        except SourceCallError as exc:  # the run fetches it again and reports it
            log.warning("agent_card_failed", source=safe_id(self.source.id), error=exc.message)
            return None
        return BundleRead(attempted=False, raw=card, endpoint=CARD_ENDPOINT)

    def discovered_capabilities(self, read: BundleRead) -> tuple[str, ...]:
        return card_capabilities(read.raw) if read.raw is not None else ()

    def adopt(self, discovered: BundleRead | None) -> BundleRead | None:
        self.card = discovered.raw if discovered is not None else None
        return None

    async def run_context(self, query: str, fields: Mapping[str, Any], fallback: str | None,
                          group: asyncio.TaskGroup) -> ContextAnswer:
        """A2A forwards the intent itself, in camelCase, and takes no `limit` (and augments nothing)."""
        body: dict[str, Any] = {"query": query}
        retrieval = forwarded_retrieval(fields, fallback) if fallback is not None else None
        if retrieval is not None:
            body["retrieval"] = retrieval
        return ContextAnswer(await self.context(body))

    async def probe(self) -> BundleRead:
        try:
            card = await self.fetch_card()
        except SourceCallError as exc:
            return BundleRead(attempted=True, error=exc)
        metadata = card.get("metadata")
        return BundleRead(attempted=True, raw=metadata if isinstance(metadata, dict) else card,
                          endpoint=CARD_ENDPOINT)

    async def context(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` is the message's `data`: `query`, and `retrieval` (camelCase intent) if forwarded;
        other keys (the `limit` other protocols take) are not part of the A2A request."""
        card = await self.fetch_card()
        url = message_url(self.card_url, card)
        if not self.transport.policy.allows(url):  # checked here, before any connection to it
            raise SourceCallError(MESSAGE_URL_BLOCKED, policy=True)
        data: dict[str, Any] = {"query": body.get("query", "")}
        if isinstance(body.get("retrieval"), dict):
            data["retrieval"] = body["retrieval"]
        payload = await call_json(self.transport, "POST", url, f"{self.label} message", {"data": data})
        if not isinstance(payload, dict):
            raise SourceCallError(f"{self.label} message returned invalid JSON", invalid_json=True)
        if payload.get("error"):
            raise SourceCallError(SOURCE_ERROR, upstream_error=True)
        if _failed(payload):
            raise SourceCallError(FAILED_STATE, upstream_error=True)
        found = context_artifact(payload)
        return found if found is not None else synthetic_context(payload, self.source.name)
