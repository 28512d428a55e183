"""queue_fetch_wait takes the pause between its looks (p_probe_ms, protocol 1.12)

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-30

Installs the schema at 0023: migrations/snapshots/0023.sql holds what it adds, changes
or drops over 0022, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None
snapshot_sha256 = "dd64fdaa5b0d28915d74d1039dd70a7d99b52d452a034e9b043cdd3285a67d7e"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
