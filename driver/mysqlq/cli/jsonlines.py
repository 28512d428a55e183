"""Messages as JSON lines, the command line's format: what ``mysqlq publish`` reads on stdin
(``{payload | payload_b64, key, id, metadata, delay, kind, content_type, priority}``, or a bare
JSON string) and prints, and what ``mysqlq consume``, ``mysqlq dlq show`` and ``mysqlq archive
show`` print.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from typing import Any

from mysqlq import codec
from mysqlq.errors import InvalidArgument

__all__ = [
    "MESSAGE_FIELDS",
    "dlq_entry_json",
    "json_line_message",
    "message_json",
    "new_message",
    "parse_metadata",
    "payload_fields",
    "publish_result_json",
]

# fields of a message given as a JSON object (publish's stdin, and the library's publish_batch)
MESSAGE_FIELDS = (
    "payload",
    "payload_b64",
    "key",
    "id",
    "metadata",
    "delay",
    "kind",
    "content_type",
    "priority",
)


def new_message(
    payload: bytes | str,
    *,
    key: str | None = None,
    message_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    delay: float | None = None,
    kind: str | None = None,
    content_type: str | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """A message as ``publish`` and ``publish_batch`` take it, with an id made here when none is
    given, so that the caller knows (and can print) every message's id."""
    return {
        "payload": payload,
        "key": key,
        "id": message_id if message_id is not None else uuid.uuid4().hex,
        "metadata": metadata,
        "delay": delay,
        "kind": kind,
        "content_type": content_type,
        "priority": priority,
    }


def parse_metadata(text: str | None, where: str) -> dict[str, Any] | None:
    """Metadata given as JSON text: an object, or null. ``where`` names it in errors."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object")
    return value


def json_line_message(line: str, where: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON line (an object, or a bare JSON string: the payload) as a :func:`new_message`.

    ``defaults`` holds the ``key``, ``metadata``, ``delay``, ``kind``, ``content_type`` and
    ``priority`` of a line that leaves them out; ``where`` names the line in errors. A payload
    that is neither a string nor base64 is published as its JSON text, as application/json.
    """
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if isinstance(value, str):
        value = {"payload": value}
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{where} must be a JSON object {{payload, key, id, metadata, delay, kind, "
            "content_type, priority} or a JSON string"
        )
    unknown = sorted(set(value) - set(MESSAGE_FIELDS))
    if unknown:
        raise InvalidArgument(f"{where}: unknown field(s) {', '.join(unknown)}")
    if ("payload" in value) == ("payload_b64" in value):
        raise InvalidArgument(f"{where} needs exactly one of payload and payload_b64")
    if "payload_b64" in value:
        try:
            payload: bytes | str = base64.b64decode(value["payload_b64"], validate=True)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{where}: payload_b64 is not valid base64") from None
    elif isinstance(value["payload"], str):
        payload = value["payload"]
    else:  # any other JSON value is published as its JSON text
        payload = json.dumps(value["payload"], ensure_ascii=False, separators=(",", ":"))
        defaults = {**defaults, "content_type": defaults.get("content_type") or codec.CONTENT_JSON}
    key = value.get("key", defaults["key"])
    kind = value.get("kind", defaults.get("kind"))
    content_type = value.get("content_type", defaults.get("content_type"))
    priority = value.get("priority", defaults.get("priority"))
    message_id = value.get("id")
    metadata = value.get("metadata", defaults["metadata"])
    delay = value.get("delay", defaults["delay"])
    for name, item, kinds in (
        ("key", key, (str,)),
        ("id", message_id, (str,)),
        ("metadata", metadata, (dict,)),
        ("kind", kind, (str,)),
        ("content_type", content_type, (str,)),
    ):
        if item is not None and not isinstance(item, kinds):
            raise InvalidArgument(f"{where}: {name} must be a JSON {kinds[0].__name__} or null")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))):
        raise InvalidArgument(f"{where}: delay must be a number of seconds or null")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9
    ):
        raise InvalidArgument(f"{where}: priority must be an integer from 0 to 9 or null")
    return new_message(
        payload,
        key=key,
        message_id=message_id,
        metadata=metadata,
        delay=delay,
        kind=kind,
        content_type=content_type,
        priority=priority,
    )


def publish_result_json(topic: str, message: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """What ``mysqlq publish`` prints for a published message (``result``: a PublishResult)."""
    return {
        "topic": topic,
        "key": message["key"],
        "id": result.id,
        "partition_id": result.partition_id,
        "offset": result.offset,
        "duplicate": result.duplicate,
    }


def payload_fields(payload: bytes) -> dict[str, str]:
    """``{"payload": text}`` when the payload is UTF-8, else ``{"payload_b64": base64}``."""
    try:
        return {"payload": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode("ascii")}


def message_json(msg: Any) -> dict[str, Any]:
    """A delivered message (a :class:`mysqlq.Message`) as the JSON object ``mysqlq consume``
    prints."""
    out: dict[str, Any] = {
        "topic": msg.topic,
        "key": msg.key,
        "offset": msg.offset,
        "id": msg.id,
        "attempt": msg.attempt,
        "kind": msg.kind,
        "content_type": msg.content_type,
        "priority": msg.priority,
        **payload_fields(msg.payload),
        "metadata": msg.metadata,
    }
    if msg.origin_topic is not None:  # a DLQ entry
        out.update(
            origin_topic=msg.origin_topic,
            origin_group=msg.origin_group,
            origin_offset=msg.origin_offset,
            failures=msg.failures,
            last_error=msg.last_error,
        )
    return out


def dlq_entry_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of ``client.dlq_show`` as the JSON object ``mysqlq dlq show`` prints: its columns,
    the metadata as JSON, the payload as text or base64 (last)."""
    entry = {k: v for k, v in row.items() if k != "payload"}
    entry["metadata"] = codec.metadata_value(entry.get("metadata"))
    entry.update(payload_fields(bytes(row["payload"])))
    return entry
