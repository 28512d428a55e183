"""protocol 1.9: least privilege (test clock, admin's group settings, DLQ topics, access rules)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

Installs the schema frozen in migrations/snapshots/0010.sql.
New tables (created by schema.upgrade): queue_acl, queue_settings.
"""

from mysqlq import schema

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
snapshot_sha256 = "2aaa31ed2b4409aa53b9200de5ff9705046db8cb1909d6f5725e951ceaa60950"


def upgrade() -> None:
    # an appended column (instant on MySQL 8.0+ and MariaDB 10.3+): no topic is marked as a DLQ;
    # subscriptions made before 1.9 keep the DLQ topic they have. No test clock is enabled: a
    # caller's p_now is refused from now on (MQ024)
    schema.add_columns("queue_topics", [("dlq", "TINYINT NOT NULL DEFAULT 0")])
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
    schema.drop_columns("queue_topics", ["dlq"])
