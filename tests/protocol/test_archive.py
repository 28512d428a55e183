"""The archive (queue_archive): GC moves what it deletes from a topic with the archive on, in the
same transaction as the delete; the archive keeps it for the topic's archive retention; purge
deletes it on demand. The clock is injected through queue_gc's p_now."""

from __future__ import annotations

import json
import threading

from helpers.support import call, rows, scalar, server_now, wait_until

from mysqlq import errors

HOUR_MS = 3_600_000
# the log's columns, which an archived row keeps as they were
LOG_COLUMNS = (
    "partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, published_at, "
    "deliver_at, target_group, origin_topic, origin_group, origin_offset, origin_message_id, "
    "failures, last_error, failed_at, kind, content_type, priority"
)


def _publish(conn, topic: str, n: int, prefix: str, keyed: bool = True) -> None:
    """``n`` messages on two keys and unkeyed, with kind, content type and priority set on some;
    without ``keyed``, unkeyed messages of priority 0 only (one partition of a one-partition
    topic: an unkeyed message's priority picks its partition too)."""
    batch = []
    for i in range(n):
        element = {"payload": f"{prefix}-{i}", "id": f"{prefix}-{i}", "metadata": {"i": i}}
        if keyed and i % 3:
            element["key"] = f"k{i % 3}"
        if i % 2:
            element.update(kind="order.created", content_type="application/json")
            if keyed:
                element["priority"] = i % 10
        batch.append(element)
    call(conn, "queue_publish_batch", topic, json.dumps(batch))


def _log(conn, table: str, topic: str) -> dict[tuple, dict]:
    """A topic's rows of queue_messages or queue_archive by (partition_id, offset)."""
    got = rows(conn, f"SELECT {LOG_COLUMNS} FROM {table} WHERE topic = %s", topic)
    return {(r["partition_id"], r["msg_offset"]): r for r in got}


def _pass_everything(conn, group: str, topic: str, upto: int | None = None) -> None:
    """Subscribe ``group`` to ``topic`` and move its watermark to ``upto`` (default: the end) on
    every partition of the topic."""
    call(conn, "queue_subscribe", group, topic, None, None, None, None, None)
    offsets = [
        [r["partition_id"], r["last_offset"] if upto is None else min(upto, r["last_offset"])]
        for r in rows(
            conn, "SELECT partition_id, last_offset FROM queue_partitions WHERE topic = %s", topic
        )
    ]
    call(conn, "queue_commit_offsets", group, topic, json.dumps(offsets), None)


def _gc(conn, now: int, limit: int = 100_000) -> dict:
    return call(conn, "queue_gc", limit, now)[0]


def _archive_on(conn, topic: str, retention_ms: int | None = None) -> dict:
    return call(conn, "queue_topic_archive", topic, 1, retention_ms)[0]


def test_gc_moves_exactly_what_it_deletes_into_the_archive(conn):
    for topic in ("orders", "plain"):
        call(conn, "queue_topic_configure", topic, 2, None, None, 0)
    assert _archive_on(conn, "orders")["archive"] == 1
    _publish(conn, "orders", 30, "o")
    _publish(conn, "plain", 12, "p")
    before = _log(conn, "queue_messages", "orders")
    plain_before = _log(conn, "queue_messages", "plain")
    # the group passes offsets up to 3 on every partition of orders, and all of plain
    _pass_everything(conn, "billing", "orders", upto=3)
    _pass_everything(conn, "billing", "plain")
    now = server_now(conn) + 1

    result = _gc(conn, now)

    kept, archived = _log(conn, "queue_messages", "orders"), _log(conn, "queue_archive", "orders")
    gone = {k for k in before if k[1] <= 3}
    assert 0 < len(gone) < len(before)
    assert set(archived) == gone and set(kept) == set(before) - gone  # each in one place
    for k, row in archived.items():
        assert row == before[k]  # every column as it was in the log
    assert {r["archived_at"] for r in rows(conn, "SELECT archived_at FROM queue_archive")} == {now}
    assert {r["kind"] for r in archived.values()} == {None, "order.created"}
    assert {r["priority"] for r in archived.values()} > {0}
    # a topic without the archive loses what GC deletes
    assert _log(conn, "queue_messages", "plain") == {}
    assert _log(conn, "queue_archive", "plain") == {}
    assert result == {
        "deleted": len(gone) + len(plain_before),
        "archived": len(gone),
        "archive_purged": 0,
    }
    # the rest once the group has passed it too; nothing is archived twice
    _pass_everything(conn, "billing", "orders")
    assert _gc(conn, now + 1) == {
        "deleted": len(before) - len(gone),
        "archived": len(before) - len(gone),
        "archive_purged": 0,
    }
    assert set(_log(conn, "queue_archive", "orders")) == set(before)
    assert _log(conn, "queue_messages", "orders") == {}


def test_gc_archives_only_what_is_past_the_topics_retention(conn):
    call(conn, "queue_topic_configure", "orders", 1, None, None, 60_000)
    _archive_on(conn, "orders")
    _publish(conn, "orders", 6, "o")
    _pass_everything(conn, "billing", "orders")
    newest = scalar(conn, "SELECT MAX(published_at) FROM queue_messages")
    assert _gc(conn, newest + 59_999)["archived"] < 6
    assert _gc(conn, newest + 60_000)["archived"] > 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 6
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_a_failed_delete_leaves_no_archived_copy(conn, connect):
    """The copy and the delete of a batch are one transaction: when the delete fails (here a
    lock wait timeout on a row another session holds), the copy is rolled back with it, and
    while it waits other sessions see the messages in the log only."""
    call(conn, "queue_topic_configure", "orders", 1, None, None, 0)
    _archive_on(conn, "orders")
    _publish(conn, "orders", 4, "o", keyed=False)  # one partition: one GC batch
    assert scalar(conn, "SELECT COUNT(DISTINCT partition_id) FROM queue_messages") == 1
    _pass_everything(conn, "billing", "orders")
    before = _log(conn, "queue_messages", "orders")
    holder = connect()
    holder.autocommit(False)
    # a shared lock: GC's copy (a read) goes through, its delete waits
    holder.cursor().execute(
        "SELECT message_id FROM queue_messages WHERE message_id = 'o-3' LOCK IN SHARE MODE"
    )
    gc_conn = connect()
    gc_conn.cursor().execute("SET SESSION innodb_lock_wait_timeout = 5")
    gc_thread = gc_conn.thread_id()
    now = server_now(conn) + 1
    outcome: dict = {}

    def run_gc() -> None:
        try:
            outcome["result"] = _gc(gc_conn, now)
        except errors.Error as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run_gc)
    worker.start()
    try:
        wait_until(
            lambda: (
                scalar(
                    conn,
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                    "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'",
                    gc_thread,
                )
                or "error" in outcome
            ),
            interval=0.25,  # INNODB_TRX is refreshed only after 100 ms without readers
            what="GC waiting for the held row",
        )
        assert outcome == {}, outcome
        # mid-transaction: its copy is not visible, the log still has everything
        assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 0
        assert set(_log(conn, "queue_messages", "orders")) == set(before)
    finally:
        worker.join(30)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), errors.LockTimeout), outcome
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 0
    assert _log(conn, "queue_messages", "orders") == before
    holder.rollback()
    # with the row free, the same GC moves everything
    assert _gc(conn, now)["archived"] == 4
    assert set(_log(conn, "queue_archive", "orders")) == set(before)


def test_the_archive_keeps_messages_for_its_own_retention(conn):
    for topic, keep_ms in (("orders", HOUR_MS), ("refunds", 2 * HOUR_MS)):
        call(conn, "queue_topic_configure", topic, 1, None, None, 0)
        row = _archive_on(conn, topic, keep_ms)
        assert (row["archive"], row["archive_retention_ms"]) == (1, keep_ms)
        _publish(conn, topic, 3, topic)
        _pass_everything(conn, "billing", topic)
    t0 = server_now(conn) + 1
    assert _gc(conn, t0) == {"deleted": 6, "archived": 6, "archive_purged": 0}
    assert _gc(conn, t0 + HOUR_MS - 1)["archive_purged"] == 0
    assert _gc(conn, t0 + HOUR_MS)["archive_purged"] == 3
    left = rows(conn, "SELECT DISTINCT topic FROM queue_archive")
    assert left == [{"topic": "refunds"}]
    assert _gc(conn, t0 + 2 * HOUR_MS)["archive_purged"] == 3
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 0


def test_turning_the_archive_off_stops_archiving_and_keeps_its_retention(conn):
    call(conn, "queue_topic_configure", "orders", 1, None, None, 0)
    _archive_on(conn, "orders", HOUR_MS)
    _publish(conn, "orders", 2, "a")
    _pass_everything(conn, "billing", "orders")
    t0 = server_now(conn) + 1
    assert _gc(conn, t0)["archived"] == 2
    # NULL keeps a setting: off, the retention stays
    row = call(conn, "queue_topic_archive", "orders", 0, None)[0]
    assert (row["archive"], row["archive_retention_ms"]) == (0, HOUR_MS)
    _publish(conn, "orders", 2, "b")
    _pass_everything(conn, "billing", "orders")
    assert _gc(conn, server_now(conn) + 1) == {"deleted": 2, "archived": 0, "archive_purged": 0}
    # what was archived before is still purged at its retention
    assert _gc(conn, t0 + HOUR_MS)["archive_purged"] == 2
    # queue_topic_configure leaves the archive settings alone and returns them
    row = call(conn, "queue_topic_configure", "orders", 3, None, None, None)[0]
    assert (row["partitions"], row["archive"], row["archive_retention_ms"]) == (3, 0, HOUR_MS)


def test_purge_by_time_and_limit(conn):
    call(conn, "queue_topic_configure", "orders", 1, None, None, 0)
    call(conn, "queue_topic_configure", "refunds", 1, None, None, 0)
    for topic in ("orders", "refunds"):
        _archive_on(conn, topic)
    _publish(conn, "orders", 3, "o0")
    _publish(conn, "orders", 3, "o1")
    _publish(conn, "refunds", 2, "r")
    # the first three archived at t0, the next three a second later, refunds at t0
    t0 = server_now(conn) + 1
    for topic, prefix, now in (("orders", "o0", t0), ("orders", "o1", t0 + 1000)):
        upto = scalar(
            conn,
            "SELECT MAX(msg_offset) FROM queue_messages WHERE message_id LIKE %s",
            f"{prefix}-%",
        )
        _pass_everything(conn, "billing", topic, upto=upto)
        assert _gc(conn, now)["archived"] == 3
    _pass_everything(conn, "billing", "refunds")
    assert _gc(conn, t0)["archived"] == 2

    def purge(before, limit=100):
        return call(conn, "queue_archive_purge", "orders", before, limit)[0]["purged"]

    assert purge(t0 - 1) == 0
    assert purge(t0, limit=2) == 2  # oldest archived first
    assert purge(t0 + 999) == 1
    ids = {r["message_id"] for r in rows(conn, "SELECT message_id FROM queue_archive")}
    assert ids == {"o1-0", "o1-1", "o1-2", "r-0", "r-1"}
    assert purge(None) == 3  # NULL: all of the topic's
    assert purge(None) == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive WHERE topic = 'refunds'") == 2


def test_two_gcs_at_once_on_an_archive_topic_both_succeed(conn, connect):
    """Two GCs on the same batch queue up as they do without the archive: the second waits for
    the first's row locks (taken before the copy), then finds the batch gone and copies nothing
    (before that lock, it failed with 1062 or a deadlock)."""
    call(conn, "queue_topic_configure", "orders", 1, None, None, 0)
    _archive_on(conn, "orders")
    _publish(conn, "orders", 4, "o", keyed=False)
    _pass_everything(conn, "billing", "orders")
    # both GCs queue behind one row lock, then go at once
    holder = connect()
    holder.autocommit(False)
    holder.cursor().execute("SELECT 1 FROM queue_messages WHERE message_id = 'o-0' FOR UPDATE")
    now = server_now(conn) + 1
    outcome: dict = {}

    def run_gc(name: str) -> None:
        try:
            outcome[name] = _gc(connect(), now)
        except errors.Error as exc:
            outcome[name] = exc

    workers = [threading.Thread(target=run_gc, args=(name,)) for name in ("a", "b")]
    for worker in workers:
        worker.start()
    try:
        wait_until(
            lambda: (
                scalar(
                    conn,
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
                    "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
                    "WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()",
                )
                >= 2
            ),
            interval=0.25,  # INNODB_TRX is refreshed only after 100 ms without readers
            what="both GCs waiting for the held row",
        )
    finally:
        holder.rollback()
        for worker in workers:
            worker.join(30)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 4
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0
    assert not any(isinstance(r, errors.Deadlock) for r in outcome.values()), outcome
    assert all(isinstance(r, dict) for r in outcome.values()), outcome
    assert sorted(r["archived"] for r in outcome.values()) == [0, 4]
