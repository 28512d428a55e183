"""The fast batch publish: a chunk's messages go as rows, in multi-row INSERTs, into the
session's TEMPORARY intake table, and one CALL of ``queue_publish_intake`` numbers them and moves
them into the log (no JSON to build or parse, payloads sent as bytes).

The intake belongs to one connection: ``queue_intake_open`` creates it on the connection's first
batch. ``queue_publish_intake`` empties it on success and on error; in a caller's transaction a
DELETE first clears what a rolled-back transaction may have put back.

What the driver knows of a connection (its server's limits, read once; whether its intake is
open, or refused to this account so that its batches go as JSON) is an :class:`Intake`, the
driver's own object, kept for as long as the connection lives (:func:`of`); nothing is set on
MySQLdb's connection object.

A chunk is a list of ``(idx, message)``: each :class:`~mysqlq.codec.OutgoingMessage` with its
index in its ``publish_batch`` call (the intake's ``idx``: the server's results and errors name
it). The messages are checked before the first chunk is sent (:mod:`mysqlq.batch`).
"""

from __future__ import annotations

import contextlib
import operator
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import MySQLdb

from mysqlq import _sql, codec
from mysqlq.codec import OutgoingMessage, PublishResult
from mysqlq.connection import execute_rows
from mysqlq.errors import (
    ER_SIGNAL_EXCEPTION,
    InvalidArgument,
    PermissionDenied,
    SchemaMismatch,
    translating,
)

__all__ = [
    "Chunk",
    "Intake",
    "Limits",
    "check_size",
    "insert_statements",
    "limits",
    "of",
    "publish",
    "ranks",
    "results",
]

# one INSERT statement carries this much at most (a larger row goes alone, under the server's
# max_allowed_packet): the server takes one in while the driver builds the next, and takes in
# three statements of 64 KiB faster than one of 192 KiB (MySQL most of all)
STATEMENT_BYTES = 64 << 10

# a chunk: messages with their index in their publish_batch call
Chunk = Sequence[tuple[int, OutgoingMessage]]

# a connection's intake: opened, or refused to this account (its batches go as JSON)
OPEN = "open"
JSON = "json"


class Limits(NamedTuple):
    """What a connection's server takes (:func:`limits`)."""

    packet: int  # max_allowed_packet: the longest statement the server takes
    depth: int  # how deep a batch's metadata may nest (codec.METADATA_DEPTH)
    json: bool = False  # the connection publishes batches as JSON (queue_publish_batch)


class Intake:
    """What the driver knows of one connection: its server's :class:`Limits` (None until read)
    and its intake's ``mode`` (None until a batch opened it; :data:`OPEN`, or :data:`JSON` when
    this account may not use it)."""

    __slots__ = ("limits", "mode")

    def __init__(self) -> None:
        self.limits: Limits | None = None
        self.mode: str | None = None

    def __repr__(self) -> str:
        return f"Intake(limits={self.limits!r}, mode={self.mode!r})"


# each connection's Intake, for as long as the connection lives (the value holds no reference
# to its key: a closed connection that is dropped takes its entry with it)
_INTAKES: weakref.WeakKeyDictionary[Any, Intake] = weakref.WeakKeyDictionary()


def of(conn: MySQLdb.connections.Connection) -> Intake:
    """``conn``'s :class:`Intake` (a new one for a connection the driver has not used yet)."""
    state = _INTAKES.get(conn)
    if state is None:
        state = _INTAKES.setdefault(conn, Intake())
    return state


_LIMITS = "SELECT @@max_allowed_packet, VERSION() LIKE '%MariaDB%'"


def limits(conn: MySQLdb.connections.Connection, *, batch: bool = False) -> Limits:
    """What ``conn``'s server takes, read once per connection. A connection whose character set
    is not utf8mb4 is refused first: keys, ids and metadata go as UTF-8 bytes, and a publish's
    results name keys as utf8mb4 text. ``batch``: also open the intake, so that ``json`` says how
    this connection's batches go."""
    state = of(conn)
    got = state.limits
    if got is None:
        charset = conn.character_set_name()
        if charset != "utf8mb4":
            raise InvalidArgument(
                f"the connection's character set is {charset}: mysqlq sends and reads its text "
                "as utf8mb4 (connect with charset='utf8mb4')"
            )
        ((packet, mariadb),) = execute_rows(conn, _LIMITS, tuples=True)
        depth = codec.METADATA_DEPTH["mariadb" if mariadb else "mysql"]
        got = state.limits = Limits(int(packet), depth)
    if batch and state.mode is None:
        try:
            execute_rows(conn, _sql.INTAKE_OPEN)
            state.mode = OPEN
        except PermissionDenied as exc:
            if exc.errno == ER_SIGNAL_EXCEPTION:
                raise
            state.mode = JSON
    return got._replace(json=True) if state.mode == JSON else got


# what one statement holds besides a message's payload and metadata, at most: the INSERT's or
# CALL's own text, the topic and the short fields (191 characters each, escaped)
STATEMENT_SLACK = 16 << 10
_ESCAPED = (b"\\", b"'", b'"', b"\0", b"\n", b"\r", b"\x1a")


def check_size(where: str, payload: bytes, metadata: str | None, limit: Limits) -> None:
    """Refuse a message too large for one statement under the server's max_allowed_packet (the
    server would refuse the statement with 1153, and close the connection): its payload escaped
    (as bytes in the intake, as base64 in a JSON batch) and its metadata escaped. ``where``
    names it. Counts the bytes that escaping doubles only for a message near the limit."""
    room = limit.packet - STATEMENT_SLACK
    sent = 4 * ((len(payload) + 2) // 3) if limit.json else 2 * len(payload)
    if sent + (0 if metadata is None else 8 * len(metadata)) <= room:
        return
    if not limit.json:
        sent = len(payload) + sum(map(payload.count, _ESCAPED))
    meta = b"" if metadata is None else metadata.encode("utf-8")
    if sent + len(meta) + sum(map(meta.count, _ESCAPED)) > room:
        raise InvalidArgument(
            f"{where} is too large: {len(payload)} bytes (with {len(meta)} bytes of metadata) "
            f"do not fit in one statement under the server's max_allowed_packet "
            f"({limit.packet} bytes)"
        )


def ranks(chunk: Chunk) -> list[int | None]:
    """Each keyed message's rank among the chunk's messages of its key, 1..n (None for an
    unkeyed one: its partition is the server's to pick, so the server numbers those)."""
    seen: dict[str, int] = {}
    out: list[int | None] = []
    for _idx, message in chunk:
        key = message.key
        if key is None:
            out.append(None)
        else:
            seen[key] = rank = seen.get(key, 0) + 1
            out.append(rank)
    return out


def _text(quote: Callable[[bytes], bytes], value: str | None) -> bytes:
    return b"NULL" if value is None else quote(value.encode("utf-8"))


def _texts(quote: Callable[[bytes], bytes]) -> Callable[[str | None], bytes]:
    """``_text`` for the fields a batch repeats (keys, kinds, content types): each value
    escaped once per call."""
    done: dict[str, bytes] = {}

    def text(value: str | None) -> bytes:
        if value is None:
            return b"NULL"
        literal = done.get(value)
        if literal is None:
            literal = done[value] = quote(value.encode("utf-8"))
        return literal

    return text


# each intake column's literal in a row's VALUES (the payload as bytes, whatever the connection's
# character set), in the order of _sql.INTAKE_COLUMNS; idx, id and payload are always sent, the
# other columns only when some message of the chunk sets them (else they take their DEFAULT)
_LITERALS = (b"%d", b"%s", b"%s", b"_binary%s", b"%s", b"%d", b"%s", b"%s", b"%d", b"%s")
ALL_COLUMNS = tuple(range(len(_LITERALS)))
# the columns a message may leave unset: its field, and the value the column's DEFAULT gives
_UNSET = tuple(
    (j, operator.attrgetter(name), default)
    for j, name, default in (
        (1, "key", None),
        (4, "metadata", None),
        (5, "delay_ms", 0),
        (6, "kind", None),
        (7, "content_type", None),
        (8, "priority", 0),
    )
)


def set_columns(chunk: Chunk, chunk_ranks: Sequence[int | None]) -> tuple[int, ...]:
    """The intake columns (indexes into _sql.INTAKE_COLUMNS) that some message of ``chunk`` sets.
    The others are left out of the INSERT and take their DEFAULT, the same value: a shorter
    statement, which the server takes in faster (about a fifth less time for 1,000 rows with no
    metadata, delay, kind or priority)."""
    messages = list(map(operator.itemgetter(1), chunk))
    n = len(messages)
    unset = {j for j, field, default in _UNSET if list(map(field, messages)).count(default) == n}
    if list(chunk_ranks).count(None) == n:
        unset.add(9)
    return tuple(j for j in ALL_COLUMNS if j not in unset)


def insert_statements(
    conn: MySQLdb.connections.Connection,
    chunk: Chunk,
    chunk_ranks: Sequence[int | None] | None = None,
    *,
    columns: tuple[int, ...] | None = None,
    max_bytes: int = STATEMENT_BYTES,
) -> Iterator[bytes]:
    """The multi-row INSERTs of ``chunk`` (each under ``max_bytes`` unless one row is larger),
    each message with its rank (``chunk_ranks``; default :func:`ranks`), naming only the columns
    the messages set (:func:`set_columns`; ``columns``: these instead), escaped by the connection
    (its character set and sql_mode) in one pass: a third of the client time of the generic
    executemany."""
    if not chunk:
        return
    if chunk_ranks is None:
        chunk_ranks = ranks(chunk)
    quote = conn.string_literal
    repeated = _texts(quote)
    used = set_columns(chunk, chunk_ranks) if columns is None else columns
    head = _sql.INTAKE_INSERT % b", ".join(_sql.INTAKE_COLUMNS[j] for j in used)
    literal = b"(" + b",".join(_LITERALS[j] for j in used) + b")"
    pick = operator.itemgetter(*used)
    values: list[bytes] = []
    size = 0
    for (idx, m), rank in zip(chunk, chunk_ranks, strict=True):
        value = literal % pick(
            (  # the row of the intake table, in the order of _sql.INTAKE_COLUMNS
                idx,
                repeated(m.key),
                _text(quote, m.id),
                quote(m.payload),
                _text(quote, m.metadata),
                m.delay_ms,
                repeated(m.kind),
                repeated(m.content_type),
                m.priority,
                b"NULL" if rank is None else b"%d" % rank,
            )
        )
        if values and size + len(value) > max_bytes:
            yield head + b",".join(values)
            values, size = [], 0
        values.append(value)
        size += len(value) + 1
    if values:
        yield head + b",".join(values)


def publish(
    conn: MySQLdb.connections.Connection, topic: str, chunk: Chunk, *, joined: bool
) -> list[PublishResult]:
    """Publish ``chunk`` to ``topic`` over ``conn``: in its transaction when ``joined``, else the
    call commits on its own. Returns each message's result, in the chunk's order.

    An account without EXECUTE on the intake's routines (a publisher granted before protocol 1.6;
    ``mysqlq grants`` lists them) publishes through ``queue_publish_batch`` instead, on that
    connection from then on."""
    chunk_ranks = ranks(chunk)
    state = of(conn)
    if state.mode == JSON:
        return _publish_json(conn, topic, chunk, chunk_ranks)
    try:
        if state.mode is None:
            execute_rows(conn, _sql.INTAKE_OPEN)
            state.mode = OPEN
        elif joined:
            execute_rows(conn, _sql.INTAKE_CLEAR)
        sent = _insert(conn, chunk, chunk_ranks)
        # (a commit Group Replication refuses is too large when what was sent nears its limit)
        found = execute_rows(conn, _sql.PUBLISH_INTAKE, (topic,), tuples=True, size=sent)
        return results(chunk, chunk_ranks, found)
    except PermissionDenied as exc:
        if exc.errno == ER_SIGNAL_EXCEPTION:  # an access rule (MQ023), not a missing grant
            raise
        if state.mode == OPEN:
            _clear(conn)
        state.mode = JSON
        return _publish_json(conn, topic, chunk, chunk_ranks)


def results(
    chunk: Chunk, chunk_ranks: Sequence[int | None], found: list[tuple]
) -> list[PublishResult]:
    """Each message's result, in the chunk's order, from the rows ``queue_publish_intake``
    returned (``idx, offset, duplicate, partition_id, part_key``): one per message, or with idx
    NULL a range (each message of its key at offset + its rank)."""
    ranges: dict[str, tuple[int, int]] = {}
    own: dict[int, tuple[int, bool, int]] = {}
    for idx, offset, duplicate, pid, key in found:
        if idx is None:
            ranges[key] = (int(offset), int(pid))
        else:
            own[int(idx)] = (int(offset), bool(duplicate), int(pid))
    out = []
    for (idx, m), rank in zip(chunk, chunk_ranks, strict=True):
        got = own.get(idx)
        if got is not None:
            out.append(PublishResult(got[0], got[1], got[2], m.id))
            continue
        base = ranges.get(m.key) if m.key is not None and rank is not None else None
        if base is None:
            raise SchemaMismatch(
                f"queue_publish_intake returned no result for messages[{idx}] "
                "(a server older or newer than this driver?)"
            )
        out.append(PublishResult(base[0] + rank, False, base[1], m.id))
    return out


def _insert(
    conn: MySQLdb.connections.Connection, chunk: Chunk, chunk_ranks: Sequence[int | None]
) -> int:
    """Send ``chunk`` into the intake; returns the bytes sent. Each INSERT is sent before the
    next one is built, so the server takes one in while the driver escapes the next. A failure
    empties the intake: the rows of the INSERTs that went in are not a call's to keep."""
    sent = 0
    waiting = False
    try:
        with translating():
            for statement in insert_statements(conn, chunk, chunk_ranks):
                if waiting:
                    waiting = False
                    conn.read_query_result()
                conn.send_query(statement)
                waiting = True
                sent += len(statement)
            if waiting:
                waiting = False
                conn.read_query_result()
    except BaseException:
        if waiting:
            with contextlib.suppress(Exception):
                conn.read_query_result()
        _clear(conn)
        raise
    return sent


def _clear(conn: MySQLdb.connections.Connection) -> None:
    with contextlib.suppress(Exception):
        execute_rows(conn, _sql.INTAKE_CLEAR)


def _publish_json(
    conn: MySQLdb.connections.Connection,
    topic: str,
    chunk: Chunk,
    chunk_ranks: Sequence[int | None],
) -> list[PublishResult]:
    """The same chunk through ``queue_publish_batch`` (the JSON interface)."""
    elements = [
        codec.batch_element_text(m, rank)
        for (_idx, m), rank in zip(chunk, chunk_ranks, strict=True)
    ]
    found = execute_rows(conn, _sql.PUBLISH_BATCH, (topic, "[" + ",".join(elements) + "]"))
    return [
        PublishResult(int(r["offset"]), bool(r["duplicate"]), int(r["partition_id"]), m.id)
        for (_idx, m), r in zip(chunk, found, strict=True)
    ]
