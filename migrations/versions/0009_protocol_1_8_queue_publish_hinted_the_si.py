"""protocol 1.8: queue_publish_hinted, the single publish with a partition hint

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

Installs the schema at 0009: migrations/snapshots/0009.sql holds what it adds, changes
or drops over 0008, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
snapshot_sha256 = "6537c856022c991f5cd4f6ff0d7b2d086cef688ba9fc16d915224ee19836ead5"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
