"""The llmwiki-serve command line: `serve` plus one-shot commands that print JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.logging import configure_logging
from common.version import __version__
from serve.errors import KnowledgeSourceError
from serve.settings import OPTIONS, ServeSettings, SettingsError, resolve_settings


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        dest = option.name
        if option.is_flag:
            parser.add_argument(option.flag, dest=dest, action="store_true", default=None,
                                help=f"{option.help} [env {option.env}]")
        elif option.repeatable:
            parser.add_argument(option.flag, dest=dest, action="append", default=None,
                                help=f"{option.help} [env {option.env}]")
        else:
            parser.add_argument(option.flag, dest=dest, type=option.parse, default=None,
                                help=f"{option.help} [env {option.env}]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmwiki-serve",
        description="Serve a Markdown knowledge folder read-only to agents (HTTP).",
    )
    parser.add_argument("-v", "--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the HTTP service for ROOT")
    serve.add_argument("root", metavar="ROOT", help="the knowledge folder to serve")
    _add_serve_options(serve)

    for name, text in (("manifest", "print the manifest JSON (with the local root)"),
                       ("source-refs", "print the source refs JSON"),
                       ("source-bundle", "print the source bundle JSON")):
        one_shot = commands.add_parser(name, help=text)
        one_shot.add_argument("root", metavar="ROOT")
        one_shot.add_argument("--source-id", dest="source_id", default=None)
    return parser


def _settings(args: argparse.Namespace, one_shot: bool) -> ServeSettings:
    cli: dict[str, Any] = {k: v for k, v in vars(args).items() if k not in ("command", "root")}
    if one_shot:  # one-shot commands never touch the restart cache or watch the folder
        cli.update(page_cache=True, inotify=True)
    return resolve_settings(args.root, cli)


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    root = Path(args.root).expanduser()
    if args.command != "serve" and not root.is_dir():
        parser.error(f"ROOT must be an existing directory: {args.root}")
    try:
        settings = _settings(args, one_shot=args.command != "serve")
    except SettingsError as exc:
        parser.error(str(exc))
    configure_logging(settings.log_level, settings.log_format)
    if args.command == "serve":
        return _serve(settings)
    from serve.service import KnowledgeSource

    source = KnowledgeSource(settings)
    try:
        if args.command == "manifest":
            _print_json(source.manifest(for_network=False))
        elif args.command == "source-refs":
            _print_json(source.source_refs())
        elif args.command == "source-bundle":
            _print_json(source.source_bundle(for_network=False))
    except KnowledgeSourceError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    finally:
        source.close()
    return 0


def _serve(settings: ServeSettings) -> int:
    from aiohttp import web

    from serve.protocols.http import create_app

    app = create_app(settings)
    web.run_app(app, host=settings.host, port=settings.port, access_log=None, print=None,
                handle_signals=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
