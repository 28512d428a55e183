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
snapshot_sha256 = "2849dea671e59d6fdbe2cbbbc0fbd49d5eb769afa84cecfd9e1c8310b7489526"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
