"""A fetch starts a cursor range after the rows at its head, which its own watermark move may delete

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-30

Installs the schema at 0022: migrations/snapshots/0022.sql holds what it adds, changes
or drops over 0021, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None
snapshot_sha256 = "0c90773c5c79d4a9da4fd2fc9b425f40570cfc86acc80d987017a678d166b52f"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
