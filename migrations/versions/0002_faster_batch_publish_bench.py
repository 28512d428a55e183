"""faster batch publish; bench

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Installs the schema at 0002: migrations/snapshots/0002.sql holds what it adds, changes
or drops over 0001, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
snapshot_sha256 = "8ddfe92c908c8f282b9d00de65a35dabd2452491dfe924a33510ac22e1ccac66"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
