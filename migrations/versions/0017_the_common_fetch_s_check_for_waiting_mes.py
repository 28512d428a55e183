"""the common fetch's check for a waiting message reads each new offset by its primary key, in a
fixed join order: in the optimizers' order it read every message its partitions kept, at each fetch

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29

Installs the schema at 0017: migrations/snapshots/0017.sql holds what it adds, changes
or drops over 0016, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None
snapshot_sha256 = "fd459f9c032f4788cdda07df5f2a0eed169928394faa4f52a14bf0a603f9743f"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
