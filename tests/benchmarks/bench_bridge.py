"""On-demand benchmark of the bridge's fan-out: its overhead over the slowest source, and bounded waves.

    .venv/bin/python -m tests.benchmarks.bench_bridge [--iterations 200] [--json out.json]

It runs the real bridge (`.venv/bin/llmwiki-agent-bridge serve --port 0`) on 127.0.0.1 and fake
`llmwiki-http` Knowledge Sources, each in its own process as real sources would be (in one shared
process, a source's call would wait for the others' HTTP handling): small aiohttp servers answering
`GET /source-bundle`, `POST /query` and `POST /search` with serve's own JSON for
fixtures/sample-wiki (produced once by `llmwiki-serve source-bundle/query/search`), each answer
after a fixed delay. Every fake source records when each call reached its handler and when the
handler answered (CLOCK_MONOTONIC, which is shared by all processes), so the time a source really
spent is known per bridge request. Client requests are sequential, on one keep-alive connection,
with `orchestrationMode: "evidence-only"` and the sources given inline.

1. Overhead: 4 sources with delays spread from --delay-ms to --slowest-delay-ms. For each request
   the overhead is the bridge latency minus the slowest source's own time on that request (how
   long at least one of its handlers was running, over the calls the bridge made to it: bundle,
   query and the search augmentations, sent together). It is split into the time before that
   source's first call, the gaps in its handler time and the time after its last answer. Target:
   < 10 ms median. The floor: the same figures for a bare `aiohttp.ClientSession` making the
   bridge's calls to the same sources, all sent together in the bridge's order (answers
   JSON-decoded), one round after each bridge request so both meet the same machine load (the
   fake sources' and this client's CPU figures include those rounds; the bridge's does not);
   target: the bridge's median < 5 ms above the floor's. For scale, `GET /health` and the bare
   client making one source's calls.
2. Waves: 16 sources, each with delay --wave-delay-ms, bridge fan-out concurrency 4. The wall time
   should be about 4 waves of one source's path, the peak of sources active at once must be
   exactly the concurrency (each with at most its own calls in flight).

`--code-dir` runs the bridge from another directory (e.g. a `git archive` of one commit), and
`--py-spy PATH` profiles the bridge afterwards over as many requests again.

Request counts and the run time are bounded, every wait has a timeout, and both child processes
are killed in `finally`. Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bridge.sources.http_source import augmentation_queries
from tests.benchmarks.harness import (
    HOST,
    Deadline,
    add_run_options,
    check_code_dir,
    code_identity,
    code_lines,
    cpu_seconds,
    install_deadline,
    kill_group,
    log_tail,
    machine,
    percentile,
    wait_for_quiet,
    write_json_report,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_WIKI = REPO / "fixtures" / "sample-wiki"
WORKER_FLAG = "--fake-sources-worker"
READY_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
PAYLOAD_TIMEOUT_S = 120.0
SOURCES = 4
WAVE_SOURCES = 16
HEALTH_FLOOR_REQUESTS = 200
FLOOR_SEQUENCES = 60
OVERHEAD_TARGET_MS = 10.0  # spec/README.md: the overhead's median
ABOVE_FLOOR_TARGET_MS = 5.0  # and its median above a bare aiohttp client's
# Two search augmentations (contract 3.9): "decision" words go last in one variant.
DEFAULT_QUERY = "Which decision did the team record about the release freeze?"
QUERY_LIMIT = 8  # what the bridge asks for (bridge.sources.base.DEFAULT_QUERY_LIMIT)
SEARCH_LIMIT = 4  # and per augmentation search (AUGMENT_LIMIT)


def clock() -> float:
    """CLOCK_MONOTONIC is one clock for every process on the machine: the client's and the fake
    sources' timestamps can be compared directly."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# -- the fake sources (run in their own process) --------------------------------------------


class FakeSources:
    """The fake llmwiki-http sources of one worker process and what they observed."""

    def __init__(self, spec: dict[str, Any], indices: Sequence[int]) -> None:
        self.indices = list(indices)
        self.delays = [float(d) for d in spec["delays_s"]]
        self.bundles = [json.dumps(b).encode() for b in spec["bundles"]]
        self.query = json.dumps(spec["query"]).encode()
        self.searches = {text: json.dumps(body).encode() for text, body in spec["searches"].items()}
        self.default_search = next(iter(self.searches.values()), b'{"results": []}')
        self.records: list[tuple[int, str, float, float]] = []
        self.connections: set[tuple[int, Any]] = set()  # (source, the bridge's address)

    def body_for(self, index: int, endpoint: str, raw: bytes) -> bytes:
        if endpoint == "bundle":
            return self.bundles[index]
        if endpoint == "query":
            return self.query
        text = json.loads(raw).get("query") if raw else None
        return self.searches.get(text if isinstance(text, str) else "", self.default_search)

    async def _answer(self, index: int, endpoint: str, request: web.Request) -> web.Response:
        started = clock()
        self.connections.add((index, request.transport.get_extra_info("peername")
                              if request.transport is not None else None))
        body = self.body_for(index, endpoint, await request.read())
        await asyncio.sleep(self.delays[index])
        self.records.append((index, endpoint, started, clock()))
        return web.Response(body=body, content_type="application/json")

    def source_app(self, index: int) -> web.Application:
        async def bundle(request: web.Request) -> web.Response:
            return await self._answer(index, "bundle", request)

        async def query(request: web.Request) -> web.Response:
            return await self._answer(index, "query", request)

        async def search(request: web.Request) -> web.Response:
            return await self._answer(index, "search", request)

        app = web.Application()
        app.router.add_get("/source-bundle", bundle)
        app.router.add_post("/query", query)
        app.router.add_post("/search", search)
        return app

    def control_app(self) -> web.Application:
        """Read and reset the observations; on its own port, so no source sees these calls."""

        async def records(_request: web.Request) -> web.Response:
            return web.json_response({"records": self.records, "connections": len(self.connections)})

        async def reset(_request: web.Request) -> web.Response:
            self.records = []
            self.connections = set()
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_get("/records", records)
        app.router.add_post("/reset", reset)
        return app


class LeanSource(asyncio.Protocol):
    """One connection to a fake source served without a web framework: it reads a request, answers
    it after the source's delay, and records the same two moments as the aiohttp handler. On a
    2-core machine the fake sources' own HTTP work competes with the bridge for the CPUs; this
    keeps it small (a real deployment's sources run elsewhere)."""

    ROUTES = {(b"GET", b"/source-bundle"): "bundle", (b"POST", b"/query"): "query",
              (b"POST", b"/search"): "search"}

    def __init__(self, fakes: FakeSources, index: int) -> None:
        self.fakes = fakes
        self.index = index
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = transport.get_extra_info("peername")

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].split(b"\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head[1:]
                       if line.lower().startswith(b"content-length:")), 0)
        if len(self.buffer) < end + 4 + length:
            return
        raw, self.buffer = self.buffer[end + 4:end + 4 + length], self.buffer[end + 4 + length:]
        method, path = head[0].split(b" ")[:2]
        endpoint = self.ROUTES.get((method, path))
        started = clock()
        self.fakes.connections.add((self.index, self.peer))  # per call, as the aiohttp handler does
        if endpoint is None:
            self._send(b"404 Not Found", b"{}")
            return
        body = self.fakes.body_for(self.index, endpoint, raw)

        def answer() -> None:
            self.fakes.records.append((self.index, endpoint, started, clock()))
            self._send(b"200 OK", body)

        asyncio.get_running_loop().call_later(self.fakes.delays[self.index], answer)

    def _send(self, status: bytes, body: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _listen_lean(fakes: FakeSources, index: int, servers: list[asyncio.Server]) -> int:
    server = await asyncio.get_running_loop().create_server(lambda: LeanSource(fakes, index), HOST, 0)
    servers.append(server)
    return int(server.sockets[0].getsockname()[1])


async def _listen(app: web.Application, runners: list[web.AppRunner]) -> int:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    runners.append(runner)
    await web.TCPSite(runner, HOST, 0).start()
    return int(next(a for a in runner.addresses if isinstance(a, tuple))[1])


async def run_fake_sources(spec_path: str, indices: Sequence[int]) -> None:
    """Worker entry point: listen for the sources `indices` of the spec, print their ports as one
    JSON line, serve until SIGTERM or the spec's time limit."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    fakes = FakeSources(spec, indices)
    runners: list[web.AppRunner] = []
    servers: list[asyncio.Server] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        if spec.get("server") == "lean":
            ports = [await _listen_lean(fakes, i, servers) for i in fakes.indices]
        else:
            ports = [await _listen(fakes.source_app(i), runners) for i in fakes.indices]
        control = await _listen(fakes.control_app(), runners)
        sys.stdout.write(json.dumps({"ports": ports, "control": control}) + "\n")
        sys.stdout.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), float(spec["max_seconds"]))
    finally:
        for server in servers:
            server.close()
        for runner in runners:
            await runner.cleanup()


# -- child processes ------------------------------------------------------------------------


@dataclass
class Child:
    """A child process that prints one JSON line when ready; killed with its process group."""

    name: str
    cmd: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: Path = REPO
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> dict[str, Any]:
        self.spawn()
        return self.ready()

    def spawn(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log, env=self.env, cwd=self.cwd,
                                         start_new_session=True)
        finally:
            log.close()

    def ready(self) -> dict[str, Any]:
        """The child's first JSON line."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = clock() + READY_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            remaining = deadline - clock()
            if remaining <= 0:
                raise TimeoutError(f"{self.name} not ready after {READY_TIMEOUT_S} s")
            readable, _w, _x = select.select([self.proc.stdout], [], [], min(remaining, 0.5))
            if not readable:
                continue
            line = self.proc.stdout.readline()
            if not line:
                continue
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    return event

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        kill_group(self.proc)
        self.proc = None

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines)


def bridge_command() -> list[str]:
    script = REPO / ".venv" / "bin" / "llmwiki-agent-bridge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bridge.cli"]


def serve_command() -> list[str]:
    script = REPO / ".venv" / "bin" / "llmwiki-serve"
    return [str(script)] if script.exists() else [sys.executable, "-m", "serve.cli"]


def code_env(code_dir: Path | None) -> dict[str, str]:
    """The environment for a child running the project's code, from `code_dir` when given (first
    on PYTHONPATH, before the editable install)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    if code_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_dir), env.get("PYTHONPATH", "")) if p)
    return env


def bridge_child(work: Path, concurrency: int, code_dir: Path | None) -> Child:
    env = code_env(code_dir)
    env["XDG_CONFIG_HOME"] = str(work / "xdg")
    cmd = [*bridge_command(), "serve", "--host", HOST, "--port", "0", "--log-level", "warning",
           "--fanout-concurrency", str(concurrency), "--config", str(work / "bridge-settings.json")]
    return Child("bridge", cmd, work / "bridge.log", env, code_dir or REPO)


def serve_json(code_dir: Path | None, *args: str) -> Any:
    """One answer of serve's CLI for the sample wiki (the same JSON its HTTP routes return)."""
    done = subprocess.run([*serve_command(), *args], capture_output=True, cwd=code_dir or REPO,
                          env=code_env(code_dir), timeout=PAYLOAD_TIMEOUT_S, check=True)
    return json.loads(done.stdout)


def source_payloads(query: str, count: int, code_dir: Path | None) -> dict[str, Any]:
    """Serve-shaped answers: one bundle per source (own ids), the query's context pack, and the
    search results for each augmentation the bridge will send."""
    root = str(SAMPLE_WIKI)
    bundle = serve_json(code_dir, "source-bundle", root)
    bundles = []
    for index in range(count):
        own = f"bench-source-{index}"
        bundles.append({**bundle, "source_id": own, "public_uri": f"llmwiki://{own}",
                        "bundle_id": f"{own}:{bundle.get('bundle_id', '')}"})
    searches = {text: serve_json(code_dir, "search", root, text, "--limit", str(SEARCH_LIMIT))
                for text in augmentation_queries(query)}
    context = serve_json(code_dir, "query", root, query, "--limit", str(QUERY_LIMIT))
    return {"bundles": bundles, "query": context, "searches": searches}


# -- the client -----------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection; times each exchange on CLOCK_MONOTONIC."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, float, float]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        started = clock()
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, data, started, clock()

    def close(self) -> None:
        self.conn.close()


class Control:
    """The fake sources' observations, read over their workers' control ports."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.clients = [Client(port) for port in ports]

    def reset(self) -> None:
        for client in self.clients:
            status, _b, _s, _f = client.call("POST", "/reset", b"{}")
            if status != 200:
                raise RuntimeError(f"fake sources reset answered {status}")

    def read(self) -> tuple[list[tuple[int, str, float, float]], int, int]:
        """Calls (source, endpoint, handler start, handler end), the peak of calls in flight and the
        number of connections the calls came on, since the last reset."""
        records: list[tuple[int, str, float, float]] = []
        connections = 0
        for client in self.clients:
            status, data, _s, _f = client.call("GET", "/records")
            if status != 200:
                raise RuntimeError(f"fake sources records answered {status}")
            body = json.loads(data)
            records += [(int(r[0]), str(r[1]), float(r[2]), float(r[3])) for r in body["records"]]
            connections += int(body["connections"])
        return records, peak_in_flight(records), connections

    def close(self) -> None:
        for client in self.clients:
            client.close()


def peak_in_flight(records: Sequence[tuple[int, str, float, float]]) -> int:
    """Most calls inside a source handler at the same moment, over all sources."""
    events = sorted([(r[2], 1) for r in records] + [(r[3], -1) for r in records])
    active = peak = 0
    for _moment, change in events:
        active += change
        peak = max(peak, active)
    return peak


def message_body(query: str, ports: Sequence[int]) -> bytes:
    sources = [{"id": f"bench-{i}", "name": f"Bench Source {i}", "protocol": "llmwiki-http",
                "status": "ready", "url": f"http://{HOST}:{port}"} for i, port in enumerate(ports)]
    return json.dumps({"message": {"role": "user", "parts": [{"kind": "text", "text": query}]},
                       "orchestrationMode": "evidence-only", "knowledgeSources": sources}).encode()


def check_answer(status: int, data: bytes, sources: int) -> None:
    """Every source must have answered: a failed source would make the figures meaningless."""
    if status != 200:
        raise RuntimeError(f"POST /message:send answered {status}: {data[:300]!r}")
    result = json.loads(data)["artifacts"][0]["parts"][0]["data"]
    failed = [s["id"] for s in result["steps"] if s.get("status") == "error"]
    if failed or result["diagnostics"]:
        raise RuntimeError(f"source calls failed: steps {failed}, diagnostics {result['diagnostics']}")
    # The fake sources serve the same pages: since issue 29 each page is one citation naming the
    # other sources in alsoIn.
    cited = {c["id"].split(":", 1)[0] for c in result["citations"]}
    cited |= {a["sourceId"] for c in result["citations"] for a in c.get("alsoIn", [])}
    if len(cited) != sources:
        raise RuntimeError(f"citations from {len(cited)} of {sources} sources")


class CpuMeter:
    """CPU of the bridge, of the fake sources, of this client and of everything else."""

    def __init__(self, bridge_pid: int, sources_pids: Sequence[int]) -> None:
        self.bridge_pid = bridge_pid
        self.sources_pids = list(sources_pids)
        self.start = self._sample()

    def _sample(self) -> tuple[float, float, float, float, float]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        me = resource.getrusage(resource.RUSAGE_SELF)
        return (sum(values) / tick, (sum(values) - idle) / tick, me.ru_utime + me.ru_stime,
                cpu_seconds(self.bridge_pid) or 0.0,
                sum(cpu_seconds(pid) or 0.0 for pid in self.sources_pids))

    def read(self) -> dict[str, float]:
        end = self._sample()
        total, busy, own, bridge, fakes = (b - a for a, b in zip(self.start, end, strict=True))
        return {"bridge_cpu_s": bridge, "sources_cpu_s": fakes, "client_cpu_s": own,
                "other_busy": max(0.0, busy - bridge - fakes - own) / max(1e-9, total),
                "loadavg_1m": os.getloadavg()[0]}


# -- analysis -------------------------------------------------------------------------------


def summarize(samples_s: Sequence[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples_s)
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "median_ms": statistics.median(ordered),
            "p95_ms": percentile(ordered, 95), "p99_ms": percentile(ordered, 99),
            "mean_ms": statistics.fmean(ordered), "min_ms": ordered[0], "max_ms": ordered[-1]}


@dataclass
class SourcePath:
    """What one source spent on one bridge request."""

    calls: int
    busy: float  # how long at least one of its handlers was running (calls may overlap)
    first: float  # when its first call reached the handler
    last: float  # when its last handler answered


def _union(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def source_paths(records: Sequence[tuple[int, str, float, float]], started: float,
                 finished: float) -> dict[int, SourcePath]:
    spans: dict[int, list[tuple[float, float]]] = {}
    for index, _endpoint, begin, end in records:
        if started <= begin <= finished:
            spans.setdefault(index, []).append((begin, end))
    return {index: SourcePath(len(calls), _union(calls), min(b for b, _ in calls), max(e for _, e in calls))
            for index, calls in spans.items()}


def overhead_breakdown(paths: dict[int, SourcePath], started: float, finished: float) -> dict[str, float]:
    """latency = lead + slowest.busy + gaps + tail, for the source with the most own time."""
    slowest = max(paths.values(), key=lambda p: p.busy)
    latency = finished - started
    gaps = (slowest.last - slowest.first) - slowest.busy
    firsts = [p.first for p in paths.values()]
    return {"latency": latency, "slowest_busy": slowest.busy, "overhead": latency - slowest.busy,
            "lead": slowest.first - started, "gaps": gaps, "tail": finished - slowest.last,
            "gap_per_call": gaps / max(1, slowest.calls - 1),
            "first_call_spread": max(firsts) - min(firsts), "slowest_calls": slowest.calls}


def peak_active(paths: dict[int, SourcePath]) -> int:
    """Most sources between their first call and last answer at the same moment."""
    events = sorted([(p.first, 1) for p in paths.values()] + [(p.last, -1) for p in paths.values()])
    active = peak = 0
    for _moment, change in events:
        active += change
        peak = max(peak, active)
    return peak


def start_waves(paths: dict[int, SourcePath], gap: float) -> list[int]:
    """Sources grouped by when their first call came: a new wave starts after a pause of `gap`."""
    firsts = sorted(p.first for p in paths.values())
    waves: list[int] = []
    previous = -math.inf
    for moment in firsts:
        if moment - previous > gap:
            waves.append(0)
        waves[-1] += 1
        previous = moment
    return waves


# -- the two measurements -------------------------------------------------------------------


def health_floor(client: Client, count: int) -> dict[str, float]:
    """GET /health on the bridge: the cost of one client exchange with it, no source involved."""
    samples = []
    for _ in range(count):
        status, _d, started, finished = client.call("GET", "/health")
        if status != 200:
            raise RuntimeError(f"GET /health answered {status}")
        samples.append(finished - started)
    return summarize(samples)


async def _bare_call(session: aiohttp.ClientSession, method: str, url: str, body: Any) -> None:
    async with session.request(method, url, json=body) as response:
        json.loads(await response.read())


def _bare_calls(session: aiohttp.ClientSession, ports: Sequence[int], query: str) -> list[Any]:
    """The bridge's calls to the sources on `ports`, in the order it sends them: each source's
    query and bundle, then every source's searches."""
    bases = [f"http://{HOST}:{port}" for port in ports]
    searches = augmentation_queries(query)
    first = [call for base in bases for call in (
        _bare_call(session, "POST", f"{base}/query", {"query": query, "limit": QUERY_LIMIT}),
        _bare_call(session, "GET", f"{base}/source-bundle", None))]
    return first + [_bare_call(session, "POST", f"{base}/search", {"query": text, "limit": SEARCH_LIMIT})
                    for base in bases for text in searches]


async def _bare_sequences(ports: Sequence[int], query: str, count: int,
                          deadline: float) -> list[tuple[float, float]]:
    """The bridge's source calls from a bare aiohttp client, all sent together, each answer read
    and JSON-decoded. Returns when each round began and ended."""
    exchanges = []
    async with aiohttp.ClientSession() as session:
        for _ in range(count):
            if clock() > deadline:
                break
            started = clock()
            await asyncio.gather(*_bare_calls(session, ports, query))
            exchanges.append((started, clock()))
    return exchanges


class BareClient:
    """A bare aiohttp client kept open between rounds (its own event loop), so its rounds can
    alternate with the bridge's requests and meet the same machine load."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session = self.loop.run_until_complete(self._open())

    @staticmethod
    async def _open() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    def round(self, ports: Sequence[int], query: str) -> tuple[float, float]:
        """The bridge's calls to `ports` (see `_bare_calls`), sent together; when it began and ended."""
        started = clock()
        self.loop.run_until_complete(self._round(ports, query))
        return started, clock()

    async def _round(self, ports: Sequence[int], query: str) -> None:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            await asyncio.gather(*_bare_calls(self.session, ports, query))

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.close()


def bare_client_floor(ports: Sequence[int], control: Control, query: str, count: int,
                      deadline: float) -> dict[str, Any]:
    """The same overhead figures for a bare aiohttp client making the calls of `ports` (their
    slowest source's time taken out, as for the bridge): what any client pays on this machine
    for them (wake-ups, HTTP, JSON)."""
    asyncio.run(_bare_sequences(ports, query, 3, deadline))  # connect and warm up
    control.reset()
    exchanges = asyncio.run(_bare_sequences(ports, query, count, deadline))
    records = control.read()[0]
    rows = [overhead_breakdown(source_paths(records, started, finished), started, finished)
            for started, finished in exchanges]
    return {key: summarize([row[key] for row in rows])
            for key in ("latency", "slowest_busy", "overhead", "lead", "gaps", "tail", "gap_per_call")}


def bench_overhead(args: argparse.Namespace, client: Client, control: Control, ports: Sequence[int],
                   pids: tuple[int, list[int]], deadline: float) -> dict[str, Any]:
    """The bridge's requests, each followed by one round of the bare client's floor (the same
    calls to the same sources): the two meet the same load, so a shared machine moves both."""
    body = message_body(args.query, ports)
    control.reset()
    for _ in range(args.warmup):
        status, data, _s, _f = client.call("POST", "/message:send", body)
        check_answer(status, data, len(ports))
    connections = control.read()[2]  # the bridge's alone: the floor's client opens its own
    bare = BareClient()
    try:
        for _ in range(3):
            bare.round(ports, args.query)  # connect and warm up
        out: dict[str, Any] = {"sources": len(ports), "fake_server": args.fake_server,
                               "delays_ms": [d * 1000 for d in args.delays_s[:len(ports)]],
                               "cpu_busy_before": wait_for_quiet(args.wait_quiet),
                               "loadavg_before": os.getloadavg(), "connections": connections}
        control.reset()
        meter = CpuMeter(*pids)
        exchanges: list[tuple[float, float]] = []
        floor_exchanges: list[tuple[float, float]] = []
        for _ in range(args.iterations):
            if clock() > deadline:
                out["stopped_by_deadline"] = True
                break
            status, data, started, finished = client.call("POST", "/message:send", body)
            exchanges.append((started, finished))
            check_answer(status, data, len(ports))
            floor_exchanges.append(bare.round(ports, args.query))
        out["cpu"] = meter.read()
    finally:
        bare.close()
    records = control.read()[0]
    rows = []
    calls_seen: set[int] = set()
    for started, finished in exchanges:
        paths = source_paths(records, started, finished)
        if len(paths) != len(ports):
            raise RuntimeError(f"a request reached {len(paths)} of {len(ports)} sources")
        calls_seen |= {p.calls for p in paths.values()}
        rows.append(overhead_breakdown(paths, started, finished))
    if not rows:
        raise Deadline("no request was timed before --max-seconds")
    floor_rows = [overhead_breakdown(source_paths(records, started, finished), started, finished)
                  for started, finished in floor_exchanges]
    out["calls_per_source"] = sorted(calls_seen)
    for key in ("latency", "slowest_busy", "overhead", "lead", "gaps", "tail", "gap_per_call",
                "first_call_spread"):
        out[key] = summarize([row[key] for row in rows])
    out["bare_client"] = {key: summarize([row[key] for row in floor_rows])
                          for key in ("latency", "slowest_busy", "overhead", "lead", "gaps", "tail",
                                      "gap_per_call")}
    out["above_floor_paired"] = summarize([row["overhead"] - floor["overhead"]
                                           for row, floor in zip(rows, floor_rows, strict=True)])
    out["bridge_cpu_per_request_ms"] = out["cpu"]["bridge_cpu_s"] * 1000 / max(1, len(rows))
    return out


def bench_waves(args: argparse.Namespace, client: Client, control: Control, ports: Sequence[int],
                pids: tuple[int, list[int]], deadline: float) -> dict[str, Any]:
    body = message_body(args.query, ports)
    status, data, _s, _f = client.call("POST", "/message:send", body)  # opens every connection
    check_answer(status, data, len(ports))
    out: dict[str, Any] = {"sources": len(ports), "concurrency": args.concurrency,
                           "delay_ms": args.wave_delay_s * 1000,
                           "cpu_busy_before": wait_for_quiet(args.wait_quiet),
                           "loadavg_before": os.getloadavg()}
    meter = CpuMeter(*pids)
    runs = []
    expected_waves = math.ceil(len(ports) / args.concurrency)
    for _ in range(args.wave_iterations):
        if clock() > deadline:
            out["stopped_by_deadline"] = True
            break
        control.reset()
        status, data, started, finished = client.call("POST", "/message:send", body)
        check_answer(status, data, len(ports))
        records, in_flight, connections = control.read()
        paths = source_paths(records, started, finished)
        busy = statistics.median(p.busy for p in paths.values())
        span = statistics.median(p.last - p.first for p in paths.values())
        runs.append({"wall_ms": (finished - started) * 1000, "source_busy_ms": busy * 1000,
                     "source_span_ms": span * 1000,
                     "expected_ms": expected_waves * busy * 1000,
                     "ratio": (finished - started) / (expected_waves * busy),
                     "span_ratio": (finished - started) / (expected_waves * span),
                     "peak_in_flight": in_flight, "peak_active_sources": peak_active(paths),
                     "connections": connections,
                     "waves": start_waves(paths, busy / 2),
                     "calls_per_source": sorted({p.calls for p in paths.values()})})
    out["cpu"] = meter.read()
    out["runs"] = runs
    out["expected_waves"] = expected_waves
    if runs:
        for key in ("wall_ms", "source_busy_ms", "source_span_ms", "expected_ms", "ratio", "span_ratio"):
            out[key] = statistics.median(r[key] for r in runs)
        out["peak_in_flight"] = [min(r["peak_in_flight"] for r in runs),
                                 max(r["peak_in_flight"] for r in runs)]
        out["peak_active_sources"] = [min(r["peak_active_sources"] for r in runs),
                                      max(r["peak_active_sources"] for r in runs)]
        out["connections"] = [min(r["connections"] for r in runs), max(r["connections"] for r in runs)]
        # At most `concurrency` sources at once; each may have all its calls in flight together.
        out["bounded"] = all(r["peak_active_sources"] == args.concurrency
                             and r["peak_in_flight"] <= args.concurrency * max(r["calls_per_source"])
                             for r in runs)
        out["in_waves"] = all(r["waves"] == [args.concurrency] * expected_waves for r in runs)
    return out


def profile_bridge(args: argparse.Namespace, client: Client, ports: Sequence[int], pid: int,
                   work: Path, deadline: float) -> dict[str, Any]:
    """py-spy on the bridge while it answers the overhead requests once more (the timed figures
    were taken without it). py-spy pauses the bridge for each sample."""
    spy = REPO / ".venv" / "bin" / "py-spy"
    cmd = [str(spy) if spy.exists() else "py-spy", "record", "--pid", str(pid), "--rate", "250",
           "--format", "raw", "--output", str(args.py_spy)]
    log = open(work / "py-spy.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        spy_proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
    finally:
        log.close()
    body = message_body(args.query, ports)
    count = 0
    started = clock()
    try:
        time.sleep(1.0)  # let py-spy attach
        for _ in range(args.iterations):
            if clock() > deadline or spy_proc.poll() is not None:
                break
            status, data, _s, _f = client.call("POST", "/message:send", body)
            check_answer(status, data, len(ports))
            count += 1
    finally:
        spy_proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy_proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy_proc.kill()
            spy_proc.wait(timeout=10)
    out: dict[str, Any] = {"output": str(args.py_spy), "requests": count, "seconds": clock() - started,
                           "returncode": spy_proc.returncode,
                           "log": (work / "py-spy.log").read_text(errors="replace")[-2000:]}
    if args.py_spy.is_file():
        out["top"] = profile_summary(args.py_spy)
    return out


def profile_summary(path: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive shares per function from py-spy's raw (collapsed stacks) output. Samples
    in the event loop's `select` (waiting for the sources) are counted apart: py-spy does not
    always see that wait as idle."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = waiting = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _sep, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        count = int(number)
        frames = [_function(f) for f in stack.split(";")]
        if frames[-1].startswith("EpollSelector.select "):
            waiting += count
            continue
        total += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def ranked(table: dict[str, int]) -> list[tuple[str, float]]:
        best = sorted(table.items(), key=lambda item: -item[1])[:top]
        return [(name, round(100 * n / max(1, total), 1)) for name, n in best]

    # The event loop's own frames are in (almost) every sample: leave them out of the inclusive list.
    scaffold = {name for name, n in inclusive.items() if n >= 0.95 * total}
    return {"samples": total, "waiting_samples": waiting, "self_percent": ranked(own),
            "inclusive_percent": ranked({k: v for k, v in inclusive.items() if k not in scaffold})}


def _function(frame: str) -> str:
    """`name (path/file.py:123)` without the line number and with the path shortened."""
    name, _sep, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", f"{REPO}/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where})" if where else name


# -- reporting ------------------------------------------------------------------------------


def _lat(s: dict[str, float]) -> str:
    return f"{s['median_ms']:.2f} / {s['p95_ms']:.2f} / {s['p99_ms']:.2f} ms"


def _medians(floor: dict[str, Any]) -> str:
    return " / ".join(f"{floor[k]['median_ms']:.2f}" for k in ("lead", "gap_per_call", "tail")) + " ms"


def overhead_table(r: dict[str, Any]) -> str:
    over = r["overhead"]
    verdict = "met" if over["median_ms"] < OVERHEAD_TARGET_MS else "**MISSED**"
    above = over["median_ms"] - r["bare_client"]["overhead"]["median_ms"]
    delays = ", ".join(f"{d:.3g}" for d in r["delays_ms"])
    rows = [
        ("`POST /message:send` latency: median / p95 / p99", _lat(r["latency"]), "", ""),
        ("slowest source's own time on that request (sum of its handler times)", _lat(r["slowest_busy"]),
         "", ""),
        ("**overhead** = latency − slowest source's own time", _lat(over),
         f"median < {OVERHEAD_TARGET_MS:g} ms", verdict),
        ("… before the slowest source's first call", _lat(r["lead"]), "", ""),
        (f"… between its {max(r['calls_per_source']) - 1} later calls (sum)", _lat(r["gaps"]), "", ""),
        ("… per gap between two calls", _lat(r["gap_per_call"]), "", ""),
        ("… after its last answer", _lat(r["tail"]), "", ""),
        ("spread of the sources' first calls", _lat(r["first_call_spread"]), "", ""),
        ("bridge CPU per request", f"{r['bridge_cpu_per_request_ms']:.2f} ms", "", ""),
        ("connections the sources saw during the warm-up requests", str(r["connections"]),
         f"{r['sources'] * max(r['calls_per_source'])} (one per concurrent call, kept alive)", ""),
        ("`GET /health` on the bridge (one client exchange, the floor)", _lat(r["health_floor"]), "", ""),
        (f"floor: a bare aiohttp client making the same {r['sources'] * max(r['calls_per_source'])} "
         "calls together, one round after each request: overhead", _lat(r["bare_client"]["overhead"]),
         "", ""),
        ("… before the slowest source's first call / per gap / after its last answer (medians)",
         _medians(r["bare_client"]), "", ""),
        ("for scale: the bare client making one source's calls: overhead",
         _lat(r["bare_one_source"]["overhead"]), "", ""),
        ("… before its first call / per gap / after its last answer (medians)",
         _medians(r["bare_one_source"]), "", ""),
        ("**bridge overhead above that floor** (medians)", f"{above:.2f} ms",
         f"< {ABOVE_FLOOR_TARGET_MS:g} ms", "met" if above < ABOVE_FLOOR_TARGET_MS else "**MISSED**"),
        ("… per request, bridge minus the floor round right after it", _lat(r["above_floor_paired"]),
         "", ""),
    ]
    heading = (f"### Overhead over the slowest of {r['sources']} sources ({r['latency']['count']} sequential "
               f"requests; source delays {delays} ms per call; calls per source: "
               f"{', '.join(map(str, r['calls_per_source']))}; fake sources: {r['fake_server']})")
    return _table(heading, ("median / p95 / p99", "target"), rows, r)


def waves_table(r: dict[str, Any]) -> str:
    if not r["runs"]:
        return "### Waves: no run (deadline)"
    c, waves = r["concurrency"], r["expected_waves"]
    seen = sorted({tuple(x["waves"]) for x in r["runs"]})
    calls = max((n for x in r['runs'] for n in x['calls_per_source']), default=1)
    rows = [
        ("wall time (median)", f"{r['wall_ms']:.1f} ms", "", ""),
        (f"{waves} × one source's own time (median {r['source_busy_ms']:.1f} ms)",
         f"{r['expected_ms']:.1f} ms; wall / this = {r['ratio']:.3f}", "≈ 1", ""),
        (f"{waves} × one source's path, first call to last answer (median {r['source_span_ms']:.1f} ms)",
         f"{waves * r['source_span_ms']:.1f} ms; wall / this = {r['span_ratio']:.3f}", "≈ 1", ""),
        ("peak requests in flight at the sources (min..max over runs)",
         f"{r['peak_in_flight'][0]}..{r['peak_in_flight'][1]}", f"≤ {c} × {calls} (calls per source)",
         "met" if r["bounded"] else "**MISSED**"),
        ("peak sources active at once", f"{r['peak_active_sources'][0]}..{r['peak_active_sources'][1]}",
         f"= {c}", "met" if r["bounded"] else "**MISSED**"),
        ("connections the sources saw per request (min..max)",
         f"{r['connections'][0]}..{r['connections'][1]}",
         f"{r['sources'] * calls} (one per concurrent call, kept alive)", ""),
        ("sources per start wave", "; ".join(" ".join(map(str, w)) for w in seen),
         " ".join([str(c)] * waves), "met" if r["in_waves"] else "**MISSED**"),
    ]
    heading = (f"### {r['sources']} sources, concurrency {c} ({len(r['runs'])} runs; "
               f"delay {r['delay_ms']:g} ms per call; calls per source: "
               f"{', '.join(map(str, sorted({n for x in r['runs'] for n in x['calls_per_source']})))})")
    return _table(heading, ("measured", "expected"), rows, r)


def _table(heading: str, columns: tuple[str, str], rows: Sequence[tuple[str, str, str, str]],
           r: dict[str, Any]) -> str:
    """A part's Markdown: heading, the four-column table, and the machine-load line."""
    lines = [heading, "", f"| figure | {columns[0]} | {columns[1]} | |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", _load_line(r)]
    return "\n".join(lines)


def profile_text(p: dict[str, Any]) -> str:
    if "top" not in p:
        return f"### py-spy: no profile (exit {p['returncode']}): {p['log'][-500:]}"
    top = p["top"]
    lines = [f"### py-spy on the bridge: {top['samples']} busy samples over {p['requests']} requests, "
             f"{top['waiting_samples']} more in `select` ({p['output']})", "",
             "| self % | function | | inclusive % | function |",
             "| --- | --- | --- | --- | --- |"]
    for (own_name, own), (inc_name, inc) in zip(top["self_percent"], top["inclusive_percent"],
                                                strict=False):
        lines.append(f"| {own} | `{own_name}` | | {inc} | `{inc_name}` |")
    return "\n".join(lines)


def _load_line(r: dict[str, Any]) -> str:
    cpu = r["cpu"]
    return (f"- load average before / after: {r['loadavg_before'][0]:.2f} / {cpu['loadavg_1m']:.2f}; "
            f"other processes used {cpu['other_busy'] * 100:.0f} % of all cores during the runs "
            f"({r['cpu_busy_before'] * 100:.0f} % just before); CPU used: "
            f"bridge {cpu['bridge_cpu_s']:.2f} s, fake sources {cpu['sources_cpu_s']:.2f} s, "
            f"client {cpu['client_cpu_s']:.2f} s")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [WORKER_FLAG] and len(argv) == 3:
        asyncio.run(run_fake_sources(argv[1], [int(i) for i in argv[2].split(",")]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_bridge",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200,
                        help="timed sequential requests for the overhead (default 200, at most 5000)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first (default 20)")
    parser.add_argument("--delay-ms", type=float, default=20.0,
                        help="delay of the fastest of the 4 sources, per call (default 20)")
    parser.add_argument("--slowest-delay-ms", type=float, default=40.0,
                        help="delay of the slowest of the 4 sources, per call (default 40); the "
                             "others are spread evenly in between")
    parser.add_argument("--wave-sources", type=int, default=WAVE_SOURCES,
                        help="sources in the waves run (default 16)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="the bridge's --fanout-concurrency (default 4)")
    parser.add_argument("--wave-delay-ms", type=float, default=20.0,
                        help="delay of each source in the waves run, per call (default 20)")
    parser.add_argument("--wave-iterations", type=int, default=10,
                        help="requests in the waves run (default 10, at most 200)")
    parser.add_argument("--fake-server", choices=("lean", "aiohttp"), default="lean",
                        help="how the fake sources serve HTTP: lean (default; a small asyncio protocol, so "
                             "their CPU competes little with the bridge's) or aiohttp (web handlers)")
    parser.add_argument("--query", default=DEFAULT_QUERY,
                        help="the question (default: one that makes the bridge send two searches)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="PATH",
                        help="afterwards, profile the bridge with py-spy (raw collapsed stacks to PATH) "
                             "over --iterations more overhead requests, and print the top functions")
    add_run_options(parser, code_help="run the bridge (and serve's CLI for the payloads) from this "
                    "directory, e.g. a `git archive` of one commit, instead of the working tree",
                    max_seconds=600.0, max_seconds_help="time limit for the measurements (default "
                    "600); loops stop early, and the run is aborted 60 s after it")
    args = parser.parse_args(argv)
    args.iterations = max(1, min(5000, args.iterations))
    args.warmup = max(1, min(1000, args.warmup))
    args.wave_iterations = max(1, min(200, args.wave_iterations))
    args.wave_sources = max(1, min(64, args.wave_sources))
    args.concurrency = max(1, min(64, args.concurrency))
    args.max_seconds = max(10.0, min(7200.0, args.max_seconds))
    for name in ("delay_ms", "slowest_delay_ms", "wave_delay_ms"):
        if not 0 <= getattr(args, name) <= 5000:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 5000")
    if args.slowest_delay_ms < args.delay_ms:
        parser.error("--slowest-delay-ms must not be below --delay-ms")
    step = (args.slowest_delay_ms - args.delay_ms) / max(1, SOURCES - 1)
    args.delays_s = [(args.delay_ms + i * step) / 1000 for i in range(SOURCES)]
    args.wave_delay_s = args.wave_delay_ms / 1000
    check_code_dir(parser, args, "bridge/cli.py")
    if args.py_spy is not None:
        args.py_spy = args.py_spy.resolve()

    install_deadline(args.max_seconds + 60, f"run exceeded --max-seconds {args.max_seconds:g} by 60 s")

    report: dict[str, Any] = {"machine": machine(),
                              "code": code_identity(args.code_dir, ("bridge", "common")),
                              "command": " ".join(["python -m tests.benchmarks.bench_bridge", *argv])}
    out = sys.stderr if args.json == "-" else sys.stdout
    work = Path(tempfile.mkdtemp(prefix="llmwiki-bench-bridge-"))
    fakes: list[Child] = []
    bridge: Child | None = None
    clients: list[Client | Control] = []
    try:
        payloads = source_payloads(args.query, SOURCES + args.wave_sources + 1, args.code_dir)
        report["payload_bytes"] = {"source_bundle": len(json.dumps(payloads["bundles"][0])),
                                   "query": len(json.dumps(payloads["query"])),
                                   "search": [len(json.dumps(s)) for s in payloads["searches"].values()]}
        # The last source, with the slowest delay, is for the bare-client floor.
        spec = {**payloads, "server": args.fake_server,
                "delays_s": args.delays_s + [args.wave_delay_s] * args.wave_sources + [args.delays_s[-1]],
                "max_seconds": args.max_seconds + 120}
        spec_path = work / "fake-sources.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        worker = [sys.executable, "-m", "tests.benchmarks.bench_bridge", WORKER_FLAG, str(spec_path)]
        fakes = [Child(f"fake source {i}", [*worker, str(i)], work / "fake-sources.log")
                 for i in range(len(spec["delays_s"]))]
        for fake in fakes:  # they start together, then each is waited for
            fake.spawn()
        listening = [fake.ready() for fake in fakes]
        ports = [int(p) for answer in listening for p in answer["ports"]]
        bridge = bridge_child(work, args.concurrency, args.code_dir)
        ready = bridge.start()
        port = int(str(ready["url"]).rsplit(":", 1)[1])
        client, control = Client(port), Control([int(answer["control"]) for answer in listening])
        clients += [client, control]
        pids = (bridge.pid, [fake.pid for fake in fakes])
        deadline = clock() + args.max_seconds

        overhead = bench_overhead(args, client, control, ports[:SOURCES], pids, deadline)
        overhead["health_floor"] = health_floor(client, HEALTH_FLOOR_REQUESTS)
        # For scale: a bare client making one source's calls alone (the last source, with the
        # slowest delay); the floor of the same 16 calls was measured alongside the bridge.
        overhead["bare_one_source"] = bare_client_floor(ports[-1:], control, args.query,
                                                        FLOOR_SEQUENCES, deadline)
        report["overhead"] = overhead
        out.write(overhead_table(overhead) + "\n\n")
        out.flush()
        waves = bench_waves(args, client, control, ports[SOURCES:-1], pids, deadline)
        report["waves"] = waves
        out.write(waves_table(waves) + "\n\n")
        if args.py_spy is not None:
            report["profile"] = profile = profile_bridge(args, client, ports[:SOURCES], bridge.pid, work,
                                                         deadline)
            out.write(profile_text(profile) + "\n\n")
        out.write(code_lines(report))
        out.flush()
    finally:
        signal.alarm(0)
        for open_client in clients:
            open_client.close()
        for child in (bridge, *fakes):
            if child is not None:
                child.kill()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
