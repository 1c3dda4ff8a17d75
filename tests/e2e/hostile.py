"""Tools of the hostile batteries: raw HTTP calls that never raise on a status, a watch that keeps
asking `/health` while an attack runs, and a line reader for the stdio server. Loopback only;
every call has a timeout."""

from __future__ import annotations

import http.client
import json
import queue
import shutil
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLE_WIKI = REPO / "fixtures" / "sample-wiki"
HEALTH_BOUND = 0.5  # seconds: the bound for /health while an attack runs
SLOW = 30.0  # a call that takes this long has hung


@dataclass
class Answer:
    status: int
    body: bytes
    seconds: float
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


def call(base: str, method: str, path: str, body: bytes | None = None, *, timeout: float = SLOW,
         headers: dict[str, str] | None = None) -> Answer:
    """One request on a fresh connection; a timeout is reported as status 0."""
    parts = urllib.parse.urlsplit(base)
    started = time.monotonic()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        sent = {"content-type": "application/json", **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        data = response.read()
        return Answer(response.status, data, time.monotonic() - started,
                      {k.lower(): v for k, v in response.getheaders()})
    except (TimeoutError, OSError, http.client.HTTPException):
        return Answer(0, b"", time.monotonic() - started)
    finally:
        connection.close()


def post_json(base: str, path: str, payload: Any, *, timeout: float = SLOW) -> Answer:
    return call(base, "POST", path, json.dumps(payload).encode(), timeout=timeout)


class HealthWatch:
    """Asks `/health` in a loop while the block runs; `worst` is the slowest answer (a failed or
    timed-out one counts as SLOW)."""

    def __init__(self, base: str, interval: float = 0.05) -> None:
        self.base = base
        self.interval = interval
        self.latencies: list[float] = []
        self.failures: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            answer = call(self.base, "GET", "/health", timeout=SLOW)
            if answer.status != 200:
                self.failures.append(answer.status)
                self.latencies.append(SLOW)
            else:
                self.latencies.append(answer.seconds)
            self._stop.wait(self.interval)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(SLOW + 5)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    def check(self, bound: float = HEALTH_BOUND) -> None:
        assert self.latencies, "the watch asked /health no time at all"
        assert not self.failures, f"/health failed during the attack: {self.failures[:5]}"
        assert self.worst <= bound, (f"/health took {self.worst:.2f} s during the attack "
                                     f"(bound {bound} s; {len(self.latencies)} asks)")


def copy_wiki(dest: Path) -> Path:
    root = dest / "wiki"
    shutil.copytree(SAMPLE_WIKI, root)
    return root


def assert_clean_error(answer: Answer, *secrets: str) -> None:
    """A 4xx (or a JSON-RPC error) with a JSON body that names no path, secret or traceback."""
    assert answer.status != 0, f"no answer within {SLOW} s"
    assert answer.status < 500, f"{answer.status}: {answer.body[:300]!r}"
    text = answer.body.decode("utf-8", "replace")
    assert "Traceback" not in text and 'File "' not in text, text[:300]
    for secret in secrets:
        assert secret not in text, f"the answer names {secret!r}: {text[:300]}"
    json.loads(answer.body)  # always a JSON envelope


class LineReader:
    """Reads a subprocess's stdout lines on a thread, so a test can wait for one with a timeout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _run(self, stream: Any) -> None:
        for line in stream:
            self._lines.put(line)

    def next_json(self, timeout: float = SLOW) -> Any:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout} s") from None
        return json.loads(line)
