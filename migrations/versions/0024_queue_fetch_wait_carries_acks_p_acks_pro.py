"""queue_fetch_wait carries acks (p_acks, protocol 1.13); queue_fetch's work in queue__fetch

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-30

Installs the schema at 0024: migrations/snapshots/0024.sql holds what it adds, changes
or drops over 0023, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None
snapshot_sha256 = "bbc8d2f3d710e432b814faf52fe998a360fd2e8386b52712194ba677066287df"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
