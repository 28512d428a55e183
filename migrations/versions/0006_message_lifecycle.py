"""message lifecycle: kind, content type and priority columns, priority-ordered fetch, the archive

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

Installs the schema at 0006: migrations/snapshots/0006.sql holds what it adds, changes
or drops over 0005, folded onto 0001.sql and the deltas before it.
New tables (created by schema.upgrade): queue_archive.
"""

from mysqlq import schema

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
snapshot_sha256 = "60a902350a74a154f38e7022dea2cdc4aa05b67420f5f9cf46a408dcf6317185"


TEXT = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"


def upgrade() -> None:
    # appended columns: added in place (instantly) on MySQL 8.0+ and MariaDB 10.3+; the log's
    # rows get NULL kind and content type and priority 0, which is what they were
    schema.add_columns(
        "queue_messages",
        [
            ("kind", f"VARCHAR(191) {TEXT} NULL"),
            ("content_type", f"VARCHAR(191) {TEXT} NULL"),
            ("priority", "TINYINT NOT NULL DEFAULT 0"),
        ],
    )
    schema.add_columns(
        "queue_topics",
        [
            ("archive", "TINYINT NOT NULL DEFAULT 0"),
            ("archive_retention_ms", "BIGINT NOT NULL DEFAULT 604800000"),
        ],
    )
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
    schema.drop_columns("queue_topics", ["archive", "archive_retention_ms"])
    schema.drop_columns("queue_messages", ["kind", "content_type", "priority"])
