"""a message published without delay is never held as a delayed one

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-30

Installs the schema at 0026: migrations/snapshots/0026.sql holds what it adds, changes
or drops over 0025, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None
snapshot_sha256 = "a57cda0def26d20b60a0c943bd49adf3c91a7f6729edfe9b76fa43458fc0b04c"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
