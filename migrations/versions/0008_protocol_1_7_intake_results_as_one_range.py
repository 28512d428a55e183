"""protocol 1.7: intake results as one range per ranked key; single publish checks behind one test

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

Installs the schema at 0008: migrations/snapshots/0008.sql holds what it adds, changes
or drops over 0007, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
snapshot_sha256 = "ff9167d0c6954738983e840d8d00716413583a99839aa31af4f27d0cfde2b119"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
