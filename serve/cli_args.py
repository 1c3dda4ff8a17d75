"""llmwiki-serve's command-line grammar: the commands, their arguments and every help line."""

from __future__ import annotations

import argparse
import json
from typing import Any

from common.filters import FilterError, Filters, parse_filters
from common.limits import SEARCH_LIMIT, SNIPPET_CHARS, Limit
from common.version import __version__
from serve.settings import OPTIONS


def _add_serve_options(parser: argparse.ArgumentParser, http: bool = True) -> None:
    for option in OPTIONS:
        if option.http_only and not http:
            continue
        dest = option.name
        if option.is_flag:
            action = "store_true" if option.flag_value else "store_false"
            parser.add_argument(option.flag, *option.aliases, dest=dest, action=action, default=None,
                                help=f"{option.help} [env {option.env}]")
        elif option.repeatable:
            parser.add_argument(option.flag, dest=dest, action="append", default=None,
                                help=f"{option.help} [env {option.env}]")
        else:
            parser.add_argument(option.flag, *option.aliases, dest=dest, type=option.parse,
                                default=None,
                                help=f"{option.help} [env {option.env}]")


ROOT_HELP = "the Markdown folder (wiki, Obsidian vault, Logseq graph, ...); read, never written"
SOURCE_ID_HELP = "override the source id (default: slug of the wiki title) [env LLMWIKI_SOURCE_ID]"
PROFILE_HELP = ("auto (detect the folder's shape, the default) or okf-v0.2 (an Open Knowledge Format "
                "v0.2 bundle, validated strictly) [env LLMWIKI_SOURCE_PROFILE]")
# The search modes that answer, offered in --help. The wire schema's vector and hybrid are still
# accepted, to be refused with the contract's "Vector search is not enabled" error (exit 1).
WORKING_MODES = ("lexical", "literal")
REFUSED_MODES = ("vector", "hybrid")


def _mode(text: str) -> str:
    if text not in WORKING_MODES + REFUSED_MODES:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(WORKING_MODES)})")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmwiki-serve",
        description="Serve a Markdown folder read-only to agents: HTTP (with MCP at /mcp and, "
                    "opt-in, A2A), MCP over stdio, or one-shot answers printed as JSON.",
    )
    parser.add_argument("-v", "--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the HTTP service (REST, MCP at /mcp and /mcp/stream, opt-in A2A) for ROOT",
        description="Run the HTTP service for ROOT on loopback: REST routes, MCP at /mcp and "
                    "/mcp/stream, and A2A with --enable-a2a.")
    serve.add_argument("root", metavar="ROOT", help=ROOT_HELP)
    _add_serve_options(serve)

    mcp = commands.add_parser(
        "mcp", help="speak MCP over stdin/stdout for ROOT (for clients that launch a subprocess)",
        description="Speak MCP over stdin/stdout for ROOT (newline-delimited JSON-RPC); logs go to "
                    "stderr. For MCP clients that launch the server as a subprocess.")
    mcp.add_argument("root", metavar="ROOT", help=ROOT_HELP)
    _add_serve_options(mcp, http=False)

    for name, text in (("query", "print the context pack JSON for a question"),
                       ("search", "print the search results JSON for terms")):
        retrieval = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        retrieval.add_argument("root", metavar="ROOT", help=ROOT_HELP)
        retrieval.add_argument("text", metavar="TEXT",
                               help="the question" if name == "query" else "the terms to search for")
        retrieval.add_argument("-l", "--limit", type=_bounded_int(SEARCH_LIMIT), default=None,
                               help=f"most results ({SEARCH_LIMIT.span}, default 8)")
        retrieval.add_argument("--mode", type=_mode, default="lexical", metavar="{lexical,literal}",
                               help="lexical (ranked words, the default) or literal (the exact text)")
        retrieval.add_argument("--fields", action="append", default=None,
                               help="result fields to keep (repeat or comma-separate)")
        retrieval.add_argument("--snippet-chars", type=_bounded_int(SNIPPET_CHARS), default=None,
                               help=f"characters of each snippet ({SNIPPET_CHARS.span})")
        retrieval.add_argument("--min-score", type=_non_negative, default=None,
                               help="leave out results scoring below this (>= 0)")
        retrieval.add_argument("--exclude-page-id", action="append", default=None,
                               help="leave out this page (repeat or comma-separate)")
        retrieval.add_argument("--filters", type=_filters, default=None, metavar="JSON",
                               help="only pages these filters admit, as the request's `filters` "
                                    "object: tags_any, tags_all, path_prefix, kinds (journal, "
                                    "orientation, note), date_from, date_to (YYYY-MM-DD)")
        retrieval.add_argument("--source-id", dest="source_id", default=None, help=SOURCE_ID_HELP)
        retrieval.add_argument("--source-profile", dest="source_profile", default=None, help=PROFILE_HELP)

    for name, text in (("manifest", "print the manifest JSON (with the local root)"),
                       ("source-refs", "print the source refs JSON"),
                       ("source-bundle", "print the source bundle JSON"),
                       ("inspect", "say what serve sees in ROOT: its shape and why, pages, what is "
                                   "skipped and why, titles from file names, drafts withheld")):
        one_shot = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        one_shot.add_argument("root", metavar="ROOT", help=ROOT_HELP)
        if name == "inspect":
            one_shot.add_argument("--json", action="store_true", help="print JSON instead of text")
            one_shot.add_argument("--max-page-bytes", dest="max_page_bytes", type=int, default=None,
                                  help="files larger than this count as skipped, as serve skips them "
                                       "(default 8 MiB) [env LLMWIKI_SERVE_MAX_PAGE_BYTES]")
        else:
            one_shot.add_argument("--source-id", dest="source_id", default=None, help=SOURCE_ID_HELP)
        one_shot.add_argument("--source-profile", dest="source_profile", default=None, help=PROFILE_HELP)
    return parser


def _bounded_int(limit: Limit) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if not limit.contains(value):
            raise argparse.ArgumentTypeError(f"must be between {limit.low} and {limit.high}")
        return value
    return parse


def _filters(text: str) -> Filters | None:
    try:
        return parse_filters(json.loads(text))
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not a JSON object: {exc.msg}") from None
    except FilterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value
