"""The installed commands' help as a newcomer reads it, and the one environment the demo and the
tests share: asking the bootstrap again for either installs nothing."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO
from tests.e2e.processes import console_script, run_command

HTTP_ONLY = ("--host", "--port", "--cors-origin", "--allowed-host", "--idle-timeout-seconds",
             "--body-timeout-seconds", "--enable-a2a", "--public-url", "--metrics",
             "--shutdown-timeout-seconds")


def _help(work: Path, script: str, *command: str) -> str:
    done = run_command(work, [console_script(script), *command, "--help"])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_mcp_help_offers_no_http_flag(tmp_path: Path) -> None:
    text = _help(tmp_path, "llmwiki-serve", "mcp")
    assert not [flag for flag in HTTP_ONLY if f"[{flag}" in text or f"  {flag}" in text], text
    assert "stdin/stdout" in text and "--mcp-tools" in text


@pytest.mark.parametrize("command", ["query", "search"])
def test_retrieval_help_offers_the_working_modes_only(tmp_path: Path, command: str) -> None:
    text = _help(tmp_path, "llmwiki-serve", command)
    assert "{lexical,literal}" in text and "vector" not in text and "hybrid" not in text
    wiki = REPO / "fixtures" / "sample-wiki"
    serve = console_script("llmwiki-serve")
    refused = run_command(tmp_path, [serve, command, wiki, "x", "--mode", "semantic"])
    assert refused.returncode == 2 and "choose from lexical, literal" in refused.stderr


def test_the_bridge_help_says_what_it_does_now(tmp_path: Path) -> None:
    text = " ".join(_help(tmp_path, "llmwiki-agent-bridge").split())
    assert "evidence-only in this release" not in text
    assert "delegated-runtime, the default" in text


@pytest.mark.parametrize("extras", ["", "test"])
def test_the_bootstrap_reinstalls_nothing_for_the_demo_or_the_tests(extras: str) -> None:
    """run-demo asks for no extras, run-tests for `test`: the environment the tests run in has
    both, so neither asks pip for anything (the marker is shared, extras accumulate)."""
    if Path(console_script("llmwiki-serve")).parent != REPO / ".venv" / "bin":
        pytest.fail("the e2e tier runs in the checkout's .venv (./scripts/run-tests)")
    started = time.monotonic()
    done = subprocess.run([str(REPO / "scripts" / "bootstrap"), *([extras] if extras else [])],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "installing" not in done.stderr, done.stderr
    assert time.monotonic() - started < 30
