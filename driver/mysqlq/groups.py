"""Joining a consumer group: ``queue_subscribe`` creates a group's subscription or joins it as it
is, and never changes an existing group's settings (only an admin does: ``queue_group_configure``,
``Client.configure_group``, ``mysqlq group configure``)."""

from __future__ import annotations

from typing import Any

from mysqlq import _sql
from mysqlq.connection import execute_rows
from mysqlq.errors import InvalidArgument

__all__ = ["DEFAULT_MAX_ATTEMPTS", "join"]

# what a group created by a subscriber that names no max_attempts gets
DEFAULT_MAX_ATTEMPTS = 3


def join(
    conn: Any,
    group: str,
    topic: str,
    subscriber: str | None,
    max_attempts: int | None,
    dlq_topic: str | None,
    lease_ms: int | None,
) -> dict[str, Any]:
    """``queue_subscribe``; returns the subscription row. ``max_attempts=None``: a new group gets
    DEFAULT_MAX_ATTEMPTS, an existing one keeps its own. An explicit value that differs from an
    existing group's raises InvalidArgument (MQ022), as a differing ``dlq_topic`` does."""
    wanted = DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts
    try:
        return execute_rows(
            conn, _sql.SUBSCRIBE, (group, topic, subscriber, wanted, dlq_topic, lease_ms)
        )[0]
    except InvalidArgument as exc:
        if max_attempts is not None or exc.code != "MQ022":
            raise
    # the group exists with a setting of its own: join it as it is (a differing dlq_topic, the
    # other conflict MQ022 names, is refused again here; the code decides, not the message words)
    return execute_rows(
        conn, _sql.SUBSCRIBE, (group, topic, subscriber, None, dlq_topic, lease_ms)
    )[0]
