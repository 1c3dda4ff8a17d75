"""Every `--help` says what the command does now: each argument has a line, only working choices
are offered, and `mcp` offers no HTTP-only option."""

from __future__ import annotations

import argparse

import pytest

from bridge.cli import build_parser as bridge_parser
from serve.cli_args import build_parser as serve_parser
from serve.settings import OPTIONS


def _parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = {parser.prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.update(_parsers(child))
    return found


ALL = {**_parsers(serve_parser()), **_parsers(bridge_parser())}


@pytest.mark.parametrize("prog", sorted(ALL))
def test_every_argument_has_a_line(prog: str) -> None:
    parser = ALL[prog]
    assert parser.description, f"{prog} says nothing about what it does"
    bare = [action.dest for action in parser._actions
            if not isinstance(action, argparse._SubParsersAction)
            and (not action.help or action.help == argparse.SUPPRESS)]
    assert not bare, f"{prog}: no help for {bare}"


def test_mcp_offers_no_http_only_option() -> None:
    text = ALL["llmwiki-serve mcp"].format_help()
    http_only = [option.flag for option in OPTIONS if option.http_only]
    assert http_only, "the table marks the HTTP-only options"
    assert not [flag for flag in http_only if f"{flag} " in text or f"{flag}\n" in text]
    assert "--cache-dir" in text and "--mcp-tools" in text


@pytest.mark.parametrize("command", ["query", "search"])
def test_only_working_modes_are_offered(command: str) -> None:
    text = ALL[f"llmwiki-serve {command}"].format_help()
    assert "{lexical,literal}" in text
    assert "vector" not in text and "hybrid" not in text


def test_the_bridge_says_its_default_mode() -> None:
    text = ALL["llmwiki-agent-bridge"].format_help()
    assert "in this release" not in text
    assert "delegated-runtime, the default" in " ".join(text.split())
