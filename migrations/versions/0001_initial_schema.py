"""Initial schema

Revision ID: 0001
Revises: None
Create Date: 2026-11-22

Installs the schema frozen in migrations/snapshots/0001.sql.
"""

from mysqlq import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
snapshot_sha256 = "d24ccb8beb4e4d615ee09b35b4f8d742bd43eda3431fe1e956821d3868f3ce92"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
