"""Initial schema

Revision ID: 0001
Revises: None
Create Date: 2026-11-22

Installs the baseline, frozen whole in migrations/snapshots/0001.sql; later revisions
store only what they change over it.
"""

from mysqlq import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
snapshot_sha256 = "7e5939c9374dc5c86323958f3a032b1d4d8cc4791cc9177a58c9740844d9a6ad"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
