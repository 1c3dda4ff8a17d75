"""The source protocols this bridge speaks: one explicit table, protocol name -> client class."""

from __future__ import annotations

from collections.abc import Mapping

from bridge.sources.a2a_source import A2aSourceClient
from bridge.sources.client import HttpSourceClient, TransportClient
from bridge.sources.mcp_source import McpSourceClient

SourceClients = Mapping[str, type[TransportClient]]


def source_clients() -> SourceClients:
    """The table; built where the bridge starts (the app factory, the CLI) and handed to every
    source call through the transport. A protocol missing here is each such source's failure."""
    return {cls.protocol: cls for cls in (HttpSourceClient, McpSourceClient, A2aSourceClient)}
