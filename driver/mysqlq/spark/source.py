"""The ``mysqlq`` data source for PySpark's Python Data Source API.

Batch read of a topic's log, batch and streaming write through ``queue_publish_batch``, and a
streaming read that is a consumer group (its position lives in ``queue_offsets``). Everything here
is picklable: database connections are opened where the work runs (``partitions()`` on the driver,
``read()``/``write()`` on executors) and never travel with the objects.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mysqlq import _sql
from mysqlq.connection import connect, execute_rows, resolve_dsn
from mysqlq.errors import ConnectionLost, Deadlock, InvalidArgument, LockTimeout

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

try:  # Spark >= 4.0 has the Arrow batch writer; the streaming one came in 4.1
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = None  # type: ignore
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceStreamArrowWriter = None  # type: ignore
try:  # Spark >= 4.2: Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover
    SupportsTriggerAvailableNow = object  # type: ignore

__all__ = ["COLUMNS", "SCHEMA", "MySQLQDataSource"]

NAME = "mysqlq"

# column of the Spark row -> (SQL expression over queue_messages m, Spark type)
COLUMNS: dict[str, tuple[str, Any]] = {
    "topic": ("m.topic", StringType()),
    "partition_id": ("m.partition_id", LongType()),
    "key": ("m.partition_key", StringType()),
    "offset": ("m.msg_offset", LongType()),
    "id": ("m.message_id", StringType()),
    "payload": ("m.payload", BinaryType()),
    "metadata": ("m.metadata", StringType()),
    "published_at": ("m.published_at", TimestampType()),
    "deliver_at": ("m.deliver_at", TimestampType()),
    "target_group": ("m.target_group", StringType()),
    "origin_topic": ("m.origin_topic", StringType()),
    "origin_group": ("m.origin_group", StringType()),
    "origin_offset": ("m.origin_offset", LongType()),
    "origin_message_id": ("m.origin_message_id", StringType()),
    "failures": ("m.failures", IntegerType()),
    "last_error": ("m.last_error", StringType()),
    "failed_at": ("m.failed_at", TimestampType()),
}
_NOT_NULL = {"topic", "partition_id", "offset", "id", "payload", "published_at", "deliver_at"}
SCHEMA = StructType(
    [StructField(name, typ, name not in _NOT_NULL) for name, (_, typ) in COLUMNS.items()]
)
_TIME_COLUMNS = {"published_at", "deliver_at", "failed_at"}

DEFAULT_NUM_PARTITIONS = 8
DEFAULT_FETCH_SIZE = 10_000
DEFAULT_CHUNK_SIZE = 1000
MAX_OFFSET = 2**63 - 1


# --------------------------------------------------------------------------- options


def _int_option(options: Mapping[str, str], name: str, default: int | None, low: int = 0):
    value = options.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise InvalidArgument(f"option {name} must be an integer, not {value!r}") from None
    if number < low:
        raise InvalidArgument(f"option {name} must be at least {low}")
    return number


def _epoch_ms(value: Any, what: str) -> int:
    """Epoch milliseconds from an int, a datetime (naive = UTC), a date or ISO-8601 text."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{what} must be a time, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.date):
        return _epoch_ms(datetime.datetime(value.year, value.month, value.day), what)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument(
                f"{what} must be epoch milliseconds or an ISO-8601 time, not {value!r}"
            ) from None
        return _epoch_ms(parsed, what)
    raise InvalidArgument(f"{what} must be a time, not {value!r}")


def _time_option(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    return None if value in (None, "") else _epoch_ms(value, f"option {name}")


def _partition_offsets(options: Mapping[str, str]) -> dict[int, tuple[int, int]] | None:
    """Option ``partitionOffsets``: ``{"<partition_id>": [first, last]}`` (inclusive)."""
    text = options.get("partitionOffsets")
    if not text:
        return None
    message = 'option partitionOffsets must be a JSON object {"<partition_id>": [first, last]}'
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError
        ranges = {}
        for pid, bounds in raw.items():
            first, last = bounds
            if not all(isinstance(b, int) and not isinstance(b, bool) for b in (first, last)):
                raise ValueError
            ranges[int(pid)] = (first, last)
        return ranges
    except (ValueError, TypeError):
        raise InvalidArgument(message) from None


def _check_identifier(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        raise InvalidArgument(f"option {name} is required")
    return value


def _columns_of(schema: StructType) -> list[str]:
    """The requested columns (a user schema may pick a subset, in any order)."""
    names = []
    for field in schema.fields:
        if field.name not in COLUMNS:
            raise InvalidArgument(
                f"unknown column {field.name!r} for the mysqlq source; known: {', '.join(COLUMNS)}"
            )
        expected = COLUMNS[field.name][1]
        if field.dataType != expected:
            raise InvalidArgument(
                f"column {field.name!r} must be {expected.simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )
        names.append(field.name)
    if not names:
        raise InvalidArgument("the mysqlq source needs at least one column")
    return names


# --------------------------------------------------------------------------- reading


class RangeSplit(InputPartition):
    """One Spark partition: log ranges ``(lo, hi]`` of some mysqlq partitions."""

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        super().__init__(ranges)
        self.ranges = ranges  # [(partition_id, lo exclusive, hi inclusive)]


def _buckets(ranges: list[tuple[int, int, int]], count: int) -> list[RangeSplit]:
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


class _Scan:
    """Reads log ranges into Arrow record batches (runs on executors)."""

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
    ) -> None:
        self.dsn = dsn
        self.columns = columns
        self.schema = schema
        self.min_time = min_time
        self.max_time = max_time
        self.group = group
        self.message_id = message_id
        self.fetch_size = fetch_size

    def read(self, split: RangeSplit) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        # the offset comes first (to page by it); the requested columns follow
        sql = _sql.SPARK_READ_RANGE.format(
            columns=", ".join(COLUMNS[c][0] for c in self.columns) or "1"
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
        if name in _TIME_COLUMNS:
            values = [None if v is None else v * 1000 for v in values]  # ms -> us
        elif name == "payload":
            values = [bytes(v) for v in values]
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            values = [v.decode() if isinstance(v, (bytes, bytearray)) else v for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


class BatchReader(DataSourceReader):
    """``spark.read.format("mysqlq")``: the retained log of one topic."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.dsn = resolve_dsn(options.get("dsn"))
        self.topic = _check_identifier(options, "topic")
        self.columns = _columns_of(schema)
        self.schema = schema
        self.num_partitions = _int_option(options, "numPartitions", DEFAULT_NUM_PARTITIONS, low=1)
        self.fetch_size = _int_option(options, "fetchSize", DEFAULT_FETCH_SIZE, low=1)
        self.min_offset = _int_option(options, "minOffset", None)
        self.max_offset = _int_option(options, "maxOffset", None)
        self.min_time = _time_option(options, "startTime")
        self.max_time = _time_option(options, "endTime")
        self.partition_offsets = _partition_offsets(options)
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
            rows = execute_rows(conn, _sql.SPARK_PARTITIONS, (self.topic,))
        finally:
            conn.close()
        ranges = []
        for row in rows:
            pid, last = int(row["partition_id"]), int(row["last_offset"])
            if self.partition_ids is not None and pid not in self.partition_ids:
                continue
            if self.keys is not None and row["partition_key"] not in self.keys:
                continue
            lo, hi = 0, last
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
        return _buckets(ranges, self.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        scan = _Scan(
            self.dsn,
            self.columns,
            self.schema,
            min_time=self.min_time,
            max_time=self.max_time,
            message_id=self.message_id,
            fetch_size=self.fetch_size,
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
            ms = _epoch_ms(f.value, "published_at")
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


# --------------------------------------------------------------------------- streaming read


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
        self.topic = _check_identifier(options, "topic")
        self.group = _check_identifier(options, "group")
        self.columns = _columns_of(schema)
        self.schema = schema
        self.num_partitions = _int_option(options, "numPartitions", DEFAULT_NUM_PARTITIONS, low=1)
        self.fetch_size = _int_option(options, "fetchSize", DEFAULT_FETCH_SIZE, low=1)
        self._conn: Any = None
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

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        return state

    def _rows(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        for attempt in range(5):
            try:
                if self._conn is None:
                    self._conn = connect(self.dsn)
                return execute_rows(self._conn, sql, args)
            except (ConnectionLost, Deadlock, LockTimeout):
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
                if attempt == 4:
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

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
        return _buckets(ranges, self.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        scan = _Scan(
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
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


# --------------------------------------------------------------------------- writing

_WRITE_COLUMNS = {"payload", "key", "id", "metadata", "delay_ms", "topic"}


class PublishCommit(WriterCommitMessage):
    def __init__(self, published: int, duplicates: int) -> None:
        self.published = published
        self.duplicates = duplicates


def _check_write_schema(schema: StructType, topic: str | None) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "payload" not in names:
        raise InvalidArgument("a DataFrame written to mysqlq needs a payload column")
    if not isinstance(names["payload"], (BinaryType, StringType)):
        raise InvalidArgument("the payload column must be binary or string")
    for name in ("key", "id", "metadata", "topic"):
        if name in names and not isinstance(names[name], StringType):
            raise InvalidArgument(f"the {name} column must be a string")
    if "delay_ms" in names and names["delay_ms"].typeName() not in {"integer", "long", "short"}:
        raise InvalidArgument("the delay_ms column must be an integer")
    if topic is None and "topic" not in names:
        raise InvalidArgument("option topic is required (or a topic column)")


class _Publisher:
    """Publishes rows in chunks with queue_publish_batch (runs on executors)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.dsn = resolve_dsn(options.get("dsn"))
        self.topic = options.get("topic") or None
        self.chunk_size = _int_option(options, "chunkSize", DEFAULT_CHUNK_SIZE, low=1)
        if self.chunk_size > 100_000:
            raise InvalidArgument("option chunkSize must be at most 100000")
        _check_write_schema(schema, self.topic)
        # rows without an id get "<write id>:<spark partition>:<row>", the same on a task retry
        self.write_id = uuid.uuid4().hex

    def _id_prefix(self) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return f"{self.write_id}:0:"
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if query and batch is not None:
            # a micro-batch replayed after a restart republishes the same ids
            return f"{query}:{batch}:{ctx.partitionId()}:"
        return f"{self.write_id}:{ctx.partitionId()}:"

    def publish(self, batches: Iterator[dict[str, list[Any]]]) -> PublishCommit:
        prefix = self._id_prefix()
        conn = connect(self.dsn)
        published = duplicates = index = 0
        chunks: dict[str, list[str]] = {}
        try:
            for columns in batches:
                payloads = columns["payload"]
                n = len(payloads)
                keys = columns.get("key") or [None] * n
                ids = columns.get("id") or [None] * n
                metas = columns.get("metadata") or [None] * n
                delays = columns.get("delay_ms") or [None] * n
                topics = columns.get("topic") if self.topic is None else None
                for i in range(n):
                    index += 1
                    element = _element(
                        payloads[i], keys[i], ids[i], metas[i], delays[i], prefix, index
                    )
                    topic = self.topic if topics is None else topics[i]
                    if not topic:
                        raise InvalidArgument(f"row {index} of the partition has no topic")
                    chunk = chunks.setdefault(topic, [])
                    chunk.append(element)
                    if len(chunk) >= self.chunk_size:
                        p, d = self._send(conn, topic, chunk)
                        published, duplicates = published + p, duplicates + d
                        chunk.clear()
            for topic, chunk in chunks.items():
                if chunk:
                    p, d = self._send(conn, topic, chunk)
                    published, duplicates = published + p, duplicates + d
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return PublishCommit(published, duplicates)

    def _send(self, conn: Any, topic: str, chunk: list[str]) -> tuple[int, int]:
        text = "[" + ",".join(chunk) + "]"
        for attempt in range(6):
            try:
                rows = execute_rows(conn, _sql.PUBLISH_BATCH, (topic, text))
                dup = sum(1 for r in rows if r["duplicate"])
                return len(rows) - dup, dup
            except (Deadlock, LockTimeout):
                # every element has an id: repeating the chunk stores nothing twice (G1)
                if attempt == 5:
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")


def _element(payload, key, msg_id, metadata, delay, prefix: str, index: int) -> str:
    """One element of queue_publish_batch's JSON, as text."""
    if payload is None:
        raise InvalidArgument(f"row {index} of the partition has a NULL payload")
    if isinstance(payload, str):
        parts = ['{"payload":', json.dumps(payload, ensure_ascii=False)]
    else:
        parts = ['{"payload_b64":"', base64.b64encode(payload).decode("ascii"), '"']
    parts += [',"id":', json.dumps(msg_id if msg_id is not None else f"{prefix}{index}")]
    if key is not None:
        parts += [',"key":', json.dumps(key, ensure_ascii=False)]
    if metadata is not None:
        try:
            parsed = json.loads(metadata)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidArgument(f"row {index} of the partition: metadata must be a JSON object")
        parts += [',"metadata":', metadata]
    if delay:
        parts += [',"delay_ms":', str(int(delay))]
    parts.append("}")
    return "".join(parts)


def _arrow_columns(batches: Iterator[Any]) -> Iterator[dict[str, list[Any]]]:
    for batch in batches:
        yield {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}


def _row_columns(rows: Iterator[Any], size: int = 1000) -> Iterator[dict[str, list[Any]]]:
    buffer: list[Any] = []
    for row in rows:
        buffer.append(row.asDict())
        if len(buffer) >= size:
            yield {k: [r[k] for r in buffer] for k in buffer[0]}
            buffer = []
    if buffer:
        yield {k: [r[k] for r in buffer] for k in buffer[0]}


_BatchWriterBase = DataSourceArrowWriter or DataSourceWriter
_StreamWriterBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class BatchWriter(_BatchWriterBase):  # type: ignore[misc, valid-type]
    """``df.write.format("mysqlq")``: each task publishes its rows in chunks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.publisher = _Publisher(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        arrow = DataSourceArrowWriter is not None
        columns = _arrow_columns(iterator) if arrow else _row_columns(iterator)
        return self.publisher.publish(columns)


class StreamWriter(_StreamWriterBase):  # type: ignore[misc, valid-type]
    """``df.writeStream.format("mysqlq")``: each micro-batch is published like a batch write;
    rows without an id get ids derived from the query, batch and row, so a replayed
    micro-batch stores nothing twice."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.publisher = _Publisher(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        arrow = DataSourceStreamArrowWriter is not None
        columns = _arrow_columns(iterator) if arrow else _row_columns(iterator)
        return self.publisher.publish(columns)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


# --------------------------------------------------------------------------- the source


class MySQLQDataSource(DataSource):
    """Data source ``mysqlq``. Options: ``dsn`` (default env ``MYSQLQ_DSN``), ``topic``;
    ``group`` for streaming reads; see docs/spark.md for the rest."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    # filters are pushed when the option pushFilters says so, else when the source was
    # registered by mysqlq.spark.register() in a session with Python filter push-down on
    push_filters = False

    def reader(self, schema: StructType) -> DataSourceReader:
        push = self.options.get("pushFilters")
        push = self.push_filters if push in (None, "") else push.lower() == "true"
        if push and EqualTo is not None:
            return FilteringBatchReader(self.options, schema)
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use mode('append')")
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use outputMode('append')")
        return StreamWriter(self.options, schema)


class MySQLQFilteringDataSource(MySQLQDataSource):
    """The same source, pushing filters to the database by default."""

    push_filters = True
