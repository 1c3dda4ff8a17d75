"""The bridge's layers point one way, read from the source (ast, nothing imported):

    web/ -> service.py -> core/ -> sources/base.py, runtime/base.py, config/ -> support/

The core reaches no web framework and no HTTP status, not even through what it imports; source
clients and the runtime adapters know nothing of the core or the web; config and support import
no layer above them; no bridge module is longer than ~400 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.imports import ImportGraph

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = ROOT / "bridge"
MAX_LINES = 400


GRAPH = ImportGraph("bridge")
MODULES = GRAPH.modules
imports_of = GRAPH.imports_of
reachable = GRAPH.reachable


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def layer(prefix: str) -> list[str]:
    return [m for m in MODULES if within(m, prefix)]


# The web framework, directly or as the openai client brings it (it vendors an aiohttp transport),
# and the layers above the core.
NOT_UNDER_THE_CORE = ("aiohttp", "openai", "common.errors", "bridge.web", "bridge.service", "bridge.cli",
                      "bridge.sources.client", "bridge.sources.transport", "bridge.runtime.chat")


def test_the_layers_have_their_modules() -> None:
    assert {"bridge.core.run", "bridge.core.gather", "bridge.core.evidence", "bridge.core.errors",
            "bridge.core.artifact"} <= set(MODULES)
    assert {"bridge.sources.base", "bridge.sources.client", "bridge.sources.protocols",
            "bridge.config.registry", "bridge.config.policy", "bridge.runtime.base",
            "bridge.web.app", "bridge.web.routes", "bridge.web.middlewares",
            "bridge.web.errors"} <= set(MODULES)
    top = {m for m in MODULES if m.count(".") == 1 and MODULES[m].name != "__init__.py"}
    assert top == {"bridge.cli", "bridge.service"}, "the package top holds the entry point and the service"


@pytest.mark.parametrize("module", layer("bridge.core"))
def test_nothing_under_the_core_reaches_aiohttp_or_the_web_layer(module: str) -> None:
    bad = {name: by for name, by in reachable(module).items() if within(name, *NOT_UNDER_THE_CORE)}
    assert not bad, f"{module} reaches {bad} (name: imported by)"


@pytest.mark.parametrize("module", layer("bridge.sources") + layer("bridge.runtime"))
def test_adapters_import_neither_the_core_nor_the_web(module: str) -> None:
    bad = {n for n in imports_of(module) if within(n, "bridge.core", "bridge.web", "bridge.service")}
    assert not bad, module


@pytest.mark.parametrize("module", layer("bridge.config") + layer("bridge.support"))
def test_config_and_support_import_no_layer_above(module: str) -> None:
    above = ["bridge.core", "bridge.web", "bridge.service", "bridge.sources", "bridge.runtime"]
    if within(module, "bridge.support"):
        above.append("bridge.config")
    bad = {n for n in imports_of(module) if within(n, *above)}
    assert not bad, module


def test_the_graph_walk_sees_through_modules() -> None:
    """The walk is transitive: the service reaches aiohttp through the source transport."""
    found = reachable("bridge.service")
    assert "aiohttp" in found and "bridge.sources.transport" in found
    assert "aiohttp" not in reachable("bridge.core.run")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_bridge_module_is_over_the_line_cap(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines"


def test_the_run_parts_load_without_aiohttp() -> None:
    """The same, as Python sees it: importing every core module brings in no aiohttp."""
    names = ", ".join(layer("bridge.core"))
    code = (f"import sys, {names}; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('aiohttp', 'openai') or m == 'common.errors'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "[]"


def test_the_web_layer_maps_every_failure_kind_to_a_status() -> None:
    from typing import get_args

    from bridge.core.errors import RequestRejected, RunFailed
    from bridge.support.errors import BridgeError, FailureKind
    from bridge.web.errors import STATUS, http_error

    assert set(STATUS) == set(get_args(FailureKind))
    rejected = http_error(RequestRejected("bad_request", "No."))
    assert (rejected.status, rejected.body()) == (400, {"error": {"code": "bad_request", "message": "No."}})
    assert http_error(BridgeError("duplicate_source_id", "Taken.", "conflict")).status == 409
    failed = http_error(RunFailed("runtime_failed", "chat_completions_failed", "Failed.", "r-1", "t-1"))
    assert failed.status == 502
    assert failed.body() == {"error": {"code": "chat_completions_failed", "message": "Failed."},
                             "requestId": "r-1", "traceId": "t-1"}


def test_settings_writes_raise_domain_errors() -> None:
    """config/writes.py names no HTTP status: it raises kinds the web layer maps."""
    names = imports_of("bridge.config.writes")
    assert not {n for n in names if within(n, "common.errors", "aiohttp")}
    from bridge.config import writes

    with pytest.raises(writes.BridgeError) as raised:
        writes.require_store(_NoStore())
    assert (raised.value.kind, raised.value.code) == ("conflict", "settings_persistence_disabled")


class _NoStore:
    store = None
