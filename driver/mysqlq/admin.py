"""Administration through a client: topics, groups, access rules, seek, redrive, GC, stats and
the DLQ (``mysqlq.Client`` is an :class:`Admin`; its archive calls are in :mod:`mysqlq.client`).

Each method is one procedure call (two for some ``configure_topic`` calls) through the client's
link, safe to repeat, so retried on transient errors for the client's retry window.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any, NamedTuple

from mysqlq import _sql
from mysqlq.errors import InvalidArgument
from mysqlq.schedules import ScheduleAdmin

__all__ = ["Admin", "GcResult", "check_limit", "epoch_ms", "flow_args"]


class Admin(ScheduleAdmin):
    """The administration calls; ``_call(sql, args)`` runs one statement (retried) and returns
    its rows."""

    def _call(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        raise NotImplementedError

    def configure_topic(
        self,
        topic: str,
        *,
        partitions: int | None = None,
        max_attempts: int | None = None,
        dlq_suffix: str | None = None,
        retention: float | None = None,
        archive: bool | None = None,
        archive_retention: float | None = None,
        dlq: bool | None = None,
        dedup_window: float | None = None,
    ) -> dict[str, Any]:
        """Create a topic or change its settings; None keeps a setting as it is (a new topic
        takes the defaults). Returns the topic row, ``archive`` and ``archive_retention_ms``
        included. ``retention`` and ``archive_retention`` are seconds: how long GC keeps what
        every group has passed, and how long the archive keeps what GC moved there.
        ``archive=True``: GC moves the messages it removes into ``queue_archive`` instead of
        only deleting them. The archive settings go in a call of their own
        (``queue_topic_archive``), after the others (``queue_topic_configure``). ``dlq=True``
        marks the topic as a DLQ topic that any group may name as its DLQ (``queue_topic_dlq``);
        the row returned then also holds ``dlq``. ``dedup_window`` (seconds): an id published
        again within that time of its first copy is a duplicate (the first offset), even after GC
        removed the copy; ``0`` removes the window (ids unique while stored, the default); its own
        call (``queue_topic_dedup``), last; the row then holds ``dedup_window_ms``."""
        retention_ms = None if retention is None else _seconds_ms(retention, "retention")
        if archive is not None and not isinstance(archive, bool):
            raise InvalidArgument(f"archive must be True, False or None, not {archive!r}")
        keep_ms = (
            None
            if archive_retention is None
            else _seconds_ms(archive_retention, "archive_retention")
        )
        dedup_ms = None if dedup_window is None else _seconds_ms(dedup_window, "dedup_window")
        if dedup_ms == 0 and dedup_window:
            raise InvalidArgument(
                f"dedup_window must be 0 or at least 0.001 s, not {dedup_window!r}"
            )
        settings = (partitions, max_attempts, dlq_suffix, retention_ms)
        archiving = archive is not None or keep_ms is not None
        row: dict[str, Any] = {}
        alone = not archiving and dlq is None and dedup_ms is None
        if alone or any(v is not None for v in settings):
            row = self._call(_sql.TOPIC_CONFIGURE, (topic, *settings))[0]
        if archiving:
            flag = None if archive is None else int(archive)
            row = self._call(_sql.TOPIC_ARCHIVE, (topic, flag, keep_ms))[0]
        if dlq is not None:
            if not isinstance(dlq, bool):
                raise InvalidArgument(f"dlq must be True, False or None, not {dlq!r}")
            row = {**row, **self._call(_sql.TOPIC_DLQ, (topic, int(dlq)))[0]}
        if dedup_ms is not None:
            row = {**row, **self._call(_sql.TOPIC_DEDUP, (topic, dedup_ms))[0]}
        return row

    def subscribe(
        self,
        group: str,
        topic: str,
        *,
        max_attempts: int | None = None,
        dlq_topic: str | None = None,
    ) -> dict[str, Any]:
        """Register a consumer group on a topic (GC keeps messages until it has them), or join it
        as it is: a differing ``max_attempts`` or ``dlq_topic`` raises MQ022 (configure_group)."""
        return self._call(_sql.SUBSCRIBE, (group, topic, None, max_attempts, dlq_topic, None))[0]

    def configure_group(
        self,
        group: str,
        topic: str,
        *,
        rate: float | None = None,
        burst: int | None = None,
        rate_per_key: float | None = None,
        concurrency: int | None = None,
        max_attempts: int | None = None,
        dlq_topic: str | None = None,
    ) -> dict[str, Any]:
        """Create a group's subscription or change its settings (the admin's call); None keeps a
        setting. ``dlq_topic`` must be a DLQ topic: a name ending in ``_dlq``, the topic's own
        DLQ name, or one marked with ``configure_topic(..., dlq=True)`` (else MQ013).

        Flow control, across all the group's subscribers: ``rate`` messages per second started
        (deliveries and redeliveries), with a bucket of ``burst`` (default ``ceil(rate)``);
        ``concurrency`` messages in flight at most. ``0`` removes a limit (``burst=0``: back to
        the default). Out of range: MQ029. ``rate_per_key`` (a limit per partition key) is
        part of the interface but not built yet: anything but None is refused, nothing sent."""
        if rate_per_key is not None:
            raise InvalidArgument(
                "rate_per_key: per-key rate limits are not supported yet (use rate for the group)"
            )
        args = (group, topic, max_attempts, dlq_topic, *flow_args(rate, burst, concurrency))
        row = self._call(_sql.GROUP_CONFIGURE, args)[0]
        return {**row, "rate_per_s": _rate(row.get("rate_per_s"))}

    def pause(self, topic: str, group: str | None = None) -> dict[str, Any]:
        """Pause ``group`` on ``topic``, or (None) the topic for every group: fetch delivers
        nothing until :meth:`resume`; leases, settles and publishing go on. Returns the flags."""
        return self._call(_sql.PAUSE, (topic, group))[0]

    def resume(self, topic: str, group: str | None = None) -> dict[str, Any]:
        """Undo :meth:`pause` of the group (or of the topic); the other flag stays as it is."""
        return self._call(_sql.RESUME, (topic, group))[0]

    def acl_grant(self, user: str, operation: str, pattern: str) -> list[dict[str, Any]]:
        """Let account ``user`` ``publish``/``consume`` topics, or use ``group`` names, matching
        ``pattern`` (a name, or a prefix and ``*``); docs/protocol.md, queue_acl_grant."""
        return self._call(_sql.ACL_GRANT, (user, operation, pattern))

    def acl_revoke(self, user: str, operation: str | None = None, pattern: str | None = None):
        """Remove an account's rules (one, an operation's, or all); returns how many (an int)."""
        return int(self._call(_sql.ACL_REVOKE, (user, operation, pattern))[0]["removed"])

    def unsubscribe(self, group: str, topic: str) -> bool:
        return bool(self._call(_sql.UNSUBSCRIBE, (group, topic))[0]["removed"])

    def seek(
        self, group: str, topic: str, offset: int | None, *, key: str | None = None
    ) -> list[dict[str, Any]]:
        """Set where a group reads next: ``offset`` (0 = earliest kept, None = the end), on
        one partition (``key``) or on all of the topic's."""
        return self._call(_sql.SEEK, (group, topic, key, offset))

    def cancel(
        self, topic: str, id: str, *, key: str | None = None, group: str | None = None
    ) -> int:
        """Cancel message ``id`` (published under ``key``) before it is delivered, for ``group``
        or (None) every group subscribed to ``topic``: it is never delivered there and no longer
        holds back its partition. A message in flight finishes normally. Returns how many
        deliveries were cancelled; :class:`mysqlq.NothingToCancel` (MQ026) when none was."""
        return int(self._call(_sql.CANCEL, (topic, key, id, group))[0]["cancelled"])

    def redrive(self, dlq_topic: str, limit: int = 1000) -> int:
        """Send DLQ entries back to their topic, each for the group that failed it."""
        return int(self._call(_sql.REDRIVE, (dlq_topic, limit))[0]["redriven"])

    def redrive_one(self, dlq_topic: str, partition_id: int, offset: int) -> int:
        """Send one DLQ entry back to its topic for the group that failed it; 1, or 0 when it
        was redriven before (code MQ020 when there is no such entry)."""
        rows = self._call(_sql.REDRIVE_ONE, (dlq_topic, partition_id, offset))
        return int(rows[0]["redriven"])

    def gc(self, limit: int = 100_000) -> int:
        """Delete what every subscribed group has passed; returns the rows deleted (see
        :meth:`gc_counts` for what was archived and purged too)."""
        return self.gc_counts(limit).deleted

    def gc_counts(self, limit: int = 100_000) -> GcResult:
        """Run GC once: delete what every subscribed group has passed and is past retention
        (moving it into the archive on topics configured with ``archive=True``), then purge
        archived messages past their topic's ``archive_retention``. Returns all three counts."""
        return GcResult.from_row(self._call(_sql.GC, (limit,))[0])

    def maintenance(self) -> int:
        return int(self._call(_sql.MAINTENANCE, ())[0]["deleted"])

    def stats(self) -> list[dict[str, Any]]:
        """Per topic and group: partitions, lag, in flight, live subscribers, DLQ depth."""
        rows = self._call(_sql.STATS_GROUPS, ())
        # SUM() comes back as Decimal: counts are whole numbers; the query's `unacked` is the lag
        return [
            {
                ("lag" if k == "unacked" else k): (
                    _rate(v) if k == "rate" else int(v) if isinstance(v, Decimal) else v
                )
                for k, v in r.items()
            }
            for r in rows
        ]

    def backlog(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per topic, group, kind and priority: the messages the group has not acked yet (those
        past its watermark; reads the backlog, so mind its size)."""
        rows = self._call(_sql.STATS_BACKLOG, (topic, topic))
        return [{**r, "priority": int(r["priority"]), "messages": int(r["messages"])} for r in rows]

    def dlq_list(self, dlq_topic: str, limit: int = 100) -> list[dict[str, Any]]:
        return self._call(_sql.DLQ_LIST, (dlq_topic, limit))

    def dlq_show(self, dlq_topic: str, partition_id: int, offset: int) -> dict[str, Any] | None:
        rows = self._call(_sql.DLQ_SHOW, (dlq_topic, partition_id, offset))
        return rows[0] if rows else None


class GcResult(NamedTuple):
    """What one GC run did: messages deleted from the log, how many of them were moved into
    the archive (on topics with ``archive=True``), and archived messages purged for being past
    their topic's archive retention."""

    deleted: int
    archived: int
    archive_purged: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> GcResult:
        return cls(int(row["deleted"]), int(row["archived"]), int(row["archive_purged"]))


# the longest duration the procedures take (check_ms in procedures/_macros.sql): 365 days
MAX_DURATION_MS = 31_536_000_000


def _seconds_ms(seconds: Any, name: str) -> int:
    """A duration in seconds (as the client takes them) as the procedures' milliseconds, checked
    here: configure_topic may make two calls, and the second must not fail on its input after
    the first has changed the topic."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or not 0 <= round(seconds * 1000) <= MAX_DURATION_MS
    ):
        raise InvalidArgument(
            f"{name} must be a number of seconds from 0 to {MAX_DURATION_MS // 1000} "
            f"(365 days), not {seconds!r}"
        )
    return round(seconds * 1000)


def _rate(value: Any) -> float | None:
    return None if value is None else float(value)


# the flow-control settings queue_group_configure takes (MQ029 beyond them)
MAX_RATE = 1_000_000
MAX_FLOW_COUNT = 1_000_000


def flow_args(rate: Any, burst: Any, concurrency: Any) -> tuple[Any, Any, Any]:
    """``rate`` (messages per second), ``burst`` and ``concurrency`` checked as the procedure
    checks them (no NaN, infinity or bool reaches it), the rate as a decimal string."""
    if rate is not None and (
        isinstance(rate, bool)
        or not isinstance(rate, (int, float, Decimal))
        or not math.isfinite(rate)
        or not (rate == 0 or 0.001 <= rate <= MAX_RATE)
    ):
        raise InvalidArgument(
            f"MQ029 rate must be None, 0 (no limit) or 0.001 to {MAX_RATE:,} messages per "
            f"second, not {rate!r}",
        )
    for name, value in (("burst", burst), ("concurrency", concurrency)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_FLOW_COUNT
        ):
            raise InvalidArgument(
                f"MQ029 {name} must be None, 0 (remove) or an integer up to {MAX_FLOW_COUNT:,}, "
                f"not {value!r}",
            )
    return (None if rate is None else f"{Decimal(str(rate)):.6f}", burst, concurrency)


def check_limit(limit: Any, name: str) -> None:
    """A count the procedures take: an integer above 0 (``name`` names it in the error)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"{name} must be an integer above 0, not {limit!r}")


def epoch_ms(moment: Any, name: str) -> int | None:
    """A time as epoch milliseconds: an int as it is, a timezone-aware datetime converted."""
    if moment is None:
        return None
    if isinstance(moment, datetime.datetime):
        if moment.tzinfo is None:
            raise InvalidArgument(
                f"{name} must be timezone-aware (datetime.now(timezone.utc), say): a naive "
                "datetime could be any zone's"
            )
        return round(moment.timestamp() * 1000)
    if isinstance(moment, bool) or not isinstance(moment, int) or moment < 0:
        raise InvalidArgument(
            f"{name} must be epoch milliseconds (an int, 0 or more) or a timezone-aware "
            f"datetime, not {moment!r}"
        )
    return moment
