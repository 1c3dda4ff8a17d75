"""OKF v0.2 bundles over the real app: identity, payloads, graph, refs, errors and recovery."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve.settings import ServeSettings, SettingsError
from tests.serve.conftest import Client, ClientFactory
from tests.support.folders import copy_fixture

REPO = Path(__file__).resolve().parents[3]
OKF_CAPABILITIES = ["okf-v0.2", "okf_read_only_consumer", "okf_structured_provenance",
                    "okf_trust_lifecycle_metadata"]
INVALID = {"error": {"code": "okf_v0_2_invalid",
                     "message": "Configured root is not a valid OKF v0.2 bundle."}}
PROJECTION_ROUTES = ["/health", "/manifest", "/source-refs", "/source-bundle", "/graph",
                     "/graph/neighborhood?seed=index", "/read/index"]
BASE_META = {"adapter": "okf-v0.2", "implementation": "Open Knowledge Format v0.2",
             "source_root": ".", "source_profile": "okf-v0.2", "format_version": "0.2"}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return copy_fixture("shapes/okf-bundle", tmp_path / "roots")


async def get_json(client: Client, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status == status, await response.text()
    return await response.json()


async def mcp_call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
    response = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                "params": {"name": name, "arguments": arguments}})
    return response.status, await response.json()


def signature_lines(root: Path) -> list[str]:
    """The contract's signature entries for a folder of Markdown files only (walk order)."""
    lines = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory, name)
            data = path.read_bytes()
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            lines.append(f"{path.relative_to(root).as_posix()}\tfile\t{len(data)}\t{digest}")
    return lines


# -- identity -------------------------------------------------------------------------------


async def test_manifest_bundle_and_health(serve_client: ClientFactory, bundle: Path) -> None:
    client = await serve_client(bundle, enable_a2a=True)
    manifest = await get_json(client, "/manifest")
    assert manifest["adapter"] == "okf-v0.2"
    assert manifest["implementation"] == "Open Knowledge Format v0.2"
    assert (manifest["source_profile"], manifest["format_version"]) == ("okf-v0.2", "0.2")
    assert list(manifest)[6:10] == ["adapter", "implementation", "source_profile", "format_version"]
    assert manifest["title"] == "Finance Knowledge Bundle"
    assert (manifest["page_count"], manifest["approved_page_count"]) == (6, 5)
    assert manifest["index_page"] == "index.md"
    # The profile's capabilities come after the base ones and before the opt-in A2A one.
    assert manifest["capabilities"][-5:] == [*OKF_CAPABILITIES, "a2a-message"]
    source_bundle = await get_json(client, "/source-bundle")
    assert (source_bundle["source_profile"], source_bundle["format_version"]) == ("okf-v0.2", "0.2")
    assert list(source_bundle)[5:9] == ["adapter", "implementation", "source_profile",
                                        "format_version"]
    assert source_bundle["capabilities"] == manifest["capabilities"]
    health = await get_json(client, "/health")
    assert health["source"]["adapter"] == "okf-v0.2"
    assert health["capabilities"] == manifest["capabilities"]
    status, reply = await mcp_call(client, "llmwiki_source_bundle", {})
    assert status == 200
    assert reply["result"]["source_profile"] == "okf-v0.2"
    assert reply["result"]["capabilities"] == manifest["capabilities"]


async def test_other_shapes_keep_empty_profile_fields(serve_client: ClientFactory,
                                                      sample_root: Path) -> None:
    client = await serve_client(sample_root)
    manifest = await get_json(client, "/manifest")
    assert (manifest["source_profile"], manifest["format_version"]) == ("", "")
    assert not set(OKF_CAPABILITIES) & set(manifest["capabilities"])
    store = await get_json(client, "/diagnostics/projection-store")
    assert store["cache_source_id"] == "sample-wiki"


async def test_signature_formula_and_bundle_id(serve_client: ClientFactory, bundle: Path) -> None:
    client = await serve_client(bundle)
    manifest = await get_json(client, "/manifest")
    base = "sha256:" + hashlib.sha256("\n".join(signature_lines(bundle)).encode()).hexdigest()
    expected = "sha256:" + hashlib.sha256(f"{base}\tokf-v0.2\t0.2".encode()).hexdigest()
    assert manifest["projection"]["signature"] == expected
    assert manifest["bundle_id"] == f"finance-knowledge-bundle:sha256:{expected[7:19]}"
    store = await get_json(client, "/diagnostics/projection-store")
    assert store["cache_source_id"] == "okf-bundle@okf-v0.2"


# -- pages and graph ------------------------------------------------------------------------


async def test_read_payload_carries_the_okf_object(serve_client: ClientFactory,
                                                   bundle: Path) -> None:
    client = await serve_client(bundle)
    page = await get_json(client, "/read/revenue-metric")
    assert list(page)[-2:] == ["updated_at", "okf"]
    assert page["updated_at"] == "2026-07-01T09:30:00Z"
    assert page["review_state"] == "unknown"
    assert page["source_refs"] == ["rev-policy", "ledgers/general-ledger.csv", "SRC-FIN-7"]
    okf = page["okf"]
    assert okf["concept_type"] == "Metric"
    assert okf["trust_tier"] == "human-reviewed"
    assert okf["verified"] == [{"by": "human:finance-lead", "at": "2026-07-02"}]
    assert okf["generated"] == {"by": "agent:metric-bot", "at": "2026-07-01T09:30:00Z"}
    assert okf["sources"][0]["extra"] == {"excerpt_hash": "sha256:revpolicyfixture"}
    assert okf["sources"][1]["usage_window"] == {"days": 30}
    assert okf["extra"]["x-llmwiki"] == {"owner": "finance", "rank": 2}
    assert await get_json(client, "/read/revenue-metric?fields=id,okf") == {
        "id": "revenue-metric", "okf": okf}
    index = await get_json(client, "/read/metrics/index")
    assert (index["role"], index["okf"]["role"], index["okf"]["trust_tier"]) == (
        "index", "index", "unverified")
    status, reply = await mcp_call(client, "llmwiki_read", {"page_id": "revenue-metric"})
    assert status == 200 and reply["result"]["okf"] == okf
    assert await get_json(client, "/read/log", 404) == {"detail": "page not found"}
    assert await get_json(client, "/read/drafts/proposed-contract") == {
        "found": False, "reason": "not approved for serving"}


async def test_graph_node_metadata_and_okf_nodes(serve_client: ClientFactory,
                                                 bundle: Path) -> None:
    client = await serve_client(bundle)
    page = await get_json(client, "/read/revenue-metric")
    graph = await get_json(client, "/graph?limit=2000")
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["page:revenue-metric"]["metadata"] == {
        **BASE_META, "source_refs": page["source_refs"], "review_state": "unknown", "okf": page["okf"]}
    assert nodes["okf_type:metric"] == {"id": "okf_type:metric", "label": "Metric", "kind": "okf_type",
                                        "path": "metrics/revenue.md",
                                        "metadata": {"source_profile": "okf-v0.2"}}
    assert nodes["source:rev-policy"]["metadata"] == {"source_profile": "okf-v0.2",
                                                      "okf": page["okf"]["sources"][0]}
    assert "page:drafts/proposed-contract" not in nodes
    assert "source:draft-contract-source" not in nodes
    edges = {(e["source"], e["target"], e["relation"]): e["metadata"] for e in graph["edges"]}
    assert edges[("page:revenue-metric", "okf_resource:metrics-revenue", "describes")] == {
        "source": "okf.resource", "source_profile": "okf-v0.2"}
    assert (len(graph["nodes"]), len(graph["edges"])) == (20, 20)
    manifest = await get_json(client, "/manifest")
    assert (manifest["projection"]["graph_node_count"],
            manifest["projection"]["graph_edge_count"]) == (24, 23)
    # The neighbourhood and a context pack's graph render the same page nodes.
    around = await get_json(client, "/graph/neighborhood?seed=revenue-metric")
    assert {n["id"]: n for n in around["nodes"]}["page:revenue-metric"] == nodes["page:revenue-metric"]
    response = await client.post("/query", json={"query": "recognised revenue refunds"})
    pack = await response.json()
    packed = {n["id"]: n for n in pack["graph"]["nodes"]}
    assert packed["page:revenue-metric"] == nodes["page:revenue-metric"]
    assert packed["source:rev-policy"]["metadata"] == nodes["source:rev-policy"]["metadata"]


async def test_source_refs_are_structured_and_draft_filtered(serve_client: ClientFactory,
                                                             bundle: Path) -> None:
    client = await serve_client(bundle, allow_drafts=True)
    refs = {r["id"]: r for r in (await get_json(client, "/source-refs"))["source_refs"]}
    assert "draft-contract-source" not in refs
    policy = refs["rev-policy"]
    assert policy == {
        "id": "rev-policy", "label": "Revenue Recognition Policy", "kind": "okf_source",
        "uri": "llmwiki://finance-knowledge-bundle/source-refs/rev-policy",
        "linked_pages": ["metrics/revenue.md"], "linked_page_ids": ["revenue-metric"],
        "locator": {
            "source_profile": "okf-v0.2",
            "source": (await get_json(client, "/read/revenue-metric"))["okf"]["sources"][0],
            "first_seen_page": {"id": "revenue-metric", "path": "metrics/revenue.md"},
            "document": {"concept_type": "Metric", "status": "stable",
                         "trust_tier": "human-reviewed", "stale_after": "2026-12-31"},
        },
    }
    # A resource cited by two pages (one by id, one by resource) and a plain ref.
    assert refs["ledgers-general-ledger.csv"]["linked_pages"] == ["metrics/revenue.md"]
    assert refs["general-ledger"]["linked_pages"] == ["computations/revenue-ytd.md"]
    assert refs["src-fin-7"]["kind"] == "source_ref" and refs["src-fin-7"]["locator"] == {}
    assert set(refs) == {"rev-policy", "ledgers-general-ledger.csv", "general-ledger", "src-fin-7"}
    drafts = {r["id"] for r in (await get_json(client, "/source-refs?include_drafts=true"))["source_refs"]}
    assert "draft-contract-source" in drafts


# -- errors, recovery, profile ---------------------------------------------------------------


async def test_invalid_bundle_is_422_everywhere_and_recovers(serve_client: ClientFactory,
                                                             tmp_path: Path) -> None:
    root = copy_fixture("adversarial/okf-invalid-missing-type", tmp_path / "roots")
    client = await serve_client(root)
    for path in PROJECTION_ROUTES:
        assert await get_json(client, path, 422) == INVALID, path
    response = await client.post("/query", json={"query": "type"})
    assert (response.status, await response.json()) == (422, INVALID)
    # MCP JSON-RPC reports root errors with its fixed message (contract 6.1), never the path.
    status, body = await mcp_call(client, "llmwiki_graph", {})
    assert (status, body["error"]) == (200, {"code": -32000, "message": "Internal MCP-style error."})
    # Fixing the document is seen by the next request, without a restart.
    concept = root / "concept.md"
    fixed = concept.read_text(encoding="utf-8").replace("---\ntitle:", "---\ntype: Note\ntitle:", 1)
    concept.write_text(fixed, encoding="utf-8")
    manifest = await get_json(client, "/manifest")
    assert manifest["adapter"] == "okf-v0.2" and manifest["page_count"] == 2
    # Breaking a served bundle again rejects it again.
    concept.write_text("---\ntype: Note\nsources: [nope]\n---\n# C\n", encoding="utf-8")
    assert await get_json(client, "/health", 422) == INVALID


async def test_forced_profile_and_its_validation(serve_client: ClientFactory,
                                                 tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.md").write_text("---\ntype: Note\n---\n# A\n", encoding="utf-8")
    auto = await serve_client(root)
    assert (await get_json(auto, "/manifest"))["adapter"] == "generic-markdown"
    forced = await serve_client(root, source_profile="okf-v0.2")
    manifest = await get_json(forced, "/manifest")
    assert (manifest["adapter"], manifest["source_profile"]) == ("okf-v0.2", "okf-v0.2")
    store = await get_json(forced, "/diagnostics/projection-store")
    assert store["cache_source_id"] == "plain@okf-v0.2"
    generic = await serve_client(copy_fixture("shapes/generic-markdown", tmp_path / "g"),
                                 source_profile="okf-v0.2")
    assert await get_json(generic, "/manifest", 422) == INVALID


def test_invalid_profile_is_rejected_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="^source_profile must be auto or okf-v0.2$"):
        ServeSettings(root=tmp_path, source_profile="okf")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    for args, extra in ((["serve", str(tmp_path), "--source-profile", "okf-v0.3"], {}),
                        (["manifest", str(tmp_path), "--source-profile", "OKF"], {}),
                        (["serve", str(tmp_path)], {"LLMWIKI_SOURCE_PROFILE": "bogus"})):
        result = subprocess.run([sys.executable, "-m", "serve.cli", *args], cwd=REPO,
                                env={**env, **extra}, capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr == "Error: source_profile must be auto or okf-v0.2\n"
        assert result.stdout == ""


def test_cli_one_shots_take_the_profile(tmp_path: Path, bundle: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMWIKI_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.md").write_text("---\ntype: Note\n---\n# A\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "serve.cli", "manifest", str(root),
                             "--source-profile", "okf-v0.2"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert (manifest["adapter"], manifest["source_profile"]) == ("okf-v0.2", "okf-v0.2")
    assert manifest["capabilities"][-4:] == OKF_CAPABILITIES
    invalid = subprocess.run([sys.executable, "-m", "serve.cli", "source-refs",
                              str(REPO / "fixtures/adversarial/okf-invalid-bad-sources")],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                             check=False)
    assert invalid.returncode == 1
    assert invalid.stderr.startswith("Error: Configured root is not a valid OKF v0.2 bundle.")
    assert "Traceback" not in invalid.stderr
