"""What a handler returns, or a batch carries, to publish with mysqlq's own fields; and the command
the publishers hand to the producer.

``MySQLQResponse(body, key=..., id=..., delay=..., priority=..., kind=..., headers=...)``: as a
handler's return value it is published by the handler's ``@broker.publisher(...)`` (or to the
message's ``reply_to``) with those fields; as an element of ``broker.publish_batch(...)`` it sets
them for that one message.

A field left unset (``key`` and ``id`` default to :data:`UNSET`, the others to None) falls back to
the publisher's default, and, for a result published in a handler's flow, ``key`` and ``id`` to
those of the message being handled (see :meth:`MySQLQPublishCommand.inherit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faststream._internal.constants import EMPTY
from faststream.response.publish_type import PublishType
from faststream.response.response import BatchPublishCommand, PublishCommand, Response

__all__ = ["CORRELATION_ID", "REPLY_TO", "UNSET", "MySQLQPublishCommand", "MySQLQResponse"]

# not given (as opposed to None, which asks for no key, or a generated id)
UNSET: Any = EMPTY

# the metadata keys that carry FastStream's own fields (the rest of the metadata is its headers)
CORRELATION_ID = "correlation_id"
REPLY_TO = "reply_to"


class MySQLQResponse(Response):
    """A message body with mysqlq's publish fields: ``key`` (the partition key: order per key),
    ``id`` (idempotency, G1), ``delay`` (seconds), ``priority`` (0-9), ``kind`` and ``headers``
    (the message's metadata)."""

    def __init__(
        self,
        body: Any,
        *,
        key: str | None = UNSET,
        id: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
    ) -> None:
        super().__init__(body=body, headers=dict(headers or {}), correlation_id=correlation_id)
        self.key = key
        self.id = id
        self.delay = delay
        self.priority = priority
        self.kind = kind

    def get_publish_key(self) -> str | None:
        return None if self.key is UNSET else self.key

    def as_publish_command(self) -> MySQLQPublishCommand:
        return MySQLQPublishCommand(
            self.body,
            topic="",
            key=self.key,
            message_id=self.id,
            delay=self.delay,
            priority=self.priority,
            kind=self.kind,
            headers=self.headers,
            correlation_id=self.correlation_id,
            _publish_type=PublishType.PUBLISH,
        )


class MySQLQPublishCommand(BatchPublishCommand):
    """One publish (or a batch, ``batch_bodies``) to the topic ``destination``."""

    def __init__(
        self,
        message: Any,
        /,
        *messages: Any,
        topic: str = "",
        key: str | None = UNSET,
        message_id: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
        reply_to: str = "",
        _publish_type: PublishType,
    ) -> None:
        super().__init__(
            message,
            *messages,
            destination=topic,
            correlation_id=correlation_id,
            headers=dict(headers or {}),
            reply_to=reply_to,
            _publish_type=_publish_type,
        )
        self.key = key
        self.message_id = message_id
        self.delay = delay
        self.priority = priority
        self.kind = kind

    @classmethod
    def from_cmd(  # type: ignore[override]
        cls, cmd: PublishCommand | MySQLQPublishCommand, *, batch: bool = False
    ) -> MySQLQPublishCommand:
        if isinstance(cmd, MySQLQPublishCommand):
            return cmd
        body, extra = cls._parse_bodies(cmd.body, batch=batch)
        return cls(
            body,
            *extra,
            topic=cmd.destination,
            headers=cmd.headers,
            correlation_id=cmd.correlation_id,
            reply_to=cmd.reply_to,
            _publish_type=cmd.publish_type,
        )

    def defaults(
        self,
        *,
        key: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> None:
        """Fill what the command leaves unset with a publisher's defaults."""
        if self.key is UNSET:
            self.key = key
        if self.delay is None:
            self.delay = delay
        if self.priority is None:
            self.priority = priority
        if self.kind is None:
            self.kind = kind
        if headers:
            self.add_headers(dict(headers), override=False)

    def inherit(self, consumed: Any) -> None:
        """A result published in a handler's flow: what it leaves unset comes from the message
        being handled (``consumed``, the raw mysqlq message): its key, so the result keeps its
        key's order, and, on another topic, its id, so that a redelivered message (after a crash
        or a nack) does not publish its result twice (G1 makes the second one a duplicate)."""
        if consumed is None:
            return
        if self.key is UNSET:
            self.key = getattr(consumed, "key", None)
        if self.message_id is UNSET and getattr(consumed, "topic", None) != self.destination:
            self.message_id = getattr(consumed, "id", None)

    # what the producer sends ----------------------------------------------------------------

    def publish_fields(self, item: Any = None) -> dict[str, Any]:
        """The keyword arguments of ``mysqlq.aio.Client.publish`` (payload and content type
        aside) for this command, or for ``item``, one of its batch bodies: a
        :class:`MySQLQResponse` there overrides the command's fields for its message."""
        key, message_id, delay, priority, kind = (
            self.key,
            self.message_id,
            self.delay,
            self.priority,
            self.kind,
        )
        headers, correlation_id = self.headers, self.correlation_id
        if isinstance(item, MySQLQResponse):
            key = key if item.key is UNSET else item.key
            message_id = item.id  # a batch's command has no id of its own
            delay = delay if item.delay is None else item.delay
            priority = priority if item.priority is None else item.priority
            kind = kind if item.kind is None else item.kind
            headers = {**headers, **item.headers}
            correlation_id = item.correlation_id or correlation_id
        metadata = dict(headers)
        if correlation_id and correlation_id != message_id:
            metadata[CORRELATION_ID] = correlation_id
        if self.reply_to:
            metadata[REPLY_TO] = self.reply_to
        return {
            "key": None if key is UNSET else key,
            "id": None if message_id is UNSET else message_id,
            "metadata": metadata or None,
            "delay": float(delay or 0.0),
            "kind": kind,
            "priority": int(priority or 0),
        }

    def __repr__(self) -> str:
        fields = [f"body={self.body!r}", f"topic={self.destination!r}"]
        for name in ("key", "message_id", "delay", "priority", "kind"):
            value = getattr(self, name)
            if value is not None and value is not UNSET:
                fields.append(f"{name}={value!r}")
        if self.headers:
            fields.append(f"headers={self.headers!r}")
        return f"{type(self).__name__}({', '.join(fields)})"
