"""The mock on respx, for classic ``httpx`` clients (imported only by ``MockResponsesAPI.router``).

The mock speaks ``httpx2``; this adapter turns a classic request into an ``httpx2`` one, and the
answer, its streamed body and its transport errors back into classic ``httpx`` objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import httpx
import httpx2
import respx

__all__ = ["start_router"]

Dispatch = Callable[[httpx2.Request], Awaitable[httpx2.Response]]


def _classic_error(error: httpx2.TransportError, request: httpx.Request) -> httpx.TransportError:
    kind = getattr(httpx, type(error).__name__, httpx.TransportError)
    return kind(str(error), request=request)


class _ClassicStream(httpx.AsyncByteStream):
    """An ``httpx2`` response body read through a classic ``httpx`` response."""

    def __init__(self, response: httpx2.Response, request: httpx.Request) -> None:
        self._response = response
        self._body = cast(httpx2.AsyncByteStream, response.stream)
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._body:
                yield chunk
        except httpx2.TransportError as error:
            raise _classic_error(error, self._request) from error

    async def aclose(self) -> None:
        await self._response.aclose()


def start_router(dispatch: Dispatch, *, scheme: str, host: str, prefix: str) -> respx.MockRouter:
    """A started respx router sending ``scheme://host/prefix...`` to ``dispatch``."""

    async def side_effect(request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        modern = httpx2.Request(
            request.method, str(request.url), headers=request.headers.raw, content=content
        )
        try:
            response = await dispatch(modern)
        except httpx2.TransportError as error:
            raise _classic_error(error, request) from error
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_ClassicStream(response, request),
        )

    router = respx.MockRouter(assert_all_called=False, assert_all_mocked=True)
    router.route(scheme=scheme, host=host, path__startswith=prefix).mock(side_effect=side_effect)
    router.start()
    return router
