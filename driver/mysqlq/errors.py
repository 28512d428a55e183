"""Exceptions raised by mysqlq, and the translation of MySQLdb errors into them.

Every exception the driver raises derives from :class:`Error`.  Server errors
are translated by :func:`translate` (or the :func:`translating` context manager)
from the error number the server reported:

* ``SIGNAL SQLSTATE '45000'`` in a procedure (errno 1644) -> :class:`InvalidArgument`, with
  ``code`` the stable code its message starts with (``MQ011``; docs/protocol.md lists them);
  ``MQ019`` (a settle in your transaction met a stale delivery) -> :class:`StaleDelivery`;
  ``MQ023`` (an access rule refused the account a topic or group) -> :class:`PermissionDenied`;
  ``MQ026`` (queue_cancel found nothing to cancel) -> :class:`NothingToCancel`;
  ``MQ028`` (no schedule of that name) -> :class:`ScheduleNotFound`
* a value the server cannot convert to a parameter's declared type (1264 out of range, 1265
  truncated, 1366 incorrect integer or string value such as invalid UTF-8, 1406 too long) ->
  :class:`InvalidArgument`, its message starting with the parameter's name
* a missing ``queue_*`` routine or table (1305, 1146) -> :class:`NotMigrated`
* access denied to a table, routine or database (1044, 1142, 1143, 1227, 1370) ->
  :class:`PermissionDenied` (see ``mysqlq grants``)
* a server setting mysqlq cannot work with (1665: ``binlog_format=STATEMENT``, which cannot log
  the READ COMMITTED transactions of the procedures) -> :class:`ServerMisconfigured`, naming it
* deadlock (1213) -> :class:`Deadlock`; lock wait timeout (1205) -> :class:`LockTimeout`
* lost or refused connections (2002, 2003, 2006, 2013, ...) -> :class:`ConnectionLost`
* anything else -> :class:`DatabaseError`

No message carries a password: :func:`redact_dsn` replaces the password of every DSN in the text
of every :class:`Error` (and of whatever else prints a DSN) with ``***``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import MySQLdb

__all__ = [
    "CommitFailed",
    "ConnectionLost",
    "DatabaseError",
    "Deadlock",
    "Error",
    "InvalidArgument",
    "InvalidDSN",
    "LockTimeout",
    "NotMigrated",
    "NothingToCancel",
    "PermissionDenied",
    "ScheduleNotFound",
    "SchemaMismatch",
    "ServerMisconfigured",
    "ServerReadOnly",
    "StaleDelivery",
    "TransactionTooLarge",
    "TransientError",
    "redact_dsn",
    "translate",
    "translating",
]


class Error(Exception):
    """Base class of every error mysqlq raises.

    ``errno`` is the server (or client library) error number when the error
    came from MySQL, else ``None``.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        message = redact_dsn(message)
        super().__init__(message)
        self.message = message
        self.errno = errno
        # the procedures' stable error code (MQ001 ...), when a procedure raised it
        m = _CODE.match(message)
        self.code: str | None = m.group(1) if m else None


REDACTED = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_HOSTS_END = re.compile(r"[/?#\s'\"]")
_HOST_PORT = re.compile(r"(\[[^\]]*\]|[^:]*)(?::(.*))?", re.S)


def redact_dsn(text: str) -> str:
    """``text`` with the password of every DSN in it (``scheme://user:password@host...``)
    replaced by ``***``: the one redaction of the driver, what messages, reprs and the command
    line print instead of a DSN.

    It cuts as :func:`mysqlq.connection.parse_dsn` does: the user name ends at the first ``:``
    after ``://``, the password at the *last* ``@`` after it, so whatever the password holds
    (``@ : / ? # %``, quotes, spaces, percent-encoded or not) goes. In a longer text that last
    ``@`` may lie beyond the DSN: more than the password goes then, never less. A DSN without an
    ``@`` has no password; a port in it that is not a number (a password whose ``@`` was left
    out) is redacted too."""
    if "://" not in text:
        return text
    out = []
    pos = 0
    while m := _SCHEME.search(text, pos):
        out.append(text[pos : m.end()])
        rest = text[m.end() :]
        at = rest.rfind("@")
        if at >= 0:
            user, colon, _ = rest[:at].partition(":")
            out.append(f"{user}:{REDACTED}@" if colon else rest[: at + 1])
            pos = m.end() + at + 1
            continue
        end = _HOSTS_END.search(rest)
        hosts = rest[: end.start() if end else len(rest)]
        out.append(",".join(_redact_port(item) for item in hosts.split(",")))
        pos = m.end() + len(hosts)
    out.append(text[pos:])
    return "".join(out)


def _redact_port(item: str) -> str:
    host, port = _HOST_PORT.fullmatch(item).groups()  # type: ignore[union-attr]
    return item if port is None or port.isdigit() else f"{host}:{REDACTED}"


class InvalidDSN(Error, ValueError):
    """A connection string that cannot be used."""


class InvalidArgument(Error, ValueError):
    """A procedure rejected its input (``SIGNAL SQLSTATE '45000'``)."""


class NothingToCancel(InvalidArgument):
    """``cancel`` found nothing to cancel (code MQ026): no such message (never published, not
    committed yet, or removed by GC), or it is in flight or already done for the group(s); the
    message says which."""


class ScheduleNotFound(InvalidArgument):
    """No schedule has that name (code MQ028): ``unschedule``, ``pause_schedule``,
    ``resume_schedule`` and ``run_schedule`` of a schedule never created, or deleted."""


class StaleDelivery(Error):
    """A settle inside your transaction met a delivery that is no longer yours (redelivered,
    seeked over or already settled): nothing was settled, and the transaction must roll back so
    that its writes do not commit as if the message were handled (code MQ019)."""


class SchemaMismatch(Error):
    """The database's mysqlq schema version is not the one the driver expects."""


class NotMigrated(SchemaMismatch):
    """The database has no mysqlq schema at all: run ``mysqlq migrate``."""


class DatabaseError(Error):
    """Any other error reported by the server or the client library."""


class PermissionDenied(DatabaseError):
    """The account lacks a privilege for this call (see ``mysqlq grants``)."""


class ServerMisconfigured(DatabaseError):
    """A server or session setting that mysqlq cannot work with; the message names it."""


class TransientError(DatabaseError):
    """An error after which retrying the same operation may succeed."""


class ConnectionLost(TransientError):
    """The connection to the server failed or was lost."""


class Deadlock(TransientError):
    """The transaction was rolled back to break a deadlock (1213)."""


class LockTimeout(TransientError):
    """A lock wait timed out (1205); only the statement was rolled back."""


class ServerReadOnly(ConnectionLost):
    """The server refuses writes (1290: ``read_only``/``super_read_only``), as a Group Replication
    secondary or a demoted primary does: reconnect and find the writable primary."""


class CommitFailed(TransientError):
    """The commit was refused and the transaction rolled back: a Group Replication certification
    conflict (3101) or an error during COMMIT (1180). Safe to retry where the call is repeatable
    (every publish carries ids, G1)."""


class TransactionTooLarge(DatabaseError):
    """The transaction is over ``group_replication_transaction_size_limit`` (3100): retrying cannot
    help; publish smaller batches (``chunk_size``) or raise the limit."""


ER_SIGNAL_EXCEPTION = 1644  # SIGNAL with a user SQLSTATE class '45'
ER_SP_DOES_NOT_EXIST = 1305
ER_NO_SUCH_TABLE = 1146
ER_LOCK_DEADLOCK = 1213
ER_LOCK_WAIT_TIMEOUT = 1205
ER_BINLOG_STMT_MODE_AND_ROW_ENGINE = 1665
ER_OPTION_PREVENTS_STATEMENT = 1290  # --read-only / --super-read-only
ER_ERROR_DURING_COMMIT = 1180
ER_RUN_HOOK_ERROR = 3100  # Group Replication's before_commit hook: the transaction is too large
ER_TRANSACTION_ROLLBACK_DURING_COMMIT = 3101  # Group Replication certification failure
# the server refuses an argument it cannot convert to the parameter's type before the call runs
DENIED_ERRNOS = frozenset({1044, 1142, 1143, 1227, 1370})
CONVERSION_ERRNOS = frozenset({1264, 1265, 1366, 1406})
_CODE = re.compile(r"(MQ\d{3}) ")
_COLUMN = re.compile(r"for column (?:``\.``\.)?[`'](p_\w+)[`']")

CONNECTION_ERRNOS = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1927,  # connection was killed (MariaDB)
        2002,  # can't connect through socket
        2003,  # can't connect to server
        2005,  # unknown server host
        2006,  # server has gone away
        2013,  # lost connection during query
        2055,  # lost connection at reading ...
        4031,  # disconnected by the server because of inactivity (MySQL 8)
    }
)

_MISSING_ROUTINE = re.compile(
    r"(?:FUNCTION|PROCEDURE)\s+(?:`?[\w$]+`?\.)?`?(queue_\w+)`?\s+does not exist", re.I
)
_MISSING_TABLE = re.compile(r"Table\s+'(?:[\w$]+\.)?(queue_\w+)'\s+doesn't exist", re.I)


def _errno_and_message(exc: BaseException) -> tuple[int | None, str]:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return args[0], str(args[1])
    if len(args) == 1 and isinstance(args[0], int):
        return args[0], ""
    return None, " ".join(str(a) for a in args)


def translate(exc: BaseException) -> Error:
    """Return the mysqlq exception for a MySQLdb (or already mysqlq) exception.

    The original exception is kept as ``__cause__`` when the result is raised
    with ``raise translate(e) from e``.
    """
    if isinstance(exc, Error):
        return exc
    errno, message = _errno_and_message(exc)
    text = f"({errno}) {message}" if errno is not None else message
    if errno == ER_SIGNAL_EXCEPTION:
        if message.startswith("MQ019 "):
            return StaleDelivery(message, errno)
        if message.startswith("MQ023 "):  # an access rule (queue_acl) refused the account
            return PermissionDenied(message, errno)
        if message.startswith("MQ026 "):
            return NothingToCancel(message, errno)
        if message.startswith("MQ028 "):
            return ScheduleNotFound(message, errno)
        return InvalidArgument(message, errno)
    if errno in CONVERSION_ERRNOS and (m := _COLUMN.search(message)):
        return InvalidArgument(f"{m.group(1)}: {message} ({errno})", errno)
    if errno == ER_SP_DOES_NOT_EXIST and (m := _MISSING_ROUTINE.search(message)):
        return NotMigrated(
            f"the database has no mysqlq schema ({m.group(1)} is missing); "
            f"run `mysqlq migrate` first [{text}]",
            errno,
        )
    if errno == ER_NO_SUCH_TABLE and (m := _MISSING_TABLE.search(message)):
        return NotMigrated(
            f"the database has no mysqlq schema (table {m.group(1)} is missing); "
            f"run `mysqlq migrate` first [{text}]",
            errno,
        )
    if errno in DENIED_ERRNOS:
        return PermissionDenied(text, errno)
    if errno == ER_BINLOG_STMT_MODE_AND_ROW_ENGINE:
        return ServerMisconfigured(
            "binlog_format is STATEMENT: mysqlq's procedures write in READ COMMITTED "
            "transactions, which the binary log can only record row by row; set "
            "binlog_format=ROW (MySQL's default) or MIXED for the server or this session "
            f"[{text}]",
            errno,
        )
    if errno == ER_LOCK_DEADLOCK:
        return Deadlock(text, errno)
    if errno == ER_OPTION_PREVENTS_STATEMENT and "read" in message.lower():
        return ServerReadOnly(text, errno)
    if errno in (ER_ERROR_DURING_COMMIT, ER_TRANSACTION_ROLLBACK_DURING_COMMIT):
        return CommitFailed(text, errno)
    if errno == ER_RUN_HOOK_ERROR:
        return TransactionTooLarge(
            "the transaction is too large for the group (group_replication_transaction_size_limit, "
            "150 MB by default): publish smaller batches (chunk_size) or raise the limit "
            f"[{text}]",
            errno,
        )
    if errno == ER_LOCK_WAIT_TIMEOUT:
        return LockTimeout(text, errno)
    if errno in CONNECTION_ERRNOS:
        return ConnectionLost(text, errno)
    if isinstance(exc, MySQLdb.InterfaceError):
        # e.g. (0, '') when the connection object was already closed
        return ConnectionLost(f"connection unusable: {text or exc!r}", errno)
    return DatabaseError(text or repr(exc), errno)


@contextlib.contextmanager
def translating() -> Iterator[None]:
    """Context manager re-raising MySQLdb errors as mysqlq errors."""
    try:
        yield
    except MySQLdb.Error as exc:
        raise translate(exc) from exc
