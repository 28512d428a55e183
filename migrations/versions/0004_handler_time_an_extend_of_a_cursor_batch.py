"""handler time: an extend of a cursor batch moves its deadline without rows (G14)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

Installs the schema at 0004: migrations/snapshots/0004.sql holds what it adds, changes
or drops over 0003, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
snapshot_sha256 = "d0113700767f40c0e020db9f86933352156a41a6797757f8d7ede2f519bfe71f"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
