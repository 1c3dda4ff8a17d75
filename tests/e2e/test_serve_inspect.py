"""`llmwiki-serve inspect ROOT`, installed: what serve sees in a folder (its shape and why, pages,
what is skipped and why, file-name titles, drafts withheld, shared titles), with no server."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.conftest import REPO, SAMPLE_WIKI
from tests.e2e.processes import console_script, free_port, run_command, start_serve, stop_checked


def _inspect(work: Path, root: Path, *args: str) -> Any:
    done = run_command(work, [console_script("llmwiki-serve"), "inspect", root, "--json", *args])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def _paths(entries: list[dict[str, str]]) -> dict[str, str]:
    return {entry["path"]: entry["reason"] for entry in entries}


def test_a_vault_without_its_marker_is_explained(tmp_path: Path) -> None:
    root = tmp_path / "en"
    (root / "Templates").mkdir(parents=True)
    (root / "Daily").mkdir()
    (root / ".trash").mkdir()
    (root / ".trash" / "old.md").write_text("# Deleted\n")
    (root / "Templates" / "Meeting.md").write_text("# Templates\nA meeting template.\n")
    (root / "Daily" / "Templates.md").write_text("# Templates\nDaily templates.\n")
    (root / "Plain note.md").write_text("No heading here, only text.\n")
    (root / "Draft.md").write_text("---\ndraft: true\n---\n# Draft idea\n")
    (root / "big.md").write_text("# Big\n" + "x" * 4000 + "\n")
    (root / "binary.md").write_bytes(b"\0\1\2 not text")
    os.symlink(root / "Plain note.md", root / "link.md")

    report = _inspect(tmp_path / "work", root, "--max-page-bytes", "2048")

    assert report["adapter"] == "generic-markdown"
    assert "no tool's marker" in report["why"] and ".obsidian/" in report["why"]
    assert report["title"] == "en" and "folder's name" in report["title_from"]
    assert report["pages"] == 4 and report["approved"] == 3
    skipped = _paths(report["skipped"])
    assert "larger than --max-page-bytes" in skipped["big.md"]
    assert "NUL" in skipped["binary.md"]
    assert "symbolic link" in skipped["link.md"]
    assert _paths(report["ignored_dirs"]) == {".trash": "deleted notes"}
    assert _paths(report["withheld"]) == {"Draft.md": "draft: True"}
    assert [e["path"] for e in report["file_name_titles"]] == ["Plain note.md"]
    [shared] = report["duplicate_titles"]
    assert shared["title"] == "Templates"
    assert [p["path"] for p in shared["pages"]] == ["Daily/Templates.md", "Templates/Meeting.md"]
    # The documented rule: a read by a shared title gets the last candidate inspect lists.
    serve = start_serve(tmp_path / "serve", root, "--no-page-cache")
    try:
        with urllib.request.urlopen(f"{serve.url}/read/Templates", timeout=10) as answer:
            assert json.load(answer)["path"] == shared["pages"][-1]["path"]
    finally:
        stop_checked(serve)


def test_the_text_form_names_the_shape_and_its_reason(tmp_path: Path) -> None:
    done = run_command(tmp_path, [console_script("llmwiki-serve"), "inspect", SAMPLE_WIKI])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("Shape: llmwiki-markdown, because an LLM-compiled wiki")
    assert 'Wiki title: "Sample Operations Wiki" (from index.md)' in lines
    assert "Pages: 14 (12 served, 2 withheld) from 15 files walked" in lines
    assert any(line.startswith("Withheld") for line in lines)


def test_each_shape_fixture_is_named_with_its_marker(tmp_path: Path) -> None:
    shapes = REPO / "fixtures" / "shapes"
    expected = {"obsidian-vault": ("obsidian", ".obsidian/"), "logseq-graph": ("logseq", "logseq/config.edn"),
                "dendron-single": ("dendron", "dendron.yml"), "foam-jsonc": ("foam", "recommends Foam"),
                "quartz-site": ("quartz", "quartz.config"), "okf-bundle": ("okf-v0.2", "okf_version"),
                "marker-only": ("", "no Markdown file")}
    for name, (adapter, marker) in expected.items():
        report = _inspect(tmp_path / name, shapes / name)
        assert report["adapter"] == adapter, name
        assert marker in report["why"], (name, report["why"])


def test_inspect_starts_no_server_and_reports_a_missing_folder(tmp_path: Path) -> None:
    port = free_port()
    done = run_command(tmp_path, [console_script("llmwiki-serve"), "inspect", tmp_path / "nope"],
                       env={"LLMWIKI_SERVE_PORT": str(port)})
    assert done.returncode == 2
    assert "ROOT must be an existing directory" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
