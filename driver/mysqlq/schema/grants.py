"""Least privilege: the GRANT statements for a publisher, a consumer, an admin and a reader.

Every mysqlq routine runs with ``SQL SECURITY DEFINER`` (the server's default, and the routines
say so explicitly): it runs with the privileges of the account that installed it (the admin that
ran the migration), so a client needs nothing but ``EXECUTE`` on the routines it calls. It needs no
privilege on any ``queue_*`` table: a publisher can publish without being able to read a payload,
and a consumer can fetch and ack without being able to delete a row.

The reader is the one account that reads tables: ``SELECT`` on the ``queue_*`` tables (payloads
included) and nothing that writes, for ``mysqlq dashboard`` without ``--allow-actions``,
``mysqlq stats`` and ``mysqlq dlq list|show``. Its grants name each table rather than the
database, so it cannot read the application's own tables beside the queue's.

The operator is the reader plus ``EXECUTE`` on exactly the procedures of the dashboard's actions
(``OPERATOR_PROCEDURES``: redrive, seek, pause and resume, and a schedule's pause, resume, delete
and run now), for ``mysqlq dashboard
--allow-actions``: those procedures are the admin's too, and the operator has none of the admin's
other privileges.

The statements grant to plain accounts (``'user'@'host'``), not to roles. Roles exist on both
servers but behave differently: MySQL needs ``SET DEFAULT ROLE`` (or
``activate_all_roles_on_login``) before a granted role is active, MariaDB takes a single
``SET DEFAULT ROLE`` and has no ``mandatory_roles``; a pooled connection that misses the
activation step silently has no privilege. Direct grants mean the same thing on MySQL 8 and
MariaDB 10.6+, and a DBA who prefers roles can grant the same lists to a role.

>>> print("\\n".join(grant_statements("app")))                        # doctest: +ELLIPSIS
GRANT EXECUTE ON PROCEDURE `app`.`queue_publish` TO 'mysqlq_publisher'@'%';
...
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ACL_OPERATIONS",
    "ADMIN_PROCEDURES",
    "ADMIN_TABLE_PRIVILEGES",
    "CONSUMER_PROCEDURES",
    "OPERATOR_PROCEDURES",
    "PUBLISHER_PROCEDURES",
    "READER_TABLES",
    "SHARED_PROCEDURES",
    "Account",
    "acl_statements",
    "grant_statements",
    "parse_account",
]

# every public routine belongs to exactly one list (tests/test_grants.py checks the installed ones)
PUBLISHER_PROCEDURES = (
    "queue_publish",
    "queue_publish_message",
    "queue_publish_hinted",
    "queue_publish_batch",
    "queue_intake_open",
    "queue_publish_intake",
    # cancel a message not yet delivered: whoever may publish to the topic (queue_acl 'publish')
    "queue_cancel",
)
CONSUMER_PROCEDURES = (
    "queue_subscribe",
    "queue_heartbeat",
    "queue_acquire_leases",
    "queue_release_leases",
    "queue_deregister",
    "queue_fetch",
    "queue_fetch_wait",
    "queue_ack",
    "queue_nack",
    "queue_extend",
    "queue_dead_letter",
    "queue_release_messages",
    "queue_ack_tx",
    "queue_nack_tx",
    "queue_dead_letter_tx",
    # subscribers tick GC and heartbeat cleanup where no event runs (after a failover): one run
    # per interval, at most a minute apart, by the server's clock only (no p_now without the
    # test clock), deleting only what every group has passed and its retention allows (G9)
    "queue_maintenance_tick",
)
# what changes other groups' or the topic's state, or deletes: the admin's alone
ADMIN_PROCEDURES = (
    "queue_topic_configure",
    "queue_topic_archive",
    # a topic's dedup window (ids kept past GC)
    "queue_topic_dedup",
    "queue_archive_purge",
    "queue_unsubscribe",
    "queue_seek",
    # Spark's streaming consumer group moves offsets without leases (and reads the log's tables)
    "queue_commit_offsets",
    "queue_redrive",
    "queue_redrive_one",
    "queue_gc",
    "queue_maintenance",
    # a group's settings are the admin's (queue_subscribe only creates or joins)
    "queue_group_configure",
    "queue_topic_dlq",
    # flow control: pause and resume a group or a whole topic (the operator's too)
    "queue_pause",
    "queue_resume",
    # access rules: which topics and groups an account may use
    "queue_acl_grant",
    "queue_acl_revoke",
    # recurring messages: create or replace, delete, pause, resume, run now (the dashboard's
    # actions: the operator's too, except creating one)
    "queue_schedule",
    "queue_schedule_delete",
    "queue_schedule_pause",
    "queue_schedule_resume",
    "queue_schedule_run",
)
SHARED_PROCEDURES = ("queue_version",)  # every account may ask the protocol version
# the operator: `mysqlq dashboard --allow-actions` (mysqlq.dashboard.actions), exactly the admin
# procedures its actions call, plus the reader's SELECT; not in the one-role-per-routine check
OPERATOR_PROCEDURES = (
    "queue_redrive",
    "queue_redrive_one",
    "queue_seek",
    "queue_pause",
    "queue_resume",
    "queue_schedule_delete",
    "queue_schedule_pause",
    "queue_schedule_resume",
    "queue_schedule_run",
)
# what the reader may SELECT: every table of the protocol (docs/protocol.md), not the database
READER_TABLES = (
    "queue_topics",
    "queue_partitions",
    "queue_messages",
    "queue_offsets",
    "queue_delivery_state",
    "queue_partition_leases",
    "queue_subscriber_heartbeats",
    "queue_subscriptions",
    "queue_maintenance_schedule",
    "queue_archive",
    # the ids of dedup windows (no payloads)
    "queue_dedup_ids",
    # the access rules and the admin's switches (no secret: user names, patterns, test_clock)
    "queue_acl",
    "queue_settings",
    # recurring messages (payloads included, as in queue_messages)
    "queue_schedules",
)
# the migration installs tables, routines and events and stamps its version table; `mysqlq stats`
# and `mysqlq dlq` read the tables
ADMIN_TABLE_PRIVILEGES = (
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "ALTER",
    "DROP",
    "INDEX",
    "REFERENCES",
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
    "EXECUTE",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "EVENT",
    "TRIGGER",
    "CREATE VIEW",
    "SHOW VIEW",
)

_IDENT = re.compile(r"^[A-Za-z0-9_$]{1,64}$")
# an access rule's pattern (queue_acl): a topic or group name, or a prefix of one and '*'
_PATTERN = re.compile(r"^[A-Za-z0-9._:/-]{0,191}\*?$")
ACL_OPERATIONS = ("publish", "consume", "group")


@dataclass(frozen=True)
class Account:
    user: str
    host: str = "%"

    def sql(self) -> str:
        return f"{_quote_string(self.user)}@{_quote_string(self.host)}"


def _quote_string(value: str) -> str:
    if not value or len(value) > 255 or any(c in value for c in "'\\\x00\n\r"):
        raise ValueError(f"not a usable account name part: {value!r}")
    return f"'{value}'"


def _database(name: str) -> str:
    if not _IDENT.match(name):
        raise ValueError(f"database name must be 1-64 characters of A-Z a-z 0-9 _ $: {name!r}")
    return f"`{name}`"


def parse_account(text: str, default_host: str = "%") -> Account:
    """``user`` or ``user@host`` (quotes optional) -> Account."""
    user, _, host = text.partition("@")
    return Account(user.strip("'`\""), (host or default_host).strip("'`\""))


def _execute(db: str, routines: Iterable[str], kind: str, account: Account) -> list[str]:
    return [f"GRANT EXECUTE ON {kind} {db}.`{r}` TO {account.sql()};" for r in routines]


def grant_statements(
    database: str,
    *,
    publisher: Account | None = Account("mysqlq_publisher"),
    consumer: Account | None = Account("mysqlq_consumer"),
    admin: Account | None = Account("mysqlq_admin"),
    create_users: bool = False,
    reader: Account | None = None,
    operator: Account | None = None,
) -> list[str]:
    """The statements that give each account what its role needs in ``database``, and nothing
    more. ``None`` leaves an account out (the reader and the operator are left out unless
    given). ``create_users`` adds ``CREATE USER IF NOT EXISTS`` (without a password: set one with
    ``ALTER USER ... IDENTIFIED BY ...``)."""
    db = _database(database)
    out: list[str] = []
    for account in (publisher, consumer, admin, reader, operator):
        if account is not None and create_users:
            out.append(f"CREATE USER IF NOT EXISTS {account.sql()};")
    if publisher is not None:
        out += _execute(db, (*PUBLISHER_PROCEDURES, *SHARED_PROCEDURES), "PROCEDURE", publisher)
    if consumer is not None:
        out += _execute(db, (*CONSUMER_PROCEDURES, *SHARED_PROCEDURES), "PROCEDURE", consumer)
    if admin is not None:
        out.append(f"GRANT {', '.join(ADMIN_TABLE_PRIVILEGES)} ON {db}.* TO {admin.sql()};")
    if reader is not None:
        out += [f"GRANT SELECT ON {db}.`{t}` TO {reader.sql()};" for t in READER_TABLES]
        out += _execute(db, SHARED_PROCEDURES, "PROCEDURE", reader)
    if operator is not None:
        out += [f"GRANT SELECT ON {db}.`{t}` TO {operator.sql()};" for t in READER_TABLES]
        out += _execute(db, (*OPERATOR_PROCEDURES, *SHARED_PROCEDURES), "PROCEDURE", operator)
    return out


def acl_statements(
    database: str, account: Account, operation: str, patterns: Iterable[str]
) -> list[str]:
    """The ``CALL queue_acl_grant`` statements that limit ``account`` (its user name, on every
    host: the routines know the login's user, not the account's host pattern) to the topics
    (``publish``, ``consume``) or groups (``group``) matching ``patterns``. Run them as the admin,
    after the migration."""
    if operation not in ACL_OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(ACL_OPERATIONS)}: {operation!r}")
    db = _database(database)
    out = []
    for pattern in patterns:
        if not pattern or not _PATTERN.match(pattern):
            raise ValueError(
                "a topic or group pattern is a name of A-Z a-z 0-9 . _ - : / (1 to 191), "
                f"or a prefix of one followed by *: {pattern!r}"
            )
        user = _quote_string(account.user)
        out.append(f"CALL {db}.`queue_acl_grant`({user}, '{operation}', '{pattern}');")
    return out
