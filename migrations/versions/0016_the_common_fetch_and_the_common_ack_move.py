"""the common fetch and the common ack move offsets rows with an insert of existing keys, not a
multi-table UPDATE: MariaDB kept its rows to update in a temporary table on disk

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29

Installs the schema at 0016: migrations/snapshots/0016.sql holds what it adds, changes
or drops over 0015, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None
snapshot_sha256 = "532be20652e628a3780bd7b6c1c6b494ddd4325bb7e1f932019eb80652047b43"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
