"""An ack behind delayed messages finds its partitions' rows and offsets by primary key

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29

Installs the schema at 0020: migrations/snapshots/0020.sql holds what it adds, changes
or drops over 0019, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None
snapshot_sha256 = "8a0b952ed70bf477124c1eca0e72a300bff6a4558c7b273c429a585aafd4effb"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
