"""The bridge settings file (version, config, sources): read tolerantly, written atomically."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETTINGS_VERSION = 1


class SettingsFileError(Exception):
    """The settings file exists but cannot be used (unreadable or not a JSON object)."""


@dataclass
class SettingsDocument:
    config: dict[str, Any] = field(default_factory=dict)
    sources: list[Any] = field(default_factory=list)


@dataclass
class SettingsStore:
    """One settings file. `status` is `missing`, `ok` or `invalid` after the last read; a corrupt file
    is reported (and never overwritten), not fatal."""

    path: Path
    status: str = "missing"

    def read(self) -> SettingsDocument:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.status = "missing"
            return SettingsDocument()
        except OSError as exc:
            self.status = "invalid"
            raise SettingsFileError("Settings file could not be read.") from exc
        if not text.strip():
            self.status = "ok"
            return SettingsDocument()
        try:
            data = json.loads(text)
        except ValueError:
            self.status = "invalid"
            raise SettingsFileError("Settings file is not valid JSON.") from None
        if not isinstance(data, dict):
            self.status = "invalid"
            raise SettingsFileError("Settings file must hold a JSON object.")
        config = data.get("config") if isinstance(data.get("config"), dict) else {}
        sources = data.get("sources") if isinstance(data.get("sources"), list) else []
        self.status = "ok"
        return SettingsDocument(dict(config or {}), list(sources or []))

    def read_or_empty(self) -> SettingsDocument:
        try:
            return self.read()
        except SettingsFileError:
            return SettingsDocument()

    def write(self, config_patch: dict[str, Any] | None = None,
              sources: list[dict[str, Any]] | None = None) -> None:
        """Shallow-merge `config_patch`, replace `sources` when given, and write the whole file
        through a temp file + fsync + rename, so a reader sees the old file or the new one."""
        current = self.read()  # raises on a corrupt file: we never overwrite what we cannot read
        config = {**current.config, **(config_patch or {})}
        document = {"version": SETTINGS_VERSION, "config": config,
                    "sources": sources if sources is not None else current.sources}
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{int(time.time() * 1000)}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # it holds secrets
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        with contextlib.suppress(OSError):  # make the rename itself durable
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self.status = "ok"

