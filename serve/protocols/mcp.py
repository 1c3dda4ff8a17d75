"""The one MCP dispatcher behind /mcp, /mcp/stream and stdio: identity, tools, eras."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from common.json_wire import json_bytes
from common.mcp import ACCEPTED_HEADER_VERSIONS as ACCEPTED_HEADER_VERSIONS  # tests import it here
from common.mcp import (
    HANDSHAKE_VERSIONS,
    INTERNAL,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE,
    METHOD_NOT_FOUND,
    SUPPORTED_VERSIONS,
    Era,
    McpError,
    Reply,
    complete_result,
    error_status,
    request_id_of,
    response,
)
from common.serve_tool_arguments import LENIENT, USER_ERROR, ToolArguments, user_messages
from common.serve_tools import TOOL_BY_NAME, TOOLS, ServerDefaults, input_schema, output_schema
from common.version import __version__
from serve.errors import UserError
from serve.protocols.mcp_resources import (
    get_prompt,
    prompt_list,
    read_resource,
    resource_list,
    resource_templates,
)
from serve.service import KnowledgeSource
from serve.settings import SettingsError, tool_selection

DEFAULT_SERVER_NAME = "LLMWiki Serve"

UNSUPPORTED_METHOD = "Unsupported MCP-style method."
UNKNOWN_TOOL = "Unknown MCP-style tool."
INTERNAL_MESSAGE = "Internal MCP-style error."
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
RETRIEVAL_CAPABILITY_PREFIXES = ("llmwiki_retrieval_", "llmwiki_agent_guided_lexical_",
                                 "llmwiki_search_mode_")


def disabled_message(name: str) -> str:
    return (f"MCP tool '{name}' is disabled on this server "
            "(see --mcp-tools / --mcp-exclude-tools).")


def collapse(text: str) -> str:
    return " ".join(text.split())


# -- the dispatcher -------------------------------------------------------------------------


@dataclass
class McpOptions:
    server_name: str | None = None
    instructions: str | None = None
    tool_description_prefix: str | None = None
    tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()


@dataclass
class _Manifest:
    title: str = ""
    description: str = ""
    source_id: str = ""
    public_uri: str = ""
    adapter: str = ""
    implementation: str = ""
    capabilities: list[str] = field(default_factory=list)


class Dispatcher:
    """Every MCP method, over one KnowledgeSource; transports only frame and route."""

    def __init__(self, source: KnowledgeSource, options: McpOptions | None = None) -> None:
        settings = source.settings
        self.source = source
        self.options = options or McpOptions(
            server_name=getattr(settings, "mcp_server_name", None),
            instructions=getattr(settings, "mcp_instructions", None),
            tool_description_prefix=getattr(settings, "mcp_tool_description_prefix", None),
            tools=tuple(getattr(settings, "mcp_tools", ()) or ()),
            exclude_tools=tuple(getattr(settings, "mcp_exclude_tools", ()) or ()))
        try:
            self.enabled = tool_selection(self.options.tools, self.options.exclude_tools)
        except SettingsError as exc:
            raise ValueError(str(exc)) from None
        self.defaults = ServerDefaults(settings.context_default_limit, settings.graph_default_limit)
        # Each tool's argument model as this server publishes and validates it.
        self.models = {tool.name: tool.bound_arguments(self.defaults) for tool in TOOLS}

    # -- identity ---------------------------------------------------------------------

    def _manifest(self) -> _Manifest | None:
        try:
            m = self.source.manifest()
        except Exception:
            return None
        return _Manifest(m.title, m.description, m.source_id, m.public_uri, m.adapter,
                         m.implementation, list(m.capabilities))

    def server_name(self, manifest: _Manifest | None = None) -> str:
        if self.options.server_name and collapse(self.options.server_name):
            return collapse(self.options.server_name)
        m = manifest if manifest is not None else self._manifest()
        if m is not None and m.title.strip():
            return f"{collapse(m.title)} - LLMWiki Serve"
        if m is not None and m.source_id:
            return f"{m.source_id} - LLMWiki Serve"
        return DEFAULT_SERVER_NAME

    def server_info(self) -> dict[str, str]:
        return {"name": self.server_name(), "version": __version__}

    def instructions(self, manifest: _Manifest | None = None) -> str:
        if self.options.instructions and self.options.instructions.strip():
            return self.options.instructions.strip()
        m = manifest if manifest is not None else self._manifest()
        if m is None:
            return ("Read-only LLMWiki knowledge source: context packs, search, page reads, "
                    "graph, source refs and the source bundle over approved pages.")
        parts = [f'Use this server only for questions about the served LLMWiki "{m.title}": it '
                 "offers read-only context packs, search, page reads, graph, source refs and "
                 "source bundle over approved pages."]
        if m.description:
            parts.append(f"Wiki description: {m.description}.")
        parts.append(f"Source identity: source_id={m.source_id}, public_uri={m.public_uri}, "
                     f"adapter={m.adapter}, implementation={m.implementation}.")
        retrieval = [c for c in m.capabilities if c.startswith(RETRIEVAL_CAPABILITY_PREFIXES)]
        if retrieval:
            parts.append(f"Retrieval capabilities: {', '.join(retrieval)}.")
        parts.append("For questions unrelated to this wiki, use another source.")
        return " ".join(parts)

    def description_prefix(self, manifest: _Manifest | None = None) -> str:
        explicit = self.options.tool_description_prefix
        if explicit is not None:
            text = collapse(explicit)
            return f"{text} " if text else ""
        override = collapse(self.options.server_name or "")
        m = manifest if manifest is not None else self._manifest()
        if m is None:
            return f"[{override}] " if override else ""
        label = override or collapse(m.title) or self.server_name(m)
        if m.source_id and m.source_id not in label:
            label = f"{label} | source_id: {m.source_id}"
        return f"[{label}] "

    def descriptions(self) -> dict[str, str]:
        prefix = self.description_prefix(self._manifest())
        return {tool.name: prefix + tool.describe(self.defaults, self.enabled) for tool in TOOLS}

    def tool_list(self, *, full: bool = True) -> list[dict[str, Any]]:
        """tools/list: bare /mcp gets names and descriptions only (contract 6.1)."""
        descriptions = self.descriptions()
        tools = []
        for tool in TOOLS:
            if tool.name not in self.enabled:
                continue
            item: dict[str, Any] = {"name": tool.name, "description": descriptions[tool.name],
                                    "inputSchema": input_schema(self.models[tool.name])}
            if full:
                item["outputSchema"] = output_schema(tool.name)
                item["annotations"] = dict(tool.annotations)
            tools.append(item)
        return tools

    # -- tools ------------------------------------------------------------------------

    def check_tool(self, name: Any) -> str:
        if not isinstance(name, str) or name not in TOOL_BY_NAME:
            raise McpError(INVALID_PARAMS, UNKNOWN_TOOL)
        if name not in self.enabled:
            raise McpError(INVALID_PARAMS, disabled_message(name))
        return name

    def run_tool(self, name: str, args: ToolArguments) -> dict[str, Any]:
        """Run one tool on validated arguments; service errors propagate. The result is the
        tool's payload as JSON data (stdio and the text content write it)."""
        payload = TOOL_BY_NAME[name].handler(self.source, args)
        return payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload

    def call_compat(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`tools/call` on bare /mcp: the raw payload, or McpError. Arguments are read as the
        reference reads them (the models' lenient context; non-objects are {})."""
        name = self.check_tool(params.get("name"))
        arguments = params.get("arguments")
        try:
            args = self.models[name].model_validate(
                arguments if isinstance(arguments, dict) else {}, context=LENIENT)
            return self.run_tool(name, args)
        except ValidationError as exc:  # the lenient models fail only with the contract's words
            messages = user_messages(exc) or [exc.errors(include_url=False)[0]["msg"]]
            raise McpError(INVALID_PARAMS, messages[0]) from None
        except UserError as exc:
            raise McpError(INVALID_PARAMS, exc.safe_message) from None
        except Exception:
            raise McpError(INTERNAL, INTERNAL_MESSAGE) from None

    def call_standard(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`tools/call` on the standard surfaces: a CallToolResult; failures are isError."""
        name = params.get("name")
        if not isinstance(name, str) or name not in TOOL_BY_NAME:
            return _tool_error(f"Unknown tool: {name}")
        if name not in self.enabled:
            return _tool_error(f"Error executing tool {name}: {disabled_message(name)}")
        arguments = params.get("arguments")
        try:
            args = self.models[name].model_validate(arguments if isinstance(arguments, dict) else {})
            payload = self.run_tool(name, args)
        except ValidationError as exc:
            return _tool_error(f"Error executing tool {name}: {_validation_text(exc)}")
        except UserError as exc:
            return _tool_error(f"Error executing tool {name}: {exc.safe_message}")
        except Exception:
            return _tool_error(f"Error executing tool {name}: {INTERNAL_MESSAGE}")
        # The payload once more as compact JSON text: clients that read only text content
        # keep every field, and none pays for indentation (structuredContent is the data).
        text = json_bytes(payload).decode("utf-8")
        return {"content": [{"type": "text", "text": text}], "structuredContent": payload,
                "isError": False}

    # -- method dispatch --------------------------------------------------------------

    def initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        manifest = self._manifest()
        return {"protocolVersion": version, "capabilities": CAPABILITIES,
                "serverInfo": {"name": self.server_name(manifest), "version": __version__},
                "instructions": self.instructions(manifest)}

    def discover(self) -> dict[str, Any]:
        manifest = self._manifest()
        return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": CAPABILITIES,
                "instructions": self.instructions(manifest)}

    def _standard(self, method: str, params: Mapping[str, Any], era: Era) -> tuple[dict[str, Any], bool]:
        """The result for a standard MCP method and whether it is cacheable (list/read)."""
        handlers: dict[str, Callable[[], tuple[dict[str, Any], bool]]] = {
            "tools/list": lambda: ({"tools": self.tool_list()}, True),
            "tools/call": lambda: (self.call_standard(params), False),
            "resources/list": lambda: ({"resources": resource_list(self.source)}, True),
            "resources/templates/list": lambda: (
                {"resourceTemplates": resource_templates()}, True),
            "resources/read": lambda: (read_resource(self.source, params.get("uri")), True),
            "prompts/list": lambda: ({"prompts": prompt_list()}, True),
            "prompts/get": lambda: (get_prompt(params, self._manifest), False),
        }
        if era == "modern":
            handlers["server/discover"] = lambda: (self.discover(), True)
        else:
            handlers["initialize"] = lambda: (self.initialize(params), False)
            handlers["ping"] = lambda: ({}, False)
        handler = handlers.get(method)
        if handler is None:
            raise McpError(METHOD_NOT_FOUND, "Method not found", method)
        return handler()

    def handle(self, message: Mapping[str, Any], era: Era) -> Reply:
        """Answer one routed JSON-RPC message in a standard era (handshake or modern)."""
        method = message.get("method")
        if "id" not in message:  # a notification
            return Reply(202, None)
        rid = request_id_of(message)
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if not isinstance(method, str):
            return Reply(400, response(rid, error=McpError(INVALID_REQUEST, "Invalid Request")))
        try:
            result, cacheable = self._standard(method, params, era)
        except McpError as exc:
            return Reply(error_status(exc.code, era), response(rid, error=exc))
        except Exception:
            return Reply(200, response(rid, error=McpError(INTERNAL, INTERNAL_MESSAGE)))
        if era == "modern":
            result = complete_result(result, cacheable, self.server_info())
        return Reply(200, response(rid, result))

    def handle_compat(self, message: Mapping[str, Any]) -> Reply:
        """Bare /mcp (no version header): the reference's MCP-style JSON-RPC, plus
        initialize, ping and notifications."""
        method = message["method"]
        rid = message.get("id")
        params = message.get("params") or {}
        if method.startswith("notifications/") and rid is None:
            return Reply(202, None)
        try:
            if method == "tools/list":
                result: Any = {"tools": self.tool_list(full=False)}
            elif method == "tools/call":
                result = self.call_compat(params)
            elif method == "initialize":
                result = self.initialize(params)
            elif method == "ping":
                result = {}
            else:
                raise McpError(METHOD_NOT_FOUND, UNSUPPORTED_METHOD)
        except McpError as exc:
            return Reply(200, response(rid, error=McpError(exc.code, exc.message),
                                       omit_null_id=True))
        except Exception:
            return Reply(200, response(rid, error=McpError(INTERNAL, INTERNAL_MESSAGE),
                                       omit_null_id=True))
        return Reply(200, response(rid, result, omit_null_id=True))



def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _validation_text(exc: ValidationError) -> str:
    """pydantic's words for a schema violation; a rule's own words (the contract's message)
    alone when the schema holds."""
    errors = [e for e in exc.errors(include_url=False) if e["type"] != USER_ERROR]
    if not errors:
        return user_messages(exc)[0]
    lines = [f"{len(errors)} validation error(s) for {exc.title}"]
    for error in errors:
        loc = ".".join(str(part) for part in error["loc"])
        lines.append(f"{loc}: {error['msg']}")
    return "\n".join(lines)
