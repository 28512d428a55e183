"""message lifecycle: kind, content type and priority columns, priority-ordered fetch, the archive

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

Installs the schema frozen in migrations/snapshots/0006.sql.
New tables (created by schema.upgrade): queue_archive.
"""

from mysqlq import schema

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
snapshot_sha256 = "5f50023358129e615b6f4fbe63f63589cfba9e0d91f58325469d5e979f5b4d11"


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
