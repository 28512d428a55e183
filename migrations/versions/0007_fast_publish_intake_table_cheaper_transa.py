"""fast publish: intake table, cheaper transaction probe

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Installs the schema at 0007: migrations/snapshots/0007.sql holds what it adds, changes
or drops over 0006, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
snapshot_sha256 = "e46e8b3bf8f81ac334d428baa87fcda629fc387206afbea289a7414aa27cf968"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
