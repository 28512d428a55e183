"""A delivered message, as a handler sees it.

A leaf of the package: it imports nothing of mysqlq. Its outcomes go to whatever delivered it
through the small :class:`Settler` protocol (a subscriber's :class:`mysqlq.settlement.Settlement`
implements it); what settles a message on its behalf (its ack policy, ``msg.transaction()``)
records that with :func:`record_outcome`.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

JSON_TYPE = "application/json"


def decode_body(payload: bytes, content_type: str | None) -> Any:
    """``msg.body``: the payload decoded by its content type: JSON (application/json, or any
    ``+json`` type) as its value, ``text/*`` as str (in its charset, UTF-8 by default),
    anything else (or no content type) as bytes."""
    if not content_type:
        return payload
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media == JSON_TYPE or media.endswith("+json"):
        return json.loads(payload)
    if media.startswith("text/"):
        charset = "utf-8"
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
        return payload.decode(charset)
    return payload


class Settler(Protocol):
    """Where a message's outcomes go: the four calls a :class:`Message` makes (queued for the
    next settle call of its subscriber, or run in the caller's transaction)."""

    def settle(
        self,
        message: Message,
        outcome: str,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """``outcome`` is ``ack``, ``nack`` (after ``delay`` seconds, None: the backoff) or
        ``dead_letter``; ``error`` is the text stored with a nack or a dead letter."""

    def extend(self, message: Message, seconds: float) -> None:
        """Keep the message invisible to others for ``seconds`` more from now."""

    def settle_in(
        self,
        message: Message,
        outcome: str,
        conn: Any,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """Settle inside the open transaction of ``conn`` (a MySQLdb connection), without
        committing it: the outcome exists when, and only if, that transaction commits."""

    def transaction(self, message: Message) -> AbstractContextManager[Any]:
        """A transaction on the subscriber's database that acks the message when it commits."""


def record_outcome(message: Message, outcome: str | None) -> None:
    """Record ``outcome`` as the message's (None: unsettled again, a rolled-back transaction's),
    for what settles it on the handler's behalf; the first outcome is final for the handler."""
    message._outcome = outcome


@dataclass
class Message:
    """One delivery of one message to one subscriber of a group.

    ``offset`` is the message's position in its partition (``topic``, ``key``; unkeyed messages
    have ``key = None`` and live in one of the topic's hashed partitions, ``partition_id``).
    ``attempt`` counts deliveries to this group, 1 for the first. ``token`` identifies this
    delivery: a later redelivery gets another one, and outcomes carrying an old token are ignored.
    DLQ entries also carry ``origin_*``, ``failures``, ``last_error`` and ``failed_at``.
    ``kind`` and ``content_type`` are what the publisher said the payload is (None when it said
    nothing), ``priority`` its priority (0 to 9); :attr:`body` decodes the payload by its type.
    """

    topic: str
    key: str | None
    offset: int
    id: str
    payload: bytes
    metadata: dict[str, Any] | None
    attempt: int
    partition_id: int
    token: int
    published_at: int
    visible_until: int
    origin_topic: str | None = None
    origin_group: str | None = None
    origin_offset: int | None = None
    origin_message_id: str | None = None
    failures: int | None = None
    last_error: str | None = None
    failed_at: int | None = None
    kind: str | None = None
    content_type: str | None = None
    priority: int = 0
    _settler: Settler | None = field(default=None, repr=False, compare=False)
    _outcome: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_row(cls, row: dict[str, Any], settler: Settler | None = None) -> Message:
        """The message of a fetched row (the columns of ``queue_fetch``; the DLQ's ``origin_*``
        and the columns after ``visible_until`` may be missing). Made without the dataclass's
        keyword ``__init__`` (23 fields): a subscriber makes one per delivered message."""
        try:
            return cls._from_full_row(row, settler)
        except KeyError:
            if _OPTIONAL_COLUMNS.keys() <= row.keys():
                raise  # a column every row has is missing
            return cls._from_full_row({**_OPTIONAL_COLUMNS, **row}, settler)

    @classmethod
    def _from_full_row(cls, row: dict[str, Any], settler: Settler | None) -> Message:
        metadata = row["metadata"]
        if metadata:
            if isinstance(metadata, (bytes, bytearray)):
                metadata = metadata.decode()
            metadata = json.loads(metadata)
        else:
            metadata = None
        message = _new(cls)
        # (the server sends integers as int and the payload as bytes: nothing to convert)
        message.__dict__ = {
            "topic": row["topic"],
            "key": row["partition_key"],
            "offset": row["offset"],
            "id": row["id"],
            "payload": row["payload"],
            "metadata": metadata,
            "attempt": row["attempt"],
            "partition_id": row["partition_id"],
            "token": row["token"],
            "published_at": row["published_at"],
            "visible_until": row["visible_until"],
            "origin_topic": row["origin_topic"],
            "origin_group": row["origin_group"],
            "origin_offset": row["origin_offset"],
            "origin_message_id": row["origin_message_id"],
            "failures": row["failures"],
            "last_error": row["last_error"],
            "failed_at": row["failed_at"],
            "kind": row["kind"],
            "content_type": row["content_type"],
            "priority": row["priority"] or 0,
            "_settler": settler,
            "_outcome": None,
        }
        return message

    @property
    def delivery_key(self) -> tuple[int, int, int]:
        """This delivery, ``(partition_id, offset, token)``, as a subscriber's own bookkeeping
        keys it."""
        return (self.partition_id, self.offset, self.token)

    @property
    def delivery(self) -> list[int]:
        """The [partition_id, offset, token] triple the settle procedures take."""
        return [self.partition_id, self.offset, self.token]

    @property
    def body(self) -> Any:
        """The payload decoded by its content type: the value for JSON (application/json or
        ``*+json``), str for ``text/*`` (in its charset), bytes for anything else or none."""
        return decode_body(self.payload, self.content_type)

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    def text(self, encoding: str = "utf-8") -> str:
        return self.payload.decode(encoding)

    # explicit outcomes: the first one is final, returning from the handler adds nothing

    def ack(self, conn: Any = None) -> None:
        """Done: the message will not be delivered to this group again. With ``conn`` (a MySQLdb
        connection with a transaction open) the ack joins that transaction: it exists when, and
        only if, the transaction commits; a stale delivery raises :class:`mysqlq.StaleDelivery`
        and the transaction must roll back."""
        self._settle("ack", conn=conn)

    def nack(
        self, delay: float | None = None, error: str = "nacked by handler", conn: Any = None
    ) -> None:
        """Failed: deliver again after ``delay`` seconds (default: the subscriber's backoff), or
        move to the DLQ when this was the last allowed attempt. ``conn``: as for :meth:`ack`."""
        self._settle("nack", delay=delay, error=error, conn=conn)

    def dead_letter(self, reason: str, conn: Any = None) -> None:
        """Move to the group's DLQ now, with ``reason`` as the last error. ``conn``: as for
        :meth:`ack`."""
        self._settle("dead_letter", error=reason, conn=conn)

    def transaction(self) -> AbstractContextManager[Any]:
        """``with msg.transaction() as tx: tx.execute(...)``: a transaction (READ COMMITTED) on
        the subscriber's database whose commit also acks the message, and whose rollback (on an
        exception) leaves it unsettled. Exactly-once effects for writes to that database."""
        return self._attached().transaction(self)

    def extend(self, seconds: float) -> None:
        """Keep the message invisible to others for ``seconds`` more from now."""
        self._attached().extend(self, seconds)

    @property
    def settled(self) -> bool:
        return self._outcome is not None

    def _settle(self, outcome: str, conn: Any = None, **kw: Any) -> None:
        if conn is not None:
            # in the caller's transaction: the settler records the outcome once the call worked
            # (record_outcome)
            self._attached().settle_in(self, outcome, conn, **kw)
            return
        if self._outcome is not None:
            return
        settler = self._attached()
        self._outcome = outcome
        settler.settle(self, outcome, **kw)

    def _attached(self) -> Settler:
        if self._settler is None:
            raise RuntimeError("this message is not attached to a subscriber")
        return self._settler


_new = object.__new__
# the columns a row given to from_row may leave out, and what they are then
_OPTIONAL_COLUMNS: dict[str, Any] = dict.fromkeys(
    (
        "metadata",
        "origin_topic",
        "origin_group",
        "origin_offset",
        "origin_message_id",
        "failures",
        "last_error",
        "failed_at",
        "kind",
        "content_type",
        "priority",
    )
)
# from_row sets each field itself: it must know every one of them
if {f.name for f in fields(Message)} != set(
    Message.from_row(
        dict.fromkeys(("topic", "partition_key", "id", "payload"), b"")
        | dict.fromkeys(("offset", "attempt", "partition_id", "token"), 0)
        | dict.fromkeys(("published_at", "visible_until"), 0)
    ).__dict__
):  # pragma: no cover
    raise AssertionError("Message.from_row does not set every field of Message")
