"""A typed client of the frontend API, signed with SigV4 from the caller's boto3 credentials.

The same client talks to a deployed stack (API Gateway with IAM auth) and to
the local stack (`python -m atf_local serve`, which accepts any signed
request). Its calls are defined once in atf_sdk.operations and carried out
here, blocking, with urllib3; AsyncAtfClient (atf_sdk.async_client) awaits
the very same calls. Throttling (429), server errors (5xx) and lost
connections are retried with jittered exponential backoff (RetryPolicy).
"""

from __future__ import annotations

import time

import urllib3

from atf_core.api import BatchItem, ScheduledTask
from atf_sdk.operations import Calls
from atf_sdk.transport import API_URL_ENV, CONNECT_TIMEOUT_S, Blocking, Lost, Reply, RetryPolicy, Send


class AtfClient(Blocking, Calls):
    """Schedule, inspect, cancel and gate tasks through the frontend API; redrive or discard dead
    letters, manage periodic schedules and run chains (every call is in atf_sdk.operations)."""

    def _open(self) -> None:
        self._timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=self.timeout_s)
        self._pool = urllib3.PoolManager(maxsize=4)

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> AtfClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, send: Send) -> Reply | Lost:
        url, headers = self._signed(send, self._credentials())
        connect_s, read_s = send.timeouts(self.timeout_s)
        timeout = self._timeout if send.timeout_s is None else urllib3.Timeout(connect=connect_s, read=read_s)
        try:
            response = self._pool.request(
                send.method, url, body=send.body, headers=headers, timeout=timeout, retries=False, redirect=False
            )
        except urllib3.exceptions.HTTPError as error:
            return Lost(str(error))
        return Reply(response.status, response.headers, response.data)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)


__all__ = ["API_URL_ENV", "AtfClient", "BatchItem", "RetryPolicy", "ScheduledTask"]
