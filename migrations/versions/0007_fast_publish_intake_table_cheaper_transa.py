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
snapshot_sha256 = "6a8107789552dbebea469aef23cc27a58a96bf56625df99d7e284224826c6bf5"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
