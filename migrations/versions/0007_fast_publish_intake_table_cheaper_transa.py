"""fast publish: intake table, cheaper transaction probe

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Installs the schema frozen in migrations/snapshots/0007.sql.
"""

from mysqlq import schema

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
snapshot_sha256 = "6937d2b58a58e2a7d6b37e985ad2b6070522c5e43e5d0f49355d40b616c8cadb"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
