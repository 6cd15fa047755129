"""Deletes of handled messages, sent ten at a time.

A message is done once its claim is written (the store, not SQS, holds the
task from then on), so its delete can wait up to a second for others to
share one DeleteMessageBatch call: fewer SQS requests per task. A message
redelivered meanwhile (visibility timeout 60 s) would only fail its claim.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

from atf_core.calls import calls

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("atf.controller")


class DeleteBatcher:
    def __init__(self, sqs: SQSClient, linger_s: float = 1.0) -> None:
        self._sqs = sqs
        self._linger_s = linger_s
        self._pending: dict[str, list[str]] = defaultdict(list)
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="sqs-deletes")
        self._thread.start()

    def delete(self, queue_url: str, receipt: str) -> None:
        with self._cond:
            self._pending[queue_url].append(receipt)
            if len(self._pending[queue_url]) >= 10:
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stopped and not any(len(r) >= 10 for r in self._pending.values()):
                    self._cond.wait(self._linger_s)
                batches = {url: receipts[:10] for url, receipts in self._pending.items() if receipts}
                for url, receipts in batches.items():
                    del self._pending[url][: len(receipts)]
                stopped = self._stopped and not any(self._pending.values())
            for url, receipts in batches.items():
                self._send(url, receipts)
            if stopped:
                return

    @calls("sqs:DeleteMessage")  # DeleteMessageBatch, as IAM authorizes it
    def _send(self, url: str, receipts: list[str]) -> None:
        entries = [{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(receipts)]
        try:
            reply = self._sqs.delete_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - undeleted messages come back and fail their claim harmlessly
            log.warning("deleting %d messages failed", len(receipts))
            return
        if reply.get("Failed"):
            log.warning("%d message deletes failed", len(reply["Failed"]))
