"""a group's delayed messages no longer cost every long poll and fetch: its due rows are found
by an index (before, each probe read every delivery-state row of its partitions, or of every group)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29

Installs the schema at 0018: migrations/snapshots/0018.sql holds what it adds, changes
or drops over 0017, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None
snapshot_sha256 = "f884e63f37e465357dc66645a1abc28103ae712585ab820ac7b53c8ac85a0c24"


def upgrade() -> None:
    # the index the probe and fetch read due rows by: built online (LOCK=NONE: settling goes on),
    # before the routines that read by it
    schema.add_index(
        "queue_delivery_state", "queue_delivery_state_due", "(group_name, state, invisible_until)"
    )
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
    schema.drop_index("queue_delivery_state", "queue_delivery_state_due")
