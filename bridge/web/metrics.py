"""The bridge's own metrics: each Knowledge Source query's outcome and latency by protocol, and the
runtime's (model's) latency. They are counted by wrapping a run's source clients and its chat
runtime, and only when metrics are enabled: otherwise nothing is wrapped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from bridge.runtime.chat import ChatRuntime
from bridge.sources.base import ContextAnswer, SourceCallError, SourceClient
from common.metrics import LATENCY_BUCKETS, ServiceMetrics

NAMESPACE = "llmwiki_bridge"
OTHER = "other"  # the protocol label of a source whose protocol has no client here


class BridgeMetrics(ServiceMetrics):
    def __init__(self, protocols: Collection[str]) -> None:
        super().__init__(NAMESPACE)
        self.protocols = frozenset(protocols)
        self.source_calls = Counter(
            "source_queries", "Knowledge Source queries of runs, by protocol and outcome "
            "(ok, error, timeout, cancelled).", ("protocol", "outcome"), namespace=NAMESPACE,
            registry=self.registry)
        self.source_latency = Histogram(
            "source_query_duration_seconds", "Time one Knowledge Source query of a run took, by protocol.",
            ("protocol",), namespace=NAMESPACE, buckets=LATENCY_BUCKETS, registry=self.registry)
        self.runtime_latency = Histogram(
            "runtime_request_duration_seconds", "Time one runtime (model) request took, by adapter and "
            "outcome (ok or error).", ("adapter", "outcome"), namespace=NAMESPACE,
            buckets=LATENCY_BUCKETS, registry=self.registry)

    def metered_source(self, client: SourceClient) -> SourceClient:
        """The same client, its run query counted (the client is the run's own: one per source)."""
        protocol = client.source.protocol if client.source.protocol in self.protocols else OTHER
        query = client.run_context

        async def run_context(query_text: str, fields: Mapping[str, Any], fallback: str | None,
                              group: asyncio.TaskGroup) -> ContextAnswer:
            started = time.perf_counter()
            outcome = "error"
            try:
                answer = await query(query_text, fields, fallback, group)
                outcome = "ok"
                return answer
            except SourceCallError as exc:
                outcome = "timeout" if exc.timeout else "error"
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"  # the run's deadline passed, or the run was abandoned
                raise
            finally:
                self.source_calls.labels(protocol, outcome).inc()
                self.source_latency.labels(protocol).observe(time.perf_counter() - started)

        client.run_context = run_context  # type: ignore[method-assign, assignment]
        return client

    def metered_runtime(self, runtime: ChatRuntime) -> ChatRuntime:
        complete: Callable[..., Awaitable[Any]] = runtime.complete

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            outcome = "error"
            try:
                reply = await complete(*args, **kwargs)
                outcome = "ok"
                return reply
            finally:
                self.runtime_latency.labels("chat-completions", outcome).observe(
                    time.perf_counter() - started)

        runtime.complete = timed  # type: ignore[method-assign]
        return runtime
