"""Schema installation, above the runtime core: render the sources (``render``), freeze them
into snapshots, a full baseline and one delta per later revision (``snapshot``, ``freeze``), the
full schema at any revision folded from them (``schema_at``), install and migrate (``steps``,
``migrate``), and the least-privilege grants (``grants``).

Revision modules call ``schema.upgrade`` / ``schema.downgrade`` (see ``steps``).
"""

from mysqlq.schema.snapshot import SchemaObject, load_snapshot, schema_at
from mysqlq.schema.steps import (
    SET_SQL_MODE,
    SQL_MODE,
    VERSION_TABLE,
    CursorExecutor,
    OfflineExecutor,
    add_columns,
    add_index,
    downgrade,
    drop_columns,
    drop_index,
    execute,
    install,
    stamp,
    upgrade,
)

__all__ = [
    "SET_SQL_MODE",
    "SQL_MODE",
    "VERSION_TABLE",
    "CursorExecutor",
    "OfflineExecutor",
    "SchemaObject",
    "add_columns",
    "add_index",
    "downgrade",
    "drop_columns",
    "drop_index",
    "execute",
    "install",
    "load_snapshot",
    "schema_at",
    "stamp",
    "upgrade",
]
