"""sorts of JSON_TABLE rows in the common fetch and the settles read them from a materialized
derived table: MariaDB spilled them to disk; the long poll's probe sorts nothing

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28

Installs the schema at 0015: migrations/snapshots/0015.sql holds what it adds, changes
or drops over 0014, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
snapshot_sha256 = "363caf51a518d04020a05ea79eb7cea6766268c06a5200df284556b26686e546"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
