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
snapshot_sha256 = "5d63540811a5d5afff5a1e5bde893e32bd7148c91d2a5eeb5694512d2a200e95"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
