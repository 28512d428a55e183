"""faster publish: a leaner queue_publish, a set-wise queue_publish_batch that takes caller ranks

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

Installs the schema at 0005: migrations/snapshots/0005.sql holds what it adds, changes
or drops over 0004, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
snapshot_sha256 = "2078218fafc979479f33446a659e391d8a4b1b9666ccc3a11325f9ef336a0295"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
