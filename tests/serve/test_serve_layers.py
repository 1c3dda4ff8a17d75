"""serve's rooms sit on floors, read from the source (ast, nothing imported); a module imports
only from its own floor or below:

    cli.py, cli_args.py, inspect.py -> protocols/ -> service.py, indexing.py, start_up.py
        -> store/ -> watch/ -> reads/ -> retrieval/ -> snapshot/ -> graph/ -> source/
        -> support/, settings.py, errors.py, routes.py

Below protocols/ nothing reaches a web framework or a metrics library. No module is over
400 lines."""

from __future__ import annotations

import pytest

from tests.support.imports import ImportGraph

MAX_LINES = 400

# Lowest first. A room is a folder of serve/ or a module at its top.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("serve.support", "serve.settings", "serve.errors", "serve.routes"),
    ("serve.source",),
    ("serve.graph",),
    ("serve.snapshot",),
    ("serve.retrieval",),
    ("serve.reads",),
    ("serve.watch",),
    ("serve.store",),
    ("serve.indexing", "serve.service", "serve.start_up"),
    ("serve.protocols",),
    ("serve.cli", "serve.cli_args", "serve.inspect"),
)
WEB = ("aiohttp", "aiohttp_cors", "prometheus_client", "serve.protocols")


GRAPH = ImportGraph("serve")
MODULES = GRAPH.modules
imports_of = GRAPH.imports_of
reachable = GRAPH.reachable


def room_of(module: str) -> str:
    """The room a serve module or a name inside it belongs to ("serve.graph" for
    serve.graph.model.Node), or "" outside serve."""
    for floor in FLOORS:
        for room in floor:
            if module == room or module.startswith(room + "."):
                return room
    return ""


FLOOR = {room: n for n, floor in enumerate(FLOORS) for room in floor}


def test_every_module_is_in_a_room_and_the_top_holds_only_the_service() -> None:
    homeless = [m for m in MODULES if m != "serve" and not room_of(m)]
    assert not homeless, f"modules on no floor: {homeless}"
    top = {m for m in MODULES if m.count(".") == 1 and MODULES[m].name != "__init__.py"}
    assert top == {"serve.cli", "serve.cli_args", "serve.inspect", "serve.service",
                   "serve.indexing", "serve.start_up", "serve.settings", "serve.errors",
                   "serve.routes"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "serve"))
def test_no_module_imports_from_a_higher_floor(module: str) -> None:
    mine = FLOOR[room_of(module)]
    higher = {name: FLOORS[FLOOR[room_of(name)]][0] for name in imports_of(module)
              if room_of(name) and FLOOR[room_of(name)] > mine}
    assert not higher, f"{module} (floor {mine}) imports {higher}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES
                                          if room_of(m) and FLOOR[room_of(m)] < FLOOR["serve.protocols"]))
def test_nothing_under_the_protocols_reaches_the_web(module: str) -> None:
    bad = {name: by for name, by in reachable(module).items()
           if any(name == w or name.startswith(w + ".") for w in WEB)}
    assert not bad, f"{module} reaches {bad} (name: imported by)"


def test_the_walk_sees_through_modules() -> None:
    assert "aiohttp" in reachable("serve.cli")
    assert "serve.source.page" in reachable("serve.service")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_line_cap(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines"
