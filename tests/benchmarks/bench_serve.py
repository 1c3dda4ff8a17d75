"""On-demand benchmark of serve's foundation against the targets in the product spec.

    .venv/bin/python -m tests.benchmarks.bench_serve --pages 2000 20000 [--json out.json]

For each size it generates a wiki into tests/benchmarks/.generated/<n> (unless present),
then runs the real console script (`.venv/bin/llmwiki-serve serve DIR --port P`) on
127.0.0.1 with an isolated, empty cache directory and measures:

- cold start: process spawn until GET /health answers 200;
- restart with the folder unchanged: SIGTERM, wait for exit (the restart cache is written),
  spawn again with the same cache dir, until GET /health answers 200;
- GET /health and GET /read/{id} latency (median, p99) over sequential keep-alive requests
  with the default strict freshness; /health in the first seconds after ready (while the
  restart cache is written); the first and the following /graph/neighborhood requests;
- RSS of the server process (VmRSS, and peak VmHWM) after start, after the latency runs
  and after the first graph requests; the server's CPU time until ready;
- edit visibility: an in-place title edit, an editor-style atomic save, a new page, a new
  page in a new folder and a deleted page must each be visible to the very next request;
- the /health "diagnostics" block, and how much CPU other processes used meanwhile.

Targets are printed beside the figures; see docs/performance.md. `--code-dir` runs serve's
code from another directory (e.g. a `git archive` of one commit).

Every wait has a hard timeout, request counts are bounded and server processes are always
killed in `finally`. Edits made to the generated folder are undone before exit.
Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.benchmarks.generate import generate
from tests.benchmarks.harness import (
    HOST,
    check_code_dir,
    code_identity,
    code_lines,
    compile_code,
    cpu_seconds,
    free_port,
    kill_group,
    log_tail,
    machine,
    percentile,
    proc_status,
    wait_for_quiet,
    write_json_report,
)

REPO = Path(__file__).resolve().parents[2]
GENERATED = Path(__file__).resolve().parent / ".generated"
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
CACHE_WAIT_S = 120.0
POLL_INTERVAL_S = 0.01
WARMUP_REQUESTS = 50
AFTER_READY_S = 3.0
SLOW_FIRST_REQUEST_MS = 25.0  # the spec's p99 request budget: "visible ... at the cost above"
RACY_WINDOW_S = 2.5  # serve re-reads files whose ctime is within 2 s of being read

# (key, label, unit, limit) -- the spec's targets, stated for 20,000 pages.
TARGETS = {
    "cold_start_s": ("< 4 s", 4.0),
    "restart_s": ("< 1.5 s", 1.5),
    "health_median_ms": ("< 1 ms", 1.0),
    "rss_after_start_mb": ("< 250 MB", 250.0),
    "rss_after_restart_mb": ("< 250 MB", 250.0),
    "rss_after_latency_mb": ("< 250 MB", 250.0),
    "rss_after_graph_mb": ("< 250 MB", 250.0),
}


# -- helpers ------------------------------------------------------------------------------


def summarize_ms(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples)
    return {
        "count": len(ordered),
        "median_ms": statistics.median(ordered),
        "p99_ms": percentile(ordered, 99),
        "mean_ms": statistics.fmean(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
    }


def serve_command() -> list[str]:
    script = REPO / ".venv" / "bin" / "llmwiki-serve"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "serve.cli"]  # same entry point, without the wrapper


def newest_ctime(root: Path) -> float:
    newest = 0.0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_ctime)
    return newest


def wait_until_files_settled(root: Path) -> float:
    """Sleep until every file is older than serve's racy window, so the restart cache can
    trust the stat of every file (as on a folder that was not just written). Returns the
    seconds slept."""
    delay = newest_ctime(root) + RACY_WINDOW_S - time.time()
    if delay > 0:
        time.sleep(min(delay, RACY_WINDOW_S))
        return delay
    return 0.0


def ensure_folder(pages: int, seed: int, regenerate: bool) -> tuple[Path, float | None]:
    """The generated wiki for `pages` (generated now if absent), and the generation time."""
    target = GENERATED / (str(pages) if seed == 7 else f"{pages}-seed{seed}")
    if target.is_dir() and not regenerate:
        return target, None
    GENERATED.mkdir(parents=True, exist_ok=True)
    partial = GENERATED / f".{pages}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    try:
        generate(partial, pages, seed)
        if target.exists():
            shutil.rmtree(target)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target, time.perf_counter() - started


def approved_page_ids(root: Path) -> list[str]:
    """Ids of non-hub pages the generator did not withhold (read from their frontmatter)."""
    ids = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            continue
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                head = handle.read(800)
            block = head.split("\n---", 1)[0]
            if ("draft: true" in block or "status: private" in block
                    or "review_state: needs_review" in block):
                continue
            ids.append(f"{rel_dir}/{name[:-3]}")
    return ids


# -- HTTP ---------------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection (http.client keeps client overhead small)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)

    def get(self, path: str) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        return response.status, body, time.perf_counter() - started

    def get_json(self, path: str) -> tuple[int, Any, float]:
        status, body, elapsed = self.get(path)
        return status, json.loads(body), elapsed

    def close(self) -> None:
        self.conn.close()


def burst(port: int, path: str, seconds: float, limit: int = 20000) -> dict[str, float]:
    """Sequential requests for `seconds` (at most `limit`), as soon as the server is ready."""
    client = Client(port)
    samples: list[float] = []
    try:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and len(samples) < limit:
            status, _body, elapsed = client.get(path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}")
            samples.append(elapsed)
    finally:
        client.close()
    return summarize_ms(samples)


def timed_requests(port: int, paths: Sequence[str], count: int,
                   expect: int = 200) -> dict[str, float]:
    client = Client(port)
    try:
        for i in range(WARMUP_REQUESTS):
            client.get(paths[i % len(paths)])
        samples = []
        for i in range(count):
            status, _body, elapsed = client.get(paths[i % len(paths)])
            if status != expect:
                raise RuntimeError(f"GET {paths[i % len(paths)]} answered {status}")
            samples.append(elapsed)
    finally:
        client.close()
    return summarize_ms(samples)


# -- the server process -------------------------------------------------------------------


@dataclass
class Server:
    root: Path
    cache_dir: Path
    log_path: Path
    extra_args: Sequence[str] = ()
    code_dir: Path | None = None
    port: int = 0
    ready_wall: float = 0.0  # wall clock when /health first answered 200
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> float:
        """Spawn and wait for GET /health 200; returns seconds from spawn to ready."""
        self.port = free_port()
        env = dict(os.environ)
        env.update(self.env)
        env["XDG_CACHE_HOME"] = str(self.cache_dir.parent / "xdg")
        env["LLMWIKI_SERVE_LOG_LEVEL"] = "warning"
        env.pop("LLMWIKI_SERVE_CACHE_DIR", None)
        if self.code_dir is not None:  # serve's packages from there, before the editable install
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(self.code_dir), env.get("PYTHONPATH", "")) if p)
        cmd = [*serve_command(), "serve", str(self.root), "--host", HOST, "--port",
               str(self.port), "--cache-dir", str(self.cache_dir), *self.extra_args]
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            started = time.perf_counter()
            # Own process group: kill() also ends serve's parse workers, which would
            # otherwise outlive a killed server.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=env, cwd=self.code_dir or REPO,
                                         start_new_session=True)
        finally:
            log.close()
        deadline = started + READY_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see "
                                   f"{self.log_path}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                try:
                    conn.request("GET", "/health")
                    if conn.getresponse().status == 200:
                        elapsed = time.perf_counter() - started
                        self.ready_wall = time.time()
                        return elapsed
                finally:
                    conn.close()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"/health not ready after {READY_TIMEOUT_S} s")
            time.sleep(POLL_INTERVAL_S)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> float:
        """SIGTERM and wait for a clean exit; returns the seconds it took."""
        assert self.proc is not None
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"server did not exit within {STOP_TIMEOUT_S} s") from None
        elapsed = time.perf_counter() - started
        self.proc = None
        if code not in (0, -signal.SIGTERM):
            raise RuntimeError(f"server exited with {code}:\n{self.log_tail()}")
        return elapsed

    def kill(self) -> None:
        """SIGKILL the server's process group (the server and any workers it forked)."""
        kill_group(self.proc)
        self.proc = None

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.kill()


def cache_files(cache_dir: Path) -> list[Path]:
    """The store serve keeps for a root: `store-<key>.sqlite3` (SQLite commits whole
    transactions, so what it holds is complete; its -wal file is counted with it)."""
    return sorted(cache_dir.glob("store-*")) if cache_dir.is_dir() else []


def cache_mtime(cache_dir: Path) -> int | None:
    files = cache_files(cache_dir)
    return files[0].stat().st_mtime_ns if files else None


def wait_for_cache(cache_dir: Path, previous: int | None, since_wall: float,
                   limit_s: float = CACHE_WAIT_S) -> float | None:
    """Waits until the restart cache file is (re)written, i.e. its mtime differs from
    `previous` and then holds still for 50 ms. Returns when it was written (its mtime),
    in seconds after `since_wall`; None when not within `limit_s`."""
    started = time.perf_counter()
    last: int | None = None
    while time.perf_counter() - started < limit_s:
        mtime = cache_mtime(cache_dir)
        if mtime is not None and mtime != previous:
            if mtime == last:
                return mtime / 1e9 - since_wall
            last = mtime
        time.sleep(0.05)
    return None


def cache_size_mb(cache_dir: Path) -> float:
    return sum(f.stat().st_size for f in cache_files(cache_dir)) / 1e6


# -- baselines ----------------------------------------------------------------------------

BARE_APP = """
import json, sys
from aiohttp import web
body = json.dumps({"status": "ok", "pad": "x" * 1400}).encode()
async def health(request):
    return web.Response(body=body, content_type="application/json")
app = web.Application()
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def import_floor_s(code_dir: Path | None) -> float:
    """Interpreter start plus importing the serve HTTP stack (no folder work)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import serve.protocols.http, serve.cli"],
                   check=True, cwd=code_dir or REPO, timeout=60)
    return time.perf_counter() - started


def bare_aiohttp_health(count: int) -> dict[str, float]:
    """Latency floor of this client and a trivial aiohttp handler on this machine."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.perf_counter() + 30
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    break
            except OSError:
                if time.perf_counter() > deadline or proc.poll() is not None:
                    raise RuntimeError("bare aiohttp app did not start") from None
                time.sleep(POLL_INTERVAL_S)
        return timed_requests(port, ["/health"], count)
    finally:
        proc.kill()
        proc.wait(timeout=10)


# -- edit visibility ----------------------------------------------------------------------


@dataclass
class Undo:
    """Restores the generated folder after the edit checks."""

    restore: dict[Path, bytes] = field(default_factory=dict)
    remove: list[Path] = field(default_factory=list)

    def run(self) -> None:
        for path in reversed(self.remove):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        for path, data in self.restore.items():
            path.write_bytes(data)


def _retitle(data: bytes, new_title: str) -> bytes:
    lines = data.decode("utf-8").split("\n")
    for i, line in enumerate(lines):
        if line.startswith("title:"):
            lines[i] = f"title: {json.dumps(new_title, ensure_ascii=False)}"
            break
    return "\n".join(lines).encode("utf-8")


def edit_checks(port: int, root: Path, ids: list[str], rng: random.Random) -> dict[str, Any]:
    """Each change, then the very next request must see it. Reports the first request's
    latency and the one after it (back to the no-change path)."""
    undo = Undo()
    results: dict[str, Any] = {}
    client = Client(port)
    nonce = f"{os.getpid()}-{int(time.time())}"

    def check(name: str, page_id: str, expect_status: int, expect_title: str | None) -> None:
        status, body, first = client.get("/read/" + quote(page_id))
        seen_title = json.loads(body).get("title") if status == 200 else None
        visible = status == expect_status and (expect_title is None or seen_title == expect_title)
        _s, _b, second = client.get("/read/" + quote(page_id))
        _s, _b, health = client.get("/health")
        results[name] = {"visible": visible, "status": status, "first_request_ms": first * 1000,
                         "second_request_ms": second * 1000, "health_after_ms": health * 1000}

    try:
        picks = rng.sample(ids, 3)
        # 1. in-place edit of the title (open with O_TRUNC, write, close).
        path = root / f"{picks[0]}.md"
        original = path.read_bytes()
        undo.restore[path] = original
        title = f"Edited Title {nonce}"
        client.get("/read/" + quote(picks[0]))  # warm: the page is served before the edit
        with open(path, "wb") as handle:
            handle.write(_retitle(original, title))
        check("edit_in_place", picks[0], 200, title)

        # 2. editor-style save: write a temp file beside it, then rename over the page.
        path = root / f"{picks[1]}.md"
        original = path.read_bytes()
        undo.restore[path] = original
        title = f"Atomically Saved {nonce}"
        tmp = path.with_name(f".{path.name}.{nonce}.tmp")
        undo.remove.append(tmp)
        tmp.write_bytes(_retitle(original, title))
        os.replace(tmp, path)
        check("edit_atomic_rename", picks[1], 200, title)

        # 3. a new page in an existing folder.
        new_id = f"concepts/bench-new-page-{nonce}"
        new_path = root / f"{new_id}.md"
        undo.remove.append(new_path)
        title = f"Brand New Page {nonce}"
        new_path.write_text(f"---\ntitle: {title}\nreview_state: approved\n---\n# {title}\n\n"
                            "Added by the benchmark. [[hot]]\n", encoding="utf-8")
        check("add_page", new_id, 200, title)

        # 4. a new page inside a new folder.
        new_dir = root / "concepts" / f"bench-new-dir-{nonce}"
        undo.remove.append(new_dir)
        new_dir.mkdir()
        new_id = f"concepts/bench-new-dir-{nonce}/page"
        title = f"Page In New Folder {nonce}"
        (new_dir / "page.md").write_text(f"---\ntitle: {title}\n---\n# {title}\n\nNew folder.\n",
                                         encoding="utf-8")
        check("add_page_in_new_folder", new_id, 200, title)

        # 5. a deleted page.
        path = root / f"{picks[2]}.md"
        undo.restore[path] = path.read_bytes()
        client.get("/read/" + quote(picks[2]))
        path.unlink()
        check("delete_page", picks[2], 404, None)
    finally:
        client.close()
        undo.run()
    return results


# -- one size -----------------------------------------------------------------------------


class LoadMeter:
    """CPU used on the machine by processes other than this benchmark and its children
    (the servers), as a fraction of all cores, over the meter's lifetime."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        return sum(values) / tick, (sum(values) - idle) / tick, ours

    def other_busy(self) -> float:
        total0, busy0, ours0 = self.start
        total1, busy1, ours1 = self._sample()
        if total1 <= total0:
            return 0.0
        return max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (total1 - total0)


def bench_size(pages: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    root, gen_s = ensure_folder(pages, args.seed, args.regenerate)
    md_files = sum(1 for _ in root.rglob("*.md"))
    ids = approved_page_ids(root)
    rng = random.Random(args.seed)
    read_paths_ids = rng.sample(ids, min(len(ids), 500))
    read_paths = ["/read/" + quote(i) for i in read_paths_ids]
    out: dict[str, Any] = {"pages": pages, "root": str(root), "md_files": md_files,
                           "folder_mb": sum(f.stat().st_size for f in root.rglob("*")
                                            if f.is_file()) / 1e6,
                           "generated_now_s": gen_s}
    out["settle_sleep_s"] = wait_until_files_settled(root)
    out["cpu_busy_before"] = wait_for_quiet(args.wait_quiet)
    meter = LoadMeter()

    cache_dir = work / f"cache-{pages}"  # absent: the first start has an empty cache
    log_path = work / f"serve-{pages}.log"
    server = Server(root, cache_dir, log_path, args.serve_arg, args.code_dir)
    with running(server):
        # Cold start, empty cache.
        out["cold_start_s"] = server.start()
        out["cold_start_cpu_s"] = cpu_seconds(server.pid)
        mem = proc_status(server.pid)
        out["rss_after_start_mb"] = mem.get("VmRSS")
        client = Client(server.port)
        try:
            _s, health, _t = client.get_json("/health")
        finally:
            client.close()
        out["health_diagnostics"] = health.get("diagnostics")
        # Requests in the first seconds after ready, while serve writes its restart cache
        # in a background thread of the same process.
        out["health_just_after_ready"] = burst(server.port, "/health", AFTER_READY_S)
        out["projection"] = health.get("source", {}).get("projection")
        out["page_count"] = health.get("source", {}).get("page_count")
        out["approved_page_count"] = health.get("source", {}).get("approved_page_count")
        out["cache_written_after_ready_s"] = wait_for_cache(cache_dir, None, server.ready_wall)
        out["cache_mb"] = cache_size_mb(cache_dir)
        mem = proc_status(server.pid)
        out["rss_after_cache_save_mb"] = mem.get("VmRSS")

        # Latency (strict freshness, sequential keep-alive requests).
        out["health"] = timed_requests(server.port, ["/health"], args.requests)
        out["read"] = timed_requests(server.port, read_paths, args.requests)
        mem = proc_status(server.pid)
        out["rss_after_latency_mb"] = mem.get("VmRSS")
        # The graph views are built lazily by the first graph request.
        hood = [f"/graph/neighborhood?seed={quote(i)}&depth=1" for i in read_paths_ids[:200]]
        client = Client(server.port)
        try:
            status, _b, first = client.get(hood[0])
        finally:
            client.close()
        out["neighborhood_first_ms"] = first * 1000 if status == 200 else None
        out["neighborhood"] = timed_requests(server.port, hood, min(args.requests, 500))
        mem = proc_status(server.pid)
        out["rss_after_graph_mb"] = mem.get("VmRSS")
        out["rss_peak_first_run_mb"] = mem.get("VmHWM")

        out["shutdown_s"] = server.stop()
        out["cache_mb_after_shutdown"] = cache_size_mb(cache_dir)

        # Restart with the folder unchanged and the cache just written.
        before = cache_mtime(cache_dir)
        out["restart_s"] = server.start()
        out["restart_cpu_s"] = cpu_seconds(server.pid)
        mem = proc_status(server.pid)
        out["rss_after_restart_mb"] = mem.get("VmRSS")
        # serve rewrites an unchanged cache after a restart; let that finish first.
        out["restart_cache_written_after_ready_s"] = wait_for_cache(
            cache_dir, before, server.ready_wall, 15.0)
        out["health_after_restart"] = timed_requests(server.port, ["/health"],
                                                     min(args.requests, 1000))
        out["edits"] = edit_checks(server.port, root, ids, rng)
        mem = proc_status(server.pid)
        out["rss_after_edits_mb"] = mem.get("VmRSS")
        out["rss_peak_restart_run_mb"] = mem.get("VmHWM")
        server.stop()
    out["other_cpu_busy_during"] = meter.other_busy()
    return out


# -- reporting ----------------------------------------------------------------------------


def _verdict(key: str, value: float | None) -> tuple[str, str]:
    target = TARGETS.get(key)
    if target is None:
        return "", ""
    text, limit = target
    if value is None:
        return text, "n/a"
    return text, "met" if value < limit else "**MISSED**"


def markdown_table(r: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str]] = []

    def add(label: str, value: str, key: str = "", number: float | None = None) -> None:
        target, verdict = _verdict(key, number) if key else ("", "")
        rows.append((label, value, target, verdict))

    add("cold start until /health 200 (empty cache)", f"{r['cold_start_s']:.2f} s",
        "cold_start_s", r["cold_start_s"])
    add("restart, folder unchanged (cache warm)", f"{r['restart_s']:.2f} s", "restart_s",
        r["restart_s"])
    add("server CPU time until ready (incl. workers), cold / restart",
        f"{r['cold_start_cpu_s']:.2f} / {r['restart_cpu_s']:.2f} s")
    h, rd = r["health"], r["read"]
    add("GET /health median", f"{h['median_ms']:.3f} ms", "health_median_ms", h["median_ms"])
    add("GET /health p99", f"{h['p99_ms']:.3f} ms")
    add("GET /read/{id} median", f"{rd['median_ms']:.3f} ms")
    add("GET /read/{id} p99", f"{rd['p99_ms']:.3f} ms")
    nb = r["neighborhood"]
    add("GET /graph/neighborhood depth 1: first / median / p99",
        f"{r['neighborhood_first_ms']:.1f} / {nb['median_ms']:.3f} / {nb['p99_ms']:.3f} ms")
    b = r["health_just_after_ready"]
    add(f"GET /health in the {AFTER_READY_S:.0f} s after ready: median / p99 / max",
        f"{b['median_ms']:.3f} / {b['p99_ms']:.1f} / {b['max_ms']:.1f} ms")
    add("RSS at ready (cold start)", f"{r['rss_after_start_mb']:.0f} MB", "rss_after_start_mb",
        r["rss_after_start_mb"])
    add("RSS after latency runs", f"{r['rss_after_latency_mb']:.0f} MB",
        "rss_after_latency_mb", r["rss_after_latency_mb"])
    add("RSS after first graph requests", f"{r['rss_after_graph_mb']:.0f} MB",
        "rss_after_graph_mb", r["rss_after_graph_mb"])
    add("RSS at ready (restart)", f"{r['rss_after_restart_mb']:.0f} MB", "rss_after_restart_mb",
        r["rss_after_restart_mb"])
    add("peak RSS (VmHWM), cold / restart run",
        f"{r['rss_peak_first_run_mb']:.0f} / {r['rss_peak_restart_run_mb']:.0f} MB")
    for name, e in r["edits"].items():
        fast = e["first_request_ms"] < SLOW_FIRST_REQUEST_MS
        fast = fast and e["health_after_ms"] < SLOW_FIRST_REQUEST_MS
        verdict = "met" if e["visible"] and fast else (
            "**MISSED** (slow)" if e["visible"] else "**MISSED** (not visible)")
        rows.append((f"{name.replace('_', ' ')}: seen by the next request",
                     f"{'yes' if e['visible'] else 'NO'}; that read "
                     f"{e['first_request_ms']:.1f} ms, next read "
                     f"{e['second_request_ms']:.2f} ms, then /health "
                     f"{e['health_after_ms']:.1f} ms",
                     f"yes, each request within {SLOW_FIRST_REQUEST_MS:.0f} ms", verdict))
    lines = [
        f"### {r['pages']:,} pages ({r['md_files']:,} .md files, {r['folder_mb']:.1f} MB)",
        "",
        "| figure | measured | target (for 20,000 pages) | |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    d = r["health_diagnostics"] or {}
    p = r["projection"] or {}
    lines += [
        "",
        f"- CPU used by other processes on the machine: {r['cpu_busy_before'] * 100:.0f} % of "
        f"all cores just before, {r['other_cpu_busy_during'] * 100:.0f} % during this size",
        f"- /health diagnostics: `{json.dumps(d)}`",
        f"- projection: {r['page_count']} pages ({r['approved_page_count']} approved), "
        f"{p.get('graph_node_count')} graph nodes, {p.get('graph_edge_count')} edges",
        f"- restart cache: {r['cache_mb']:.1f} MB, written by a background thread "
        f"{_s(r['cache_written_after_ready_s'])} after ready (cold) and "
        f"{_s(r['restart_cache_written_after_ready_s'])} after ready "
        f"(restart); shutdown took {r['shutdown_s']:.2f} s",
        f"- /health median right after restart: {r['health_after_restart']['median_ms']:.3f} ms; "
        f"mean/max over the main run: {h['mean_ms']:.3f} / {h['max_ms']:.1f} ms",
    ]
    return "\n".join(lines)


def _s(value: float | None) -> str:
    # The file's mtime can precede the first 200 by a few ms: the write starts before the
    # server listens.
    return "never" if value is None else f"{max(0.0, value):.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_serve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[2000, 20000],
                        help="folder sizes to measure (default 2000 20000)")
    parser.add_argument("--requests", type=int, default=2000,
                        help="timed requests per latency run (bounded to 1..20000)")
    parser.add_argument("--seed", type=int, default=7,
                        help="generator seed (default 7; other seeds get their own folder)")
    parser.add_argument("--regenerate", action="store_true",
                        help="regenerate the folders even when present")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="extra argument for `llmwiki-serve serve` (repeatable)")
    parser.add_argument("--code-dir", type=Path, default=None,
                        help="run serve's code from this directory (e.g. a `git archive` of "
                             "a commit) instead of the working tree; the console script and "
                             "venv stay the same")
    parser.add_argument("--wait-quiet", type=float, default=60.0, metavar="SECONDS",
                        help="before each size, wait up to this long for other processes to "
                             "leave the CPUs idle (default 60)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip the import-time and bare-aiohttp baselines")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="dump raw figures as JSON to PATH ('-' or no value: stdout)")
    args = parser.parse_args(argv)
    args.requests = max(1, min(20000, args.requests))
    # SIGTERM unwinds like Ctrl-C, so `finally` blocks kill the server and undo edits.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))

    check_code_dir(parser, args, "serve/cli.py")
    compile_code(args.code_dir)
    report: dict[str, Any] = {"machine": machine(), "code": code_identity(args.code_dir),
                              "sizes": []}
    out = sys.stderr if args.json == "-" else sys.stdout
    work = Path(tempfile.mkdtemp(prefix="llmwiki-bench-"))
    try:
        if not args.no_baselines:
            wait_for_quiet(args.wait_quiet)
            report["baselines"] = {
                "import_floor_s": import_floor_s(args.code_dir),
                "bare_aiohttp_health": bare_aiohttp_health(args.requests),
            }
        for pages in args.pages:
            result = bench_size(pages, args, work)
            report["sizes"].append(result)
            out.write(markdown_table(result) + "\n\n")
            out.flush()
        out.write(code_lines(report))
        if "baselines" in report:
            b = report["baselines"]
            out.write(f"baselines: interpreter + serve imports {b['import_floor_s']:.2f} s; "
                      f"bare aiohttp /health median "
                      f"{b['bare_aiohttp_health']['median_ms']:.3f} ms, "
                      f"p99 {b['bare_aiohttp_health']['p99_ms']:.3f} ms\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
