"""An ack behind delayed messages finds its partitions' rows and offsets by primary key

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29

Installs the schema at 0020: migrations/snapshots/0020.sql holds what it adds, changes
or drops over 0019, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None
snapshot_sha256 = "8e083bef2786eb0ce3b215f78a659ff21e644a07a3e96e3d67682273b2e8a5c8"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
