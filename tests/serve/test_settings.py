"""Settings: resolution order, validation, and every option documented."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from serve.settings import OPTIONS, ServeSettings, SettingsError, resolve_settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_has_an_option() -> None:
    settable = {f.name for f in fields(ServeSettings)} - {"root"}
    assert settable == {o.name for o in OPTIONS}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_every_option_is_documented(option: object) -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert f"`{option.flag}`" in text  # type: ignore[attr-defined]
    assert f"`{option.env}`" in text  # type: ignore[attr-defined]


def test_cli_beats_environment_beats_default(tmp_path: Path) -> None:
    env = {"LLMWIKI_SERVE_PORT": "9001", "LLMWIKI_GRAPH_DEFAULT_LIMIT": "7"}
    settings = resolve_settings(tmp_path, {"port": 9002}, env)
    assert settings.port == 9002
    assert settings.graph_default_limit == 7
    assert settings.host == "127.0.0.1"


def test_environment_lists_and_flags(tmp_path: Path) -> None:
    env = {"LLMWIKI_SERVE_CORS_ORIGINS": "http://a.test, http://b.test",
           "LLMWIKI_SERVE_ALLOW_DRAFTS": "yes", "LLMWIKI_SERVE_INOTIFY": "false"}
    settings = resolve_settings(tmp_path, {}, env)
    assert settings.cors_origins == ("http://a.test", "http://b.test")
    assert settings.allow_drafts is True
    assert settings.inotify is False


def test_inverted_flags_turn_features_off(tmp_path: Path) -> None:
    settings = resolve_settings(tmp_path, {"page_cache": False, "inotify": False}, {})
    assert settings.page_cache is False
    assert settings.inotify is False
    on = {"LLMWIKI_SERVE_PAGE_CACHE": "1", "LLMWIKI_SERVE_INOTIFY": "yes"}
    assert resolve_settings(tmp_path, {"page_cache": None, "inotify": None}, on).page_cache is True
    # A flag left at its other value is a flag not given: the environment decides.
    off = {"LLMWIKI_SERVE_PAGE_CACHE": "off", "LLMWIKI_SERVE_INOTIFY": "0"}
    settings = resolve_settings(tmp_path, {"page_cache": True, "inotify": True}, off)
    assert settings.page_cache is False
    assert settings.inotify is False


def test_no_flags_on_the_command_line_turn_features_off(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from serve.cli import _settings, build_parser

    args = build_parser().parse_args(["serve", str(tmp_path), "--no-page-cache", "--no-inotify"])
    settings = _settings(args, one_shot=False)
    assert (settings.page_cache, settings.inotify) == (False, False)
    args = build_parser().parse_args(["serve", str(tmp_path)])
    settings = _settings(args, one_shot=False)
    assert (settings.page_cache, settings.inotify) == (True, True)
    monkeypatch.setenv("LLMWIKI_SERVE_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    args = build_parser().parse_args(["manifest", str(tmp_path)])
    settings = _settings(args, one_shot=True)  # a one-shot turns watching off, shares the cache
    assert (settings.page_cache, settings.inotify) == (True, False)
    monkeypatch.setenv("LLMWIKI_SERVE_CACHE_DIR", str(tmp_path / "cache"))
    settings = _settings(args, one_shot=True)  # ... unless the cache would be inside the root
    assert (settings.page_cache, settings.inotify) == (False, False)


@pytest.mark.parametrize(
    ("cli", "env", "message"),
    [
        ({}, {"LLMWIKI_GRAPH_DEFAULT_LIMIT": "abc"}, "LLMWIKI_GRAPH_DEFAULT_LIMIT must be an integer"),
        ({"graph_default_limit": 0}, {}, "graph_default_limit must be between 1 and 2000"),
        ({"port": 70000}, {}, "port must be between 1 and 65535"),
        ({"refresh_interval_seconds": -1.0}, {}, "refresh_interval_seconds must be >= 0"),
        ({}, {"LLMWIKI_SERVE_ALLOW_DRAFTS": "perhaps"}, "LLMWIKI_SERVE_ALLOW_DRAFTS must be a boolean"),
    ],
)
def test_invalid_values_name_the_setting(tmp_path: Path, cli: dict[str, object],
                                         env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        resolve_settings(tmp_path, cli, env)
