"""A batch publish in its own transaction locks and moves the sequences that exist in one statement

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29

Installs the schema at 0021: migrations/snapshots/0021.sql holds what it adds, changes
or drops over 0020, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None
snapshot_sha256 = "04a7215ec30fbfe6f218a86aa5e547843dfaebaad640dddc8dc7e7276baa770e"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
