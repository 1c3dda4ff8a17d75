"""Errors raised by serve's core, each with a stable code and a message safe for clients."""

from __future__ import annotations


class KnowledgeSourceError(Exception):
    """Base: `code` and `safe_message` may be shown to clients; `str(self)` may not."""

    code = "knowledge_source_error"
    safe_message = "The knowledge source could not answer."


class WikiRootError(KnowledgeSourceError):
    """The configured root is missing or holds nothing this service can serve."""

    def __init__(self, code: str, safe_message: str, detail: str = "") -> None:
        # str() is for local operators (CLI, logs) and may name the path; clients never see it.
        super().__init__(f"{safe_message} ({detail})" if detail else safe_message)
        self.code = code
        self.safe_message = safe_message


def root_missing(detail: str = "") -> WikiRootError:
    return WikiRootError(
        "wiki_root_missing", "Configured wiki root does not exist or is not a directory.", detail
    )


def root_unsupported(detail: str = "") -> WikiRootError:
    return WikiRootError(
        "wiki_root_unsupported", "No supported wiki files were found under the configured root.",
        detail,
    )


def okf_invalid(detail: str = "") -> WikiRootError:
    return WikiRootError("okf_v0_2_invalid", "Configured root is not a valid OKF v0.2 bundle.", detail)


class UserError(KnowledgeSourceError):
    """A request the service understood but cannot honour (HTTP 400 with `detail`)."""

    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.safe_message = message


class NotReady(KnowledgeSourceError):
    """The search index is still being built or loaded at start-up (HTTP 503 with Retry-After)."""

    code = "index_not_ready"
    safe_message = "The search index is still being built; retry shortly."
    retry_after_seconds = 2
