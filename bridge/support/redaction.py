"""Redaction of what the bridge's I/O log writes: secrets, URLs, local paths and model/provider
details are taken out of keys and strings, at any depth (contract 9.2)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

MAX_DEPTH = 8
MAX_ITEMS = 50
MAX_STRING = 20_000

# Normalised key (lower case, no separators) equal to or ending with one of these: the key goes,
# and the object says so. They describe the runtime or a store, not the evidence.
_DROPPED_SUFFIXES = (
    "embedding", "embeddings", "vector", "vectors", "provider", "providers", "providerurl", "provideruri",
    "model", "models", "modelname", "modelpath", "modelurl", "modeluri", "cache", "cachedir", "cachepath",
    "cacheurl", "cacheuri", "download", "downloads", "downloadpath", "downloadurl", "downloaduri",
    "endpoint", "endpoints", "baseurl", "baseuri")
_CREDENTIAL_KEYS = frozenset({"authorization", "proxyauthorization", "cookie", "setcookie", "xapikey",
                              "apikey"})
_CREDENTIAL_SUFFIXES = ("token", "secret", "password", "credential", "credentials")
_URL_SUFFIXES = ("url", "uri", "endpoint")
_SEPARATORS = re.compile(r"[-_.\s]")

_SECRET_WORDS = (r"api[_-]?key|x-api-key|authorization|proxy-authorization|password|passwd|secret|"
                 r"client[_-]?secret|access[_-]?token|refresh[_-]?token|id[_-]?token|token|credentials?")
_STRING_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?im)\b(set-cookie|cookie)(\s*:\s*)[^\r\n]*"), r"\1\2[redacted]"),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=:-]+", re.IGNORECASE), r"\1 [redacted]"),
    # A `Bearer`/`Basic` value was handled above; "[redacted" is a value already redacted.
    (re.compile(rf"(?i)([\"']?)\b({_SECRET_WORDS})\1(\s*[:=]\s*)(?!\[redacted|bearer\b|basic\b)"
                r"(\"[^\"]*\"|'[^']*'|[^\s,;&}\]]+)"),
     r"\1\2\1\3[redacted]"),
    (re.compile(r"\b(?:sk-proj-|sk-ant-|sk-|sk_|hf_)[A-Za-z0-9_-]{6,}"), "[redacted-key]"),
    (re.compile(r"(?i)([?&](?:api_key|access_token|refresh_token|id_token|token|key|secret|client_secret|"
                r"password|credential|code|sig|signature)=)[^&#\s\"']*"), r"\1[redacted]"),
    (re.compile(r"(?i)\bhttps?://[^\s\"'<>`]+"), "[redacted-url]"),
    (re.compile(r"(?<![\w\\])[A-Za-z]:\\[^\s\"'<>|]*"), "[redacted-path]"),
    (re.compile(r"(?<![\w\\])\\\\[^\s\"'<>|\\]+\\[^\s\"'<>|]*"), "[redacted-path]"),
    (re.compile(r"(?<![\w./-])/(?:Users|home|var/folders|var/tmp|tmp)/[^\s\"'<>|]*"), "[redacted-path]"),
)


def _key_class(key: str) -> str | None:
    name = _SEPARATORS.sub("", key.lower())
    if name.endswith(_DROPPED_SUFFIXES):
        return "drop"
    if name in _CREDENTIAL_KEYS or name.endswith(_CREDENTIAL_SUFFIXES):
        return "credential"
    if name.endswith(_URL_SUFFIXES):
        return "url"
    return None


def redact_text(text: str) -> str:
    if len(text) > MAX_STRING:
        text = text[:MAX_STRING] + f"...[{len(text) - MAX_STRING} character(s) truncated]"
    for pattern, replacement in _STRING_RULES:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any, depth: int = 0) -> Any:
    """A copy of JSON-like `value` that is safe to log."""
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= MAX_DEPTH:
        return "[truncated]"
    if isinstance(value, BaseModel):  # a wire model inside an answer (the run's result): its JSON form
        value = value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        dropped = False
        for key, item in value.items():
            name = str(key)
            kind = _key_class(name)
            if kind == "drop":
                dropped = True
            elif kind == "credential":
                out[name] = "[redacted]"
            elif kind == "url":
                out[name] = "[redacted-url]" if item not in (None, "") else item
            else:
                out[name] = redact(item, depth + 1)
        if dropped:
            out["redactedSensitiveField"] = True
        return out
    if isinstance(value, (list, tuple)):
        items = [redact(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"[{len(value) - MAX_ITEMS} item(s) truncated]")
        return items
    return redact_text(str(value))
