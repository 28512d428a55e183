"""Recurring messages through a client: ``schedule``, ``unschedule``, ``pause_schedule``,
``resume_schedule``, ``run_schedule`` and ``schedules`` (``mysqlq.Client`` has them through
:class:`mysqlq.admin.Admin`).

A schedule lives in the database (``queue_schedules``) and is published by maintenance (the event,
or any subscriber's tick), so it runs with no Python process up; docs/protocol.md, "Recurring
messages (schedules)". Each method is one procedure call, safe to retry.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

from mysqlq import _sql
from mysqlq.codec import encode_payload
from mysqlq.errors import InvalidArgument

__all__ = ["MIN_EVERY", "Schedule", "ScheduleAdmin", "every_ms"]

# the shortest interval the procedure takes, and the longest (seconds)
MIN_EVERY = 1.0
MAX_EVERY = 365 * 86_400.0
MISSED = ("last", "skip")


@dataclass(frozen=True)
class Schedule:
    """One row of ``client.schedules()``. Times are epoch milliseconds (the server's clock);
    exactly one of ``every_ms`` and ``cron`` is set; ``published`` counts the slots published,
    ``runs_now`` the messages of :meth:`ScheduleAdmin.run_schedule`."""

    name: str
    topic: str
    key: str | None
    payload_bytes: int
    kind: str | None
    content_type: str | None
    every_ms: int | None
    cron: str | None
    missed: str
    paused: bool
    next_slot_at: int
    last_slot_at: int | None
    last_published_at: int | None
    last_message_id: str | None
    published: int
    runs_now: int
    last_error: str | None
    created_at: int
    updated_at: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Schedule:
        def opt_int(v: Any) -> int | None:
            return None if v is None else int(v)

        return cls(
            name=row["name"],
            topic=row["topic"],
            key=row["partition_key"],
            payload_bytes=int(row["payload_bytes"]),
            kind=row["kind"],
            content_type=row["content_type"],
            every_ms=opt_int(row["every_ms"]),
            cron=row["cron"],
            missed=row["missed"],
            paused=bool(row["paused"]),
            next_slot_at=int(row["next_slot_at"]),
            last_slot_at=opt_int(row["last_slot_at"]),
            last_published_at=opt_int(row["last_published_at"]),
            last_message_id=row["last_message_id"],
            published=int(row["published"]),
            runs_now=int(row["runs_now"]),
            last_error=row["last_error"],
            created_at=int(row["created_at"]),
            updated_at=int(row["updated_at"]),
        )


def every_ms(every: Any) -> int:
    """An interval (seconds, or a ``timedelta``) as the procedure's milliseconds: 1 s to 365
    days."""
    if isinstance(every, datetime.timedelta):
        every = every.total_seconds()
    if (
        isinstance(every, bool)
        or not isinstance(every, (int, float))
        or not math.isfinite(every)
        or not MIN_EVERY <= every <= MAX_EVERY
    ):
        raise InvalidArgument(
            f"every must be seconds (or a timedelta) from {MIN_EVERY:g} to {MAX_EVERY:g} "
            f"(365 days), not {every!r}"
        )
    return round(every * 1000)


class ScheduleAdmin:
    """The schedule calls; ``_call(sql, args)`` runs one statement (retried) and returns its
    rows, as :class:`mysqlq.admin.Admin` defines it."""

    def _call(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        raise NotImplementedError

    def schedule(
        self,
        name: str,
        topic: str,
        payload: Any,
        *,
        every: float | datetime.timedelta | None = None,
        cron: str | None = None,
        key: str | None = None,
        kind: str | None = None,
        content_type: str | None = None,
        missed: str = "last",
    ) -> Schedule:
        """Create or replace the recurring message ``name``: ``payload`` published to ``topic``
        (with ``key``, ``kind`` and a content type as :meth:`publish` gives them) once per slot.
        Exactly one of ``every`` (seconds or a ``timedelta``, 1 s to 365 days; slots at the
        multiples of the interval since the epoch) and ``cron`` (5 fields, minute hour
        day-of-month month day-of-week, in UTC). ``missed``: what the runner does with slots
        more than a minute late (the server was down): ``"last"`` publishes the latest of them,
        ``"skip"`` none. A replaced schedule keeps its pause and counters; with a new timing, its
        next slot is the first after now. Bad timing raises code MQ027."""
        if (every is None) == (cron is None):
            raise InvalidArgument("schedule takes exactly one of every= and cron=")
        interval = None if every is None else every_ms(every)
        if cron is not None and not isinstance(cron, str):
            raise InvalidArgument(f"cron must be a str, not {cron!r}")
        if missed not in MISSED:
            raise InvalidArgument(f"missed must be 'last' or 'skip', not {missed!r}")
        data, ctype = encode_payload(payload, content_type)
        row = self._call(
            _sql.SCHEDULE, (name, topic, key, data, kind, ctype, interval, cron, missed)
        )[0]
        return Schedule.from_row(row)

    def unschedule(self, name: str) -> bool:
        """Delete the schedule ``name`` (what it published stays); code MQ028
        (:class:`mysqlq.ScheduleNotFound`) when there is none."""
        return bool(self._call(_sql.UNSCHEDULE, (name,))[0]["deleted"])

    def pause_schedule(self, name: str) -> Schedule:
        """Stop publishing ``name``'s slots until :meth:`resume_schedule`."""
        return Schedule.from_row(self._call(_sql.PAUSE_SCHEDULE, (name,))[0])

    def resume_schedule(self, name: str) -> Schedule:
        """Go on from the first slot after now (the slots passed while paused are not
        published)."""
        return Schedule.from_row(self._call(_sql.RESUME_SCHEDULE, (name,))[0])

    def run_schedule(self, name: str) -> str:
        """Publish one message of ``name`` now, with an id of its own
        (``schedule:<name>:run-<n>``), paused or not; its slots are left alone. Returns the
        message id."""
        return str(self._call(_sql.RUN_SCHEDULE, (name,))[0]["id"])

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name (a SELECT on ``queue_schedules``: the admin's or the
        reader's)."""
        return [Schedule.from_row(r) for r in self._call(_sql.SCHEDULES, ())]
