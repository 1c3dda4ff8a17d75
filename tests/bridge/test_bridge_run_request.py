"""`parse_run_request`: every accepted request form, the coded refusals, and conversation context."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from bridge.core.request import (
    MAX_MESSAGE_CHARS,
    RunRequestError,
    bounded_descriptor,
    parse_run_request,
    runtime_history,
)

Q = "How do we ship a hotfix release?"
INLINE = [{"id": "wiki", "url": "http://127.0.0.1:1", "status": "ready", "protocol": "llmwiki-http"}]
RETRIEVAL = {"schemaVersion": "llmwiki.retrieval.v1", "searchMode": "lexical",
             "search": {"queryVariants": [Q.upper(), "hotfix runbook"]}}


def refused(envelope: Any) -> RunRequestError:
    with pytest.raises(RunRequestError) as caught:
        parse_run_request(envelope)
    assert caught.value.kind == "rejected"  # the web layer answers 400
    return caught.value


def v1(*parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An A2A 1.0 SendMessageRequest as the official client serialises it."""
    return {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": list(parts)}, **extra}


@pytest.mark.parametrize("envelope", [
    {"data": {"query": f"  {Q} ", "mode": "evidence-only"}},
    {"query": Q, "orchestrationMode": "evidence-only"},
    {"orchestrationMode": "evidence-only",
     "message": {"role": "user", "parts": [{"kind": "text", "text": Q}]}},
    {"data": {"mode": "evidence-only", "message": {"role": "Agent", "parts": [{"text": Q}]}}},
    v1({"text": Q}, metadata={"orchestrationMode": "evidence-only"}),
    v1({"text": Q}, {"data": {"orchestrationMode": "evidence-only"}}),
    v1({"data": {"query": Q, "orchestrationMode": "evidence-only"}}),
    {"message": {"kind": "message", "messageId": "m", "role": "user", "metadata": {"orchestrationMode":
                 "evidence-only"}, "parts": [{"kind": "text", "text": Q}, {"kind": "data", "data": {}}]}},
], ids=["data", "root", "message-0.3", "agent-role-in-data", "v1-metadata", "v1-data-part-mode",
        "v1-data-part-query", "v0.3-message-metadata"])
def test_every_form_gives_the_same_request(envelope: dict[str, Any]) -> None:
    request = parse_run_request(envelope)
    assert request.query == Q
    assert request.mode == "evidence-only"
    assert request.intent is None and request.inline_sources is None


def test_defaults_and_precedence() -> None:
    assert parse_run_request({"query": Q}).mode == "delegated-runtime"
    # data beats root, and explicit fields beat the message's data parts
    envelope = {"data": {"query": "from data", "mode": "hybrid"}, "query": "root", "mode": "evidence-only"}
    request = parse_run_request(envelope)
    assert (request.query, request.mode) == ("from data", "hybrid")
    request = parse_run_request({**v1({"data": {"query": "part", "orchestrationMode": "hybrid"}}),
                                 "query": "root"})
    assert (request.query, request.mode) == ("root", "hybrid")
    # a data part's query beats the text parts, like data.query beats the message text
    assert parse_run_request(v1({"text": "text"}, {"data": {"query": "data"}})).query == "data"


def test_text_parts_are_joined_trimmed_and_bounded() -> None:
    message = {"role": "ROLE_USER", "parts": [
        {"text": " one"}, {"kind": "data", "data": {"text": "no"}}, {"kind": "file", "text": "no"},
        {"kind": "text", "text": "two "}]}
    assert parse_run_request({"message": message}).query == "one\ntwo"
    long = {"role": "user", "parts": [{"text": "x" * (MAX_MESSAGE_CHARS + 50)}]}
    assert len(parse_run_request({"message": long}).query) == MAX_MESSAGE_CHARS


def test_data_parts_carry_sources_and_retrieval() -> None:
    request = parse_run_request(v1({"text": Q}, {"data": {"knowledgeSources": INLINE, "retrieval": RETRIEVAL,
                                                          "unrelated": 1}}))
    assert request.inline_sources is not None
    [wiki] = request.inline_sources
    assert (wiki.id, wiki.status, wiki.protocol) == ("wiki", "ready", "llmwiki-http")
    assert request.intent is not None and request.intent.search is not None
    # query variants are deduplicated against the query the text part carried
    assert request.intent.search.query_variants == ["hotfix runbook"]


def test_inline_sources() -> None:
    assert parse_run_request({"query": Q}).inline_sources is None
    assert parse_run_request({"query": Q, "knowledgeSources": []}).inline_sources == ()
    request = parse_run_request({"query": Q, "knowledge_sources": [1, {"url": "http://x"}]})
    [only] = request.inline_sources or ()
    assert (only.id, only.status) == ("source-2", "unknown")  # inline sources must say ready


@pytest.mark.parametrize(("envelope", "code", "message"), [
    ([1], "bad_request", "A2A request body must be a JSON object."),
    ("text", "bad_request", "A2A request body must be a JSON object."),
    ({}, "bad_request", "A2A request data.query or message text is required."),
    ({"data": {"query": "  "}}, "bad_request", "A2A request data.query or message text is required."),
    ({"message": {"role": "system", "parts": [{"text": "hi"}]}}, "bad_request",
     "A2A request data.query or message text is required."),
    ({"message": {"role": "ROLE_UNSPECIFIED", "parts": [{"text": "hi"}]}}, "bad_request",
     "A2A request data.query or message text is required."),
    ({"query": "x", "mode": "turbo"}, "bad_request",
     "orchestrationMode must be one of: evidence-only, delegated-runtime, hybrid."),
    ({"query": "x", "knowledgeSources": {"id": "a"}}, "bad_request", "knowledgeSources must be an array."),
    ({"query": "x", "retrieval": None}, "invalid_retrieval_intent", None),
    ({"query": "x", "retrievalGuidance": {"schemaVersion": "nope"}}, "invalid_retrieval_guidance", None),
])
def test_refusals(envelope: Any, code: str, message: str | None) -> None:
    error = refused(envelope)
    assert error.code == code
    if message is not None:
        assert error.message == message


def test_retrieval_and_guidance_are_checked_before_the_query() -> None:
    """Contract 3.1: a bad intent is reported even when the query is missing too."""
    assert refused({"retrieval": {"searchMode": "lexical"}}).code == "invalid_retrieval_intent"
    assert refused({"retrievalGuidance": []}).code == "invalid_retrieval_guidance"
    assert refused(v1({"data": {"retrieval": {"embedding": [0.1]}}})).code == "invalid_retrieval_intent"


def test_the_request_is_frozen() -> None:
    request = parse_run_request({"query": Q})
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.query = "other"  # type: ignore[misc]


# ----------------------------------------------------------------------------- conversation (3.3)

def test_contract_conversation_example() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "earlier question"},
                {"role": "ASSISTANT", "content": " earlier answer "}, {"role": "user", "content": Q}]
    request = parse_run_request({"data": {"query": Q, "messages": messages,
                                          "configuration": {"historyLength": 2},
                                          "message": {"role": "user", "parts": [{"text": Q}]}}})
    assert request.conversation == (("user", "earlier question"), ("assistant", "earlier answer"))
    context = request.context
    assert (context.message_count, context.history_length, context.history_limit) == (5, 2, 2)
    assert context.provided and context.wire() is None  # no ids, no descriptor


def test_history_rules() -> None:
    u, a = "user", "assistant"
    assert runtime_history([(a, "lead"), (u, "q1"), (u, "q1 again"), (a, "a1"), (a, "a1 better"), (u, "q2")],
                           "now", 12) == [(u, "q1 again"), (a, "a1 better")]
    assert runtime_history([(u, "q1"), (a, "a1")], "x", 0) == []
    # a window that starts on the assistant loses it
    assert runtime_history([(u, "x"), (a, "y"), (u, "z"), (a, "w")], "q", 1) == []
    many = [(u if i % 2 == 0 else a, str(i)) for i in range(40)]
    assert len(runtime_history(many, "q", 12)) == 12


@pytest.mark.parametrize(("configuration", "limit"), [
    ({"data": {"configuration": {"historyLength": 3}}}, 3),
    ({"configuration": {"historyLength": 40}}, 12),
    ({"configuration": {"historyLength": -1}}, 12),
    ({"configuration": {"historyLength": True}}, 12),
    ({"data": {"configuration": {"historyLength": "2"}}, "configuration": {"historyLength": 0}}, 0),
])
def test_history_limit(configuration: dict[str, Any], limit: int) -> None:
    envelope = {**configuration, "data": {"query": Q, **configuration.get("data", {})}}
    assert parse_run_request(envelope).context.history_limit == limit


def test_conversation_ids_and_descriptor() -> None:
    envelope = v1({"text": Q}, metadata={"sessionId": "s-1"},
                  runtimeContext={"conversation": {"channel": " chat ", "nested": {"a": {"b": {"c": 1}}},
                                                   "list": list(range(30)), "nan": math.nan, "empty": ""}})
    envelope["message"]["contextId"] = "thread-9"
    context = parse_run_request(envelope).context
    assert (context.thread_id, context.session_id, context.turn_id) == ("thread-9", "s-1", "m-1")
    wire = context.wire()
    assert wire is not None
    assert wire["schema"] == "llmwiki-agent-bridge.conversation-context.v1"
    assert wire["threadId"] == "thread-9" and wire["messageCount"] == 1 and wire["historyLength"] == 0
    # objects nested deeper than 3 levels, non-finite numbers and empty strings are dropped
    assert wire["descriptor"] == {"channel": "chat", "list": list(range(20))}


def test_unsafe_ids_do_not_fall_back() -> None:
    envelope = {"data": {"query": Q, "threadId": "has space", "metadata": {"threadId": "good"}}}
    assert parse_run_request(envelope).context.thread_id == ""


def test_descriptor_bounds() -> None:
    assert bounded_descriptor({"a": {"b": {"c": {"d": 1}}}}) is None
    deep = bounded_descriptor({"a": {"b": {"c": {"d": 1}, "e": "x"}}})
    assert deep == {"a": {"b": {"e": "x"}}}  # depth 3: the fourth level of objects is dropped
    wide = bounded_descriptor({f"k{i}": i for i in range(60)})
    assert len(wide) == 40
    assert bounded_descriptor({"k" * 100: "v" * 2000}) == {"k" * 80: "v" * 1000}
    assert bounded_descriptor({"x": math.inf, "y": [], "z": "  "}) is None
