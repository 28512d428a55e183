"""faster batch publish; bench

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Installs the schema frozen in migrations/snapshots/0002.sql.
"""

from mysqlq import schema

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
snapshot_sha256 = "e8e81df42baf2b07ce6b412cc627e876c4e15174e786978758bd68ca2d6cb41b"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
