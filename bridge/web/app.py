"""The bridge's aiohttp application: the service, the pipeline, the routes and the source session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import structlog
from aiohttp import web
from aiohttp.abc import AbstractResolver

from bridge.config.registry import SourceDescriptor, normalize_registered
from bridge.config.settings import BridgeSettings, check_bind_policy
from bridge.config.store import SettingsFileError, SettingsStore
from bridge.service import BridgeService
from bridge.sources.protocols import source_clients
from bridge.sources.transport import source_http_client
from bridge.web.middlewares import setup_bridge_pipeline
from bridge.web.requests import SERVICE_KEY
from bridge.web.routes import add_routes
from common.logging import setup_request_context

RESOLVER_KEY = web.AppKey("bridge_resolver", AbstractResolver)

log = structlog.get_logger("llmwiki.bridge.http")


def load_registry(store: SettingsStore | None) -> list[SourceDescriptor]:
    """Registered sources from the settings file; an unusable file or entry is reported, not fatal."""
    if store is None:
        return []
    try:
        document = store.read()
    except SettingsFileError:
        log.warning("settings_file_invalid")
        return []
    try:
        return normalize_registered(document.sources)
    except ValueError:
        store.status = "invalid_sources"
        log.warning("settings_file_sources_invalid")
        return []


def create_app(settings: BridgeSettings, sources: list[SourceDescriptor] | None = None,
               resolver: AbstractResolver | None = None) -> web.Application:
    """Build the bridge application. Sources come from the settings file when `config_path` is set
    (persistence on), unless given explicitly. `resolver` replaces the system resolver under the
    policy check (tests use it to simulate DNS answers)."""
    check_bind_policy(settings)
    store = SettingsStore(settings.config_path) if settings.config_path is not None else None
    registry = sources if sources is not None else load_registry(store)
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SERVICE_KEY] = BridgeService(settings, registry, store, clients=source_clients())
    if resolver is not None:
        app[RESOLVER_KEY] = resolver
    if settings.metrics:  # off: no middleware, no route, prometheus_client not even imported
        from bridge.web.metrics import BridgeMetrics
        from common.metrics import install_metrics

        metrics = BridgeMetrics(app[SERVICE_KEY].clients)
        app[SERVICE_KEY].metrics = metrics
        install_metrics(app, metrics)  # first, so outermost: it sees the status the client gets
    setup_request_context(app, "bridge")
    setup_bridge_pipeline(app)
    add_routes(app)
    app.cleanup_ctx.append(_source_client)
    return app


async def _source_client(app: web.Application) -> AsyncIterator[None]:
    """One shared outbound client for every source call; closed with the app."""
    service = app[SERVICE_KEY]
    resolver = app.get(RESOLVER_KEY, None)
    async with source_http_client(lambda: service.source_policy, resolver) as client:
        service.http = client
        yield
        service.http = None
