"""What every handler reads off a request: the service, the trace id, the JSON body."""

from __future__ import annotations

import re
import uuid
from typing import Any

from aiohttp import web

from bridge.service import BridgeService
from common.errors import CodedError
from common.json_read import JsonRejected, JsonTooDeep, loads_bounded

SERVICE_KEY = web.AppKey("bridge_service", BridgeService)
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def service_of(request: web.Request) -> BridgeService:
    return request.app[SERVICE_KEY]


def trace_id(request: web.Request) -> str:
    given = request.headers.get("X-Trace-Id", "")
    return given if _SAFE_ID.match(given) else str(uuid.uuid4())


async def read_json_body(request: web.Request) -> Any:
    """The request's JSON (`{}` when empty); 400 `invalid_json` when it is not JSON or nests deeper
    than any bridge request shape could (which would otherwise exhaust the stack later)."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        return loads_bounded(raw)
    except JsonTooDeep:
        raise CodedError(400, "invalid_json", "Request body JSON is nested too deeply.") from None
    except JsonRejected as exc:
        raise CodedError(400, "invalid_json", f"Request body JSON is not accepted: {exc}.") from None
    except ValueError:
        raise CodedError(400, "invalid_json", "Request body must be valid JSON.") from None
