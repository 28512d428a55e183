"""Initial schema

Revision ID: 0001
Revises: None
Create Date: 2026-11-22

Installs the schema frozen in migrations/snapshots/0001.sql.
"""

from mysqlq import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
snapshot_sha256 = "52380649f02db78fa73fbb46b850abbb6961d1e9c38456365d491e389d2a2370"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
