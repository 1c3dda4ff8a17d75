"""On-demand benchmark of POST /query and POST /search against issue 3's speed targets.

    .venv/bin/python -m tests.benchmarks.bench_query --pages 20000 [--requests N]
        [--json out.json] [--wait-quiet [SECONDS]] [--code-dir DIR]

For each size it uses the generated wiki in tests/benchmarks/.generated/<n> (generated
first when absent, as bench_serve does), copies it into a private temp dir (the edits below
then never touch a folder another benchmark may be reading), runs the real console script
(`.venv/bin/llmwiki-serve serve DIR --port P --cache-dir <tmp>`) on 127.0.0.1 with strict
freshness (the default, inotify) and measures:

1. search readiness: the server builds its search index and graph views in a background
   thread after /health first answers 200; how long after that the first POST /search
   (and the first POST /query) answers 200, and how slow GET /health is meanwhile;
2. sequential latency of POST /query and POST /search over one keep-alive aiohttp session
   (median, p90, p99, max), with a varied, deterministic query set drawn from the folder's
   titles, headings, code identifiers, issue keys, versions and Korean text, plus natural
   questions; about 10 % literal mode, 10 % with two query_variants and 10 % with
   fields / snippet_chars;
3. throughput with 8 concurrent clients (8 tasks, one session, connector limit 8), for a
   fixed number of requests or a time limit, whichever comes first; latency under load and
   the number of non-200 answers; then, as a diagnostic, the same without the literal-mode
   requests;
4. edit to visible: append a unique word to one page, then POST /search for it at once;
   the very next request must find the page. Repeated for 20 pages; each file is restored
   (and the restore checked) before the next edit;
5. server RSS at ready, at search-ready, after the latency runs, after the load runs and
   after the edits; CPU used by other processes during each phase.

Targets are printed beside the figures; see docs/performance.md. There is no pass/fail exit
code. Every request has a timeout, every loop a bound, the whole run an alarm, and the
server's process group is killed in `finally`. Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.benchmarks.bench_serve import (
    Server,
    approved_page_ids,
    ensure_folder,
    running,
    wait_for_cache,
    wait_until_files_settled,
)
from tests.benchmarks.harness import (
    HOST,
    add_run_options,
    check_code_dir,
    code_identity,
    code_lines,
    compile_code,
    cpu_seconds,
    install_deadline,
    machine,
    percentile,
    proc_status,
    wait_for_quiet,
    write_json_report,
)

REQUEST_TIMEOUT_S = 30.0
SEARCH_READY_TIMEOUT_S = 180.0
IDLE_TIMEOUT_S = 60.0
WARMUP_REQUESTS = 50
HEALTH_FLOOR_REQUESTS = 500
JSON_HEADERS = {"Content-Type": "application/json"}

# Issue 3, "Speed, measured" (20,000 pages, strict freshness, 2 cores), and the spec's memory.
QUERY_MEDIAN_MS = 5.0
QUERY_P99_MS = 25.0
QUERY_RPS = 400.0
INDEX_UPDATE_MS = 20.0
RSS_MB = 250.0

# Share of the query set per option kind; the rest are plain lexical requests.
OPTION_SHARES = (("literal", 0.10), ("variants", 0.10), ("options", 0.10))
FIELD_OPTIONS: tuple[dict[str, Any], ...] = (
    {"fields": ["page_id", "title", "score"]},
    {"fields": ["page_id", "path", "snippet", "route"], "snippet_chars": 120},
    {"snippet_chars": 0},
    {"snippet_chars": 600},
    {"fields": ["title", "source_refs"], "snippet_chars": 40},
    {"fields": ["page_id", "snippet"], "snippet_chars": 2000},
)


# -- the query set --------------------------------------------------------------------------

HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")
HANGUL_WORD_RE = re.compile(r"[\uac00-\ud7a3]+")
HEADING_RE = re.compile(r"^#{1,6} +(.+?) *$", re.M)
CODE_RE = re.compile(r"`([^`\n]{2,60})`")
KEY_RE = re.compile(r"\b(?:GH|OPS|SEC|PAY)-\d{2,4}\b")
VERSION_RE = re.compile(r"\bv\d+\.\d+\.\d+\b")
MARKUP_RE = re.compile(r"\[\[[^\]]*\]\]|\[[^\]]*\]\([^)]*\)|`[^`]*`|#\S+|\*\*")
SENTENCE_END_RE = re.compile(r"[.;:?!]\s+|\n+")
ALPHA_RE = re.compile(r"[A-Za-z]{3,}")
STOP_WORDS = ("the a this that each every our their its any one more less before after during while "
              "when until because so and but or if then also only still already never always usually see")
STOP = frozenset(STOP_WORDS.split(" "))


@dataclass
class PageFacts:
    id: str
    title: str
    korean: bool
    headings: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    korean_phrases: list[list[str]] = field(default_factory=list)  # Hangul words per sentence
    sentences: list[list[str]] = field(default_factory=list)  # runs of plain English words
    words: list[str] = field(default_factory=list)


def read_facts(root: Path, page_id: str) -> PageFacts:
    text = (root / f"{page_id}.md").read_text(encoding="utf-8")
    front, body = "", text
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end > 0:
            front, body = text[4:end], text[end + 5:]
    title = page_id.rsplit("/", 1)[-1].replace("-", " ")
    for line in front.splitlines():
        if line.startswith("title:"):
            value = line[6:].strip()
            title = json.loads(value) if value.startswith('"') else value
            break
    facts = PageFacts(page_id, title, bool(HANGUL_RE.search(body)))
    facts.headings = [h for h in HEADING_RE.findall(body) if h != title]
    facts.identifiers = list(dict.fromkeys(CODE_RE.findall(body) + KEY_RE.findall(body)
                                           + VERSION_RE.findall(body)))
    prose = HEADING_RE.sub(" ", body)
    for sentence in SENTENCE_END_RE.split(prose):
        if HANGUL_RE.search(sentence):
            words = HANGUL_WORD_RE.findall(sentence)
            if len(words) >= 2:
                facts.korean_phrases.append(words)
            continue
        # Runs of consecutive plain words (no markup in between): literal phrases.
        run: list[str] = []
        for token in sentence.split(" "):
            if token.isalpha() and token.isascii():
                run.append(token)
                continue
            if len(run) >= 3:
                facts.sentences.append(run)
            run = []
        if len(run) >= 3:
            facts.sentences.append(run)
    facts.words = [w.lower() for w in ALPHA_RE.findall(MARKUP_RE.sub(" ", prose))
                   if w.lower() not in STOP]
    return facts


def _span(rng: random.Random, words: Sequence[str], low: int, high: int) -> str:
    n = min(len(words), rng.randint(low, high))
    start = rng.randrange(len(words) - n + 1)
    return " ".join(words[start:start + n])


def _pick(rng: random.Random, words: Sequence[str], low: int, high: int) -> list[str]:
    return rng.sample(list(words), min(len(words), rng.randint(low, high)))


QUESTIONS_EN = (
    "how do we {verb} the {a} {b}?",
    "what is the {a} policy for {ident}?",
    "who owns the {title} page?",
    "where is {ident} configured?",
    "why does the {a} {b} fail after a {c}?",
    "when should we {verb} the {a} {b}",
    "what changed in {a} {b} for {ident}",
    "which runbook covers {a} {b} {c}?",
    "is there a checklist for {title}?",
)
QUESTIONS_KO = (
    "{k} 절차는 어떻게 되나요?",
    "{k} 관련 문서는 어디에 있나요?",
    "{k}에 대해 알려주세요",
    "{k} 담당자는 누구인가요?",
)
VERBS = ("rotate", "restore", "export", "approve", "review", "roll back", "schedule", "sign",
         "publish", "migrate")


def _plain_query(rng: random.Random, page: PageFacts, korean_pool: list[PageFacts]) -> tuple[str, str]:
    """One lexical query (kind, text) about `page`: 1-6 words, or a natural question."""
    roll = rng.random()
    if roll < 0.18:
        words = page.title.split()
        return "title", " ".join(words) if rng.random() < 0.5 else _span(rng, words, 1, 3)
    if roll < 0.32 and page.headings:
        return "heading", _span(rng, rng.choice(page.headings).split(), 1, 6)
    if roll < 0.48 and page.identifiers:
        ident = rng.choice(page.identifiers)
        if rng.random() < 0.4 and page.words:
            return "identifier+words", " ".join([ident, *_pick(rng, page.words, 1, 2)])
        return "identifier", ident
    if roll < 0.62 and korean_pool:
        other = rng.choice(korean_pool)
        if other.korean_phrases and rng.random() < 0.7:
            return "korean", _span(rng, rng.choice(other.korean_phrases), 1, 4)
        return "korean", other.title
    if roll < 0.76 and page.words:
        return "keywords", " ".join(_pick(rng, page.words, 2, 6))
    if roll < 0.86 and korean_pool:
        other = rng.choice(korean_pool)
        hangul = " ".join(HANGUL_WORD_RE.findall(other.title)) or _span(
            rng, rng.choice(other.korean_phrases or [["배포", "체크리스트"]]), 1, 2)
        return "question-ko", rng.choice(QUESTIONS_KO).format(k=hangul)
    words = page.words or page.title.lower().split()
    a, b, c = (rng.choice(words) for _ in range(3))
    ident = rng.choice(page.identifiers) if page.identifiers else page.title
    template = rng.choice(QUESTIONS_EN)
    return "question", template.format(verb=rng.choice(VERBS), a=a, b=b, c=c, ident=ident,
                                       title=page.title)


def _literal_query(rng: random.Random, page: PageFacts,
                   korean_pool: list[PageFacts]) -> tuple[str, str]:
    roll = rng.random()
    if roll < 0.3 and page.identifiers:
        return "literal-identifier", rng.choice(page.identifiers)
    korean = [f for f in korean_pool if f.korean_phrases]
    if roll < 0.5 and korean:
        return "literal-korean", _span(rng, rng.choice(rng.choice(korean).korean_phrases), 2, 3)
    if page.sentences:
        return "literal-phrase", _span(rng, rng.choice(page.sentences), 2, 4)
    return "literal-title", page.title


def build_queries(root: Path, ids: Sequence[str], count: int, seed: int) -> list[dict[str, Any]]:
    """`count` distinct request bodies, the same for the same folder and seed."""
    rng = random.Random(f"bench-query:{seed}")
    sample = sorted(rng.sample(list(ids), min(len(ids), max(200, count * 2))))
    facts = [read_facts(root, page_id) for page_id in sample]
    korean_pool = [f for f in facts if f.korean]
    kinds = []
    for kind, share in OPTION_SHARES:
        kinds += [kind] * round(count * share)
    kinds += ["plain"] * (count - len(kinds))
    rng.shuffle(kinds)
    queries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for option in kinds:
        for _attempt in range(50):
            page = rng.choice(facts)
            body: dict[str, Any]
            if option == "literal":
                kind, text = _literal_query(rng, page, korean_pool)
                body = {"query": text, "mode": "literal"}
            else:
                kind, text = _plain_query(rng, page, korean_pool)
                body = {"query": text}
                if option == "variants":
                    variants: list[str] = []
                    pool = [*page.headings, page.title, *page.identifiers,
                            " ".join(_pick(rng, page.words, 2, 3))]
                    rng.shuffle(pool)
                    keys = {text.casefold()}
                    for candidate in pool:
                        candidate = candidate.strip()
                        if candidate and candidate.casefold() not in keys and len(variants) < 2:
                            variants.append(candidate)
                            keys.add(candidate.casefold())
                    if len(variants) < 2:
                        continue
                    body["query_variants"] = variants
                elif option == "options":
                    body.update(rng.choice(FIELD_OPTIONS))
            if not text.strip():
                continue
            key = json.dumps(body, sort_keys=True, ensure_ascii=False)
            if key in seen:
                continue
            seen.add(key)
            queries.append({"option": option, "kind": kind, "page": page.id, "body": body})
            break
    return queries


# -- measuring ------------------------------------------------------------------------------


def summarize(samples_s: Sequence[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples_s)
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "median_ms": statistics.median(ordered),
            "p90_ms": percentile(ordered, 90), "p99_ms": percentile(ordered, 99),
            "max_ms": ordered[-1], "mean_ms": statistics.fmean(ordered), "min_ms": ordered[0]}


class PhaseMeter:
    """CPU used during a phase by the server, by this benchmark and by everything else
    (the server is a running child, so its CPU is read from /proc, not from rusage)."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.start = self._sample()

    def _sample(self) -> tuple[float, float, float, float]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        me = resource.getrusage(resource.RUSAGE_SELF)
        return (sum(values) / tick, (sum(values) - idle) / tick, me.ru_utime + me.ru_stime,
                cpu_seconds(self.pid) or 0.0)

    def read(self) -> dict[str, float]:
        total0, busy0, own0, srv0 = self.start
        total1, busy1, own1, srv1 = self._sample()
        total = max(1e-9, total1 - total0)
        server, own = srv1 - srv0, own1 - own0
        return {"server_cpu_s": server, "client_cpu_s": own,
                "other_busy": max(0.0, (busy1 - busy0) - server - own) / total,
                "wall_cores_s": total}


def wait_server_idle(pid: int, limit_s: float = IDLE_TIMEOUT_S, threshold: float = 0.05) -> float:
    """Waits until the server uses under `threshold` of one core over 0.5 s (its warm-up
    thread and cache writer are done); returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        before = cpu_seconds(pid) or 0.0
        time.sleep(0.5)
        if (cpu_seconds(pid) or 0.0) - before < threshold * 0.5:
            break
    return time.perf_counter() - started


class Http:
    """POSTs JSON over one aiohttp session, timing each request until its body is read."""

    def __init__(self, port: int, connections: int = 1) -> None:
        self.base = f"http://{HOST}:{port}"
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections),
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        async with self.session.post(self.base + path, data=body, headers=JSON_HEADERS) as resp:
            data = await resp.read()
            return resp.status, data, time.perf_counter() - started

    async def get(self, path: str) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        async with self.session.get(self.base + path) as resp:
            data = await resp.read()
            return resp.status, data, time.perf_counter() - started

    async def close(self) -> None:
        await self.session.close()


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


async def search_ready(port: int) -> dict[str, Any]:
    """From /health ready: the first POST /search and /query answering 200, and GET /health
    latency meanwhile (the first search waits for the index the warm-up thread builds)."""
    http = Http(port, connections=4)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    health: list[float] = []
    done = asyncio.Event()

    async def poll_health() -> None:
        while not done.is_set() and time.perf_counter() - started < SEARCH_READY_TIMEOUT_S:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                status, _b, elapsed = await http.get("/health")
                if status == 200:
                    health.append(elapsed)
            await asyncio.sleep(0.02)

    async def first_ok(path: str) -> tuple[float, float, int]:
        attempts = 0
        while time.perf_counter() - started < SEARCH_READY_TIMEOUT_S:
            attempts += 1
            try:
                status, _b, elapsed = await http.post(path, encode({"query": "warm"}))
            except (aiohttp.ClientError, TimeoutError):
                status, elapsed = 0, 0.0
            if status == 200:
                return time.perf_counter() - started, elapsed, attempts
            await asyncio.sleep(0.01)
        raise TimeoutError(f"POST {path} not 200 within {SEARCH_READY_TIMEOUT_S} s")

    poller = asyncio.create_task(poll_health())
    try:
        after, request_s, attempts = await first_ok("/search")
        out["search_ready_after_s"] = after
        out["first_search_request_ms"] = request_s * 1000
        out["first_search_attempts"] = attempts
        after, request_s, _a = await first_ok("/query")
        out["query_ready_after_s"] = after
        out["first_query_request_ms"] = request_s * 1000
    finally:
        done.set()
        await poller
        await http.close()
    out["health_while_warming"] = summarize(health)
    return out


async def sequential(port: int, path: str, queries: Sequence[dict[str, Any]], count: int,
                     parse: bool = True) -> dict[str, Any]:
    """`count` timed POSTs one after another (after WARMUP_REQUESTS untimed ones)."""
    http = Http(port)
    bodies = [encode(q["body"]) for q in queries]
    samples: list[float] = []
    by_option: dict[str, list[float]] = {}
    by_kind: dict[str, list[float]] = {}
    statuses: Counter[int] = Counter()
    with_results = 0
    sizes: list[int] = []
    slowest: list[tuple[float, int]] = []
    try:
        for i in range(WARMUP_REQUESTS):
            await http.post(path, bodies[i % len(bodies)])
        for i in range(count):
            j = i % len(bodies)
            status, data, elapsed = await http.post(path, bodies[j])
            statuses[status] += 1
            samples.append(elapsed)
            by_option.setdefault(queries[j]["option"], []).append(elapsed)
            by_kind.setdefault(queries[j]["kind"], []).append(elapsed)
            slowest.append((elapsed, j))
            sizes.append(len(data))
            if parse and status == 200:
                payload = json.loads(data)
                found = payload.get("evidence") if path == "/query" else payload.get("results")
                with_results += bool(found)
    finally:
        await http.close()
    slowest.sort(reverse=True)
    return {
        **summarize(samples),
        "non_200": sum(n for s, n in statuses.items() if s != 200),
        "statuses": {str(s): n for s, n in sorted(statuses.items())},
        "with_results_share": with_results / max(1, count),
        "response_bytes_median": statistics.median(sizes) if sizes else 0,
        "by_option": {k: summarize(v) for k, v in sorted(by_option.items())},
        "by_kind": {k: summarize(v) for k, v in sorted(by_kind.items())},
        "slowest": [{"ms": round(s * 1000, 2), **queries[j]} for s, j in slowest[:8]],
        "samples_ms": [round(s * 1000, 4) for s in samples],
    }


async def health_floor(port: int, count: int = HEALTH_FLOOR_REQUESTS) -> dict[str, float]:
    """GET /health with the same client: the floor of client plus server for a request."""
    http = Http(port)
    samples = []
    try:
        for i in range(WARMUP_REQUESTS + count):
            _s, _b, elapsed = await http.get("/health")
            if i >= WARMUP_REQUESTS:
                samples.append(elapsed)
    finally:
        await http.close()
    return summarize(samples)


async def load(port: int, pid: int, path: str, queries: Sequence[dict[str, Any]], clients: int,
               total: int, seconds: float) -> dict[str, Any]:
    """`clients` tasks on one session (connector limit `clients`) until `total` requests
    were sent or `seconds` passed."""
    http = Http(port, connections=clients)
    bodies = [encode(q["body"]) for q in queries]
    counter = itertools.count()
    samples: list[float] = []
    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    meter = PhaseMeter(pid)
    started = time.perf_counter()
    deadline = started + seconds
    finished = started

    async def worker() -> None:
        nonlocal finished
        while True:
            i = next(counter)
            if i >= total or time.perf_counter() >= deadline:
                return
            try:
                status, _d, elapsed = await http.post(path, bodies[i % len(bodies)])
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors[type(exc).__name__] += 1
                continue
            statuses[status] += 1
            samples.append(elapsed)
            finished = time.perf_counter()

    try:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(clients))),
                               timeout=seconds + REQUEST_TIMEOUT_S + 5)
    finally:
        await http.close()
    elapsed = max(1e-9, finished - started)
    cpu = meter.read()
    done = len(samples)
    return {
        "clients": clients, "requests": done, "seconds": elapsed,
        "stopped_by": "requests" if done + sum(errors.values()) >= total else "time",
        "rps": done / elapsed,
        **summarize(samples),
        "non_200": sum(n for s, n in statuses.items() if s != 200) + sum(errors.values()),
        "statuses": {str(s): n for s, n in sorted(statuses.items())},
        "errors": dict(errors),
        "server_cpu_ms_per_request": cpu["server_cpu_s"] * 1000 / max(1, done),
        "server_cores_busy": cpu["server_cpu_s"] / elapsed,
        "client_cores_busy": cpu["client_cpu_s"] / elapsed,
        "other_cpu_busy": cpu["other_busy"],
        "samples_ms": [round(s * 1000, 4) for s in samples],
    }


def marker_word(i: int) -> str:
    """A unique, purely alphabetic word the analyzer keeps as it is (no digits, no suffix
    a stemmer would strip)."""
    letters = "bcdfghjklmnpqrstvwxz"
    n = os.getpid() * 1000 + int(time.time()) % 1000 * 100 + i
    out = ""
    while n:
        n, r = divmod(n, len(letters))
        out += letters[r]
    return f"zqbench{out}qz"


async def edit_to_visible(port: int, root: Path, page_ids: Sequence[str], edits: int,
                          rng: random.Random) -> dict[str, Any]:
    """Append a unique word to a page; the very next POST /search must find the page.
    Also times the same request before the edit (no change pending) and after it, and
    checks that restoring the file is visible too."""
    http = Http(port)
    rows: list[dict[str, Any]] = []
    originals: dict[Path, bytes] = {}
    try:
        for i, page_id in enumerate(rng.sample(list(page_ids), edits)):
            word = marker_word(i)
            body = encode({"query": word, "limit": 5})
            path = root / f"{page_id}.md"
            original = path.read_bytes()
            originals[path] = original

            def found(data: bytes, page: str = page_id) -> bool:
                return any(r.get("page_id") == page for r in json.loads(data).get("results", []))

            status, data, before = await http.post("/search", body)
            found_before = status == 200 and found(data)
            with open(path, "ab") as handle:  # an in-place append, as an editor's "save" may do
                handle.write(f"\n\nBenchmark marker {word}.\n".encode())
            status, data, first = await http.post("/search", body)
            visible = status == 200 and found(data)
            _s, _d, second = await http.post("/search", body)
            path.write_bytes(original)
            del originals[path]
            status, data, restore = await http.post("/search", body)
            gone = status == 200 and not found(data)
            _s, _d, after_restore = await http.post("/search", body)
            rows.append({"page_id": page_id, "word": word, "found_before": found_before,
                         "visible": visible, "restore_visible": gone,
                         "before_ms": before * 1000, "first_ms": first * 1000,
                         "second_ms": second * 1000, "restore_ms": restore * 1000,
                         "after_restore_ms": after_restore * 1000})
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
        await http.close()

    def stats(key: str) -> dict[str, float]:
        return summarize([r[key] / 1000 for r in rows])

    deltas = [max(0.0, r["first_ms"] - r["before_ms"]) / 1000 for r in rows]
    return {"edits": len(rows), "visible": sum(r["visible"] for r in rows),
            "restore_visible": sum(r["restore_visible"] for r in rows),
            "found_before": sum(r["found_before"] for r in rows),
            "first": stats("first_ms"), "before": stats("before_ms"),
            "second": stats("second_ms"), "restore": stats("restore_ms"),
            "after_restore": stats("after_restore_ms"), "first_minus_before": summarize(deltas),
            "rows": rows}


# -- one size -------------------------------------------------------------------------------


def private_copy(source: Path, work: Path) -> Path:
    target = work / f"wiki-{source.name}"
    shutil.copytree(source, target, symlinks=True)
    return target


def bench_size(pages: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    generated, gen_s = ensure_folder(pages, args.seed, False)
    root = private_copy(generated, work)
    ids = approved_page_ids(root)
    queries = build_queries(root, ids, args.queries, args.seed)
    out: dict[str, Any] = {
        "pages": pages, "generated": str(generated), "generated_now_s": gen_s,
        "md_files": sum(1 for _ in root.rglob("*.md")),
        "folder_mb": sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6,
        "queries": len(queries),
        "query_options": dict(Counter(q["option"] for q in queries)),
        "query_kinds": dict(Counter(q["kind"] for q in queries)),
        "query_words_median": statistics.median(len(q["body"]["query"].split()) for q in queries),
        "requests": args.requests,
    }
    out["settle_sleep_s"] = wait_until_files_settled(root)
    if args.wait_quiet:
        out["cpu_busy_before"] = wait_for_quiet(args.wait_quiet)

    cache_dir = work / f"cache-{pages}"
    server = Server(root, cache_dir, work / f"serve-{pages}.log", args.serve_arg, args.code_dir)
    with running(server):
        out["start_s"] = server.start()
        pid = server.pid
        out["rss_at_ready_mb"] = proc_status(pid).get("VmRSS")
        warm = PhaseMeter(pid)
        out.update(asyncio.run(search_ready(server.port)))
        out["rss_at_search_ready_mb"] = proc_status(pid).get("VmRSS")
        # The restart cache is written and the graph views built in background threads;
        # let them finish so they do not land inside the timed runs.
        out["cache_written_after_ready_s"] = wait_for_cache(cache_dir, None, server.ready_wall, 60)
        out["idle_wait_s"] = wait_server_idle(pid)
        out["warm_phase_cpu"] = warm.read()
        out["rss_when_idle_mb"] = proc_status(pid).get("VmRSS")

        if args.wait_quiet:
            out["cpu_busy_before_latency"] = wait_for_quiet(args.wait_quiet)
        meter = PhaseMeter(pid)
        out["health_floor"] = asyncio.run(health_floor(server.port))
        out["query"] = asyncio.run(sequential(server.port, "/query", queries, args.requests))
        out["search"] = asyncio.run(sequential(server.port, "/search", queries, args.requests))
        out["latency_phase_cpu"] = meter.read()
        out["rss_after_latency_mb"] = proc_status(pid).get("VmRSS")

        # The full mix, then (a diagnostic) the same without the literal-mode requests.
        lexical = [q for q in queries if q["option"] != "literal"]
        for name, path, subset in (("query", "/query", queries), ("search", "/search", queries),
                                   ("query_lexical", "/query", lexical),
                                   ("search_lexical", "/search", lexical)):
            if args.wait_quiet:
                out[f"cpu_busy_before_load_{name}"] = wait_for_quiet(args.wait_quiet)
            out[f"load_{name}"] = asyncio.run(load(server.port, pid, path, subset, args.clients,
                                                   args.load_requests, args.load_seconds))
        out["rss_after_load_mb"] = proc_status(pid).get("VmRSS")

        if args.wait_quiet:
            out["cpu_busy_before_edits"] = wait_for_quiet(args.wait_quiet)
        meter = PhaseMeter(pid)
        topic_ids = [i for i in ids if "/" in i]
        out["edit"] = asyncio.run(edit_to_visible(server.port, root, topic_ids, args.edits,
                                                  random.Random(f"bench-query-edits:{args.seed}")))
        out["edit_phase_cpu"] = meter.read()
        mem = proc_status(pid)
        out["rss_after_edits_mb"] = mem.get("VmRSS")
        out["rss_peak_mb"] = mem.get("VmHWM")
        out["server_cpu_total_s"] = cpu_seconds(pid)
        out["sample_queries"] = [q["body"] for q in queries[:12]]
        out["query_set"] = queries
        server.stop()
    return out


# -- reporting ------------------------------------------------------------------------------


def _v(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


def _lat(s: dict[str, float]) -> str:
    return (f"{s['median_ms']:.2f} / {s['p90_ms']:.2f} / {s['p99_ms']:.2f} / "
            f"{s['max_ms']:.1f} ms")


def markdown_table(r: dict[str, Any]) -> str:
    q, s, lq, ls, e = r["query"], r["search"], r["load_query"], r["load_search"], r["edit"]
    rows: list[tuple[str, str, str, str]] = []
    add = rows.append
    add(("/health 200 after spawn (empty cache)", f"{r['start_s']:.2f} s", "", ""))
    add(("first POST /search 200, after /health ready (search ready after)",
         f"{r['search_ready_after_s']:.2f} s (that request {r['first_search_request_ms']:.0f} ms)",
         "", ""))
    add(("first POST /query 200, after /health ready", f"{r['query_ready_after_s']:.2f} s "
         f"(that request {r['first_query_request_ms']:.0f} ms)", "", ""))
    hw = r["health_while_warming"]
    if hw.get("count"):
        add(("GET /health meanwhile (polled every 20 ms): answered / slowest",
             f"{hw['count']} / {hw['max_ms']:.0f} ms", "", ""))
    add(("GET /health with this client (floor): median / p99",
         f"{r['health_floor']['median_ms']:.3f} / {r['health_floor']['p99_ms']:.3f} ms", "", ""))
    add(("POST /query sequential: median / p90 / p99 / max", _lat(q),
         f"median < {QUERY_MEDIAN_MS:g} ms, p99 < {QUERY_P99_MS:g} ms",
         _v(q["median_ms"] < QUERY_MEDIAN_MS and q["p99_ms"] < QUERY_P99_MS)))
    add(("POST /search sequential: median / p90 / p99 / max", _lat(s),
         "at least as fast as /query", _v(s["median_ms"] <= q["median_ms"] and s["p99_ms"] <= q["p99_ms"]
                                          and s["median_ms"] < QUERY_MEDIAN_MS
                                          and s["p99_ms"] < QUERY_P99_MS)))
    for name, load_r in (("/query", lq), ("/search", ls)):
        target = f"> {QUERY_RPS:g}/s" if name == "/query" else "at least as fast as /query"
        ok = load_r["rps"] > QUERY_RPS and (name == "/query" or load_r["rps"] >= lq["rps"])
        add((f"POST {name}, {load_r['clients']} clients: throughput",
             f"{load_r['rps']:.0f}/s ({load_r['requests']} requests in {load_r['seconds']:.1f} s)",
             target, _v(ok)))
        add((f"POST {name}, {load_r['clients']} clients: median / p90 / p99 / max", _lat(load_r), "", ""))
        add((f"POST {name}, {load_r['clients']} clients: non-200 answers or errors",
             str(load_r["non_200"]), "0", _v(load_r["non_200"] == 0)))
    for name, key in (("/query", "load_query_lexical"), ("/search", "load_search_lexical")):
        d = r[key]
        add((f"diagnostic: POST {name}, {d['clients']} clients, without literal-mode requests",
             f"{d['rps']:.0f}/s; median / p90 / p99 / max {_lat(d)}", "", ""))
    add(("server CPU per request under load, /query / /search",
         f"{lq['server_cpu_ms_per_request']:.2f} / {ls['server_cpu_ms_per_request']:.2f} ms "
         f"(server {lq['server_cores_busy']:.2f} / {ls['server_cores_busy']:.2f} cores, client "
         f"{lq['client_cores_busy']:.2f} / {ls['client_cores_busy']:.2f} cores)", "", ""))
    add((f"edit to visible: next POST /search finds the page ({e['edits']} edits)",
         f"{e['visible']}/{e['edits']}", "every time", _v(e["visible"] == e["edits"])))
    upper = e["first"]["max_ms"] < INDEX_UPDATE_MS
    add(("that first request after the edit: median / max (upper bound of the update cost)",
         f"{e['first']['median_ms']:.1f} / {e['first']['max_ms']:.1f} ms",
         f"index update < {INDEX_UPDATE_MS:g} ms",
         "met" if upper else ("met (difference below)" if e["first_minus_before"]["max_ms"]
                              < INDEX_UPDATE_MS else "**MISSED**")))
    add(("same request before the edit; difference (first - before): median / max",
         f"{e['before']['median_ms']:.2f} / {e['before']['max_ms']:.2f} ms; "
         f"{e['first_minus_before']['median_ms']:.1f} / {e['first_minus_before']['max_ms']:.1f} ms",
         "", ""))
    add(("second request after the edit: median / max",
         f"{e['second']['median_ms']:.2f} / {e['second']['max_ms']:.2f} ms", "", ""))
    add(("restore visible to the next request; that request median / max",
         f"{e['restore_visible']}/{e['edits']}; {e['restore']['median_ms']:.1f} / "
         f"{e['restore']['max_ms']:.1f} ms", "every time", _v(e["restore_visible"] == e["edits"])))
    for label, key in (("RSS at /health ready", "rss_at_ready_mb"),
                       ("RSS at search ready", "rss_at_search_ready_mb"),
                       ("RSS once warm-up and cache write are done", "rss_when_idle_mb"),
                       ("RSS after the latency runs", "rss_after_latency_mb"),
                       ("RSS after the load runs", "rss_after_load_mb"),
                       ("RSS after the edits", "rss_after_edits_mb")):
        value = r.get(key) or float("nan")
        add((label, f"{value:.0f} MB", f"< {RSS_MB:g} MB", _v(value < RSS_MB)))
    add(("peak RSS (VmHWM)", f"{(r.get('rss_peak_mb') or float('nan')):.0f} MB", "", ""))

    lines = [f"### {r['pages']:,} pages ({r['md_files']:,} .md files, {r['folder_mb']:.1f} MB)", "",
             "| figure | measured | target | |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", "Sequential latency by request kind (median / p90 / p99 / max):", "",
              "| kind | share | POST /query | POST /search |", "| --- | --- | --- | --- |"]
    for option in sorted(q["by_option"]):
        share = q["by_option"][option]["count"] / max(1, q["count"])
        lines.append(f"| {option} | {share * 100:.0f} % | {_lat(q['by_option'][option])} | "
                     f"{_lat(s['by_option'][option])} |")
    busy = {k: r[k] for k in r if k.startswith("cpu_busy_before")}
    options = ", ".join(f"{k} {v}" for k, v in r["query_options"].items())
    phases = {"latency": r["latency_phase_cpu"]["other_busy"], "load /query": lq["other_cpu_busy"],
              "load /search": ls["other_cpu_busy"],
              "load without literal": max(r["load_query_lexical"]["other_cpu_busy"],
                                          r["load_search_lexical"]["other_cpu_busy"]),
              "edits": r["edit_phase_cpu"]["other_busy"]}
    lines += [
        "",
        f"- {r['queries']} distinct queries ({options}); "
        f"{r['requests']} timed requests per endpoint after {WARMUP_REQUESTS} warm-up; "
        f"/query evidence found for {q['with_results_share'] * 100:.0f} %, /search results for "
        f"{s['with_results_share'] * 100:.0f} % of the requests",
        "- CPU used by other processes: " + ", ".join(f"{k} {v * 100:.0f} %" for k, v in phases.items())
        + ((" (just before the phases: " + ", ".join(f"{v * 100:.0f} %" for v in busy.values()) + ")")
           if busy else ""),
        "- slowest /query requests: " + "; ".join(
            f"{x['ms']:.0f} ms {json.dumps(x['body'], ensure_ascii=False)}" for x in q["slowest"][:4]),
        f"- restart cache written {_s(r['cache_written_after_ready_s'])} after ready; the server was "
        f"idle {r['idle_wait_s']:.1f} s after the first /query",
    ]
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "never" if value is None else f"{max(0.0, value):.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_query",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[20000],
                        help="folder sizes to measure (default 20000)")
    parser.add_argument("--requests", type=int, default=1000,
                        help="timed sequential requests per endpoint (default 1000, at most 20000)")
    parser.add_argument("--queries", type=int, default=400,
                        help="distinct queries in the set (default 400, at least 200)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--load-requests", type=int, default=4000,
                        help="requests per load run (default 4000)")
    parser.add_argument("--load-seconds", type=float, default=20.0,
                        help="time limit per load run (default 20)")
    parser.add_argument("--edits", type=int, default=20, help="edit-to-visible repetitions (default 20)")
    parser.add_argument("--seed", type=int, default=7, help="generator and query-set seed (default 7)")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="extra argument for `llmwiki-serve serve` (repeatable)")
    add_run_options(parser, code_help="run serve's code from this directory (e.g. a `git archive` "
                    "of a commit)", max_seconds=1800.0,
                    max_seconds_help="hard limit for the whole run (default 1800)")
    args = parser.parse_args(argv)
    args.requests = max(1, min(20000, args.requests))
    args.queries = max(200, min(5000, args.queries))
    args.clients = max(1, min(64, args.clients))
    args.load_requests = max(1, min(100000, args.load_requests))
    args.load_seconds = max(1.0, min(300.0, args.load_seconds))
    args.edits = max(1, min(200, args.edits))
    check_code_dir(parser, args, "serve/cli.py")
    compile_code(args.code_dir)
    # `finally` blocks kill the server, restore edited files and remove the temp dir.
    install_deadline(args.max_seconds, f"run exceeded --max-seconds {args.max_seconds:g}")

    report: dict[str, Any] = {"machine": machine(), "code": code_identity(args.code_dir),
                              "command": " ".join(["python -m tests.benchmarks.bench_query",
                                                   *(argv if argv is not None else sys.argv[1:])]),
                              "sizes": []}
    out = sys.stderr if args.json == "-" else sys.stdout
    work = Path(tempfile.mkdtemp(prefix="llmwiki-bench-query-"))
    try:
        for pages in args.pages:
            result = bench_size(pages, args, work)
            report["sizes"].append(result)
            out.write(markdown_table(result) + "\n\n")
            out.flush()
        out.write(code_lines(report))
    finally:
        signal.alarm(0)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        write_json_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
