"""The llmwiki-agent-bridge command line: `serve` (the default) runs the HTTP bridge."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from bridge.config.registry import normalize_registered, redact_url
from bridge.config.resolve import OPTIONS, load_settings
from bridge.config.settings import BridgeSettings, SettingsError, check_bind_policy
from bridge.config.store import SettingsFileError, SettingsStore
from common import systemd_notify
from common.exposure import exposure_warnings
from common.logging import configure_logging
from common.version import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmwiki-agent-bridge",
        description="Fan a question out to LLMWiki Knowledge Sources (llmwiki-http, MCP, A2A) and "
                    "answer over A2A and MCP with one cited llmwiki_agent_result: evidence-only, or "
                    "written by an OpenAI-compatible model (delegated-runtime, the default; hybrid). "
                    "Settings page at /settings.")
    parser.add_argument("-v", "--version", action="version", version=__version__)
    parser.add_argument("command", nargs="?", choices=("serve", "sources", "ls", "status"),
                        default="serve",
                        help="serve (default): run the HTTP bridge; sources (ls): list the registered "
                             "Knowledge Sources; status: registry plus runtime and persistence")
    parser.add_argument("--json", action="store_true", help="sources/status: print JSON")
    parser.add_argument("--probe", action="store_true",
                        help="sources/status: check each source live (under the source policy)")
    for option in OPTIONS:
        text = f"{option.help} [env {option.env}]"
        if option.is_flag:
            parser.add_argument(option.flag, dest=option.name, action="store_true", default=None, help=text)
        elif option.name in ("allowed_origins", "allowed_hosts", "allowed_source_origins"):
            parser.add_argument(option.flag, dest=option.name, action="append", default=None, help=text)
        else:
            parser.add_argument(option.flag, dest=option.name, default=None, help=text,
                                type=_argument_type(option.parse))
    return parser


def _argument_type(parse: Any) -> Any:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except SettingsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def _cli_values(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given; a repeated flag's entries stay a list, which its field's rule reads."""
    return {k: v for k, v in vars(args).items() if k not in ("command", "json", "probe") and v is not None}


def ready_event(settings: BridgeSettings, port: int) -> dict[str, Any]:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return {"event": "ready", "url": f"http://{host}:{port}", "baseUrl": redact_url(settings.base_url),
            "baseUrlSource": settings.base_url_source, "modelConfigured": bool(settings.model),
            "modelSource": settings.model_source, "hermesBaseUrl": redact_url(settings.base_url),
            "hermesModelConfigured": bool(settings.model), "publicBind": settings.public_bind,
            "bridgeAuthConfigured": bool(settings.bearer_token),
            "configuredAllowedOrigins": len(settings.allowed_origins),
            "sourcePolicy": settings.source_policy, "runtimeProfile": settings.runtime_profile,
            "settingsPersistence": settings.config_path is not None}


_M_MMAP_THRESHOLD = -3  # glibc's mallopt() parameter number (malloc.h)
_MMAP_THRESHOLD_BYTES = 64 * 1024  # the size of the pieces source answers are read in


def keep_large_buffers_returnable() -> None:
    """Fix glibc's mmap threshold at 64 KiB. Left alone, glibc raises it to the size of each large
    block freed, so the pieces later source answers are read in (up to 32 MiB an answer) are
    carved from the heap, which it seldom gives back: 30 sources answering 200 MB each left the
    bridge at 340 MB RSS instead of 67 MB (370 MB after three such runs). Fixed, those pieces
    are mapped and unmapped, and RSS comes back to 67 MB. A no-op without glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)


async def serve(settings: BridgeSettings) -> None:
    from aiohttp import web

    from bridge.web.app import create_app

    keep_large_buffers_returnable()
    # On cleanup the runner stops listening, then gives requests in flight the shutdown timeout.
    runner = web.AppRunner(create_app(settings), access_log=None,
                           shutdown_timeout=settings.shutdown_timeout_seconds)
    await runner.setup()
    log = structlog.get_logger("llmwiki.bridge")
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        try:
            await site.start()
        except OSError as exc:
            raise ListenError(settings.host, settings.port, exc) from None
        port = settings.port
        for address in runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                port = int(address[1])
                break
        # Handlers first: a supervisor may send SIGTERM as soon as it hears we are ready.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        event = ready_event(settings, port)
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        systemd_notify.ready(f"ready: {event['url']}")
        await stop.wait()
        await site.stop()  # no new connections from here on; requests in flight go on
        log.info("stopping", url=event["url"], timeout_seconds=settings.shutdown_timeout_seconds)
        systemd_notify.stopping()
    finally:
        await runner.cleanup()
    log.info("stopped", url=event["url"])


class ListenError(Exception):
    """The bridge cannot listen on its address (in use, not local, no permission)."""

    def __init__(self, host: str, port: int, exc: OSError) -> None:
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        # errno in words; a name lookup's error (negative errno) has its own words
        reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else (exc.strerror or "bind failed")
        super().__init__(f"cannot listen on {address}: {reason}")


def check_settings_file(settings: BridgeSettings) -> None:
    """The settings file must be readable JSON with valid sources to serve from it (contract 1.5: an
    unparsable file or an invalid stored source is a start-up error). Names the file: the message goes
    to the operator's console only."""
    if settings.config_path is None:
        return
    try:
        document = SettingsStore(settings.config_path).read()
        normalize_registered(document.sources)
    except SettingsFileError as exc:
        raise SettingsError(f"{exc} ({settings.config_path})") from None
    except ValueError as exc:
        raise SettingsError(f"Settings file has an invalid source: {exc} ({settings.config_path})") from None


async def registry_report(settings: BridgeSettings, command: str, probe: bool) -> dict[str, Any]:
    """The offline operator view of the settings file's registry (raw URLs and roots: local output)."""
    from bridge.config.store import SettingsStore
    from bridge.service import BridgeService
    from bridge.sources.protocols import source_clients
    from bridge.sources.transport import source_http_client
    from bridge.web.app import load_registry

    store = SettingsStore(settings.config_path) if settings.config_path else None
    service = BridgeService(settings, load_registry(store), store, clients=source_clients())
    async with source_http_client(lambda: service.source_policy) as client:
        service.http = client
        view = await service.sources_view(probe, local=True)
    if command != "status":
        return view
    identity = settings.identity()
    connection = service.settings_document()["runtimeConnection"]
    if probe:  # `status --probe` checks the runtime too (contract 7.4), as /health?probe=1 does
        connection["reachability"] = (await service.probed_health())["runtimeConnection"]["reachability"]
    return {"bridge": "llmwiki-agent-bridge",
            "runtime": {"profile": settings.runtime_profile, "adapter": settings.runtime_adapter,
                        "id": identity["runtimeId"], "runtime": identity["runtime"],
                        "agentRuntime": identity["agentRuntime"]},
            "runtimeConnection": connection,
            "sourceRegistry": view, "persistence": service.persistence()}


def _reachability_line(reachability: dict[str, Any]) -> list[str]:
    """What `status --probe` found of the runtime, in one line (nothing when it was not probed)."""
    if not reachability.get("checked"):
        return []
    if reachability.get("ok"):
        return [f"Runtime probe: reachable (HTTP {reachability.get('httpStatus')})"]
    if reachability.get("reachable"):
        return [f"Runtime probe: answered HTTP {reachability.get('httpStatus')}"]
    return [f"Runtime probe: unreachable ({reachability.get('reason', 'request_failed')})"]


def _text_report(report: dict[str, Any], command: str) -> str:
    view = report["sourceRegistry"] if command == "status" else report
    lines: list[str] = []
    if command == "status":
        runtime, connection = report["runtime"], report["runtimeConnection"]
        lines += [f"Bridge: {report['bridge']}",
                  f"Runtime: {runtime['profile']} / {runtime['adapter']} ({connection['modelSource']} "
                  f"model, {connection['baseUrlSource']} base URL)",
                  *_reachability_line(connection.get("reachability", {})),
                  "Persistence: " + ("configured" if report["persistence"]["enabled"] else "not configured")]
    lines.append(f"Sources: {view['registeredCount']} registered, {view['selectedCount']} selected, "
                 f"{view['readyCount']} ready ({view['healthBasis']})")
    if not view["sources"]:
        lines.append("No Knowledge Sources are registered.")
    else:
        rows = [("ID", "URL", "ROOT", "PROTOCOL", "HEALTH", "SELECTED", "PAGES")]
        for entry in view["sources"]:
            health = entry["health"]
            rows.append((entry["id"], entry["url"], entry.get("root") or entry.get("rootLabel", ""),
                         entry["protocol"], "ok" if health.get("ok") else str(health.get("reason", "")),
                         "yes" if entry["selected"] else "no", str(entry.get("pageCount", ""))))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                  for row in rows]
    if view["warnings"]:
        lines.append("Warnings:")
        lines += [f"- {w['code']}: {', '.join(w['sourceIds'])}" for w in view["warnings"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = "sources" if args.command == "ls" else args.command
    if command in ("sources", "status"):
        try:
            settings = load_settings(_cli_values(args))
            report = asyncio.run(registry_report(settings, command, args.probe))
        except (SettingsError, ValueError, OSError) as exc:
            sys.stderr.write(f"llmwiki agent bridge cli failed: {exc}\n")
            return 1
        sys.stdout.write((json.dumps(report, indent=2, ensure_ascii=False) if args.json
                          else _text_report(report, command)) + "\n")
        return 0
    try:
        settings = load_settings(_cli_values(args))
        check_settings_file(settings)
        check_bind_policy(settings)
    except (SettingsError, ValueError) as exc:
        sys.stderr.write(f"failed to start llmwiki agent bridge: {exc}\n")
        return 1
    configure_logging(settings.log_level, settings.log_format)
    log = structlog.get_logger("llmwiki.bridge")
    for warning in exposure_warnings(settings.host, public_bind=settings.public_bind):
        log.warning(warning.event, host=settings.host, message=warning.message)
    try:
        asyncio.run(serve(settings))
    except ListenError as exc:
        sys.stderr.write(f"failed to start llmwiki agent bridge: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
