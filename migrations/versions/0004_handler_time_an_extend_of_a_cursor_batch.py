"""handler time: an extend of a cursor batch moves its deadline without rows (G14)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

Installs the schema frozen in migrations/snapshots/0004.sql.
"""

from mysqlq import schema

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
snapshot_sha256 = "7d772a7558f731c0ece28748227704acebb10f0a6e5d1ed80a425b62a482a216"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
