"""Prometheus metrics of one HTTP service: its own registry, the per-route request middleware and the
`/metrics` handler. Off unless the operator enables it: nothing here runs on a request otherwise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder

METRICS_PATH = "/metrics"
# Methods outside this set are counted as "other": a client may send any token as a method, and
# each distinct label value would be a new series.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
# The path label of a request no route matched (unknown paths must not each become a series).
UNMATCHED = "(unmatched)"
# Request latency: from under a millisecond (a health check) to the bridge's slowest runs.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                   60.0, 120.0)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServiceMetrics:
    """One service's registry (never the process-wide default: two apps in one process, as the
    tests build them, must not share or clash) and its HTTP request metrics."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.registry = CollectorRegistry()
        self.requests = Counter("http_requests", "HTTP requests answered, by route, method and status.",
                                ("route", "method", "status"), namespace=namespace,
                                registry=self.registry)
        self.latency = Histogram("http_request_duration_seconds",
                                 "Time from a request's arrival to its handler's answer, by route.",
                                 ("route", "method"), namespace=namespace, buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        # Each label set's children, found once: labels() validates and locks on every call.
        self._counted: dict[tuple[str, str, int], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        method = method if method in KNOWN_METHODS else "other"
        key = (route, method, status)
        counted = self._counted.get(key)
        if counted is None:
            counted = self._counted[key] = self.requests.labels(route, method, str(status))
        counted.inc()
        timed = self._timed.get((route, method))
        if timed is None:
            timed = self._timed[(route, method)] = self.latency.labels(route, method)
        timed.observe(seconds)

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The registry in the format the scraper asked for (Prometheus text unless it asks for
        OpenMetrics), and that format's content type."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


def route_label(request: web.Request) -> str:
    """The matched route's canonical path (`/read/{page_id}`), never the raw URL."""
    resource = request.match_info.route.resource
    if resource is None:
        return UNMATCHED
    return resource.canonical


def setup_metrics(app: web.Application, metrics: ServiceMetrics) -> None:
    """Count and time every request by route."""

    @web.middleware
    async def measure(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = 499  # the client went away first (nginx's code for it)
            raise
        finally:
            metrics.observe(route_label(request), request.method, status, time.perf_counter() - started)

    app.middlewares.append(measure)


def install_metrics(app: web.Application, metrics: ServiceMetrics) -> None:
    """The request middleware and `GET /metrics`. Call before the app's other middlewares are added:
    this one is then outermost and sees the status the client gets (421s and 401s included), while
    `/metrics` itself goes through the Host, Origin and token checks every route does."""
    setup_metrics(app, metrics)

    async def serve_metrics(request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app.router.add_get(METRICS_PATH, serve_metrics, allow_head=False)
