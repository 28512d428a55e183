"""The dashboard's only writes, through the driver's admin calls: redrive, seek, pause, resume.

They exist only when the dashboard was started with ``--allow-actions`` (and a token), and run
on a :class:`mysqlq.Client` of their own (the read pool's sessions are read-only). The account
of the DSN then needs what ``mysqlq grants --role operator`` gives: ``EXECUTE`` on exactly the
procedures called here (``queue_redrive``, ``queue_redrive_one``, ``queue_seek``,
``queue_pause``, ``queue_resume``, and ``queue_schedule_pause``, ``_resume``, ``_delete`` and
``_run``: ``mysqlq.schema.grants.OPERATOR_PROCEDURES``) and
``queue_version``, and the reader's ``SELECT`` on the queue's tables for the pages. No admin
account, no DDL.

``queue_redrive(dlq_topic, n)`` sends the first ``n`` entries not yet redriven, in its own
order (DLQ partition, then offset); ``queue_redrive_one`` sends exactly one entry. Neither sends
an entry twice.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import mysqlq

__all__ = ["Actions"]

_CHUNK = 10_000


class Actions:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._client: mysqlq.Client | None = None
        self._lock = threading.Lock()

    def _get(self) -> mysqlq.Client:
        with self._lock:
            if self._client is None:
                self._client = mysqlq.connect(self.dsn)
            return self._client

    def redrive(self, dlq_topic: str, count: int | None) -> int:
        """Redrive the first ``count`` entries in line (None: all); returns how many were."""
        client = self._get()
        total = 0
        while count is None or total < count:
            ask = _CHUNK if count is None else min(_CHUNK, count - total)
            n = client.redrive(dlq_topic, ask)
            total += n
            if n < ask:
                break
        return total

    def redrive_one(self, dlq_topic: str, partition_id: int, offset: int) -> int:
        """Redrive exactly one entry; 0 when it went back already."""
        return self._get().redrive_one(dlq_topic, partition_id, offset)

    def seek(self, topic: str, group: str, to: str) -> list[dict[str, Any]]:
        """Move the group to the start (the oldest message kept) or the end of the topic."""
        return self._get().seek(group, topic, 0 if to == "start" else None)

    def pause(self, topic: str, group: str | None) -> dict[str, Any]:
        """Pause the group on the topic, or (None) the topic for every group."""
        return self._get().pause(topic, group)

    def resume(self, topic: str, group: str | None) -> dict[str, Any]:
        """Resume the group on the topic, or (None) the topic."""
        return self._get().resume(topic, group)

    # recurring messages (mysqlq.dashboard.schedules): the operator's four schedule procedures

    def schedule_pause(self, name: str) -> Any:
        return self._get().pause_schedule(name)

    def schedule_resume(self, name: str) -> Any:
        return self._get().resume_schedule(name)

    def schedule_delete(self, name: str) -> bool:
        return self._get().unschedule(name)

    def schedule_run(self, name: str) -> str:
        """Publish one message of the schedule now; returns its id."""
        return self._get().run_schedule(name)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None
