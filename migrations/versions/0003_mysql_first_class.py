"""MySQL first-class: queue_version is a procedure (no stored function needs SUPER)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

Installs the schema at 0003: migrations/snapshots/0003.sql holds what it adds, changes
or drops over 0002, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
snapshot_sha256 = "161d44944c2736df3639eabd5b9f3ae7a67f53d6e3c597fbdae2d7294b570414"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
