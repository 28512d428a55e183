"""The options of the ``mysqlq`` source (strings, as Spark hands them over): their defaults and
their parsing, with a clear error for a bad value."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from mysqlq.errors import InvalidArgument

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_FETCH_SIZE",
    "DEFAULT_NUM_PARTITIONS",
    "MAX_OFFSET",
    "epoch_ms",
    "int_option",
    "partition_offsets",
    "reads_archive",
    "required_option",
    "retry_window",
    "time_option",
]

DEFAULT_NUM_PARTITIONS = 8
DEFAULT_FETCH_SIZE = 10_000
DEFAULT_CHUNK_SIZE = 1000
MAX_OFFSET = 2**63 - 1


def int_option(options: Mapping[str, str], name: str, default: int | None, low: int = 0):
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


def epoch_ms(value: Any, what: str) -> int:
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
        return epoch_ms(datetime.datetime(value.year, value.month, value.day), what)
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
        return epoch_ms(parsed, what)
    raise InvalidArgument(f"{what} must be a time, not {value!r}")


def time_option(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    return None if value in (None, "") else epoch_ms(value, f"option {name}")


def partition_offsets(options: Mapping[str, str]) -> dict[int, tuple[int, int]] | None:
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


def required_option(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        raise InvalidArgument(f"option {name} is required")
    return value


def retry_window(options: Mapping[str, str]) -> float | None:
    """Option ``retryWindow``: seconds a transient error is retried for (default: the driver's,
    60 s or ``$MYSQLQ_RETRY_WINDOW``)."""
    value = options.get("retryWindow")
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise InvalidArgument(f"option retryWindow must be seconds, not {value!r}") from None
    if not seconds >= 0:
        raise InvalidArgument("option retryWindow must be 0 or more seconds")
    return seconds


SOURCES = ("log", "archive")


def reads_archive(options: Mapping[str, str]) -> bool:
    """Option ``source``: ``log`` (the default: ``queue_messages``, what is retained) or
    ``archive`` (``queue_archive``: what GC moved out of the log of a topic with the archive
    on)."""
    value = (options.get("source") or "log").strip().lower()
    if value not in SOURCES:
        raise InvalidArgument(f"option source must be log or archive, not {options['source']!r}")
    return value == "archive"
