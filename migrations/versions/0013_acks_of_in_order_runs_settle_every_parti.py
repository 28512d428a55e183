"""acks of in-order runs settle every partition in two statements

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28

Installs the schema at 0013: migrations/snapshots/0013.sql holds what it adds, changes
or drops over 0012, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
snapshot_sha256 = "9c7851bd2204a5150e2c0f93470f61b1f5d5d0fed139f3a9d6518cab0258d6e1"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
