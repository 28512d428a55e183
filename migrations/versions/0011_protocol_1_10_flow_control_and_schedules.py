"""protocol 1.10: flow control and schedules (rate limits, concurrency caps, pause, cancel,
recurring messages, dedup window)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

Installs the schema at 0011: migrations/snapshots/0011.sql holds what it adds, changes
or drops over 0010, folded onto 0001.sql and the deltas before it.
New tables (created by schema.upgrade): queue_dedup_ids, queue_schedules.
"""

from mysqlq import schema

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
snapshot_sha256 = "008b91aff67cf4e3eb0ac0142aa2344d1401d1a6d13a7d9a6d1f43e3f7e0d4d3"


def upgrade() -> None:
    # appended columns (instant on MySQL 8.0+ and MariaDB 10.3+): no group is paused or limited,
    # no topic has a dedup window, nothing was cancelled
    schema.add_columns(
        "queue_topics",
        [("paused", "TINYINT NOT NULL DEFAULT 0"), ("dedup_window_ms", "BIGINT NULL DEFAULT NULL")],
    )
    schema.add_columns("queue_partitions", [("dedup_window_ms", "BIGINT NULL DEFAULT NULL")])
    schema.add_columns(
        "queue_subscriptions",
        [
            ("paused", "TINYINT NOT NULL DEFAULT 0"),
            ("topic_paused", "TINYINT NOT NULL DEFAULT 0"),
            ("rate_per_s", "DECIMAL(13, 6) NULL"),
            ("burst", "INT NULL"),
            ("tokens", "DECIMAL(20, 6) NOT NULL DEFAULT 0"),
            ("refilled_at", "BIGINT NOT NULL DEFAULT 0"),
            ("concurrency", "INT NULL"),
        ],
    )
    schema.add_columns("queue_offsets", [("cancelled", "BIGINT NOT NULL DEFAULT 0")])
    schema.add_columns("queue_messages", [("id_key", "TINYINT NULL DEFAULT 0")])
    # the log's id key gains id_key (0 for every stored message, so G1 is unchanged): an online
    # in-place rebuild of that one index (LOCK=NONE: publishing goes on), reading the table once
    schema.execute(
        "ALTER TABLE queue_messages DROP INDEX queue_messages_by_id, "
        "ADD UNIQUE KEY queue_messages_by_id (partition_id, message_id, id_key), "
        "ALGORITHM=INPLACE, LOCK=NONE"
    )
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
    # an id published again after its window (id_key NULL) beside a stored copy would break the
    # old key: those copies are deleted first (the old schema cannot hold them)
    schema.execute("DELETE FROM queue_messages WHERE id_key IS NULL")
    schema.execute(
        "ALTER TABLE queue_messages DROP INDEX queue_messages_by_id, "
        "ADD UNIQUE KEY queue_messages_by_id (partition_id, message_id), "
        "ALGORITHM=INPLACE, LOCK=NONE"
    )
    schema.drop_columns("queue_messages", ["id_key"])
    schema.drop_columns("queue_offsets", ["cancelled"])
    schema.drop_columns(
        "queue_subscriptions",
        ["paused", "topic_paused", "rate_per_s", "burst", "tokens", "refilled_at", "concurrency"],
    )
    schema.drop_columns("queue_partitions", ["dedup_window_ms"])
    schema.drop_columns("queue_topics", ["paused", "dedup_window_ms"])
