"""sorts of JSON_TABLE rows in the common fetch and the settles read them from a materialized
derived table: MariaDB spilled them to disk

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
snapshot_sha256 = "fa2b4f6b024b2c5b753ed5fac668a26e22461784d372e859967f9d695f71e709"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
