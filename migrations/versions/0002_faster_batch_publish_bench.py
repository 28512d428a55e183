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
snapshot_sha256 = "b543478d6e42d720f6b8b93c61cd99cfcdb2b8329a2a36b15742347c7091d11d"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
