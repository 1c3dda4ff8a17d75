"""On-demand benchmark: time from process start to the first answer (issue 17).

    .venv/bin/python -m tests.benchmarks.bench_first_answer --pages 2000 20000 [--tldr] [--json -]

For each folder (generated with tests/benchmarks/generate.py into tests/benchmarks/.generated/<n>
unless present; the tldr corpus from ../shared/corpora with --tldr) and each first request
(POST /query, POST /search, POST /mcp tools/call llmwiki_search) it starts the installed
`llmwiki-serve serve DIR` twice with one private cache directory:

- cold: the cache directory is empty;
- warm: after a SIGTERM and the process's exit (the restart cache is written), the folder unchanged;
- changed: the same, after a page was edited, one added and one deleted while it was stopped (as a
  day's notes between two sessions: the directories' mtimes an hour old), the folder put back after;
- next: the restart after that one, on the store it left.

Each run measures the seconds from spawn to the first 200 answer of that request (polled with a
short bounded pause while the port is closed or the answer is 503/not ready), the server's RSS
(VmRSS, MB) at that moment, and when /health?ready=1 first answered 200. Targets on 20,000
pages: cold < 4 s, warm < 1 s, RSS < 300 MB (docs/performance.md). Every wait is bounded and
each server's process group is killed in `finally`. Loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.benchmarks.generate import generate
from tests.benchmarks.harness import (
    HOST,
    REPO,
    add_run_options,
    code_identity,
    code_lines,
    compile_code,
    free_port,
    install_deadline,
    kill_group,
    log_tail,
    machine,
    proc_status,
    wait_for_quiet,
    write_json_report,
)

GENERATED = REPO / "tests" / "benchmarks" / ".generated"
TLDR_TARBALL = REPO.parent / "shared" / "corpora" / "tldr-en-ko.tar.gz"
FIRST_ANSWER_TIMEOUT_S = 180.0
POLL_PAUSE_S = 0.005
EXIT_TIMEOUT_S = 120.0
TARGETS = {"cold_s": 4.0, "warm_s": 1.0, "rss_mb": 300.0}
QUESTION = "release pipeline signing checksum"
PHASES = ("cold", "warm", "changed", "next")
RACY_SECONDS = 2.5

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "query": ("/query", {"query": QUESTION}),
    "search": ("/search", {"query": QUESTION}),
    "mcp": ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "llmwiki_search", "arguments": {"query": QUESTION}}}),
}


def _post(port: int, path: str, body: dict[str, Any]) -> int:
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status == 200 and path == "/mcp" and b'"error"' in data[:200]:
            return 503  # a JSON-RPC error answer is no answer
        return response.status
    finally:
        conn.close()


def _get_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _serve_command(code_dir: Path | None) -> list[str]:
    if code_dir is None:
        return [str(REPO / ".venv" / "bin" / "llmwiki-serve")]
    return [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); "
            "from serve.cli import main; raise SystemExit(main())", str(code_dir)]


def first_answer(folder: Path, cache: Path, kind: str, code_dir: Path | None,
                 log_path: Path) -> dict[str, Any]:
    """Start serve, poll the request until it answers 200; the figures at that moment."""
    port = free_port()
    path, body = REQUESTS[kind]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("NOTIFY_SOCKET", None)
    command = [*_serve_command(code_dir), "serve", str(folder), "--host", HOST, "--port", str(port),
               "--cache-dir", str(cache)]
    with log_path.open("ab") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True, env=env)
    try:
        attempts = 0
        while True:
            elapsed = time.perf_counter() - started
            if elapsed > FIRST_ANSWER_TIMEOUT_S or proc.poll() is not None:
                raise RuntimeError(f"no answer to {kind} after {elapsed:.1f} s:\n{log_tail(log_path)}")
            attempts += 1
            try:
                status = _post(port, path, body)
            except OSError:
                status = 0
            if status == 200:
                answered = time.perf_counter() - started
                rss = proc_status(proc.pid).get("VmRSS", float("nan"))
                break
            time.sleep(POLL_PAUSE_S)
        ready = _get_status(port, "/health?ready=1")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=EXIT_TIMEOUT_S)
        return {"seconds": round(answered, 3), "rss_mb": round(rss, 1), "attempts": attempts,
                "health_ready_status_after": ready}
    finally:
        kill_group(proc)


def quiet_first_answer(args: argparse.Namespace, folder: Path, cache: Path, kind: str,
                       log_path: Path) -> dict[str, Any]:
    """first_answer(), once the machine is quiet when --wait-quiet asks it to be."""
    if args.wait_quiet:
        wait_for_quiet(args.wait_quiet)
    return first_answer(folder, cache, kind, args.code_dir, log_path)


def bench_folder(name: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"folder": name}
    for kind in args.kinds:
        cache = Path(tempfile.mkdtemp(prefix="llmwiki-first-answer-"))
        log_path = cache.parent / f"{cache.name}.log"
        start = functools.partial(quiet_first_answer, args, folder, cache, kind, log_path)
        try:
            cold, warm = start(), start()
            with changed_while_stopped(folder):
                changed, after = start(), start()
            out[kind] = {"cold": cold, "warm": warm, "changed": changed, "next": after}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            log_path.unlink(missing_ok=True)
        print(f"{name:>8} {kind:<6} " + "  ".join(
            f"{phase} {out[kind][phase]['seconds']:6.2f} s ({out[kind][phase]['rss_mb']:.0f} MB)"
            for phase in PHASES), file=sys.stderr)
    return out


@contextlib.contextmanager
def changed_while_stopped(folder: Path) -> Iterator[None]:
    """A page edited, one added and one deleted, their directories' mtimes an hour back (as
    after a pause, not during a walk); the folder as it was afterwards."""
    pages = sorted(folder.rglob("*.md"))
    edited, deleted = pages[len(pages) // 2], pages[len(pages) // 3]
    added = edited.parent / "zz-added-while-stopped.md"
    kept = {edited: edited.read_bytes(), deleted: deleted.read_bytes()}
    try:
        edited.write_bytes(kept[edited] + b"\nquokka: edited while serve was stopped\n")
        added.write_text("# Added while stopped\n\nquokka [[index]]\n", encoding="utf-8")
        deleted.unlink()
        hour_ago = time.time() - 3600
        for directory in {edited.parent, deleted.parent}:
            os.utime(directory, (hour_ago, hour_ago))
        # A file's stat is trusted only once its last change is 2 s older than the read that
        # saw it (serve/watch/records.py); notes edited while serve was stopped are older.
        time.sleep(RACY_SECONDS)
        yield
    finally:
        added.unlink(missing_ok=True)
        for path, data in kept.items():
            path.write_bytes(data)


def tldr_folder(work: Path) -> Path:
    target = work / "tldr"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".tldr-", dir=work))
        subprocess.run(["tar", "-xzf", str(TLDR_TARBALL), "-C", str(staging)], check=True, timeout=300)
        (staging / "tldr").rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    return target


def bench_folders(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The folders `--pages` and `--tldr` name, generated under `--work` when absent."""
    args.work.mkdir(parents=True, exist_ok=True)
    folders: list[tuple[str, Path]] = []
    for pages in args.pages:
        target = args.work / str(pages)
        if not target.is_dir():
            generate(target, pages=pages)
        folders.append((str(pages), target))
    if args.tldr:
        folders.append(("tldr", tldr_folder(args.work)))
    return folders


def markdown_table(results: list[dict[str, Any]], kinds: list[str]) -> str:
    lines = ["| folder | first | " + " | ".join(f"{phase} s | {phase} RSS MB" for phase in PHASES) + " |",
             "|---|---|" + "---:|---:|" * len(PHASES)]
    for row in results:
        for kind in kinds:
            cells = " | ".join(f"{row[kind][phase]['seconds']:.2f} | {row[kind][phase]['rss_mb']:.0f}"
                               for phase in PHASES)
            lines.append(f"| {row['folder']} | {kind} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="*", default=[2000, 20000])
    parser.add_argument("--tldr", action="store_true", help="also the tldr corpus (../shared/corpora)")
    parser.add_argument("--kinds", nargs="+", choices=list(REQUESTS), default=list(REQUESTS))
    parser.add_argument("--work", type=Path, default=GENERATED, help="where folders are generated")
    add_run_options(parser, code_help="run serve's code from this directory", max_seconds=3600,
                    max_seconds_help="overall time limit")
    args = parser.parse_args()
    install_deadline(args.max_seconds, "bench_first_answer: time limit reached")
    compile_code(args.code_dir)
    results = [bench_folder(name, folder, args) for name, folder in bench_folders(args)]
    report = {"results": results, "targets": TARGETS, "machine": machine(),
              "code": code_identity(args.code_dir)}
    sys.stdout.write(markdown_table(results, args.kinds))
    sys.stdout.write(code_lines(report))
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
