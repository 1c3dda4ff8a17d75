"""The JSON log: an exception logged by either service carries its traceback, not `exc_info: true`."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from common.logging import configure_logging, setup_request_context


@pytest.fixture
def json_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    saved = structlog.get_config()
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    configure_logging("info", "json")  # the log goes to sys.stderr as it is now

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in stderr.getvalue().splitlines() if line.startswith("{")]

    yield lines
    structlog.configure(**saved)


def test_logged_exceptions_carry_their_traceback(json_log: Any) -> None:
    secret = "page text that must not be logged"
    try:
        raise KeyError("missing-key")
    except KeyError:
        structlog.get_logger("test").exception("it_failed", path="/x")
    del secret
    [event] = json_log()
    assert event["event"] == "it_failed" and "exc_info" not in event
    [exception] = event["exception"]
    assert exception["exc_type"] == "KeyError" and "missing-key" in exception["exc_value"]
    assert exception["frames"][-1]["name"] == "test_logged_exceptions_carry_their_traceback"
    assert "page text" not in json.dumps(event)  # frame locals are not logged


async def test_an_unhandled_handler_error_is_logged_with_its_frames(json_log: Any) -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("boom")

    app = web.Application()
    setup_request_context(app, "test")
    app.router.add_get("/broken", broken)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.get("/broken")
        assert response.status == 500
    [failure] = [e for e in json_log() if e["event"] == "unhandled_exception"]
    assert failure["exception"][0]["exc_type"] == "RuntimeError"
    assert any(frame["name"] == "broken" for frame in failure["exception"][0]["frames"])


async def test_a_client_that_went_away_is_logged_as_gone_not_as_our_failure(json_log: Any) -> None:
    async def reads_a_body(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()  # the client went: aiohttp's read then raises this
        raise ConnectionResetError("Connection lost")

    async def fails_so(request: web.Request) -> web.Response:
        raise ConnectionResetError("a socket of ours")  # the client is still there

    app = web.Application()
    setup_request_context(app, "test")
    app.router.add_post("/search", reads_a_body)
    app.router.add_post("/other", fails_so)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        with pytest.raises(aiohttp.ClientError):  # no answer: the connection is dropped
            await client.post("/search", data=b"{}")
        events = [e["event"] for e in json_log()]
        assert "client_gone" in events and "unhandled_exception" not in events
        assert (await client.post("/other", data=b"{}")).status == 500
    assert [e["path"] for e in json_log() if e["event"] == "unhandled_exception"] == ["/other"]
