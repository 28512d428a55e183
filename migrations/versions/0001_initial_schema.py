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
snapshot_sha256 = "a0f5d91653bd02a4f616b5a573899f9a5cad8cefbeaf2b494d9294a6a73290b7"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
