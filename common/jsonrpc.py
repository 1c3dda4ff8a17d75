"""JSON-RPC 2.0 error codes: the one home both services' MCP and A2A adapters read them from."""

from __future__ import annotations

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# -32000..-32019 are the implementation's own (MCP's own codes start at -32020).
SERVER_ERROR = -32000
