"""mysqlq: a message queue implemented as MySQL/MariaDB stored procedures."""

from mysqlq.client import Client, PublishResult, Transaction, connect
from mysqlq.errors import (
    ConnectionLost,
    DatabaseError,
    Deadlock,
    Error,
    InvalidArgument,
    InvalidDSN,
    LockTimeout,
    NotMigrated,
    PermissionDenied,
    SchemaMismatch,
    ServerMisconfigured,
    StaleDelivery,
    TransientError,
)
from mysqlq.message import Message
from mysqlq.subscriber import Subscriber

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ConnectionLost",
    "DatabaseError",
    "Deadlock",
    "Error",
    "InvalidArgument",
    "InvalidDSN",
    "LockTimeout",
    "Message",
    "NotMigrated",
    "PermissionDenied",
    "PublishResult",
    "SchemaMismatch",
    "ServerMisconfigured",
    "StaleDelivery",
    "Subscriber",
    "Transaction",
    "TransientError",
    "__version__",
    "connect",
]
