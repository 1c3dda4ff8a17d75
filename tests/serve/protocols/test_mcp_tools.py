"""serve's MCP tools have one table (common/serve_tools.py): no other module names a tool, every
row reaches every surface (/mcp, /mcp/stream in both eras, stdio, the capabilities, --mcp-tools,
OpenAPI), and each argument model holds both surfaces' rules (the bare endpoint's leniency as
a validation context) so nothing coerces arguments after validation."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from common.serve_tool_arguments import LENIENT, USER_ERROR
from common.serve_tools import TOOL_CAPABILITIES, TOOL_NAMES, TOOLS, ServerDefaults, Tool
from serve.protocols.mcp import Dispatcher
from serve.protocols.mcp_http import DISPATCHER_KEY
from serve.protocols.stdio import answer_line
from serve.service import KnowledgeSource
from serve.settings import ServeSettings
from tests.serve.protocols.test_mcp import MODERN, Client, ClientFactory, call, rpc, stream

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "common" / "serve_tools.py"
ARGUMENTS = {"page_id": "hot"}  # enough for every tool (the others ignore it)
# The same words meaning something else: not tools.
OTHER_FACTS = {("serve/protocols/a2a.py", "llmwiki_context"): "the A2A artifact's name (contract 7.2)"}


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_no_module_but_the_table_names_a_tool() -> None:
    """A tool named anywhere else (a list of names, a special case, a second description)
    would be a second home for it: the table is the only one."""
    assert TABLE in {*(ROOT / "common").glob("*.py")}
    named = {}
    for path in sorted([*(ROOT / "serve").rglob("*.py"), *(ROOT / "common").glob("*.py")]):
        if path != TABLE:
            where = str(path.relative_to(ROOT))
            found = {n for n in _string_constants(path) & set(TOOL_NAMES)
                     if (where, n) not in OTHER_FACTS}
            if found:
                named[where] = sorted(found)
    assert not named, f"tool names outside common/serve_tools.py: {named}"
    assert set(TOOL_NAMES) <= _string_constants(TABLE)  # the scan can see them


def test_the_table_derives_every_list() -> None:
    assert tuple(t.name for t in TOOLS) == TOOL_NAMES
    assert sorted(TOOL_CAPABILITIES) == sorted(TOOL_NAMES)
    assert TOOL_CAPABILITIES[0] == "llmwiki_source_bundle"  # contract 4.3's order


@pytest.fixture
async def client(serve_client: ClientFactory, sample_root: Path) -> Client:
    return await serve_client(sample_root, context_default_limit=5, graph_default_limit=40)


def _stdio(dispatcher: Dispatcher, method: str, params: dict[str, Any] | None = None) -> Any:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
    reply = answer_line(dispatcher, line.encode())
    assert reply is not None
    return reply["result"]


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
async def test_every_row_reaches_every_surface(client: Client, tool: Tool) -> None:
    position = TOOL_NAMES.index(tool.name)
    dispatcher = client.app[DISPATCHER_KEY]
    # tools/list: bare /mcp, the stream in both eras, stdio; same place, same schema.
    _, body = await rpc(client, "tools/list")
    assert body["result"]["tools"][position]["name"] == tool.name
    listed = []
    for version in ("2025-11-25", MODERN):
        _, reply, _ = await stream(client, "tools/list", version=version)
        listed.append(reply["result"]["tools"][position])
    listed.append(_stdio(dispatcher, "tools/list")["tools"][position])
    assert all(item == {**listed[0]} for item in listed)
    item = listed[0]
    assert item["name"] == tool.name and item["annotations"] == dict(tool.annotations)
    assert item["inputSchema"]["title"] == f"{tool.name}Arguments"
    for field, setting in tool.defaults.items():
        expected = {"context_limit": 5, "graph_limit": 40}[setting]
        assert item["inputSchema"]["properties"][field]["default"] == expected
    # tools/call through the row's handler on every surface.
    _, body = await call(client, tool.name, ARGUMENTS)
    assert "error" not in body, body
    _, reply, _ = await stream(client, "tools/call", {"name": tool.name, "arguments": ARGUMENTS},
                               version=MODERN)
    assert reply["result"]["isError"] is False
    assert reply["result"]["structuredContent"] == body["result"]
    result = _stdio(dispatcher, "tools/call", {"name": tool.name, "arguments": ARGUMENTS})
    assert result["isError"] is False and result["structuredContent"] == body["result"]
    # The capability list, OpenAPI (the same schema as tools/list), --mcp-tools.
    manifest = await (await client.get("/manifest")).json()
    assert tool.name in manifest["capabilities"]
    document = await (await client.get("/openapi.json")).json()
    for path in ("/mcp", "/mcp/stream"):
        documented = document["paths"][path]["post"]["x-mcp-tools"][position]
        assert documented["name"] == tool.name
        assert documented["inputSchema"] == {"$ref": f"#/components/schemas/{tool.name}Arguments"}
        assert documented["annotations"] == dict(tool.annotations)
    assert document["components"]["schemas"][f"{tool.name}Arguments"] == item["inputSchema"]


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
def test_mcp_tools_selects_each_row(tmp_path: Path, tool: Tool) -> None:
    source = KnowledgeSource(ServeSettings(root=tmp_path, page_cache=False, mcp_tools=(tool.name,)))
    dispatcher = Dispatcher(source)
    assert [t["name"] for t in dispatcher.tool_list()] == [tool.name]
    other = next(t.name for t in TOOLS if t is not tool)
    result = dispatcher.call_standard({"name": other, "arguments": {}})
    assert result["isError"] is True and "is disabled on this server" in result["content"][0]["text"]
    source.close()


async def test_openapi_lists_only_the_selected_tools(serve_client: ClientFactory,
                                                     sample_root: Path) -> None:
    client = await serve_client(sample_root, mcp_exclude_tools=("llmwiki_context",))
    document = await (await client.get("/openapi.json")).json()
    names = [t["name"] for t in document["paths"]["/mcp"]["post"]["x-mcp-tools"]]
    assert names == [n for n in TOOL_NAMES if n != "llmwiki_context"]
    assert "llmwiki_contextArguments" not in document["components"]["schemas"]
    search = document["paths"]["/mcp"]["post"]["x-mcp-tools"][0]["description"]
    assert "call llmwiki_context first" not in search


# -- one model, two surfaces' rules ---------------------------------------------------------

MODELS = {t.name: t.bound_arguments(ServerDefaults(context_limit=6, graph_limit=50)) for t in TOOLS}
# tool, arguments, what bare /mcp reads (field values, or the contract's error), what the
# standard surfaces read (field values, or "schema" for pydantic's validation error).
CASES: list[tuple[str, dict[str, Any], Any, Any]] = [
    ("llmwiki_search", {"limit": "nonsense"}, {"limit": 6}, "schema"),
    ("llmwiki_search", {"limit": "2"}, {"limit": 2}, {"limit": 2}),
    ("llmwiki_search", {"limit": 999, "snippet_chars": -4}, {"limit": 30, "snippet_chars": 0},
     {"limit": 30, "snippet_chars": 0}),
    ("llmwiki_search", {"limit": None, "snippet_chars": "x"}, {"limit": 6, "snippet_chars": None},
     "schema"),
    ("llmwiki_search", {"include_drafts": "maybe"}, {"include_drafts": False}, "schema"),
    ("llmwiki_search", {"include_drafts": "yes"}, {"include_drafts": True}, {"include_drafts": True}),
    ("llmwiki_search", {"mode": " Literal "}, {"mode": "literal"}, "schema"),
    ("llmwiki_search", {"mode": "fuzzy"},
     "unknown search mode: expected lexical, literal, vector, or hybrid", "schema"),
    ("llmwiki_search", {"min_score": True}, "min_score must be a non-negative number", None),
    ("llmwiki_search", {"min_score": -1}, "min_score must be a non-negative number",
     "min_score must be a non-negative number"),
    ("llmwiki_search", {"min_score": "0.5"}, {"min_score": 0.5}, {"min_score": 0.5}),
    ("llmwiki_search", {"query": 7}, {"query": "7"}, "schema"),
    ("llmwiki_search", {"fields": "title, route,title"}, {"fields": ["title", "route"]},
     {"fields": ["title", "route"]}),
    ("llmwiki_search", {"fields": [1, "b"]}, {"fields": ["1", "b"]}, "schema"),
    ("llmwiki_search", {"exclude_page_id": "a, b", "exclude_page_ids": ["b", "c"]},
     {"exclude_page_ids": ["a", "b", "c"]}, {"exclude_page_ids": ["b", "c"]}),
    ("llmwiki_search", {"query_variants": None},
     "query_variants must be an array of strings; omit it instead of null", "schema"),
    ("llmwiki_search", {"query_variants": [" a "]}, {"query_variants": ["a"]},
     {"query_variants": ["a"]}),
    ("llmwiki_search", {"query_variants": ["  "]}, "query_variants entries must be non-empty strings",
     "query_variants entries must be non-empty strings"),
    ("llmwiki_search", {"query_variants": ["a", "b", "c"]},
     "query_variants accepts at most 2 supplied variants", "schema"),
    ("llmwiki_context", {"include_graph": "off"}, {"include_graph": False}, {"include_graph": False}),
    ("llmwiki_read", {"id": "hot", "section": "1.2"}, {"page_id": "hot", "sections": ["1.2"]},
     "schema"),
    ("llmwiki_read", {}, {"page_id": ""}, "schema"),
    ("llmwiki_read", {"page_id": "hot", "max_chars": "12", "include_links": "no"},
     {"max_chars": 12, "include_links": False}, {"max_chars": 12, "include_links": False}),
    ("llmwiki_graph", {"limit": -5}, {"limit": 1}, {"limit": 1}),
    ("llmwiki_graph", {"limit": []}, {"limit": 50}, "schema"),
    ("llmwiki_graph_neighbors", {"direction": "sideways", "depth": 99},
     {"direction": "both", "depth": 4}, "schema"),
    ("llmwiki_graph_neighbors", {"seed": ["hot", "index"]}, {"seed": "hot,index"}, "schema"),
    ("llmwiki_graph_neighbors", {"seed": "hot, index", "seeds": ["index", "x"]},
     {"seed": "hot,index", "seeds": ["index", "x"]}, {"seed": "hot,index", "seeds": ["index", "x"]}),
]


def _read(name: str, arguments: dict[str, Any], context: dict[str, Any] | None) -> Any:
    try:
        return MODELS[name].model_validate(arguments, context=context)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        return errors[0]["msg"] if errors[0]["type"] == USER_ERROR else "schema"


@pytest.mark.parametrize(("name", "arguments", "lenient", "standard"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_one_model_holds_both_surfaces_rules(name: str, arguments: dict[str, Any], lenient: Any,
                                             standard: Any) -> None:
    for context, expected in ((LENIENT, lenient), (None, standard)):
        got = _read(name, arguments, context)
        if expected is None:  # whatever pydantic's lax mode makes of it, never a crash
            continue
        if isinstance(expected, dict):
            assert not isinstance(got, str), (context, got)
            assert {k: getattr(got, k) for k in expected} == expected, context
        else:
            assert got == expected, context


def test_merged_seeds_and_exclusions_are_one_list_each() -> None:
    args = MODELS["llmwiki_graph_neighbors"].model_validate(
        {"seed": "hot, index", "seeds": ["index", "x"], "relation": ["a"], "relations": "a,b"},
        context=LENIENT)
    assert args.all_seeds() == ["hot", "index", "x"]  # type: ignore[attr-defined]
    assert args.all_relations() == ["a", "b"]  # type: ignore[attr-defined]


def test_the_lenient_models_refuse_only_in_the_contracts_words() -> None:
    """Bare /mcp takes any JSON value for any argument: the models either read it or refuse it
    with one of the contract's messages, never with pydantic's."""
    values: list[Any] = [None, "", "x", "3", 3, 3.7, -1, 10**30, True, [], ["a", 1], {}, {"a": 1},
                         "nan", "hot, index"]
    for name, model in MODELS.items():
        for field in [*model.model_fields, "id", "section", "exclude_page_id"]:
            for value in values:
                try:
                    model.model_validate({field: value}, context=LENIENT)
                except ValidationError as exc:
                    types = {e["type"] for e in exc.errors(include_url=False)}
                    assert types == {USER_ERROR}, (name, field, value, exc)
