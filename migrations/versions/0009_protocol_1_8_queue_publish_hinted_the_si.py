"""protocol 1.8: queue_publish_hinted, the single publish with a partition hint

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

Installs the schema frozen in migrations/snapshots/0009.sql.
"""

from mysqlq import schema

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
snapshot_sha256 = "e7cc5033b9874756d3774f5df86eb1b1b0bf2a8a68f88a003a454702f1d44e82"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
