"""The bridge's layers point one way: the core knows no web framework and no HTTP status; the
source clients know nothing of the artifact, the service or the core."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

BRIDGE = Path(__file__).resolve().parents[2] / "bridge"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (TYPE_CHECKING blocks and functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def within(names: set[str], *packages: str) -> set[str]:
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in packages)}


CORE = sorted((BRIDGE / "core").glob("*.py"))
SOURCES = sorted((BRIDGE / "sources").glob("*.py"))


def test_the_layers_have_their_modules() -> None:
    assert {p.stem for p in CORE} >= {"run", "gather", "evidence", "errors"}
    assert {p.stem for p in SOURCES} >= {"base", "client", "protocols"}


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_no_core_module_imports_aiohttp_or_the_web_layer(path: Path) -> None:
    names = imported_modules(path)
    assert not within(names, "aiohttp", "common.errors", "bridge.protocols", "bridge.service",
                      "bridge.cli"), path.name


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_source_module_imports_the_artifact_the_service_or_the_core(path: Path) -> None:
    names = imported_modules(path)
    layers_above = ("bridge.artifact", "bridge.service", "bridge.core", "bridge.protocols")
    assert not within(names, *layers_above), path.name


def test_the_run_parts_load_without_aiohttp() -> None:
    """Not only their own imports: what they import does not bring aiohttp in either (the runtime
    step does, through the runtime adapter's source tools)."""
    code = ("import sys, bridge.core.errors, bridge.core.evidence, bridge.core.gather, "
            "bridge.core.discovery; print(sorted(m for m in sys.modules "
            "if m == 'aiohttp' or m == 'common.errors'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=BRIDGE.parent, timeout=60)
    assert done.stdout.strip() == "[]"


def test_the_web_layer_maps_every_core_failure_kind_to_a_status() -> None:
    from typing import get_args

    from bridge.core.errors import FailureKind, RequestRejected, RunFailed
    from bridge.protocols.errors import STATUS, http_error

    assert set(STATUS) == set(get_args(FailureKind))
    rejected = http_error(RequestRejected("bad_request", "No."))
    assert (rejected.status, rejected.body()) == (400, {"error": {"code": "bad_request", "message": "No."}})
    failed = http_error(RunFailed("runtime_failed", "chat_completions_failed", "Failed.", "r-1", "t-1"))
    assert failed.status == 502
    assert failed.body() == {"error": {"code": "chat_completions_failed", "message": "Failed."},
                             "requestId": "r-1", "traceId": "t-1"}
