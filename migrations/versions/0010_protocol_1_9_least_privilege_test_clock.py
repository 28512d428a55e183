"""protocol 1.9: least privilege (test clock, admin's group settings, DLQ topics, access rules)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

Installs the schema at 0010: migrations/snapshots/0010.sql holds what it adds, changes
or drops over 0009, folded onto 0001.sql and the deltas before it.
New tables (created by schema.upgrade): queue_acl, queue_settings.
"""

from mysqlq import schema

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
snapshot_sha256 = "5beaafc8bf65d6f3543b638d901e5f0e07311bb28e7060288f02798db6785b0e"


def upgrade() -> None:
    # an appended column (instant on MySQL 8.0+ and MariaDB 10.3+): no topic is marked as a DLQ;
    # subscriptions made before 1.9 keep the DLQ topic they have. No test clock is enabled: a
    # caller's p_now is refused from now on (MQ024)
    schema.add_columns("queue_topics", [("dlq", "TINYINT NOT NULL DEFAULT 0")])
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
    schema.drop_columns("queue_topics", ["dlq"])
