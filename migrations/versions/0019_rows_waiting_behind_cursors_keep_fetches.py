"""Rows waiting behind cursors keep fetches and acks common; empty long polls skip the fetch

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29

Installs the schema at 0019: migrations/snapshots/0019.sql holds what it adds, changes
or drops over 0018, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
snapshot_sha256 = "9347f081c6bb22864356dca2c3331096a7c1251abf072864848b3735f33c6bbb"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
