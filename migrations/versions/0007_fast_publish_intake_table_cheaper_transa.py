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
snapshot_sha256 = "a6ea7217ce97303ed52339623601209022858baa842b84f95cf4644c5250ac2c"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
