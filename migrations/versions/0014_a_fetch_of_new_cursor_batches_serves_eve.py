"""a fetch of new cursor batches serves every partition in four statements

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28

Installs the schema at 0014: migrations/snapshots/0014.sql holds what it adds, changes
or drops over 0013, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None
snapshot_sha256 = "5f8493eaeadbabfff87dedafe8363bad94434b9671dfafb9f2c397b6a5d55520"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
