"""Batch read: ``spark.read.format("mysqlq")`` reads the retained log of one topic, or with the
option ``source=archive`` its archive (what GC moved out of the log).

The driver lists the topic's partitions and spreads their offset ranges over Spark partitions;
executors page through each range by offset and hand Spark Arrow record batches. With filter
push-down, filters the log's primary key and the partition list answer exactly narrow the
ranges in the database.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from mysqlq import _sql
from mysqlq.connection import connect, execute_rows, resolve_dsn
from mysqlq.spark.columns import ARCHIVE_COLUMNS, TIME_COLUMNS, columns_of
from mysqlq.spark.options import (
    DEFAULT_FETCH_SIZE,
    DEFAULT_NUM_PARTITIONS,
    epoch_ms,
    int_option,
    partition_offsets,
    reads_archive,
    required_option,
    time_option,
)

try:  # Spark >= 4.1
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        IsNull,
        LessThan,
        LessThanOrEqual,
    )
except ImportError:  # pragma: no cover - older Spark: no filter push-down
    EqualTo = GreaterThan = GreaterThanOrEqual = In = IsNotNull = IsNull = None  # type: ignore
    LessThan = LessThanOrEqual = None  # type: ignore

__all__ = ["BatchReader", "FilteringBatchReader", "RangeSplit", "Scan", "buckets"]


class RangeSplit(InputPartition):
    """One Spark partition: log ranges ``(lo, hi]`` of some mysqlq partitions."""

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        super().__init__(ranges)
        self.ranges = ranges  # [(partition_id, lo exclusive, hi inclusive)]


def buckets(ranges: list[tuple[int, int, int]], count: int) -> list[RangeSplit]:
    """Spread partitions over ``count`` splits, balancing the number of offsets (largest first
    into the lightest split); each split reads its partitions in partition_id order."""
    ranges = [r for r in ranges if r[2] > r[1]]
    if not ranges:
        return []
    count = max(1, min(count, len(ranges)))
    splits: list[list[tuple[int, int, int]]] = [[] for _ in range(count)]
    loads = [0] * count
    for rng in sorted(ranges, key=lambda r: (-(r[2] - r[1]), r[0])):
        i = loads.index(min(loads))
        splits[i].append(rng)
        loads[i] += rng[2] - rng[1]
    return [RangeSplit(sorted(s)) for s in splits if s]


class Scan:
    """Reads log ranges (or, with ``archive``, archive ranges) into Arrow record batches (runs on
    executors)."""

    def __init__(
        self,
        dsn: str,
        columns: list[str],
        schema: StructType,
        *,
        min_time: int | None = None,
        max_time: int | None = None,
        group: str | None = None,
        message_id: str | None = None,
        fetch_size: int = DEFAULT_FETCH_SIZE,
        archive: bool = False,
    ) -> None:
        self.dsn = dsn
        self.columns = columns
        self.schema = schema
        self.min_time = min_time
        self.max_time = max_time
        self.group = group
        self.message_id = message_id
        self.fetch_size = fetch_size
        self.archive = archive

    def read(self, split: RangeSplit) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        # the offset comes first (to page by it); the requested columns follow
        sql = _sql.SPARK_READ_RANGE.format(
            table="queue_archive" if self.archive else "queue_messages",
            columns=", ".join(ARCHIVE_COLUMNS[c][0] for c in self.columns) or "1",
        )
        conn = connect(self.dsn)
        try:
            cur = conn.cursor()
            try:
                # Spark hands an empty plan one InputPartition(None)
                for pid, lo, hi in getattr(split, "ranges", None) or []:
                    while lo < hi:
                        cur.execute(
                            sql,
                            (
                                pid,
                                lo,
                                hi,
                                self.min_time,
                                self.min_time,
                                self.max_time,
                                self.max_time,
                                self.group,
                                self.group,
                                self.message_id,
                                self.message_id,
                                self.fetch_size,
                            ),
                        )
                        rows = cur.fetchall()
                        if not rows:
                            break
                        lo = rows[-1][0]
                        yield _to_batch(rows, self.columns, arrow_schema, pa)
                        if len(rows) < self.fetch_size:
                            break
            finally:
                cur.close()
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def _to_batch(rows: Sequence[tuple], columns: list[str], arrow_schema: Any, pa: Any) -> Any:
    arrays = []
    for i, name in enumerate(columns, start=1):
        field = arrow_schema.field(name)
        values = [row[i] for row in rows]
        if name in TIME_COLUMNS:
            values = [None if v is None else v * 1000 for v in values]  # ms -> us
        elif name == "payload":
            values = [bytes(v) for v in values]
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            values = [v.decode() if isinstance(v, (bytes, bytearray)) else v for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


class BatchReader(DataSourceReader):
    """``spark.read.format("mysqlq")``: the retained log of one topic, or its archive."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.dsn = resolve_dsn(options.get("dsn"))
        self.topic = required_option(options, "topic")
        self.archive = reads_archive(options)
        self.columns = columns_of(schema, self.archive)
        self.schema = schema
        self.num_partitions = int_option(options, "numPartitions", DEFAULT_NUM_PARTITIONS, low=1)
        self.fetch_size = int_option(options, "fetchSize", DEFAULT_FETCH_SIZE, low=1)
        self.min_offset = int_option(options, "minOffset", None)
        self.max_offset = int_option(options, "maxOffset", None)
        self.min_time = time_option(options, "startTime")
        self.max_time = time_option(options, "endTime")
        self.partition_offsets = partition_offsets(options)
        # narrowed by pushed filters
        self.keys: set[str | None] | None = None  # None: every partition; None in set: unkeyed
        self.partition_ids: set[int] | None = None
        self.message_id: str | None = None
        self.empty = False

    def _narrow_offsets(self, low: int | None, high: int | None) -> None:
        if low is not None:
            self.min_offset = low if self.min_offset is None else max(self.min_offset, low)
        if high is not None:
            self.max_offset = high if self.max_offset is None else min(self.max_offset, high)

    def _narrow_keys(self, keys: set[str | None]) -> None:
        self.keys = keys if self.keys is None else self.keys & keys

    def _narrow_pids(self, pids: set[int]) -> None:
        self.partition_ids = pids if self.partition_ids is None else self.partition_ids & pids

    def partitions(self) -> Sequence[InputPartition]:
        if self.empty:
            return []
        conn = connect(self.dsn)
        try:
            sql = _sql.SPARK_ARCHIVE_PARTITIONS if self.archive else _sql.SPARK_PARTITIONS
            rows = execute_rows(conn, sql, (self.topic,))
        finally:
            conn.close()
        ranges = []
        for row in rows:
            pid = int(row["partition_id"])
            if row["last_offset"] is None:  # the archive holds nothing of this partition
                continue
            if self.partition_ids is not None and pid not in self.partition_ids:
                continue
            if self.keys is not None and row["partition_key"] not in self.keys:
                continue
            # the log: offsets up to last_offset (all committed, G3); the archive: from its
            # lowest archived offset to its highest
            lo = int(row["first_offset"]) - 1 if self.archive else 0
            hi = int(row["last_offset"])
            if self.partition_offsets is not None:
                if pid not in self.partition_offsets:
                    continue
                first, end = self.partition_offsets[pid]
                lo, hi = max(lo, first - 1), min(hi, end)
            if self.min_offset is not None:
                lo = max(lo, self.min_offset - 1)
            if self.max_offset is not None:
                hi = min(hi, self.max_offset)
            ranges.append((pid, lo, hi))
        return buckets(ranges, self.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        scan = Scan(
            self.dsn,
            self.columns,
            self.schema,
            min_time=self.min_time,
            max_time=self.max_time,
            message_id=self.message_id,
            fetch_size=self.fetch_size,
            archive=self.archive,
        )
        yield from scan.read(partition)  # type: ignore[arg-type]


class FilteringBatchReader(BatchReader):
    """A batch reader that also takes filters from Spark (needs Spark >= 4.1 with
    ``spark.sql.python.filterPushdown.enabled=true``; Spark refuses a reader with
    ``pushFilters`` while that setting is off, hence two classes)."""

    # filter push-down (Spark >= 4.1): only what the log's primary key and the partition list
    # answer exactly; anything else stays with Spark
    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        for f in filters:
            if not self._push(f):
                yield f

    def _push(self, f: Any) -> bool:
        column = f.attribute[0] if len(f.attribute) == 1 else None
        v = getattr(f, "value", None)
        if column == "offset" and isinstance(v, int) and not isinstance(v, bool):
            if isinstance(f, EqualTo):
                self._narrow_offsets(v, v)
            elif isinstance(f, GreaterThan):
                self._narrow_offsets(v + 1, None)
            elif isinstance(f, GreaterThanOrEqual):
                self._narrow_offsets(v, None)
            elif isinstance(f, LessThan):
                self._narrow_offsets(None, v - 1)
            elif isinstance(f, LessThanOrEqual):
                self._narrow_offsets(None, v)
            else:
                return False
            return True
        if column == "published_at" and isinstance(
            getattr(f, "value", None), (datetime.datetime, datetime.date)
        ):
            ms = epoch_ms(f.value, "published_at")
            # timestamps are microseconds in Spark, milliseconds in the log: round outwards and
            # let Spark keep the filter, so the result is exact either way
            if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                self.min_time = ms if self.min_time is None else max(self.min_time, ms)
            elif isinstance(f, (LessThan, LessThanOrEqual)):
                bound = ms + 1
                self.max_time = bound if self.max_time is None else min(self.max_time, bound)
            return False
        if column == "key":
            if isinstance(f, EqualTo) and isinstance(f.value, str):
                self._narrow_keys({f.value})
            elif isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                self._narrow_keys(set(f.value))
            elif isinstance(f, IsNull):
                self._narrow_keys({None})
            else:
                return False
            return True
        if column == "partition_id":
            if isinstance(f, EqualTo) and isinstance(f.value, int):
                self._narrow_pids({f.value})
            elif isinstance(f, In) and all(isinstance(v, int) for v in f.value):
                self._narrow_pids(set(f.value))
            else:
                return False
            return True
        if column == "topic" and isinstance(f, EqualTo):
            if f.value != self.topic:
                self.empty = True
            return True
        if column == "id" and isinstance(f, EqualTo) and isinstance(f.value, str):
            if self.message_id is not None and self.message_id != f.value:
                self.empty = True
            self.message_id = f.value
            return True
        return False
