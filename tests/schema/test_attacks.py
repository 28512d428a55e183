"""The roles as attackers: accounts made with exactly what `mysqlq grants` prints call every
procedure their role holds with hostile arguments, and nothing outside their reach changes.

One database without the test clock (as in production), on which two teams share the queue:
`orders` with group `billing` (helpers.seeded's rows), and `payments` with group `payer`, whose
subscriber holds a lease and a message in flight. Five accounts: the admin (the routines'
definer), a publisher and a consumer with the role's grants and no access rule, and a team
publisher and a team consumer limited to `orders*` topics and `billing*` groups
(`mysqlq grants --topics/--groups`). The attacks:

* every clock: a far-past or far-future ``p_now`` is refused (MQ024) by every procedure that
  takes one, and changes nothing at all;
* maintenance: a tick with a year-long interval neither deletes what its retention keeps nor puts
  maintenance off by more than a minute;
* other groups: a subscribe that would change an existing group's attempts or DLQ is refused
  (MQ022), and a new group's DLQ cannot be an ordinary topic (MQ013);
* other teams: the team accounts call each procedure of their role naming the other team's
  topic, group, subscriber and in-flight deliveries (with their real tokens): all refused (MQ023
  or MQ024), and the payments team's rows are byte for byte what they were.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import MySQLdb
import pytest
from helpers.seeded import GROUP, HOUR_MS, SIGNATURES, TOPIC, seed, state

import mysqlq
from mysqlq import connection as mq_connection
from mysqlq import errors
from mysqlq.schema import grants
from mysqlq_dev.harness import create_database, drop_database, install_schema

call = mq_connection.call
YEAR_MS = 31_536_000_000
FAR_PAST, FAR_FUTURE = 0, 253_402_300_799_999
THEIRS, THEIR_GROUP, THEIR_SUBSCRIBER = "payments", "payer", "payer-1"


@dataclass
class World:
    database: str
    dsn: dict[str, str]  # role -> DSN of its account
    root: Any
    their_delivery: str  # the payer's in-flight delivery, with its real token


def _run(conn: Any, statements: list[str]) -> None:
    cur = conn.cursor()
    try:
        for statement in statements:
            cur.execute(statement)
    finally:
        cur.close()


def _dsn(server_dsn: str, user: str, password: str, database: str) -> str:
    url = mq_connection.parse_dsn(server_dsn).replace(username=user, password=password)
    return mq_connection.with_database(str(url), database)


@contextlib.contextmanager
def connected(dsn: str) -> Iterator[Any]:
    conn = mq_connection.connect(dsn)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture(scope="module")
def world(server, admin, schema_objects, head_revision) -> Iterator[World]:
    tag = secrets.token_hex(4)
    roles = ("admin", "publisher", "consumer", "team_publisher", "team_consumer")
    users = {role: f"mqx{i}_{tag}" for i, role in enumerate(roles)}
    password = secrets.token_hex(12)
    database = f"mysqlq_t_{secrets.token_hex(6)}"
    root = admin.conn
    create_database(root, database)
    try:
        for user in users.values():
            _run(root, [f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"])
        _run(
            root,
            grants.grant_statements(
                database, publisher=None, consumer=None, admin=grants.Account(users["admin"])
            ),
        )
        dsn = {role: _dsn(server.dsn, user, password, database) for role, user in users.items()}
        with connected(dsn["admin"]) as conn:
            # the admin installs the schema (it is the definer), without the test clock
            install_schema(conn, database, schema_objects, head_revision)
        for pub, con in (("publisher", "consumer"), ("team_publisher", "team_consumer")):
            _run(
                root,
                grants.grant_statements(
                    database,
                    publisher=grants.Account(users[pub]),
                    consumer=grants.Account(users[con]),
                    admin=None,
                ),
            )
        team = grants.acl_statements(
            database, grants.Account(users["team_publisher"]), "publish", ["orders*"]
        )
        team += grants.acl_statements(
            database, grants.Account(users["team_consumer"]), "consume", ["orders*"]
        )
        team += grants.acl_statements(
            database, grants.Account(users["team_consumer"]), "group", ["billing*"]
        )
        with connected(dsn["admin"]) as conn:
            _run(conn, team)
            seed(conn)
            their_delivery = _payments_team(conn)
        yield World(database, dsn, root, their_delivery)
    finally:
        drop_database(root, database)
        for user in users.values():
            with contextlib.suppress(MySQLdb.Error):
                _run(root, [f"DROP USER IF EXISTS '{user}'@'%'"])


def _payments_team(conn: Any) -> str:
    """The other team: an hour's retention, four messages, one acked, one in flight with the
    payer's subscriber (an hour's lease and visibility). Returns the in-flight delivery."""
    call(conn, "queue_topic_configure", THEIRS, 2, 5, None, HOUR_MS)
    for i in range(4):
        call(conn, "queue_publish", THEIRS, "p1", f"pay-{i}", b"secret", None, 0)
    call(conn, "queue_subscribe", THEIR_GROUP, THEIRS, THEIR_SUBSCRIBER, 5, None, HOUR_MS, None)
    call(conn, "queue_acquire_leases", THEIR_GROUP, THEIRS, THEIR_SUBSCRIBER, HOUR_MS, None)
    got = call(conn, "queue_fetch", THEIR_GROUP, THEIRS, THEIR_SUBSCRIBER, 2, HOUR_MS, 2, None)
    assert [m["offset"] for m in got] == [1, 2], got
    triples = [[m["partition_id"], m["offset"], m["token"]] for m in got]
    call(conn, "queue_ack", THEIR_GROUP, json.dumps(triples[:1]), None)
    return json.dumps(triples[1:])


def _rows(conn: Any, sql: str) -> list[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return list(cur.fetchall())
    finally:
        cur.close()


def theirs(world: World) -> dict[str, list[tuple]]:
    """Every row of the payments team: its topics' log, partitions and settings, and its group's
    subscription, positions, delivery state, leases and heartbeats."""
    db = f"`{world.database}`"
    ours = f"(SELECT partition_id FROM {db}.queue_partitions WHERE topic LIKE '{THEIRS}%')"
    group = f"group_name = '{THEIR_GROUP}'"
    queries = {
        "messages": f"SELECT * FROM {db}.queue_messages WHERE topic LIKE '{THEIRS}%'",
        "partitions": f"SELECT * FROM {db}.queue_partitions WHERE topic LIKE '{THEIRS}%'",
        "topics": f"SELECT * FROM {db}.queue_topics WHERE topic LIKE '{THEIRS}%'",
        "subscriptions": f"SELECT * FROM {db}.queue_subscriptions "
        f"WHERE {group} OR topic LIKE '{THEIRS}%'",
        "offsets": f"SELECT * FROM {db}.queue_offsets WHERE {group} OR partition_id IN {ours}",
        "delivery_state": f"SELECT * FROM {db}.queue_delivery_state "
        f"WHERE {group} OR partition_id IN {ours}",
        "leases": f"SELECT * FROM {db}.queue_partition_leases "
        f"WHERE {group} OR topic LIKE '{THEIRS}%'",
        "heartbeats": f"SELECT * FROM {db}.queue_subscriber_heartbeats "
        f"WHERE {group} OR topic LIKE '{THEIRS}%'",
        "acl": f"SELECT * FROM {db}.queue_acl",
        "settings": f"SELECT * FROM {db}.queue_settings",
    }
    return {name: sorted(_rows(world.root, sql), key=repr) for name, sql in queries.items()}


def everything(world: World) -> dict[str, tuple[int, int]]:
    with connected(world.dsn["admin"]) as conn:
        return state(conn)


def args(proc: str, **overrides: Any) -> tuple:
    base = dict(SIGNATURES[proc])
    unknown = set(overrides) - set(base)
    assert not unknown, f"{proc} has no {unknown}"
    base.update(overrides)
    return tuple(base.values())


def refused(conn: Any, proc: str, arguments: tuple) -> errors.Error:
    with pytest.raises(errors.Error) as info:
        call(conn, proc, *arguments)
    return info.value


# --------------------------------------------------------------------------- the clock


CLOCKED = sorted(p for p in grants.CONSUMER_PROCEDURES if "p_now" in SIGNATURES[p])


@pytest.mark.parametrize("role", ["consumer", "team_consumer"])
def test_no_consumer_moves_the_clock(world: World, role: str) -> None:
    """Every consumer procedure refuses a caller's clock, far past or far future, without a test
    clock (MQ024), and changes nothing: no lease looks expired, no delay looks due, no retention
    looks passed."""
    assert CLOCKED and "queue_maintenance_tick" in CLOCKED and "queue_fetch" in CLOCKED
    before = everything(world)
    with connected(world.dsn[role]) as conn:
        for proc in CLOCKED:
            for now in (FAR_PAST, FAR_FUTURE):
                error = refused(conn, proc, args(proc, p_now=now))
                assert error.code in {"MQ024", "MQ023"}, f"{proc}: {error}"
                if role == "consumer":
                    assert error.code == "MQ024", f"{proc}: {error}"
    assert everything(world) == before


def test_the_test_clock_is_the_admins_switch(world: World) -> None:
    """The clock's switch is a table no role below admin can write: the consumer cannot insert
    the row, the admin can (and then a p_now is honoured), and without it time is the server's."""
    with connected(world.dsn["consumer"]) as conn, pytest.raises(MySQLdb.Error) as info:
        _run(conn, ["INSERT INTO queue_settings (setting, value) VALUES ('test_clock', 'on')"])
    assert info.value.args[0] == 1142, info.value  # INSERT command denied
    with connected(world.dsn["admin"]) as conn:
        _run(conn, ["INSERT INTO queue_settings (setting, value) VALUES ('test_clock', 'on')"])
        try:
            (row,) = call(conn, "queue_maintenance_tick", "admin-probe", 1000, FAR_PAST)
            assert row["next_run_at"] is not None
        finally:
            _run(conn, ["DELETE FROM queue_settings WHERE setting = 'test_clock'"])
            # the far-past tick left next_run_at in 1970: the next tick claims it at once
            call(conn, "queue_maintenance_tick", "admin-probe", 1000, None)


# --------------------------------------------------------------------------- maintenance


def test_a_hostile_tick_neither_deletes_nor_stops_maintenance(world: World) -> None:
    """A consumer's tick with a year-long interval runs what is due by the server's clock (the
    payments team's acked message is inside its hour of retention: it stays) and puts the next
    run off by at most a minute."""
    before = theirs(world)
    # maintenance is due: the attacker's tick claims the run
    _run(world.root, [f"UPDATE `{world.database}`.queue_maintenance_schedule SET next_run_at = 0"])
    with connected(world.dsn["consumer"]) as conn:
        (claim, *_) = call(conn, "queue_maintenance_tick", "attacker", YEAR_MS, None)
        assert claim["ran"] == 1
        call(conn, "queue_maintenance_tick", "attacker", YEAR_MS, None)
    ((next_run_at, now),) = _rows(
        world.root,
        f"SELECT next_run_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) "
        f"FROM `{world.database}`.queue_maintenance_schedule WHERE job = 'maintenance'",
    )
    assert next_run_at <= now + 60_000, (next_run_at, now)
    assert theirs(world) == before


@pytest.mark.parametrize("role", ["consumer", "publisher"])
def test_a_session_clock_set_later_changes_nothing(world: World, role: str) -> None:
    """Any account may ``SET timestamp`` on its own session, which moves NOW(). A consumer whose
    session says it is a year later ticks maintenance, heartbeats, takes leases and fetches; a
    publisher publishes: the payments team's acked message, inside its hour of retention, stays,
    no heartbeat or lease of theirs looks expired, and what the attacker's calls wrote carries
    the server's time, not the session's."""
    before = theirs(world)
    _run(world.root, [f"UPDATE `{world.database}`.queue_maintenance_schedule SET next_run_at = 0"])
    with connected(world.dsn[role]) as conn:
        _run(conn, [f"SET timestamp = UNIX_TIMESTAMP() + {YEAR_MS // 1000}"])
        if role == "consumer":
            (claim, *_) = call(conn, "queue_maintenance_tick", "attacker", 1000, None)
            assert claim["ran"] == 1
            assert claim["next_run_at"] < FAR_FUTURE
            call(conn, *_attacker_subscription())
            call(conn, "queue_heartbeat", "attackers", "orders", "attacker", 30_000, None)
            call(conn, "queue_acquire_leases", "attackers", "orders", "attacker", 30_000, None)
            call(conn, "queue_fetch", "attackers", "orders", "attacker", 10, 30_000, 100, None)
            written = (
                f"SELECT MAX(heartbeat_at) FROM `{world.database}`.queue_subscriber_heartbeats "
                "WHERE subscriber = 'attacker'"
            )
        else:
            call(conn, "queue_publish", "orders", "k", "late-1", b"x", None, 0)
            written = (
                f"SELECT MAX(published_at) FROM `{world.database}`.queue_messages "
                "WHERE message_id = 'late-1'"
            )
    ((stamp, now),) = _rows(
        world.root, f"SELECT ({written}), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"
    )
    assert stamp is not None and stamp <= now, (stamp, now)
    assert theirs(world) == before


def _attacker_subscription() -> tuple:
    """queue_subscribe's arguments for a group of the attacker's own on the open topic."""
    return ("queue_subscribe", "attackers", "orders", "attacker", None, None, 30_000, None)


# --------------------------------------------------------------------------- other groups


def test_a_consumer_cannot_rewrite_another_groups_settings(world: World) -> None:
    """queue_subscribe joins an existing group as it is: a differing max_attempts or DLQ topic
    is refused (MQ022), and nothing changes. A new group's DLQ cannot be an ordinary topic
    (MQ013), so no group dead-letters into another team's topic."""
    before = everything(world)
    hostile = [
        (THEIR_GROUP, THEIRS, None, 1, None),
        (THEIR_GROUP, THEIRS, THEIR_SUBSCRIBER, None, f"{TOPIC}_dlq"),
        (THEIR_GROUP, THEIRS, "intruder", 1, "orders"),
    ]
    with connected(world.dsn["consumer"]) as conn:
        for group, topic, subscriber, attempts, dlq in hostile:
            error = refused(
                conn, "queue_subscribe", (group, topic, subscriber, attempts, dlq, None, None)
            )
            assert error.code in {"MQ022", "MQ013"}, error
        error = refused(conn, "queue_subscribe", ("evil", TOPIC, None, 1, THEIRS, None, None))
        assert error.code == "MQ013", error
        # joining as it is works, and changes nothing of the group's settings
        (row,) = call(conn, "queue_subscribe", THEIR_GROUP, THEIRS, None, None, None, None, None)
        assert (row["max_attempts"], row["dlq_topic"]) == (5, f"{THEIRS}_dlq")
    assert everything(world) == before


def test_only_the_admin_configures_a_group(world: World) -> None:
    """The consumer holds no EXECUTE on queue_group_configure; the admin changes a group's
    settings through mysqlq.Client, and a DLQ topic must be one (MQ013) unless marked."""
    with connected(world.dsn["consumer"]) as conn:
        error = refused(conn, "queue_group_configure", args("queue_group_configure"))
        assert isinstance(error, errors.PermissionDenied), error
    client = mysqlq.connect(world.dsn["admin"])
    try:
        with pytest.raises(errors.InvalidArgument, match="MQ013"):
            client.configure_group("audit", TOPIC, dlq_topic="ledger")
        assert client.configure_topic("ledger", dlq=True)["dlq"] == 1
        row = client.configure_group("audit", TOPIC, max_attempts=7, dlq_topic="ledger")
        assert (row["max_attempts"], row["dlq_topic"]) == (7, "ledger")
        row = client.configure_group("audit", TOPIC, dlq_topic=f"{TOPIC}_dlq")
        assert (row["max_attempts"], row["dlq_topic"]) == (7, f"{TOPIC}_dlq")
    finally:
        client.close()


def test_no_consumer_or_publisher_pauses_or_unthrottles_anything(world: World) -> None:
    """Flow control is the admin's (and the operator's): the consumer and publisher accounts,
    team or not, hold no EXECUTE on queue_pause, queue_resume or queue_group_configure, so none
    can pause another group, resume its own paused group, or lift its own rate limit or cap."""
    before = everything(world)
    for role in ("consumer", "team_consumer", "publisher", "team_publisher"):
        with connected(world.dsn[role]) as conn:
            for proc, arguments in (
                ("queue_pause", (THEIRS, THEIR_GROUP)),
                ("queue_pause", (THEIRS, None)),
                ("queue_resume", (TOPIC, GROUP)),
                ("queue_resume", (TOPIC, None)),
                ("queue_group_configure", (GROUP, TOPIC, None, None, 0, 0, 0)),
                ("queue_group_configure", (THEIR_GROUP, THEIRS, None, None, 0.001, 1, 1)),
            ):
                error = refused(conn, proc, arguments)
                assert isinstance(error, errors.PermissionDenied), (role, proc, error)
    assert everything(world) == before


def test_schedules_are_the_admins_and_publish_only_where_the_admin_may(world: World) -> None:
    """Recurring messages (issue 38): no consumer or publisher account holds EXECUTE on the
    schedule procedures, so none can create a schedule, run, pause or delete the admin's; an
    admin limited by a publish rule cannot schedule (or run) messages to another team's topic."""
    before = everything(world)
    for role in ("consumer", "team_consumer", "publisher", "team_publisher"):
        with connected(world.dsn[role]) as conn:
            for proc in (
                "queue_schedule",
                "queue_schedule_delete",
                "queue_schedule_pause",
                "queue_schedule_resume",
                "queue_schedule_run",
            ):
                error = refused(conn, proc, args(proc))
                assert isinstance(error, errors.PermissionDenied), (role, proc, error)
    assert everything(world) == before
    admin_user = mq_connection.parse_dsn(world.dsn["admin"]).username
    with connected(world.dsn["admin"]) as conn:
        call(conn, "queue_acl_grant", admin_user, "publish", "orders*")
        try:
            for topic in (THEIRS, f"{THEIRS}_dlq"):
                error = refused(conn, "queue_schedule", args("queue_schedule", p_topic=topic))
                assert error.code == "MQ023", error
            # its own team's topic is fine; run now of a schedule to theirs is refused too
            call(conn, "queue_schedule", *args("queue_schedule", p_name="ours"))
            call(conn, "queue_acl_revoke", admin_user, None, None)
            call(conn, "queue_schedule", *args("queue_schedule", p_name="theirs", p_topic=THEIRS))
            call(conn, "queue_acl_grant", admin_user, "publish", "orders*")
            error = refused(conn, "queue_schedule_run", ("theirs", None))
            assert error.code == "MQ023", error
        finally:
            call(conn, "queue_acl_revoke", admin_user, None, None)
            for name in ("ours", "theirs"):
                with contextlib.suppress(errors.Error):
                    call(conn, "queue_schedule_delete", name)
    assert everything(world) == before


# --------------------------------------------------------------------------- other teams


def _team_attacks(proc: str, their_delivery: str) -> list[dict[str, Any]]:
    """The hostile variants of a procedure's valid call: the other team's names and deliveries,
    alone and together, a year-long interval, and a far clock."""
    params = SIGNATURES[proc]
    out: list[dict[str, Any]] = []
    if "p_topic" in params:
        out += [{"p_topic": THEIRS}, {"p_topic": f"{THEIRS}_dlq"}]
    if "p_group" in params:
        out.append({"p_group": THEIR_GROUP})
        if "p_topic" in params:
            out.append({"p_group": THEIR_GROUP, "p_topic": THEIRS})
            if "p_subscriber" in params:
                out.append(
                    {"p_group": THEIR_GROUP, "p_topic": THEIRS, "p_subscriber": THEIR_SUBSCRIBER}
                )
    if "p_deliveries" in params:
        # the same deliveries as runs of offsets, [partition_id, first, last, token]
        runs = json.dumps([[pid, off, off, tok] for pid, off, tok in json.loads(their_delivery)])
        out += [
            {"p_deliveries": their_delivery},
            {"p_group": THEIR_GROUP, "p_deliveries": their_delivery},
            {"p_deliveries": runs},
            {"p_group": THEIR_GROUP, "p_deliveries": runs},
        ]
    if "p_acks" in params:
        # a long poll on our own group and topic that carries acks of theirs
        runs = json.dumps([[pid, off, off, tok] for pid, off, tok in json.loads(their_delivery)])
        out += [{"p_acks": their_delivery}, {"p_acks": runs}]
    if "p_dlq_topic" in params:
        out += [{"p_group": "billing-new", "p_dlq_topic": f"{THEIRS}_dlq"}]
    if "p_messages" in params:
        out.append({"p_topic": THEIRS, "p_messages": '[{"payload": "x", "key": "p1"}]'})
    if "p_now" in params:
        out += [{"p_now": FAR_PAST}, {"p_now": FAR_FUTURE}]
    if "p_interval_ms" in params:
        out.append({"p_interval_ms": YEAR_MS})
    return out


@pytest.mark.parametrize(
    ("role", "procedures"),
    [
        ("team_publisher", grants.PUBLISHER_PROCEDURES),
        ("team_consumer", grants.CONSUMER_PROCEDURES),
    ],
)
def test_a_team_account_cannot_touch_another_teams_topic_or_group(
    world: World, role: str, procedures: tuple[str, ...]
) -> None:
    """Each procedure of the role, with each hostile variant: refused with an access code, or
    (the maintenance tick's interval) harmless; the payments team's rows are unchanged after
    every call."""
    before = theirs(world)
    attempted = 0
    with connected(world.dsn[role]) as conn:
        for proc in procedures:
            for overrides in _team_attacks(proc, world.their_delivery):
                attempted += 1
                arguments = args(proc, **overrides)
                if overrides.keys() == {"p_interval_ms"}:
                    call(conn, proc, *arguments)
                else:
                    error = refused(conn, proc, arguments)
                    allowed = {"MQ023", "MQ024"}
                    if proc == "queue_cancel" and overrides == {"p_group": THEIR_GROUP}:
                        # their group on our topic: not subscribed there, nothing of theirs named
                        allowed.add("MQ011")
                    assert error.code in allowed, f"{proc} {overrides}: {error}"
                assert theirs(world) == before, f"{proc} {overrides} changed the payments team"
    assert attempted >= (10 if role == "team_publisher" else 60), attempted


def test_a_team_account_still_works_on_its_own(world: World) -> None:
    """The rules limit, they do not break: the team publisher publishes to orders (single and
    batch, through the driver), the team consumer subscribes a billing group and fetches."""
    client = mysqlq.connect(world.dsn["team_publisher"])
    try:
        assert client.publish(TOPIC, b"ok", key="k9").offset >= 1
        assert len(client.publish_batch(TOPIC, [b"a", b"b"])) == 2
        with pytest.raises(errors.PermissionDenied, match="MQ023"):
            client.publish(THEIRS, b"no", key="p1")
        # a refusal by a rule is not a missing grant: the client keeps its hinted publish
        assert client._hinted
        with pytest.raises(errors.PermissionDenied, match="MQ023"):
            client.publish_batch(THEIRS, [b"no"] * 3)
    finally:
        client.close()
    with connected(world.dsn["team_consumer"]) as conn:
        call(conn, "queue_subscribe", f"{GROUP}-team", TOPIC, "t1", None, None, HOUR_MS, None)
        call(conn, "queue_acquire_leases", f"{GROUP}-team", TOPIC, "t1", HOUR_MS, None)
        deadline = time.monotonic() + 10
        got: list[dict] = []
        while not got and time.monotonic() < deadline:
            got = call(conn, "queue_fetch", f"{GROUP}-team", TOPIC, "t1", 10, 60_000, 100, None)
        assert got and all(m["topic"] == TOPIC for m in got)
        # as the driver acks: one run of offsets per partition and token, in partition order
        runs: dict[tuple[int, int], list[int]] = {}
        for m in got:
            runs.setdefault((m["partition_id"], m["token"]), []).append(m["offset"])
        elements = [[p, min(o), max(o), t] for (p, t), o in sorted(runs.items())]
        assert all(max(o) - min(o) + 1 == len(o) for o in runs.values())
        (done,) = call(conn, "queue_ack", f"{GROUP}-team", json.dumps(elements), None)
        assert (done["settled"], done["stale"]) == (len(got), 0)
