"""mysqlq: a message queue implemented as MySQL/MariaDB stored procedures."""

from mysqlq.errors import (
    ConnectionLost,
    DatabaseError,
    Deadlock,
    Error,
    InvalidArgument,
    InvalidDSN,
    LockTimeout,
    NotMigrated,
    SchemaMismatch,
    TransientError,
)

__version__ = "0.1.0"

__all__ = [
    "ConnectionLost",
    "DatabaseError",
    "Deadlock",
    "Error",
    "InvalidArgument",
    "InvalidDSN",
    "LockTimeout",
    "NotMigrated",
    "SchemaMismatch",
    "TransientError",
    "__version__",
]
