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
snapshot_sha256 = "6c96caecf36d0daac4d5462b551652518e741b64a47167b6c6ca9883a2acef31"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
