"""The message format, one owner for the client, the CLI and Spark: payloads as bytes, metadata
as JSON text, delays in milliseconds, and the elements of ``queue_publish_batch``'s JSON.
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from mysqlq.errors import InvalidArgument

__all__ = [
    "BATCH_FIELDS",
    "batch_element",
    "batch_element_text",
    "batch_elements",
    "delay_ms",
    "metadata_json",
    "payload_bytes",
]


def payload_bytes(payload: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise InvalidArgument(f"payload must be bytes or str, not {type(payload).__name__}")


def metadata_json(metadata: Mapping[str, Any] | None) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidArgument(f"metadata must be a mapping or None, not {type(metadata).__name__}")
    try:
        return json.dumps(metadata, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"metadata must be JSON-serialisable: {exc}") from None


def delay_ms(delay: float | None) -> int:
    if delay is None:
        return 0
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay):
        raise InvalidArgument(f"delay must be a number of seconds, not {delay!r}")
    return round(delay * 1000)


BATCH_FIELDS = frozenset({"payload", "key", "id", "metadata", "delay"})


def batch_element(message: Any, default_id: str) -> dict[str, Any]:
    """One element of queue_publish_batch's JSON from a payload or a mapping.

    ``default_id`` is the id of a message given without one: made by the driver, so that a retry
    after a lost reply is recognised as a duplicate.
    """
    if isinstance(message, bytes):
        return {"payload_b64": base64.b64encode(message).decode("ascii"), "id": default_id}
    if isinstance(message, (bytearray, memoryview, str)):
        message = {"payload": message}
    if not isinstance(message, Mapping):
        raise InvalidArgument(
            "publish_batch takes payloads (bytes or str) or mappings with a 'payload' key"
        )
    unknown = message.keys() - BATCH_FIELDS
    if unknown:
        raise InvalidArgument(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if "payload" not in message:
        raise InvalidArgument("every message needs a 'payload'")
    payload = message["payload"]
    element: dict[str, Any] = {
        "payload_b64": base64.b64encode(
            payload if isinstance(payload, bytes) else payload_bytes(payload)
        ).decode("ascii"),
        "id": default_id if message.get("id") is None else message["id"],
    }
    key = message.get("key")
    if key is not None:
        element["key"] = key
    metadata = message.get("metadata")
    if metadata is not None:
        text = metadata_json(metadata)  # checks it: a mapping, JSON-serialisable, no NaN
        element["metadata"] = metadata if type(metadata) is dict else json.loads(text or "null")
    if message.get("delay"):
        element["delay_ms"] = delay_ms(message["delay"])
    return element


def batch_element_text(
    payload: bytes | str,
    message_id: str,
    *,
    key: str | None = None,
    metadata: str | None = None,
    delay_millis: int | None = None,
) -> str:
    """One element of queue_publish_batch's JSON, as text, from values already in the log's
    format (as a Spark row holds them): the payload as bytes (sent as base64) or str (sent as a
    JSON string), metadata as the text of a JSON object (checked, then sent as written: the log
    stores it as written), the delay in milliseconds (0 or None: none).
    """
    if isinstance(payload, str):
        parts = ['{"payload":', json.dumps(payload, ensure_ascii=False)]
    else:
        parts = ['{"payload_b64":"', base64.b64encode(payload).decode("ascii"), '"']
    parts += [',"id":', json.dumps(message_id)]
    if key is not None:
        parts += [',"key":', json.dumps(key, ensure_ascii=False)]
    if metadata is not None:
        try:
            parsed = json.loads(metadata)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidArgument("metadata must be a JSON object")
        parts += [',"metadata":', metadata]
    if delay_millis:
        parts += [',"delay_ms":', str(int(delay_millis))]
    parts.append("}")
    return "".join(parts)


def batch_elements(messages: Any, chunk_size: Any) -> list[dict[str, Any]]:
    """Check a whole batch before anything is sent: bad input publishes nothing."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgument(f"chunk_size must be an integer, not {chunk_size!r}")
    if not 1 <= chunk_size <= 100_000:
        raise InvalidArgument("chunk_size must be between 1 and 100000")
    if isinstance(messages, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
        messages, Iterable
    ):
        raise InvalidArgument(
            "messages must be an iterable of payloads or message mappings, "
            f"not {type(messages).__name__}"
        )
    # one uuid per call: ids the driver makes for messages without one (a retry is recognised)
    prefix = uuid.uuid4().hex
    return [batch_element(m, f"{prefix}-{i}") for i, m in enumerate(messages)]
