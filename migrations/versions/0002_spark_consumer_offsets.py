"""spark consumer offsets

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
snapshot_sha256 = "0a5ffe253ea62a56e78d12249213ea1651deb146192c9cc5fcc3f9803df85bcf"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
