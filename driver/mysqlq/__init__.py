"""mysqlq: a message queue implemented as MySQL/MariaDB stored procedures."""

import importlib
from typing import Any

from mysqlq import retry
from mysqlq.batching import Batch
from mysqlq.client import (
    Client,
    GcResult,
    OutgoingMessage,
    PublishResult,
    Transaction,
    connect,
)
from mysqlq.errors import (
    CommitFailed,
    ConnectionLost,
    DatabaseError,
    Deadlock,
    Error,
    InvalidArgument,
    InvalidDSN,
    LockTimeout,
    NothingToCancel,
    NotMigrated,
    PermissionDenied,
    ScheduleNotFound,
    SchemaMismatch,
    ServerMisconfigured,
    ServerReadOnly,
    StaleDelivery,
    TransactionTooLarge,
    TransientError,
)
from mysqlq.message import Message
from mysqlq.policy import AckPolicy
from mysqlq.schedules import Schedule
from mysqlq.subscriber import Subscriber


def __getattr__(name: str) -> Any:
    # mysqlq.aio (for asyncio applications) loads when first used: `import mysqlq` stays light
    if name == "aio":
        return importlib.import_module("mysqlq.aio")
    raise AttributeError(f"module 'mysqlq' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "AckPolicy",
    "Batch",
    "Client",
    "CommitFailed",
    "ConnectionLost",
    "DatabaseError",
    "Deadlock",
    "Error",
    "GcResult",
    "InvalidArgument",
    "InvalidDSN",
    "LockTimeout",
    "Message",
    "NotMigrated",
    "NothingToCancel",
    "OutgoingMessage",
    "PermissionDenied",
    "PublishResult",
    "Schedule",
    "ScheduleNotFound",
    "SchemaMismatch",
    "ServerMisconfigured",
    "ServerReadOnly",
    "StaleDelivery",
    "Subscriber",
    "Transaction",
    "TransactionTooLarge",
    "TransientError",
    "__version__",
    "connect",
    "retry",
]
