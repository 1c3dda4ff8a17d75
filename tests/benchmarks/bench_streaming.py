"""On-demand benchmark of the bridge's streaming: how soon the first event comes, and how soon each
answer chunk is forwarded after the runtime sent it.

    .venv/bin/python -m tests.benchmarks.bench_streaming [--runs 20] [--chunk-delay-ms 40] [--json out.json]

It starts the installed serve on fixtures/sample-wiki and the installed bridge (one registered
`llmwiki-http` source on that serve) on 127.0.0.1, and the e2e test model server
(tests/e2e/model_server.py) in this process, streaming its answer one word per chunk,
--chunk-delay-ms apart (a slow local model). Each run is one A2A `POST /message:stream` in
delegated-runtime mode on one keep-alive connection:

- first event: from sending the request to the first SSE event (the working task);
  target: under 50 ms;
- chunk forwarding: for each answer chunk, from the model server writing it to the client reading
  its status update (both clocks are this process's time.monotonic); target: under 20 ms each.

Runs are sequential and bounded; both child processes are stopped in `finally`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.model_server import running_model_server
from tests.e2e.processes import start_bridge, start_serve, stop_checked

REPO = Path(__file__).resolve().parents[2]
ANSWER_DELTA = "urn:llmwiki:a2a-extension:agent-bridge:v1#answerDelta"


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {"n": len(ordered), "median": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], "max": ordered[-1]}


def run(runs: int, chunk_delay_ms: float) -> dict[str, Any]:
    first_event: list[float] = []
    forwarding: list[float] = []
    with tempfile.TemporaryDirectory() as work, running_model_server() as model:
        for name in ("serve", "bridge"):
            (Path(work) / name).mkdir()
        serve = start_serve(Path(work) / "serve", REPO / "fixtures" / "sample-wiki")
        bridge = None
        try:
            bridge = start_bridge(Path(work) / "bridge", settings={"sources": [
                {"id": "wiki", "protocol": "llmwiki-http", "url": serve.url}]},
                env={"LLMWIKI_AGENT_BRIDGE_BASE_URL": model.url, "LLMWIKI_AGENT_BRIDGE_MODEL": "e2e-model"})
            model.chunk_delay = chunk_delay_ms / 1000
            with httpx.Client(timeout=60) as client:
                for index in range(runs + 1):  # the first run warms up and is not counted
                    model.sent.clear()
                    body = {"message": {"messageId": f"bench-{index}", "role": "ROLE_USER", "parts": [
                        {"text": "How do we roll back a release?"},
                        {"data": {"orchestrationMode": "delegated-runtime"}}]}}
                    arrivals: list[tuple[float, str]] = []
                    started = time.monotonic()
                    first = None
                    with client.stream("POST", bridge.url + "/message:stream", json=body,
                                       headers={"A2A-Version": "1.0"}) as response:
                        for line in response.iter_lines():
                            if not line.startswith("data:"):
                                continue
                            now = time.monotonic()
                            first = first if first is not None else now
                            event = json.loads(line[5:])
                            message = event.get("statusUpdate", {}).get("status", {}).get("message", {})
                            if message.get("metadata", {}).get("event") == ANSWER_DELTA:
                                arrivals.append((now, message["parts"][0]["text"]))
                    if index == 0 or first is None:
                        continue
                    first_event.append((first - started) * 1000)
                    sent = list(model.sent)
                    assert [t for _, t in sent] == [t for _, t in arrivals], "chunks lost or reordered"
                    forwarding += [(got - put) * 1000
                                   for (put, _), (got, _) in zip(sent, arrivals, strict=True)]
        finally:
            if bridge is not None:
                stop_checked(bridge)
            stop_checked(serve)
    return {"runs": runs, "chunkDelayMs": chunk_delay_ms, "firstEventMs": _percentiles(first_event),
            "chunkForwardingMs": _percentiles(forwarding)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--chunk-delay-ms", type=float, default=40.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = run(max(1, min(args.runs, 500)), args.chunk_delay_ms)
    print(f"first event (target < 50 ms): {figures['firstEventMs']}")
    print(f"chunk forwarding (target < 20 ms each): {figures['chunkForwardingMs']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
