"""handler time: an extend of a cursor batch moves its deadline without rows (G14)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

Installs the schema frozen in migrations/snapshots/0004.sql.
"""

from mysqlq import schema

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
snapshot_sha256 = "c71cb900902d39be3f583b63f9d13608834d3d394695508b50224d95cd9faaed"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
