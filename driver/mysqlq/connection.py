"""Connection strings and MySQLdb connections.

A DSN is a URL (parsed with the standard library's ``urllib.parse``)::

    mysql://user:password@host:3306/db
    mysql+mysqldb://user@host/db?unix_socket=/run/mysqld/mysqld.sock
    mariadb://user@127.0.0.1:3307/db?connect_timeout=5

Special characters in the user name are percent-encoded. The password may be percent-encoded
(``%40`` for ``@``) or not: the user name ends at the first ``:``, the password at the *last*
``@`` of the DSN, so ``mysql://u:p@ss:w/rd@host/db`` is user ``u``, password ``p@ss:w/rd``.
Hence an ``@`` in the database name or the query string must be written ``%40``. A ``%`` of the
password followed by two hex digits is decoded: write it ``%25``.

No message, repr or log line shows a password: ``repr(DSN)`` and :meth:`DSN.redacted` print
``***`` in its place (:func:`mysqlq.errors.redact_dsn`); only ``str(DSN)``, the DSN to connect
with, holds it.

TLS is asked for in the query string: ``ssl_mode`` (``DISABLED``, ``PREFERRED``, ``REQUIRED``,
``VERIFY_CA``, ``VERIFY_IDENTITY``) and the files ``ssl_ca``, ``ssl_capath``, ``ssl_cert``,
``ssl_key``, plus ``ssl_cipher``::

    mysql://app:secret@db-host:3306/app?ssl_mode=REQUIRED
    mysql://app:secret@db-host:3306/app?ssl_mode=VERIFY_IDENTITY&ssl_ca=/etc/ssl/db-ca.pem

MySQL 8.4+ accounts use ``caching_sha2_password``: its first login of an account sends the
password, which the client does only over TLS (MySQL offers TLS by default) or a unix socket.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import MySQLdb
from MySQLdb.constants import CLIENT

from mysqlq import primary
from mysqlq.errors import (
    InvalidDSN,
    ServerReadOnly,
    TransactionTooLarge,
    redact_dsn,
    translating,
)

__all__ = [
    "DSN",
    "DSN_ENV",
    "call",
    "connect",
    "connect_kwargs",
    "execute_results",
    "execute_rows",
    "parse_dsn",
    "redact_dsn",
    "resolve_dsn",
    "with_database",
]

DSN_ENV = "MYSQLQ_DSN"

_BACKENDS = {"mysql", "mariadb"}
_DRIVERS = {None, "", "mysqldb"}

# query parameters accepted in a DSN, with their converters
_QUERY_PARAMS: dict[str, type] = {
    "unix_socket": str,
    "charset": str,
    "connect_timeout": int,
    "read_timeout": int,
    "write_timeout": int,
    "init_command": str,
    "ssl_mode": str,
}
# TLS files and ciphers, passed to MySQLdb as its ``ssl`` dictionary
_SSL_PARAMS = {
    "ssl_ca": "ca",
    "ssl_capath": "capath",
    "ssl_cert": "cert",
    "ssl_key": "key",
    "ssl_cipher": "cipher",
}
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
# a known query parameter before the last '@': that '@' is in the query string
_QUERY_IN_USERINFO = re.compile("[?&](?:" + "|".join([*_QUERY_PARAMS, *_SSL_PARAMS]) + ")=", re.I)


def resolve_dsn(dsn: str | None) -> str:
    """Return ``dsn``, or the environment's ``MYSQLQ_DSN`` when it is empty."""
    if dsn:
        return dsn
    env = os.environ.get(DSN_ENV)
    if env:
        return env
    raise InvalidDSN(f"no DSN given and {DSN_ENV} is not set")


@dataclasses.dataclass(frozen=True)
class DSN:
    """A parsed connection string; ``str()`` renders it back, password included (to connect
    with, never to print); ``repr()`` and :meth:`redacted` show ``***`` instead."""

    drivername: str
    username: str | None = None
    password: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # every (host, port) of a host list (mysql://h1:3306,h2:3306/db): the driver connects to the
    # writable primary among them; empty for a single host (then host and port say it)
    hosts: tuple[tuple[str, int | None], ...] = ()

    def replace(self, **changes: Any) -> DSN:
        return dataclasses.replace(self, **changes)

    def with_query(self, **params: str) -> DSN:
        return self.replace(query={**self.query, **params})

    def redacted(self) -> str:
        """The DSN as text to show: its password replaced by ``***``."""
        return redact_dsn(str(self))

    def __repr__(self) -> str:
        return f"DSN({self.redacted()!r})"

    def __str__(self) -> str:
        auth = ""
        if self.username is not None:
            auth = urllib.parse.quote(self.username, safe="")
            if self.password is not None:
                auth += ":" + urllib.parse.quote(self.password, safe="")
            auth += "@"
        pairs = self.hosts or ((self.host or "", self.port),)
        where = ",".join(
            (f"[{h}]" if ":" in h else h) + (f":{p}" if p is not None else "") for h, p in pairs
        )
        path = "/" + urllib.parse.quote(self.database, safe="") if self.database else ""
        query = "?" + urllib.parse.urlencode(dict(self.query)) if self.query else ""
        return f"{self.drivername}://{auth}{where}{path}{query}"


_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.S)


def parse_dsn(dsn: str) -> DSN:
    """Parse and validate a DSN. The user info ends at the DSN's last ``@`` (see the module
    documentation); what follows is parsed as a URL (hosts, ``/database``, ``?query``)."""
    if not isinstance(dsn, str) or not (m := _URL.match(dsn)):
        raise InvalidDSN("cannot parse the DSN: not a URL like mysql://...")
    shown = redact_dsn(dsn)
    userinfo, at, rest = m.group("rest").rpartition("@")
    user, colon, secret = userinfo.partition(":")
    if at and _QUERY_IN_USERINFO.search(userinfo):
        # the last '@' lies in the query string, not before the host: ambiguous, refuse
        raise InvalidDSN(
            f"cannot parse DSN {shown!r}: its query string or database name holds an at sign;"
            " write it %40"
        )
    location = f"{m.group('scheme')}://{rest}"
    hosts = _host_list(location, shown)
    if hosts:  # parse the rest as the URL of the first host
        netloc = urllib.parse.urlsplit(location).netloc
        location = location.replace(netloc, netloc.split(",")[0], 1)
    try:
        parts = urllib.parse.urlsplit(location)
        port = parts.port
    except ValueError:
        # urllib's message echoes the text: not where a password whose '@' is missing could be
        raise InvalidDSN(f"cannot parse DSN {shown!r}: a bad host or port") from None
    backend, _, driver = m.group("scheme").partition("+")
    if backend not in _BACKENDS or driver not in _DRIVERS:
        raise InvalidDSN(
            f"unsupported DSN scheme {m.group('scheme')!r}: use mysql://, mariadb:// "
            "or mysql+mysqldb://"
        )
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    url = DSN(
        drivername=m.group("scheme"),
        username=urllib.parse.unquote(user) if at else None,
        password=urllib.parse.unquote(secret) if at and colon else None,
        host=parts.hostname or None,
        port=port,
        database=urllib.parse.unquote(parts.path.lstrip("/")) or None,
        query=query,
        hosts=hosts,
    )
    unknown = sorted(set(url.query) - set(_QUERY_PARAMS) - set(_SSL_PARAMS))
    if unknown:
        raise InvalidDSN(
            f"unsupported DSN parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted([*_QUERY_PARAMS, *_SSL_PARAMS]))}"
        )
    mode = url.query.get("ssl_mode")
    if mode is not None and str(mode).upper() not in SSL_MODES:
        raise InvalidDSN(f"bad value for DSN parameter ssl_mode: {mode!r}; use one of {SSL_MODES}")
    return url


def _host_list(location: str, shown: str) -> tuple[tuple[str, int | None], ...]:
    """The (host, port) pairs of a DSN (without its user info) that names several hosts; ()
    for one. ``shown``: the DSN as errors show it."""
    where = urllib.parse.urlsplit(location).netloc
    if "," not in where:
        return ()
    pairs = []
    for n, item in enumerate(where.split(","), 1):
        try:
            probe = urllib.parse.urlsplit(f"//{item}")
            port = probe.port
        except ValueError:
            raise InvalidDSN(
                f"cannot parse DSN {shown!r}: host {n} of its host list has a bad port"
            ) from None
        if not probe.hostname:
            raise InvalidDSN(f"cannot parse DSN {shown!r}: an empty host in its host list")
        pairs.append((probe.hostname, port))
    return tuple(pairs)


def connect_kwargs(dsn: str | DSN) -> dict[str, Any]:
    """MySQLdb.connect() keyword arguments for a DSN (parsed, or text parsed here; no driver
    defaults added)."""
    url = dsn if isinstance(dsn, DSN) else parse_dsn(dsn)
    kwargs: dict[str, Any] = {}
    if url.host:
        kwargs["host"] = url.host
    if url.port:
        kwargs["port"] = int(url.port)
    if url.username:
        kwargs["user"] = url.username
    if url.password is not None:
        kwargs["password"] = str(url.password)
    if url.database:
        kwargs["database"] = url.database
    for key, value in url.query.items():
        if key in _SSL_PARAMS:
            kwargs.setdefault("ssl", {})[_SSL_PARAMS[key]] = value
            continue
        if key == "ssl_mode":
            kwargs[key] = value.upper()
            continue
        try:
            kwargs[key] = _QUERY_PARAMS[key](value)
        except ValueError:
            raise InvalidDSN(f"bad value for DSN parameter {key}: {value!r}") from None
    return kwargs


def connect(dsn: str | DSN | None = None, **kw: Any) -> MySQLdb.connections.Connection:
    """Open a MySQLdb connection: autocommit, utf8mb4 (another charset is refused), multi-result
    capable.

    ``dsn``: a :class:`DSN`, or its text (parsed here); default the environment's
    ``MYSQLQ_DSN``. Keyword arguments override the DSN's and the defaults (they are passed to
    ``MySQLdb.connect``).
    """
    kwargs: dict[str, Any] = {
        "charset": "utf8mb4",
        "autocommit": True,
        "multi_statements": False,
    }
    url = dsn if isinstance(dsn, DSN) else parse_dsn(resolve_dsn(dsn))
    kwargs.update(connect_kwargs(url))
    kwargs.update(kw)
    if str(kwargs["charset"]).lower() != "utf8mb4":
        # keys, ids and metadata go as utf8mb4 whatever the connection says: refused, not
        # overridden (gbk would garble them, latin1 or utf8mb3 lose emoji)
        raise InvalidDSN(
            f"charset={kwargs['charset']}: mysqlq talks utf8mb4 on every connection; "
            "leave charset out of the DSN (or set it to utf8mb4)"
        )
    # procedures that return result sets need MULTI_RESULTS
    kwargs["client_flag"] = kwargs.get("client_flag", 0) | CLIENT.MULTI_RESULTS
    if len(url.hosts) > 1 and "host" not in kw:
        return primary.connect_primary(url.hosts, kwargs)
    with translating():
        return MySQLdb.connect(**kwargs)


def with_database(dsn: str, database: str | None) -> str:
    """The same DSN pointing at another database (``None``: no database)."""
    return str(parse_dsn(dsn).replace(database=database))


def execute_rows(
    conn: MySQLdb.connections.Connection,
    sql: str,
    args: Sequence[Any] | None = None,
    *,
    tuples: bool = False,
    size: int | None = None,
) -> list[Any]:
    """Run one statement; return the rows of its first result set as dicts (``tuples``: as
    tuples, for a large result) and read the rest (a CALL sends a final status after its
    result), raising mysqlq errors. ``size``: the bytes the call writes, when its arguments do
    not carry them (a batch sent into the intake before its CALL)."""
    return execute_results(conn, sql, args, tuples=tuples, size=size)[0]


def execute_results(
    conn: MySQLdb.connections.Connection,
    sql: str,
    args: Sequence[Any] | None = None,
    *,
    tuples: bool = False,
    size: int | None = None,
) -> list[list[Any]]:
    """:func:`execute_rows`, returning every result set (at least one, maybe empty): a long
    poll that carries acks answers with two."""
    try:
        with translating():
            _send(conn, sql, args)
            answers = _answers(conn, 0 if tuples else 1)
            return [rows for rows in answers if rows is not None] or [[]]
    except TransactionTooLarge as exc:
        # 3100 is any failure of Group Replication's commit hook. A member leaving the group
        # gives it too (still calling itself the ONLINE primary for a few seconds), until it
        # turns read-only. It is a size problem only on the primary, for a call whose arguments
        # alone come near the limit; else go and find the primary
        state, limit = primary.member_state(conn), primary.size_limit(conn)
        if size is None:
            size = sum(len(a) for a in args or () if isinstance(a, (str, bytes)))
        if state == "ONLINE PRIMARY" and limit and size * 2 >= limit:
            raise
        raise ServerReadOnly(
            f"Group Replication refused the commit ({state}, {size} bytes sent,"
            f" limit {limit or 'none'}): finding the primary again [{exc.args[0]}]"
        ) from exc


def call(conn: MySQLdb.connections.Connection, proc: str, *args: Any) -> list[dict[str, Any]]:
    """``CALL proc(args...)``; return the rows of the first result set as dicts.

    Remaining result sets are read and discarded so the connection is ready
    for the next statement.  MySQLdb errors are raised as mysqlq errors.
    """
    return call_all(conn, proc, *args)[0]


def call_all(
    conn: MySQLdb.connections.Connection, proc: str, *args: Any
) -> list[list[dict[str, Any]]]:
    """``CALL proc(args...)``; return every result set (possibly ``[[]]``)."""
    if not _IDENTIFIER.match(proc):
        raise ValueError(f"not a procedure name: {proc!r}")
    placeholders = ", ".join(["%s"] * len(args))
    with translating():
        _send(conn, f"CALL {proc}({placeholders})", _params(args))
        results = [rows for rows in _answers(conn, 1) if rows is not None]
    return results or [[]]


def _send(conn: MySQLdb.connections.Connection, sql: str | bytes, args: Any) -> None:
    """Send one statement, its arguments escaped as a cursor escapes them. The connection's own
    calls, not a cursor's: the cursor's bookkeeping (description, row counts, a Python call per
    argument and per result) cost a single publish about a fifth of its client time."""
    query = sql.encode(conn.encoding) if isinstance(sql, str) else sql
    if args is not None:
        query = query % tuple(map(conn.literal, args))
    conn.query(query)


def _answers(conn: MySQLdb.connections.Connection, how: int) -> list[list[Any] | None]:
    """Every answer to the statement just sent, in order: a result set's rows (``how`` 0: tuples,
    1: dicts), or None for an answer without one (a CALL's final status). Reading them all leaves
    the connection ready for the next statement; an error among them is raised."""
    answers: list[list[Any] | None] = []
    while True:
        result = conn.store_result()
        answers.append(None if result is None else list(result.fetch_row(0, how)))
        if conn.next_result() != 0:
            return answers


def _params(args: Sequence[Any]) -> tuple[Any, ...] | None:
    return tuple(args) if args else None
