"""protocol 1.7: intake results as one range per ranked key; single publish checks behind one test

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

Installs the schema frozen in migrations/snapshots/0008.sql.
"""

from mysqlq import schema

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
snapshot_sha256 = "791cf294005607f0fc7132a44b995ee035e5df551ba6599488ea9f8fe7c2e288"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
