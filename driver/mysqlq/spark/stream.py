"""Streaming read: ``spark.readStream.format("mysqlq")`` is a consumer group.

Its position lives in Spark's checkpoint (an offset is ``{"<partition_id>": last offset
included}``) and is mirrored into ``queue_offsets`` once Spark has committed a micro-batch, so
the group holds back garbage collection and shows in the usual group views.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from mysqlq import _sql
from mysqlq.connection import resolve_dsn
from mysqlq.errors import InvalidArgument
from mysqlq.link import Link
from mysqlq.spark.columns import columns_of
from mysqlq.spark.options import (
    DEFAULT_FETCH_SIZE,
    DEFAULT_NUM_PARTITIONS,
    int_option,
    required_option,
    retry_window,
)
from mysqlq.spark.reader import Scan, buckets

try:  # Spark >= 4.2: Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover
    SupportsTriggerAvailableNow = object  # type: ignore

__all__ = ["StreamReader"]


def _offsets_json(offsets: Mapping[int, int]) -> dict[str, int]:
    """A Spark offset: ``{"<partition_id>": last offset included}``, in partition_id order so
    that equal positions serialise to equal JSON."""
    return {str(pid): int(offsets[pid]) for pid in sorted(offsets)}


def _offsets_of(offset: Mapping[str, Any] | None) -> dict[int, int]:
    return {int(pid): int(off) for pid, off in (offset or {}).items()}


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """``spark.readStream.format("mysqlq")``: a consumer group that keeps its position in Spark's
    checkpoint and mirrors it into ``queue_offsets`` once Spark has committed a micro-batch.

    A micro-batch ends, per partition, at the partition's ``last_offset`` as a plain read sees it
    (every offset up to it is committed: offsets are taken in commit order, G3), but never past a
    message that is not due yet (``deliver_at`` in the future, G12). Redriven copies addressed to
    another group are skipped (they are not this group's, G9).
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.dsn = resolve_dsn(options.get("dsn"))
        self.topic = required_option(options, "topic")
        self.group = required_option(options, "group")
        self.columns = columns_of(schema)
        self.schema = schema
        self.num_partitions = int_option(options, "numPartitions", DEFAULT_NUM_PARTITIONS, low=1)
        self.fetch_size = int_option(options, "fetchSize", DEFAULT_FETCH_SIZE, low=1)
        # on the driver only: pickled without its connection
        self._link = Link(self.dsn, window=retry_window(options))
        self._acked: dict[int, int] = {}
        self._target: dict[int, int] | None = None
        self._planned: dict | None = None
        # the group counts for GC from now on; refuse a group that subscribers consume
        self._rows(_sql.SUBSCRIBE, (self.group, self.topic, None, None, None, None))
        (live,) = self._rows(_sql.SPARK_LIVE_LEASES, (self.group, self.topic))
        if int(live["leases"]):
            raise InvalidArgument(
                f"group {self.group!r} has live subscriber leases on topic {self.topic!r}: "
                "a Spark consumer group must not also be consumed by subscribers"
            )

    def _rows(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        # each statement can be repeated: reads, the group's registration, forward-only commits
        return self._link.rows(sql, args)

    # offsets ------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """The group's committed position; partitions it never touched start at the oldest
        retained message (0 = before everything)."""
        last = self._last_offsets()
        done = {
            int(r["partition_id"]): int(r["offset_acked"])
            for r in self._rows(_sql.SPARK_GROUP_OFFSETS, (self.group, self.topic))
        }
        return _offsets_json({pid: min(done.get(pid, 0), end) for pid, end in last.items()})

    def _last_offsets(self) -> dict[int, int]:
        rows = self._rows(_sql.SPARK_PARTITIONS, (self.topic,))
        return {int(r["partition_id"]): int(r["last_offset"]) for r in rows}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        # Spark passes the end of the last micro-batch it committed (Spark >= 4.2): that batch is
        # done, including the final batch of a query, which commit() would only see one batch
        # later. Older Spark calls latestOffset() without it.
        if start is not None:
            self._ack(start)
            begin = _offsets_of(start)
        else:
            # the batch planned last has finished when Spark asks for the next end
            if self._planned is not None:
                self._ack(self._planned)
            begin = dict(self._acked)
        last = self._last_offsets()
        if self._target is not None:
            last = {pid: min(end, self._target.get(pid, 0)) for pid, end in last.items()}
        end = {pid: max(begin.get(pid, 0), hi) for pid, hi in last.items()}
        probe = [[pid, begin.get(pid, 0), hi] for pid, hi in end.items() if hi > begin.get(pid, 0)]
        if probe:
            for row in self._rows(_sql.SPARK_FIRST_UNDUE, (json.dumps(probe),)):
                pid = int(row["partition_id"])
                end[pid] = max(begin.get(pid, 0), int(row["first_undue"]) - 1)
        for pid, off in begin.items():  # a partition never disappears from the offset
            end.setdefault(pid, off)
        latest = _offsets_json(end)
        if start is not None and _offsets_of(start) == end:
            return start
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._last_offsets()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        # the batch that ended at `start` was committed by Spark before this one is planned
        self._ack(start)
        self._planned = end
        begin, stop = _offsets_of(start), _offsets_of(end)
        ranges = [(pid, begin.get(pid, 0), hi) for pid, hi in stop.items()]
        return buckets(ranges, self.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        scan = Scan(
            self.dsn, self.columns, self.schema, group=self.group, fetch_size=self.fetch_size
        )
        yield from scan.read(partition)  # type: ignore[arg-type]

    def commit(self, end: dict) -> None:
        self._ack(end)

    def _ack(self, offset: Mapping[str, Any]) -> None:
        """Move the group's watermarks in queue_offsets to ``offset`` (forward only)."""
        moved = [
            [pid, off]
            for pid, off in sorted(_offsets_of(offset).items())
            if off > 0 and off > self._acked.get(pid, 0)
        ]
        if not moved:
            return
        self._rows(_sql.COMMIT_OFFSETS, (self.group, self.topic, json.dumps(moved)))
        for pid, off in moved:
            self._acked[pid] = off

    def stop(self) -> None:
        self._link.close()
