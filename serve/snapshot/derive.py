"""The next snapshot made from its parent, sharing what the change cannot have touched."""

from __future__ import annotations

import dataclasses
import itertools
import operator
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from serve.graph.links import Overlay, alias_keys, as_overlay, changed_paths, own_keys
from serve.graph.model import Fragment, SidecarFile, lookup_key
from serve.snapshot import graph
from serve.snapshot.caches import SnapshotCaches
from serve.snapshot.projection import (
    SERIALS,
    FileProblem,
    Projection,
    bundle_id_of,
    positions,
    title_and_description,
)
from serve.source.page import Page

# Derived snapshots remember this many steps back which pages each step replaced, so whatever
# was synced to an ancestor (the search index) can catch up with just those pages.
LINEAGE_DEPTH = 32
# Past this share of the pages changed at once, a derived snapshot's link index is built
# anew (from its own pages) rather than derived from the parent's, page by page.
REBUILD_SHARE = 0.3
_PATH = operator.attrgetter("path")
_ID = operator.attrgetter("id")


def derive(parent: Projection, replaced: Sequence[tuple[Page, Fragment]], signature: str,
           diagnostics: Sequence[FileProblem]) -> Projection | None:
    """The next snapshot when only the content of existing pages changed, sharing
    everything that cannot have changed; None when a full build is needed (a page's
    identity, links, members, visibility or graph metadata changed). The parent and
    its caches are only read."""
    pages = list(parent.pages)
    fragments = parent.fragments.entries()
    approved = list(parent.approved_pages)
    approved_position = parent.caches.approved_position
    if approved_position is None:
        approved_position = positions(parent.approved_pages)
    for page, fragment in replaced:
        index = parent.position.get(page.path)
        if index is None:
            return None
        old = pages[index]
        page = page._replace(role=parent.layout.role_of(page.path))
        if (page.id, page.title, page.role, page.approved, page.review_state,
                page.source_refs, page.okf_json) != (old.id, old.title, old.role, old.approved,
                                                     old.review_state, old.source_refs,
                                                     old.okf_json):
            return None
        if fragment != parent.fragments[index]:
            return None
        pages[index], fragments[index] = page, fragment
        if page.approved:  # the same pages are approved
            approved[approved_position[page.path]] = page
    # Roles are unchanged (above): only a replaced index or overview page can name the wiki.
    news = [pages[parent.position[page.path]] for page, _ in replaced]
    hubs = {page.path: page for page in news if page.role != "topic"}
    title, description = parent.title, parent.description
    if any(page.role in ("index", "overview") for page in hubs.values()):
        title, description = title_and_description(pages, parent.layout)
        if title != parent.title:
            return None  # the title names the source: identity changes, build anew
    changed = frozenset(page.path for page, _ in replaced)
    # The graph (ids, labels, kinds, edges, visibility, page-node metadata) is unchanged
    # by construction, so the built graph, its views and its counts carry over.
    caches = parent.caches.carried_over()
    caches.approved_position = approved_position
    for drafts, entry in parent.caches.entry.items():  # the same pages, in the same order
        caches.entry[drafts] = tuple(hubs.get(p.path, p) for p in entry) if hubs else entry
    if caches.lookup is not None:  # a read by name must find the new text
        caches.lookup = _relinked(parent, caches.lookup, replaced, pages)
    if caches.links is not None:
        caches.links = caches.links.with_lookup(
            caches.lookup if caches.links.lookup is parent.caches.lookup and caches.lookup is not None
            else _relinked(parent, caches.links.lookup, replaced, pages))
    placed = tuple(pages)
    return dataclasses.replace(
        parent, pages=placed, fragments=parent.fragments.with_entries(placed, fragments),
        approved_pages=tuple(approved),
        signature=signature, diagnostics=tuple(diagnostics), description=description,
        bundle_id=bundle_id_of(parent.source_id, signature), serial=next(SERIALS),
        lineage=((parent.serial, changed), *parent.lineage[: LINEAGE_DEPTH - 1]), caches=caches)


def derive_pages(parent: Projection, gone: Iterable[str], added: Sequence[tuple[Page, Fragment]],
                 signature: str, diagnostics: Sequence[FileProblem], raw_labels: Sequence[str],
                 sort_key: Callable[[str], Any]) -> Projection | None:
    """The next snapshot when pages were added, deleted, renamed or rewritten in any
    way (`gone`: paths whose pages went, `added`: the pages that came, an edit being
    both), without a pass over every page's links: the link index (graph/links.py) is
    derived from the parent's, so the graph, link resolution, backlinks and owners of
    only the touched pages and their neighbours are worked out again. None when a full
    build is needed: the wiki's title changed, or the graph's rules need every page
    (Dendron hierarchy, two pages with one id). The parent is only read, but for its
    link index, built if no request built it yet."""
    if not graph.indexable(parent):
        return None
    gone = set(gone)
    if graph.built_links(parent) is None:
        # The parent's link index is built from every fragment (below): made here, so the
        # next snapshot's entries are those it is made from. A link index taken from the
        # store needs only the fragments of the pages the change touches, made when asked.
        parent.fragments.complete()
    pages, fragments = list(parent.pages), parent.fragments.entries()
    removed: list[tuple[Page, Fragment]] = []
    for index in sorted((parent.position[path] for path in gone), reverse=True):
        removed.append((pages[index], parent.fragments[index]))
        del pages[index], fragments[index]
    layout = parent.layout
    placed_added: list[tuple[Page, Fragment]] = []
    ids: set[str] = set()
    for page, fragment in added:
        if page.path in parent.position and page.path not in gone:
            return None  # a path both kept and added: not a change set this can apply
        held = parent.by_key.get(page.id)
        if page.id in ids or (held is not None and parent.pages[held].id == page.id
                              and parent.pages[held].path not in gone):
            return None  # two pages would share an id: the graph's dedupe needs every page
        ids.add(page.id)
        if (role := layout.role_of(page.path)) != page.role:
            page = page._replace(role=role)
        key = sort_key(page.path)
        at = bisect_left(pages, key, key=lambda p: sort_key(p.path))
        pages.insert(at, page)
        fragments.insert(at, fragment)
        placed_added.append((page, fragment))
    if not pages:
        return None
    title, description = title_and_description(pages, layout)
    if title != parent.title:
        return None  # the title names the source: identity changes, build anew
    placed = tuple(pages)
    kept = parent.fragments.with_entries(placed, fragments)
    # The ids are unique (checked above), and an id wins over a path spelled the same.
    position = dict(zip(map(_PATH, placed), itertools.count()))
    by_key = dict(position)
    by_key.update(zip(map(_ID, placed), itertools.count()))
    touched = gone | {page.path for page, _ in placed_added}
    before = parent.caches
    page_json = dict(before.page_json)  # one C-level copy: other threads may be filling it
    for path in touched:
        page_json.pop(path, None)
    caches = SnapshotCaches(page_json=page_json, indexable=True)
    if before.approved_paths is not None:
        caches.approved_paths = (before.approved_paths - gone) | {
            page.path for page, _ in placed_added if page.approved}
    if before.withheld is not None:
        withheld = [path for path in before.withheld if path not in gone]
        for page, _ in placed_added:
            if not page.approved:
                insort(withheld, page.path)
        caches.withheld = withheld
    large = len(touched) > REBUILD_SHARE * len(placed)
    if not large:
        # The parent's link index is built here if no request needed it yet (a start-up
        # holds the restart cache's plain views instead): once, for the first change;
        # every later snapshot derives its own from it, and without one each snapshot
        # after a change would work out backlinks, owners and graph counts from every
        # page again.
        links, changed_keys, changed_ids = graph.links(parent).derived(removed, placed_added, placed,
                                                                       kept, position)
        caches.links, caches.lookup = links, links.lookup

        def page_path(nid: str) -> str | None:
            found = by_key.get(nid[5:])
            return placed[found].path if found is not None and placed[found].id == nid[5:] else None

        stale = touched | changed_paths(links, changed_ids, page_path)
        for key in changed_keys:
            stale.update(links.linkers.get(key, ()))
        if before.sidecar_keys is None:
            before.sidecar_keys = frozenset(sidecar_keys(parent.sidecars))
        caches.sidecar_keys = before.sidecar_keys
        side = before.sidecar
        if (side is not None and not changed_keys & side.keys and not changed_ids & side.asked
                and not stale & graph.facts(parent).keys()):
            caches.sidecar = side  # no fact's end resolves, or is proposed, differently
        facts = before.facts
        if facts is not None and not changed_keys & before.sidecar_keys and not touched & facts.keys():
            caches.facts = facts  # each fact's ends are the same page objects
    derived = dataclasses.replace(
        parent, pages=placed, fragments=kept, signature=signature,
        raw_labels=tuple(raw_labels), diagnostics=tuple(diagnostics), description=description,
        bundle_id=bundle_id_of(parent.source_id, signature),
        approved_pages=tuple(p for p in placed if p.approved), by_key=by_key,
        position=position, serial=next(SERIALS),
        lineage=((parent.serial, frozenset(touched)), *parent.lineage[: LINEAGE_DEPTH - 1]),
        caches=caches)
    if large:  # a checkout or a recompiled wiki: built from its pages, quicker than derived
        graph.links(derived)  # made on first use; here, with the change, not by a request
    return derived


def with_sidecars(parent: Projection, sidecars: Sequence[SidecarFile], signature: str,
                  diagnostics: Sequence[FileProblem]) -> Projection | None:
    """The next snapshot when only the sidecar files (graph/graph.json) changed: the same
    pages, so what is made from them alone carries over (lookup, backlinks, owners, the
    link index, page-node JSON); what the facts reach is made again on first use. None
    when the graph needs every page (see graph.indexable). The parent is only read, but for
    its link index, built if no request built it yet (as derive_pages does)."""
    if not graph.indexable(parent):
        return None
    caches = parent.caches.with_other_facts(graph.links(parent))
    return dataclasses.replace(
        parent, sidecars=tuple(sidecars), signature=signature, diagnostics=tuple(diagnostics),
        bundle_id=bundle_id_of(parent.source_id, signature), serial=next(SERIALS),
        lineage=((parent.serial, frozenset()), *parent.lineage[: LINEAGE_DEPTH - 1]), caches=caches)


def _relinked(parent: Projection, lookup: Mapping[str, Page], replaced: Sequence[tuple[Page, Fragment]],
              pages: Sequence[Page]) -> Overlay[Page]:
    """`lookup` with the replaced pages' keys naming their new objects (in `pages`): an
    overlay on it, so an edit costs its own keys rather than a copy of every key (6 ms at
    100,000 pages)."""
    changes: dict[str, Page] = {}
    root = graph.source_root(parent)
    for page, fragment in replaced:
        at = parent.position[page.path]
        old, new = parent.pages[at], pages[at]
        for key in (*own_keys(new, fragment, root), *alias_keys(fragment)):
            if lookup.get(key) is old:
                changes[key] = new
    return as_overlay(lookup).with_changes(changes)


def sidecar_keys(sidecars: Sequence[SidecarFile]) -> set[str]:
    """The lookup keys of every sidecar fact's ends."""
    return {lookup_key(value) for sidecar in sidecars for fact in sidecar.edges
            for value in (fact.source, fact.target)}
