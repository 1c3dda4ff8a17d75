"""The evidence of a run, built in one place from the sources' outcomes (in selected order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bridge.config.registry import SourceDescriptor
from bridge.core import artifact
from bridge.core.artifact import WireGraph
from bridge.core.fusion import Ranked, fuse
from bridge.core.gather import SourceOutcome
from bridge.core.prompt import AnsweredSource
from common.bridge_schemas import Citation, Diagnostic, SourceBundle, TraceStep


@dataclass(frozen=True)
class Evidence:
    """Every source's steps, diagnostics and bundles in selected order; the citations deduped by id
    (first wins) in relevance order across sources, or in selected order when the request asks
    for `citationOrder: "source"` (the reference's array); the merged graph; which sources
    answered and which failed (contract 3.7)."""

    steps: list[TraceStep]
    diagnostics: list[Diagnostic]
    bundles: list[SourceBundle]
    citations: list[Citation]
    graph: WireGraph
    answered: list[AnsweredSource]
    failed: list[SourceDescriptor]

    def step(self) -> TraceStep:
        """The run's `bridge-evidence` step."""
        return artifact.step(
            "bridge-evidence", "Prepare evidence", "done",
            detail=f"Prepared {len(self.citations)} citation(s), {len(self.graph.nodes)} graph node(s), "
                   f"{len(self.bundles)} source bundle metadata record(s), and {len(self.failed)} source "
                   "failure note(s).")


def collect(outcomes: Sequence[SourceOutcome], query: str, by_relevance: bool = True) -> Evidence:
    answered = [AnsweredSource(o.source, o.evidence, o.bundle) for o in outcomes if o.evidence is not None]
    groups = [a.evidence.citations for a in answered]
    # A source that says it cannot answer (`answerable: false`) ranks after those that can.
    citations = (fuse(query, [Ranked(a.evidence.citations, a.evidence.answerable is not False)
                              for a in answered])
                 if by_relevance else artifact.dedupe_citations(groups))
    return Evidence(
        steps=[s for o in outcomes for s in o.steps],
        diagnostics=[d for o in outcomes for d in o.diagnostics],
        bundles=[o.bundle for o in outcomes if o.bundle is not None],
        citations=citations,
        graph=artifact.merge_graphs([a.evidence.graph for a in answered]),
        answered=answered,
        failed=[o.source for o in outcomes if o.failed])
