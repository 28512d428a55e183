"""faster batch publish; bench

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Installs the schema frozen in migrations/snapshots/0002.sql.
"""

from mysqlq import schema

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
snapshot_sha256 = "3f244b801783be1c1a898e6aa03b7fb22282e21c5ee259ee02d95f2f9a1e331e"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
