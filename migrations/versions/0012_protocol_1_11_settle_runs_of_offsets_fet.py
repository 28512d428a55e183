"""protocol 1.11: settle runs of offsets, fetch's final read sorted apart from payloads, fetch
never waits on a publisher

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

Installs the schema at 0012: migrations/snapshots/0012.sql holds what it adds, changes
or drops over 0011, folded onto 0001.sql and the deltas before it.
"""

from mysqlq import schema

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
snapshot_sha256 = "4333b337c4dba6d08443cbe909387555962d50d456ed81390f16afec1c55bb11"


def upgrade() -> None:
    schema.upgrade(revision, down_revision)


def downgrade() -> None:
    schema.downgrade(revision, down_revision)
