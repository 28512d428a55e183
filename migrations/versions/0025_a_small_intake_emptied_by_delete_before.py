"""A small intake emptied by DELETE before the commit on MySQL

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-30

Installs the schema at 0025: migrations/snapshots/0025.sql holds what it adds, changes
or drops over 0024, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None
snapshot_sha256 = "feccdff79506c1724332b05be6aa1928a9928c06a94ff3f890ef525a384c6136"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
