"""Retrieval discovery (runs with a retrieval intent only): every selected source's fresh
capabilities, read before the fan-out, decide what each is sent (contract 3.10)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from bridge.config.registry import SourceDescriptor
from bridge.core.gather import deadline_passed
from bridge.core.retrieval import SourceRetrievalPlan, plan_for, unsupported_message
from bridge.sources.base import BundleRead, ClientFor, SourceCallError
from bridge.support.fanout import fan_out
from bridge.support.text import safe_id
from common.bridge_schemas import RetrievalIntent

log = structlog.get_logger("llmwiki.bridge.run")


@dataclass(frozen=True)
class Discovery:
    """By selected index: what discovery read (reused by the fan-out, not read twice) and the plan."""

    reads: dict[int, BundleRead]
    plans: dict[int, SourceRetrievalPlan]

    def unsupported(self, intent: RetrievalIntent, selected: Sequence[SourceDescriptor]) -> str | None:
        """With `fallback: none`, the 400 message naming every source that cannot serve the intent."""
        if intent.fallback != "none":
            return None
        labels = [f"{s.id} ({s.protocol})" for s in selected]
        plans = self.plans
        mode = [labels[i] for i in plans if not plans[i].mode_supported]
        guided = [labels[i] for i in plans if plans[i].mode_supported and not plans[i].guided_supported]
        filters = [labels[i] for i in plans if not plans[i].filters_supported]
        return unsupported_message(intent, mode, guided, filters) if mode or guided or filters else None


async def discover(client_for: ClientFor,
                   selected: Sequence[SourceDescriptor], intent: RetrievalIntent, deadline: float,
                   limit: int) -> Discovery:
    """Read every bundle first. A read that `deadline` cuts short counts as failed (the source keeps
    its descriptor's capabilities)."""
    clients = [client_for(source) for source in selected]

    async def read(index: int) -> BundleRead | None:
        try:
            async with asyncio.timeout_at(deadline):
                return await clients[index].discover()
        except TimeoutError:
            return BundleRead(attempted=True, error=deadline_passed())
        except Exception:  # a bridge bug with this source's answer: its failure, not the run's
            log.exception("source_discovery_failed", source=safe_id(selected[index].id))
            return BundleRead(attempted=True, error=SourceCallError("Source discovery failed."))

    found = await fan_out(range(len(selected)), read, limit)
    reads: dict[int, BundleRead] = {}
    plans: dict[int, SourceRetrievalPlan] = {}
    ids = [s.id for s in selected]
    for index, (source, bundle) in enumerate(zip(selected, found, strict=True)):
        if bundle is not None:
            reads[index] = bundle
        if bundle is not None and bundle.raw is not None:
            caps, basis = clients[index].discovered_capabilities(bundle), "fresh"
        else:
            caps, basis = source.capabilities, "descriptor" if source.capabilities else "none"
        plans[index] = plan_for(intent, caps, basis, source.id, ids, source.protocol)
    return Discovery(reads, plans)
