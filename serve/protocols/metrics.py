"""serve's own metrics, read from the knowledge source when Prometheus scrapes (nothing is counted on
the request path): the projection's size and refreshes, the folder walks and the index builds."""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from common import metrics as common_metrics
from common.metrics import ServiceMetrics
from serve.service import KnowledgeSource

NAMESPACE = "llmwiki_serve"


class SourceCollector(Collector):
    def __init__(self, source: KnowledgeSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        freshness = self.source.freshness
        current = freshness.current  # the published snapshot as is: a scrape never rescans
        pages = GaugeMetricFamily(f"{NAMESPACE}_projection_pages",
                                  "Pages in the current projection (0 while none is published).",
                                  labels=("visibility",))
        pages.add_metric(("all",), current.page_count if current is not None else 0)
        pages.add_metric(("approved",), current.approved_page_count if current is not None else 0)
        yield pages
        yield CounterMetricFamily(f"{NAMESPACE}_projection_refreshes",
                                  "Projections built since start (the first one included).",
                                  value=freshness.projections)
        yield CounterMetricFamily(f"{NAMESPACE}_folder_walks",
                                  "Full walks of the served folder since start.", value=freshness.walks)
        yield CounterMetricFamily(f"{NAMESPACE}_index_builds",
                                  "Full builds of the search index since start.",
                                  value=self.source.indexing.builds)
        yield GaugeMetricFamily(f"{NAMESPACE}_index_build_seconds",
                                "Duration of the last full search-index build (0 before the first).",
                                value=self.source.indexing.build_seconds)
        yield GaugeMetricFamily(f"{NAMESPACE}_index_ready",
                                "1 once the search index has been built.",
                                value=1 if self.source.indexing.ready else 0)


def install_metrics(app: web.Application, source: KnowledgeSource) -> ServiceMetrics:
    metrics = ServiceMetrics(NAMESPACE)
    metrics.registry.register(SourceCollector(source))
    common_metrics.install_metrics(app, metrics)
    return metrics
