"""AtfClient for asyncio services (FastAPI, aiohttp, ...): the same methods, awaited.

    async with AsyncAtfClient.from_env() as atf:
        task = await atf.schedule("resize", {"image": "cat.png"})
        done = await atf.wait(task.id, timeout_s=30)

Every call is the one AtfClient makes (atf_sdk.operations): the same input checks before sending,
the same SigV4 signing by botocore, retries (RetryPolicy), errors (atf_core.errors) and models. It is
carried out with httpx, which runs on anyio (so under trio too), and never blocks the event loop: reading
credentials, which may refresh them from AWS, happens in a worker thread. Install it with
`pip install 'atf-sdk[async]'`.
"""

from __future__ import annotations

from atf_sdk.extras import needs_extra

try:
    import anyio.to_thread
    import httpx
except ModuleNotFoundError as missing:  # without its extra: httpx, and anyio that comes with it, name "async"
    raise needs_extra(missing, "AsyncAtfClient") from None

from atf_sdk.operations import Calls
from atf_sdk.transport import CONNECT_TIMEOUT_S, Asynchronous, Lost, Reply, Send


class AsyncAtfClient(Asynchronous, Calls):
    """AtfClient's calls, each a coroutine. Use one client for many concurrent calls (it pools
    connections) inside one event loop, and close it there: `async with`, or `await aclose()`."""

    def _open(self) -> None:
        timeout = httpx.Timeout(self.timeout_s, connect=CONNECT_TIMEOUT_S)
        # trust_env=False: as AtfClient, no proxy or .netrc from the environment (a .netrc login would replace SigV4)
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncAtfClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(self, send: Send) -> Reply | Lost:
        credentials = await anyio.to_thread.run_sync(self._credentials)
        url, headers = self._signed(send, credentials)
        try:
            connect_s, read_s = send.timeouts(self.timeout_s)
            timeout = httpx.Timeout(read_s, connect=connect_s)
            response = await self._http.request(send.method, url, content=send.body, headers=headers, timeout=timeout)
        except httpx.TransportError as error:
            return Lost(str(error) or type(error).__name__)
        return Reply(response.status_code, response.headers, response.content)

    async def _sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


__all__ = ["AsyncAtfClient"]
