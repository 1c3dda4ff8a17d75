"""Knowledge Sources that answer in the other spellings the contracts document, on one loopback port
in a thread: the bridge must read them as it reads serve's snake_case.

  /camel/...   camelCase everywhere (wikiTitle, pageId, connectionId, sourceRefs, pageCount, the
               approved count and the adapter under `metadata`), the graph as top-level
               `nodes`/`edges` read through their fallbacks (title for a label, role for a kind,
               kind for a relation), an empty `id` and null first spellings that must be skipped,
               a handle sent as `uri`, and keys nobody knows
  /other/...   the remaining spellings: `title` for the wiki title, ids from `path`,
               `connection_id`, `source_refs`, `approved_page_count`, and a `graph` object
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

CAMEL_QUERY: dict[str, Any] = {
    "wikiTitle": "Camel Wiki", "pageCount": 3, "answerable": True,
    "metadata": {"approvedPageCount": 2, "adapter": "camel-adapter", "unknown": {"x": 1}},
    "orientation": [{"pageId": "hot", "title": "Hot", "path": "hot.md", "role": "hot",
                     "sourceRefs": ["SRC-HOT"], "snippet": "# Hot\nThis week: [[Release|the release]]."}],
    "citations": [{"id": "", "pageId": "rollback", "path": "runbooks/rollback.md", "title": "Rollback",
                   "snippet": "Redeploy the previous tag.", "score": 2, "connectionId": "upstream-a",
                   "sourceRefs": ["SRC-REL-1", 7], "uri": "llmwiki://camel/pages/rollback",
                   "somethingNew": {"nested": [1, 2]}}],
    "nodes": [{"id": "page:rollback", "label": None, "title": "Rollback page", "role": "topic",
               "path": "runbooks/rollback.md", "metadata": {"weight": 1}},
              {"id": "page:hot", "label": "", "kind": "", "role": "hot"}],
    "edges": [{"source": "page:hot", "target": "page:rollback", "relation": None, "kind": "links_to"},
              {"source": "page:hot", "target": "elsewhere"}],
    "limitations": ["camel limitation", 3],
    "newTopLevelKey": [{"a": None}],
}
CAMEL_SEARCH: dict[str, Any] = {"results": [
    {"pageId": "release-checklist", "title": "Release Checklist", "path": "release.md",
     "snippet": "Tag, build, publish.", "score": 1, "sourceRefs": ["SRC-REL-2"]}]}
OTHER_QUERY: dict[str, Any] = {
    "title": "Other Wiki", "approved_page_count": 5,
    "evidence": [{"path": "guides/deploy.md", "title": "Deploy", "snippet": "Deploy with care.",
                  "connection_id": "upstream-b", "source_refs": ["SRC-DEP"]},
                 "not an item",
                 {"page_id": "faq", "title": "FAQ"}],
    "graph": {"nodes": [{"id": "page:faq", "kind": "faq"}, {"id": "page:deploy", "title": "Deploy"}],
              "edges": [{"source": "page:faq", "target": "page:deploy", "relation": "mentions"}]},
}

# Manifests (contract 4.3.3): camelCase with the counts under `projection`; snake_case with
# them at the top, the other spellings of a source ref, a root the bridge must drop.
CAMEL_MANIFEST: dict[str, Any] = {
    "sourceId": "camel", "bundleId": "camel:sha256:abc", "title": "Camel",
    "projection": {"projectionSignature": "sha256:abc", "pageCount": 3, "approvedPageCount": 2},
    "sourceRefs": [{"sourceRefId": "SRC-HOT", "name": "Hot notes", "kind": "doc",
                    "uri": "https://user:pw@docs.example/hot?x=1"}, "not an object"],
    "rawOrigins": {"metadataOnly": True, "originCount": "4"}}
OTHER_MANIFEST: dict[str, Any] = {
    "source_id": "other", "bundle_id": "other:1", "title": "Other", "root": "/srv/secret",
    "signature": "sha256:def", "page_count": 5, "graph_node_count": 9,
    "source_refs": [{"id": "SRC-DEP", "label": "Deploy", "type": "runbook"}],
    "raw_origins": ["a", "b"]}


def _app() -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        camel = request.path.startswith("/camel/")
        if request.path.endswith("/query"):
            return web.json_response(CAMEL_QUERY if camel else OTHER_QUERY)
        if request.path.endswith("/search"):
            return web.json_response(CAMEL_SEARCH if camel else {"results": []})
        return web.json_response(CAMEL_MANIFEST if camel else OTHER_MANIFEST)

    app = web.Application()
    for prefix in ("camel", "other"):
        app.router.add_route("*", f"/{prefix}/{{tail:.*}}", answer)
    return app


@contextmanager
def running_spelled_sources() -> Iterator[str]:
    """The server on 127.0.0.1 in its own thread and event loop, for the `with` block; yields its URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app())

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    url = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
