"""MySQL first-class: queue_version is a procedure (no stored function needs SUPER)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

Installs the schema frozen in migrations/snapshots/0003.sql.
"""

from mysqlq import schema

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
snapshot_sha256 = "d66061c1c94ef9c2cfcb7547020548c401f5b5410afcbbf20ed1b5ef39a3af53"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
