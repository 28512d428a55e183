"""faster publish: a leaner queue_publish, a set-wise queue_publish_batch that takes caller ranks

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

Installs the schema frozen in migrations/snapshots/0005.sql.
"""

from mysqlq import schema

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
snapshot_sha256 = "fe409bc17310e568749d458ba48bd67caa5f94abe6836c4b14adcf77ada7edbf"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
