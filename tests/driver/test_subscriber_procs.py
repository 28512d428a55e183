"""The Python subscriber in real processes: crashes, signals, killed connections (G4-G7, G9-G12).

The workers and the reads of what they did are in ``tests/helpers/procs.py``.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections import Counter

import MySQLdb
import pytest
from helpers.procs import TOPIC, Harness, publish_many

pytestmark = pytest.mark.timeout(90)


# 1 --------------------------------------------------------------------------------------------


def test_fanout_two_groups_each_handle_every_message_once(h):
    ids = publish_many(h, [f"k{i}" for i in range(6)], 10)
    h.spawn("A", group="g1", lease=3, batch_size=5)
    h.spawn("B", group="g2", lease=3, batch_size=5)
    for g in ("g1", "g2"):
        h.wait(lambda g=g: h.acked(g) == len(ids), timeout=30, what=f"{g} to ack everything")
    for g, worker in (("g1", "A"), ("g2", "B")):
        evs = h.events("grp = %s", g)
        assert {e["worker"] for e in evs} == {worker}
        starts = Counter(e["msg_id"] for e in evs if e["event"] == "start")
        ends = Counter(e["msg_id"] for e in evs if e["event"] == "end")
        assert set(starts) == set(ids), f"{g} did not see every message"
        assert all(n == 1 for n in starts.values()), f"{g} handled some twice: {starts}"
        assert ends == starts
        assert {e["attempt"] for e in evs} == {1}


# 2 --------------------------------------------------------------------------------------------


def check_strict_order(events: list[dict], killed: str, last: int) -> None:
    """One partition's events with batch_size=1: every START follows the END of the message
    before it (so handlers never overlap and offsets never go back), except that the message the
    killed worker was running (or had ended but not yet acked) is started again by another."""
    running: dict | None = None
    done = 0  # offset of the last message whose handler ended
    done_by = None
    restarts = 0
    for e in events:
        where = f"event {e['id']} ({e['worker']} #{e['msg_offset']} {e['event']})"
        if e["event"] == "start":
            if running is not None:
                # the killed worker's handler never ended; only its message may start again
                assert running["worker"] == killed, f"{where}: overlaps {running}"
                assert e["worker"] != killed and e["msg_offset"] == running["msg_offset"], (
                    f"{where}: started while #{running['msg_offset']} of {killed} was in flight"
                )
                restarts += 1
            elif e["msg_offset"] == done:
                assert done_by == killed and e["worker"] != killed, (
                    f"{where}: #{done} started again"
                )
                restarts += 1
            else:
                assert e["msg_offset"] == done + 1, f"{where}: expected #{done + 1} next"
            running = e
        else:
            assert running is not None and running["worker"] == e["worker"], f"{where}: no start"
            assert running["msg_offset"] == e["msg_offset"], f"{where}: ends another message"
            done, done_by, running = e["msg_offset"], e["worker"], None
    assert restarts <= 1
    assert done == last and running is None


def test_strict_order_across_kill_9_of_the_holder(h):
    n = 40
    publish_many(h, ["k"], n)
    opts = {"batch_size": 1, "lease": 2, "visibility": 3, "sleep": 0.05, "concurrency": 2}
    a = h.spawn("A", **opts)
    h.wait(
        lambda: len(h.events("worker = 'A' AND event = 'end'")) >= 10,
        timeout=30,
        what="A to handle 10 messages",
    )
    a.signal(signal.SIGKILL)
    a.proc.wait(timeout=10)
    h.spawn("B", **opts)
    h.wait(lambda: h.acked() == n, timeout=40, what="every message acked")
    evs = h.events()
    assert {e["worker"] for e in evs} == {"A", "B"}
    assert {e["msg_offset"] for e in evs if e["event"] == "end"} == set(range(1, n + 1))
    check_strict_order(evs, killed="A", last=n)


# 3 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 10])
def test_nack_with_delay_does_not_block_its_partition(h, batch_size):
    n = 8
    publish_many(h, ["k"], n)
    h.spawn("A", batch_size=batch_size, lease=3, visibility=20, nack_delay=2, nack_offsets="1")
    h.wait(lambda: h.acked() == n, timeout=30, what="every message acked")
    evs = h.events()
    first = [e for e in evs if e["msg_offset"] == 1]
    assert [(e["attempt"], e["event"]) for e in first] == [
        (1, "start"),
        (1, "end"),
        (2, "start"),
        (2, "end"),
    ]
    nacked_end, retry_start = first[1], first[2]
    for off in range(2, n + 1):
        (end,) = [e for e in evs if e["msg_offset"] == off and e["event"] == "end"]
        assert end["id"] < retry_start["id"], f"#{off} waited for the nacked #1"
    waited = retry_start["at_ms"] - nacked_end["at_ms"]
    assert waited >= 1950, f"#1 came back after {waited} ms, before its 2 s delay"


# 4 --------------------------------------------------------------------------------------------


def test_visibility_expiry_redelivers_what_a_killed_subscriber_held(h):
    """A live subscriber keeps its messages invisible (G14); one killed mid-handler stops
    extending, and its message comes back, with a new token, once its visibility has passed."""
    publish_many(h, ["k"], 1)
    a = h.spawn("A", batch_size=1, lease=1.5, visibility=1.5, sleep=30, sleep_attempt=1)
    h.wait(lambda: h.events("event = 'start'"), timeout=20, what="A to start the message")
    a.signal(signal.SIGKILL)
    h.spawn("B", batch_size=1, lease=1.5, visibility=1.5)
    h.wait(lambda: h.acked() == 1, timeout=30, what="the message acked")
    starts = h.events("event = 'start'")
    assert [(e["worker"], e["attempt"]) for e in starts] == [("A", 1), ("B", 2)]
    assert starts[1]["token"] != starts[0]["token"]
    # not before the first delivery's visibility deadline (same machine, same clock)
    assert starts[1]["at_ms"] >= starts[0]["visible_until"] - 5


def test_extend_prevents_redelivery(h):
    publish_many(h, ["k"], 1)
    h.spawn("A", batch_size=1, lease=5, visibility=1.5, sleep=4, extend=1.5)
    # if the visibility ran out, the redelivery would come before the watermark moves
    h.wait(lambda: h.acked() == 1, timeout=30, what="the message acked")
    evs = h.events()
    assert [(e["attempt"], e["event"]) for e in evs] == [(1, "start"), (1, "end")]
    assert evs[1]["at_ms"] - evs[0]["at_ms"] >= 3900  # it really ran past the visibility


# 5 --------------------------------------------------------------------------------------------


def test_max_attempts_moves_to_dlq_byte_for_byte_other_group_unaffected(h):
    payload = bytes(range(256)) + b"\x00\xff\x00 \x80\xc3\x28\r\n\x00"
    h.client.publish(TOPIC, payload, key="k", id="poison", metadata={"m": 1})
    h.spawn("A", group="g1", fail="always", max_attempts=2, retry_backoff=0.05, lease=3)
    h.spawn("B", group="g2", lease=3)
    h.wait(lambda: h.acked("g1") == 1, timeout=30, what="g1 to be done with the message")
    h.wait(lambda: h.acked("g2") == 1, timeout=30, what="g2 to ack the message")
    dlq = h.sql("SELECT * FROM queue_messages WHERE topic = %s", f"{TOPIC}_dlq")
    assert len(dlq) == 1, dlq
    (entry,) = dlq
    assert bytes(entry["payload"]) == payload
    assert entry["origin_topic"] == TOPIC
    assert entry["origin_group"] == "g1"
    assert entry["origin_message_id"] == "poison"
    assert entry["partition_key"] == "k"
    assert entry["failures"] == 2
    g1 = h.events("grp = 'g1' AND event = 'start'")
    assert [e["attempt"] for e in g1] == [1, 2]
    g2 = h.events("grp = 'g2'")
    assert [(e["attempt"], e["event"]) for e in g2] == [(1, "start"), (1, "end")]
    # the log row stays for the other group, untouched
    (orig,) = h.sql("SELECT payload FROM queue_messages WHERE topic = %s", TOPIC)
    assert bytes(orig["payload"]) == payload


# 6 --------------------------------------------------------------------------------------------


def test_fair_share_twelve_partitions_five_processes_then_two_stop(h):
    publish_many(h, [f"k{i:02d}" for i in range(12)], 1)
    names = [f"w{i}" for i in range(5)]
    workers = {n: h.spawn(n, lease=3) for n in names}

    def shared_by(expected: list[str], low: int, high: int) -> bool:
        held = h.holdings()
        return (
            set(held) == set(expected)
            and sum(held.values()) == 12
            and all(low <= v <= high for v in held.values())
        )

    h.wait(lambda: shared_by(names, 2, 3), timeout=30, what="12 leases shared 2 or 3 each")
    h.wait_ticks(names, rounds=2)  # it stays so
    assert shared_by(names, 2, 3), h.holdings()

    stopped = names[3:]
    for n in stopped:
        workers[n].signal(signal.SIGTERM)
    for n in stopped:
        assert h.exited(workers[n]) == 0, workers[n].tail()
    rest = names[:3]
    h.wait(lambda: shared_by(rest, 4, 4), timeout=15, what="the other 3 to hold 4 each")
    h.wait_ticks(rest, rounds=2)
    assert shared_by(rest, 4, 4), h.holdings()
    assert h.acked() == 12


# 7 --------------------------------------------------------------------------------------------


def test_graceful_stop_hands_leases_and_buffered_messages_over_at_once(h):
    keys = [f"k{i}" for i in range(4)]
    ids = publish_many(h, keys, 10)
    # A ticks every 10 s: it keeps all 4 partitions until its next tick, even with B live.
    # One fetch gives it all 10 messages of each partition, and it needs 5 s to run them.
    opts = {"lease": 30, "batch_size": 10, "concurrency": 4, "sleep": 0.5, "visibility": 60}
    a = h.spawn("A", **opts)
    h.wait(lambda: h.holdings() == {"A": 4}, timeout=15, what="A to hold every partition")
    h.wait(lambda: len(h.events("event = 'start'")) >= 4, timeout=15, what="A to start handlers")
    h.spawn("B", **opts)
    h.wait(lambda: h.ticked_since(["B"], 0), timeout=15, what="B to join")
    (lease,) = h.sql(
        "SELECT MIN(expires_at) AS until FROM queue_partition_leases WHERE leased_by = 'A'"
    )
    assert h.holdings() == {"A": 4}, "A lost partitions before its stop; the test needs them"
    assert len(h.events("event = 'start'")) <= len(ids) - 8, "A was nearly done before its stop"
    stop_ms = h.now_ms()
    a.signal(signal.SIGTERM)
    h.wait(lambda: h.holdings() == {"B": 4}, timeout=25, what="B to take every partition")
    took_ms = h.now_ms()
    # B's lease tick runs every 10 s: the handover took at most about one of them, while A's
    # leases would have lasted until `lease["until"]`
    assert took_ms < lease["until"] - 5000, (stop_ms, took_ms, lease["until"])
    assert took_ms - stop_ms < 15000
    assert h.exited(a) == 0, a.tail()
    assert a.stats().get("released", 0) > 0, f"A had nothing buffered: {a.stats()}"
    h.wait(lambda: h.acked() == len(ids), timeout=30, what="every message acked")
    evs = h.events()
    assert {e["attempt"] for e in evs} == {1}, "a released message was charged an attempt"
    starts = Counter(e["msg_id"] for e in evs if e["event"] == "start")
    assert set(starts) == set(ids) and set(starts.values()) == {1}
    assert {e["worker"] for e in evs} == {"A", "B"}


# 8 --------------------------------------------------------------------------------------------


def test_sigstop_past_the_lease_starts_no_buffered_message_after_sigcont(h):
    n = 20
    ids = publish_many(h, ["k"], n)
    # A holds the one partition before B joins, so it keeps it (the member holding more keeps
    # the extra partition of fair share, G15)
    opts = {"lease": 2, "batch_size": 5, "concurrency": 1, "sleep": 0.5, "visibility": 8}
    a = h.spawn("A", **opts)
    h.wait(lambda: h.holdings() == {"A": 1}, timeout=15, what="A to hold the partition")
    h.spawn("B", **opts)
    h.wait(lambda: h.ticked_since(["B"], 0), timeout=15, what="B to join")

    def mid_batch() -> dict | None:
        # A is running a message with at least three more of its fetch buffered behind it
        evs = h.events("worker = 'A' AND event = 'start'")
        if evs and (evs[-1]["msg_offset"] - 1) % 5 <= 1:
            return evs[-1]
        return None

    running = h.wait(mid_batch, timeout=20, what="A in the middle of a batch")
    a.signal(signal.SIGSTOP)
    stopped_at = h.events()[-1]["id"]
    try:
        h.wait(lambda: h.holdings() == {"B": 1}, timeout=20, what="B to take the partition")
    finally:
        a.signal(signal.SIGCONT)
    h.wait(lambda: h.acked() == n, timeout=40, what="every message acked")
    assert a.alive() and h.ended() == set(ids)
    # A's buffered messages share the token of the fetch that delivered `running`
    late = h.events(
        "worker = 'A' AND event = 'start' AND id > %s AND token = %s",
        stopped_at,
        running["token"],
    )
    assert not late, (
        f"after SIGCONT, A started messages it had buffered before losing its lease: "
        f"{[(e['msg_offset'], e['attempt']) for e in late]}\n{h.diagnostics()}"
    )


# 9 --------------------------------------------------------------------------------------------


def _connections(h: Harness) -> set[int]:
    return {
        int(r["id"])
        for r in h.sql(
            "SELECT id FROM information_schema.PROCESSLIST WHERE db = %s AND id <> CONNECTION_ID()",
            h.db.name,
        )
    }


def test_killed_connections_lose_nothing_and_the_worker_keeps_going(h):
    keys = [f"k{i}" for i in range(4)]
    ids = publish_many(h, keys, 60)
    ours = _connections(h)  # the test's own (its reader, the publisher, the admin session)
    w = h.spawn("A", lease=3, visibility=3, batch_size=10, sleep=0.02)
    killed = 0
    for round_ in range(1, 4):
        h.wait(lambda r=round_: len(h.ended()) >= 50 * r, timeout=30, what=f"{50 * round_} handled")
        theirs = _connections(h) - ours
        assert theirs, "found no connection of the worker"
        cur = h.conn.cursor()
        for pid in theirs:
            with contextlib.suppress(MySQLdb.OperationalError):  # it may have closed meanwhile
                cur.execute(f"KILL CONNECTION {pid}")
                killed += 1
        cur.close()
    assert killed >= 3
    h.wait(lambda: h.ended() >= set(ids), timeout=40, what="every message handled")
    more = publish_many(h, keys, 5, prefix="after")
    h.wait(lambda: h.acked() == len(ids) + len(more), timeout=40, what="every message acked")
    assert h.ended() == set(ids) | set(more)
    assert w.alive()


# 10 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("same_key", [True, False], ids=["same-key", "other-key"])
def test_delayed_message_waits_its_time(h, same_key):
    later_key = "k" if same_key else "k2"
    publish_many(h, ["k", "k2"], 1, prefix="warm")  # the partitions exist, leased and running
    h.spawn("A", lease=3, batch_size=10)
    h.wait(lambda: h.acked() == 2, timeout=20, what="the warm-up messages")
    published = time.time() * 1000
    h.client.publish(TOPIC, b"delayed", key="k", id="delayed", delay=2.0)
    h.client.publish(TOPIC, b"now", key=later_key, id="now")
    h.wait(lambda: h.acked() == 4, timeout=20, what="both messages acked")
    (delayed,) = h.events("msg_id = 'delayed' AND event = 'start'")
    (now,) = h.events("msg_id = 'now' AND event = 'start'")
    assert now["id"] < delayed["id"], "the undelayed message waited for the delayed one"
    assert delayed["at_ms"] >= published + 2000 - 5, (
        f"delivered {delayed['at_ms'] - published:.0f} ms after publish, before its delay"
    )


# 7b -------------------------------------------------------------------------------------------


def test_graceful_stop_releases_what_a_fetch_in_flight_returns(h):
    """A fetch still running when stop() begins: what it returns was never started, so it must be
    released like the rest of the buffer (visible at once, no attempt charged)."""
    publish_many(h, ["k"], 1, prefix="warm")
    opts = {"lease": 3, "visibility": 4, "batch_size": 5}
    a = h.spawn("A", **opts)
    h.wait(lambda: h.acked() == 1, timeout=20, what="the warm-up message")
    # hold the group's offsets row: A's next fetch waits on it, after its lease check
    locker = h.db.connect()
    cur = locker.cursor()
    cur.execute("START TRANSACTION")
    cur.execute("SELECT * FROM queue_offsets WHERE group_name = 'g1' FOR UPDATE")
    cur.fetchall()
    ids = publish_many(h, ["k"], 3)

    waiting_since: dict[int, float] = {}

    def fetch_waiting() -> bool:
        # (PROCESSLIST, not INNODB_TRX: that one is a cache not refreshed while polled often;
        # seen at every poll for 300 ms, as MySQL's PROCESSLIST has no time_ms column)
        now = time.monotonic()
        found = {
            r["id"]
            for r in h.sql(
                "SELECT id FROM information_schema.PROCESSLIST WHERE db = %s AND info LIKE %s",
                h.db.name,
                "%FROM queue_offsets%FOR UPDATE%",
            )
        }
        for pid in set(waiting_since) - found:
            del waiting_since[pid]
        for pid in found:
            waiting_since.setdefault(pid, now)
        return any(now - since > 0.3 for since in waiting_since.values())

    try:
        h.wait(fetch_waiting, timeout=15, what="A's fetch to wait on the offsets row")
        a.signal(signal.SIGTERM)
        # today's driver deregisters while that fetch still waits; one that lets the fetch end
        # first would not, so give up waiting for that after 3 s (A stops within milliseconds)
        signalled = time.monotonic()
        h.wait(
            lambda: (
                time.monotonic() > signalled + 3
                or not h.sql("SELECT 1 FROM queue_subscriber_heartbeats WHERE subscriber = 'A'")
            ),
            timeout=20,
            what="A to deregister",
        )
    finally:
        locker.rollback()
    assert h.exited(a) == 0, a.tail()
    h.spawn("B", **opts)
    h.wait(lambda: h.acked() == 4, timeout=30, what="every message acked")
    # attempt 1: A released them; left in flight they would come back after the visibility
    # timeout (4 s) as attempt 2
    starts = h.events("event = 'start' AND msg_id IN %s", ids)
    assert [(e["worker"], e["attempt"]) for e in starts] == [("B", 1)] * 3, (
        f"messages fetched while A stopped were charged an attempt: {starts}; A: {a.stats()}"
    )


# 11 -------------------------------------------------------------------------------------------


def _leases(h: Harness) -> dict[int, tuple[str | None, int]]:
    """Every lease row of g1: holder (expired or not) and epoch."""
    return {
        int(r["partition_id"]): (r["leased_by"], int(r["lease_epoch"]))
        for r in h.sql(
            "SELECT partition_id, leased_by, lease_epoch FROM queue_partition_leases "
            "WHERE group_name = 'g1'"
        )
    }


def _settled(h: Harness, members: list[str], partitions: int) -> dict[int, tuple[str | None, int]]:
    """Wait for a converged fair share among ``members`` (each live lease with one of them,
    floor or ceil of P/S each) that two more lease ticks of every member leave as it is."""
    floor, extra = divmod(partitions, len(members))
    fair = sorted([floor + 1] * extra + [floor] * (len(members) - extra))

    def converged() -> dict | None:
        held = h.holdings()
        if set(held) - set(members) or sorted(held.get(m, 0) for m in members) != fair:
            return None
        before = _leases(h)
        h.wait_ticks(members, rounds=2)
        return before if _leases(h) == before and h.holdings() == held else None

    return h.wait(converged, timeout=60, what=f"a stable fair share among {members}")


def test_sigstop_past_the_lease_then_sigcont_moves_only_what_fair_share_needs(h):
    """G15 with real processes: A, B and C share 7 partitions; A is stopped past its lease, B and
    C take its partitions; A continues and gets its share back. Each step moves the fewest
    partitions a fair share allows: A's own when it is away, then 2 (the one of B and C holding 4
    keeps 3, the other keeps 2), where ranking by name alone would give A the extra partition
    and move 3. A partition that stays with its holder is never handed over meanwhile."""
    keys = [f"k{i}" for i in range(7)]
    publish_many(h, keys, 1)
    members = ["A", "B", "C"]
    workers = {n: h.spawn(n, lease=3) for n in members}
    h.wait(lambda: h.acked() == 7, timeout=30, what="every message acked")
    s0 = _settled(h, members, 7)
    away = {pid for pid, (holder, _) in s0.items() if holder == "A"}

    workers["A"].signal(signal.SIGSTOP)
    try:
        s1 = _settled(h, ["B", "C"], 7)
    finally:
        workers["A"].signal(signal.SIGCONT)
    s2 = _settled(h, members, 7)

    def moved(a: dict, b: dict) -> set[int]:
        return {pid for pid in a if a[pid][0] != b[pid][0]}

    def kept_epochs(a: dict, b: dict) -> None:
        for pid in set(a) - moved(a, b):
            assert a[pid][1] == b[pid][1], f"partition {pid} was handed over and back"

    assert moved(s0, s1) == away, (s0, s1)
    kept_epochs(s0, s1)
    assert len(moved(s1, s2)) == 2, (s1, s2)
    assert {s2[pid][0] for pid in moved(s1, s2)} == {"A"}
    kept_epochs(s1, s2)
    assert all(w.alive() for w in workers.values())
