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
snapshot_sha256 = "85dd0de774225ca302206e33659a6759e1d65ce8fd7846c2ff158eb4efdbcb74"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
