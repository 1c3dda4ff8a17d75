"""The runtime client's HTTP transport: every answer read as it arrives and dropped at a size cap."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2


class RuntimeAnswerTooLarge(Exception):
    """The runtime's answer passed the bridge's cap; the read stopped there."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.inner:
            size += len(chunk)
            if size > self.limit:
                raise RuntimeAnswerTooLarge
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """Asks for uncompressed answers (so the bytes counted are the bytes kept) and refuses one
    larger than `limit`, from its Content-Length or while it streams. The openai client reads
    every answer, errors included, through here."""

    def __init__(self, limit: int) -> None:
        self.inner = httpx2.AsyncHTTPTransport(trust_env=False)
        self.limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        length = response.headers.get("Content-Length", "")
        coding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if (length.isdigit() and int(length) > self.limit) or coding not in ("", "identity"):
            # A compressed answer (not asked for) could not be counted as it is kept.
            await response.aclose()
            raise RuntimeAnswerTooLarge
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
