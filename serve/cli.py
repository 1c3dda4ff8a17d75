"""The llmwiki-serve command line: `serve` plus one-shot commands that print JSON."""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serve.cli_args import build_parser
from serve.errors import KnowledgeSourceError
from serve.settings import ServeSettings, SettingsError, SourceProfileError, resolve_settings

if TYPE_CHECKING:
    from serve.watch.early_read import EarlyRead

# How long READY=1 waits for the start-up warm-up (index load or build) at most.
READY_WAIT_SECONDS = 900.0
# How long the rest of an unread request body (after a 408 or 413) is drained before the
# connection closes: enough for the client to read our answer, not a slot held for long.
LINGER_SECONDS = 1.0
__all__ = ["build_parser", "main"]


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    return tuple(dict.fromkeys(p.strip() for v in values for p in v.split(",") if p.strip()))


RETRIEVAL_ARGS = ("text", "limit", "mode", "fields", "snippet_chars", "min_score", "exclude_page_id",
                  "filters")


def _settings(args: argparse.Namespace, one_shot: bool) -> ServeSettings:
    cli: dict[str, Any] = {k: v for k, v in vars(args).items()
                           if k not in ("command", "root", *RETRIEVAL_ARGS)}
    if one_shot:
        # A one-shot reads the folder once and exits: no file watching. It shares the restart
        # cache with `serve`, unless the cache directory is inside the root.
        cli.update(inotify=False)
        settings = resolve_settings(args.root, cli)
        if settings.page_cache:
            from serve.store.database import default_cache_dir, is_inside

            if is_inside(settings.cache_dir or default_cache_dir(), settings.root.expanduser()):
                cli.update(page_cache=False)
    return resolve_settings(args.root, cli)


def _print_json(payload: Any) -> None:
    """A service answer (JSON data or a wire model), indented for people."""
    from pydantic import BaseModel  # not at start-up: `serve` imports this module first

    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json")
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


def pause_gc_for_start_up() -> None:
    """Loading a folder builds about a million long-lived, acyclic tuples; the cyclic
    collector would traverse them all again and again as they accumulate (about a third
    of a restart). Collection resumes once the first snapshot is published."""
    gc.disable()


def resume_gc_after_start_up() -> None:
    """Move everything built so far out of the collector's reach (it would otherwise
    traverse it once per generation later, a pause of about 0.25 s each at 20,000 pages),
    then collect as usual. Start-up leaves almost no cyclic garbage to lose this way."""
    gc.freeze()
    gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    parser = build_parser()
    args = parser.parse_args(argv)
    root = Path(args.root).expanduser()
    if args.command != "serve" and not root.is_dir():
        parser.error(f"ROOT must be an existing directory: {args.root}")
    if args.command == "serve":
        problem = root_problem(root)
        if problem is not None:
            return start_failed(problem)
    try:
        settings = _settings(args, one_shot=args.command not in ("serve", "mcp"))
    except SourceProfileError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except SettingsError as exc:
        parser.error(str(exc))
    if settings.page_cache and args.command in ("serve", "mcp"):
        from serve.store.database import default_cache_dir, is_inside

        cache_dir = settings.cache_dir or default_cache_dir()
        if is_inside(cache_dir, settings.root.expanduser()):
            sys.stderr.write(f"Error: the restart cache directory {cache_dir} is inside the served root; "
                             "give --cache-dir outside it, or --no-page-cache\n")
            return 2
    early = None
    sockets: list[socket.socket] = []
    if args.command == "serve":
        try:  # before the folder loads: a port in use is known at once, not after the load
            sockets = bind_early(settings.host, settings.port)
        except OSError as exc:
            return start_failed(f"cannot listen on {_address(settings.host, settings.port)}: "
                                f"{_reason(exc)}")
    if args.command in ("serve", "mcp"):  # long-running: build temporaries must not stay resident
        from serve.support.memory import keep_large_blocks_out_of_the_heap

        keep_large_blocks_out_of_the_heap()
    if args.command == "serve":
        # Before the service's own imports (aiohttp takes a tenth of a second); see EarlyRead.
        pause_gc_for_start_up()
        early = start_early_read(settings)
    from common.logging import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    if args.command == "serve":
        return _serve(settings, early, sockets, started)
    if args.command == "mcp":
        from serve.protocols.stdio import run_stdio

        return run_stdio(settings)
    if args.command == "inspect":
        return _inspect(args, settings)
    return _one_shot(args, settings, started)


def _inspect(args: argparse.Namespace, settings: ServeSettings) -> int:
    """What serve would see in ROOT, read as serve reads it; no server, no cache written."""
    from serve.inspect import inspect_folder, render_text

    report = inspect_folder(settings.root, max_page_bytes=settings.max_page_bytes,
                            source_profile=settings.source_profile)
    if args.json:
        _print_json(report.as_json())
    else:
        sys.stdout.write(render_text(report))
    return 0


def _one_shot(args: argparse.Namespace, settings: ServeSettings, started: float) -> int:
    """A command that prints one answer: it says what it does on stderr when that takes long,
    and leaves the restart cache for the next command or `serve`."""
    from serve.service import KnowledgeSource
    from serve.start_up import PROGRESS_SECONDS, one_shot_progress

    source = KnowledgeSource(settings, started=started)
    ticker = one_shot_progress(source, f"answering the {args.command}")
    try:
        if args.command in ("query", "search"):
            req = source.request(query=args.text, limit=args.limit, mode=args.mode,
                                 fields=_names(args.fields), snippet_chars=args.snippet_chars,
                                 min_score=args.min_score,
                                 exclude_page_ids=_names(args.exclude_page_id) or (),
                                 filters=args.filters)
            _print_json(source.context(req) if args.command == "query" else source.search(req))
        elif args.command == "manifest":
            _print_json(source.manifest(for_network=False))
        elif args.command == "source-refs":
            _print_json(source.source_refs())
        elif args.command == "source-bundle":
            _print_json(source.source_bundle(for_network=False))
    except KnowledgeSourceError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    finally:
        ticker.stop()
        source.close()
    slow = time.monotonic() - started > PROGRESS_SECONDS
    if settings.page_cache:
        if slow:
            sys.stderr.write("llmwiki-serve: saving the restart cache for the next run\n")
        source.save_cache()
    if slow:
        current = source.freshness.current
        pages = current.page_count if current is not None else 0
        origin = {"cache": "from the restart cache", "built": "built"}.get(source.indexing.origin, "not used")
        sys.stderr.write(f"llmwiki-serve: done in {time.monotonic() - started:.1f} s "
                         f"({pages} pages; search index {origin})\n")
    return 0


def start_failed(message: str) -> int:
    """An expected start-up failure: one line on the operator's console, no traceback."""
    sys.stderr.write(f"llmwiki-serve: {message}\n")
    return 2


def _reason(exc: OSError) -> str:
    """The error in words ("Address already in use"; a name lookup's own words for a host that
    does not resolve, whose errno is not the system's)."""
    return os.strerror(exc.errno) if exc.errno and exc.errno > 0 else (exc.strerror or str(exc))


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def root_problem(root: Path) -> str | None:
    """Why ROOT cannot be served (missing, not a directory, unreadable), or None. The path is the
    operator's own and goes to their console only."""
    try:
        info = root.stat()
    except FileNotFoundError:
        return f"the folder to serve does not exist: {root}"
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return f"the folder to serve does not exist (a parent is a file): {root}"
        return f"the folder to serve cannot be opened ({_reason(exc)}): {root}"
    if not stat.S_ISDIR(info.st_mode):
        return f"the folder to serve is not a directory: {root}"
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except OSError as exc:
        return f"the folder to serve cannot be read ({_reason(exc)}): {root}"
    return None


def bind_early(host: str, port: int) -> list[socket.socket]:
    """Bind (not listen: connections are refused, not queued, until the service starts) every
    address HOST names, as aiohttp would. The server listens on these sockets once it starts."""
    sockets: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does on POSIX
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def start_early_read(settings: ServeSettings) -> EarlyRead | None:
    """Start parsing a large folder before the service's own imports, unless the restart
    cache will supply the pages."""
    from serve.store.database import default_cache_dir, is_inside, store_path
    from serve.watch.early_read import EarlyRead

    root = settings.root.expanduser().resolve()
    if settings.page_cache:
        cache_dir = settings.cache_dir or default_cache_dir()
        if is_inside(cache_dir, root):
            return None  # a cache inside the root: KnowledgeSource reports it
        if store_path(cache_dir, root).exists():
            return None
    return EarlyRead(root, max_page_bytes=settings.max_page_bytes,
                     source_profile=settings.source_profile)


def _serve(settings: ServeSettings, early: EarlyRead | None, sockets: list[socket.socket],
           process_started: float) -> int:
    import asyncio

    import structlog
    from aiohttp import web

    from common import systemd_notify
    from common.exposure import exposure_warnings
    from serve.protocols.http import create_app
    from serve.service import KnowledgeSource
    from serve.start_up import folder_shape, service_progress

    log = structlog.get_logger("llmwiki.serve")
    for warning in exposure_warnings(settings.host, any_host="*" in settings.allowed_hosts,
                                     drafts=settings.allow_drafts):
        log.warning(warning.event, host=settings.host, message=warning.message)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}"
    announcing: set[asyncio.Task[None]] = set()

    async def started(app: web.Application) -> None:
        resume_gc_after_start_up()

    async def announce_ready() -> None:
        # The start-up warm-up loads or builds the index in a worker thread: READY=1 (and
        # /health's ready) wait for it, so a supervisor's "ready" means queries are answered.
        warmed = await asyncio.get_running_loop().run_in_executor(
            None, source.warmed.wait, READY_WAIT_SECONDS)
        ticker.stop()
        if not warmed:  # systemd times the start out and restarts us
            log.warning("not_ready", url=url, phase=source.phase, waited_seconds=READY_WAIT_SECONDS)
            return
        state = "ready" if source.indexing.ready else "listening (folder not loaded)"
        log.info("ready", url=url, index_ready=source.indexing.ready, phase=source.phase,
                 index_origin=source.indexing.origin,
                 seconds=round(time.monotonic() - source.started, 3))
        systemd_notify.ready(f"{state}: {url}")

    def listening(*_: object) -> None:
        # run_app calls its `print` hook once every site listens: readiness starts from there.
        task = asyncio.get_running_loop().create_task(announce_ready())
        announcing.add(task)
        task.add_done_callback(announcing.discard)

    async def shutting_down(app: web.Application) -> None:
        # on_shutdown runs once the listening sockets are closed, before requests in flight are
        # waited for (up to shutdown_timeout_seconds).
        log.info("stopping", url=url, timeout_seconds=settings.shutdown_timeout_seconds)
        systemd_notify.stopping()

    try:
        source = KnowledgeSource(settings, early=early, started=process_started)
    except BaseException:
        if early is not None:
            early.close()
        raise
    ticker = service_progress(source)
    source.load()
    log.info("folder_loaded", **folder_shape(source))
    app = create_app(settings, source)
    # on_startup handlers run after the cleanup contexts' start-up half, which loads the
    # folder, and before the server accepts connections.
    app.on_startup.append(started)
    app.on_shutdown.append(shutting_down)
    web.run_app(app, sock=sockets, access_log=None, print=listening, handle_signals=True,
                keepalive_timeout=settings.idle_timeout_seconds, lingering_time=LINGER_SECONDS,
                shutdown_timeout=settings.shutdown_timeout_seconds)
    log.info("stopped", url=url)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
