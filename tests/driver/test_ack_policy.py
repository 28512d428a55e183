"""Ack policies and retry strategies on a real server (issue 12): what a subscriber sends after a
handler returns, raises or is given up, and how long a failed message waits (the database's
clock holds it back: the delay goes into the nack)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from helpers.support import rows, scalar, wait_until

import mysqlq
from mysqlq import AckPolicy, retry


class Runs:
    """Every handler run: (id, attempt, monotonic start)."""

    def __init__(self, fail: bool = True) -> None:
        self.fail = fail
        self.seen: list[tuple[str, int, float]] = []
        self.lock = threading.Lock()

    def __call__(self, msg: mysqlq.Message) -> None:
        with self.lock:
            self.seen.append((msg.id, msg.attempt, time.monotonic()))
        if self.fail:
            raise RuntimeError(f"boom {msg.attempt}")

    def attempts(self) -> list[int]:
        return [a for _, a, _ in self.seen]


def publish(dsn: str, n: int = 1, topic: str = "t") -> None:
    with mysqlq.connect(dsn) as client:
        for i in range(1, n + 1):
            client.publish(topic, f"m{i}".encode(), key="k", id=f"m-{i}")


def subscriber(dsn: str, handler, **kw) -> mysqlq.Subscriber:
    kw.setdefault("max_attempts", 5)
    return mysqlq.Subscriber(
        dsn, topic="t", group="g", handler=handler, maintenance_interval=None, **kw
    )


def dead_letters(conn) -> list[dict]:
    return rows(
        conn,
        "SELECT origin_message_id AS id, failures, last_error FROM queue_messages"
        " WHERE origin_topic = 't' ORDER BY msg_offset",
    )


def acked(conn) -> int:
    return int(
        scalar(
            conn, "SELECT COALESCE(MAX(offset_acked), 0) FROM queue_offsets WHERE group_name='g'"
        )
    )


def test_nack_on_error_waits_the_strategys_delay_then_dead_letters(dsn, conn) -> None:
    """Constant(0.4) and max_attempts 3: three runs, each at least 0.4 s after the last (the
    database held the message back), then the DLQ with the last error."""
    publish(dsn)
    runs = Runs()
    sub = subscriber(dsn, runs, max_attempts=3, retry=retry.Constant(0.4), poll_interval=0.05)
    sub.start()
    try:
        wait_until(lambda: dead_letters(conn), what="the dead letter")
    finally:
        sub.stop()
    assert runs.attempts() == [1, 2, 3]
    starts = [t for _, _, t in runs.seen]
    assert all(b - a >= 0.38 for a, b in itertools.pairwise(starts)), starts
    (dl,) = dead_letters(conn)
    assert dl["failures"] == 3 and dl["last_error"] == "RuntimeError: boom 3"


def test_no_retry_dead_letters_at_the_first_failure(dsn, conn) -> None:
    publish(dsn)
    runs = Runs()
    sub = subscriber(dsn, runs, retry=retry.NoRetry()).start()
    try:
        wait_until(lambda: dead_letters(conn), what="the dead letter")
    finally:
        sub.stop()
    assert runs.attempts() == [1]
    (dl,) = dead_letters(conn)
    assert dl["failures"] == 1 and dl["last_error"] == "RuntimeError: boom 1"


def test_max_total_delay_dead_letters_once_the_delays_would_pass_it(dsn, conn) -> None:
    """Constant(0.2, max_total_delay=0.5): delays 0.2 and 0.4 fit, 0.6 does not: three runs, far
    below max_attempts 10."""
    publish(dsn)
    runs = Runs()
    strategy = retry.Constant(0.2, max_total_delay=0.5)
    sub = subscriber(dsn, runs, max_attempts=10, retry=strategy, poll_interval=0.05).start()
    try:
        wait_until(lambda: dead_letters(conn), what="the dead letter")
    finally:
        sub.stop()
    assert runs.attempts() == [1, 2, 3]
    assert dead_letters(conn)[0]["failures"] == 3


def test_ack_acks_whether_the_handler_raised_or_not(dsn, conn) -> None:
    publish(dsn, 2)
    runs = Runs()
    sub = subscriber(dsn, runs, ack_policy=AckPolicy.ACK).start()
    try:
        wait_until(lambda: acked(conn) == 2, what="both acked")
    finally:
        sub.stop()
    assert runs.attempts() == [1, 1] and dead_letters(conn) == []
    assert sub.stats()["handler_errors"] == 2 and sub.stats()["acked"] == 2


def test_reject_on_error_dead_letters_at_once_and_acks_a_return(dsn, conn) -> None:
    publish(dsn, 2)
    seen: list[str] = []

    def handler(msg: mysqlq.Message) -> None:
        seen.append(msg.id)
        if msg.id == "m-1":
            raise ValueError("bad order")

    sub = subscriber(dsn, handler, ack_policy="reject_on_error").start()
    try:
        wait_until(lambda: dead_letters(conn) and acked(conn) == 2, what="m-1 dead, m-2 acked")
    finally:
        sub.stop()
    assert seen == ["m-1", "m-2"]
    (dl,) = dead_letters(conn)
    assert dl["id"] == "m-1" and dl["failures"] == 1 and dl["last_error"] == "ValueError: bad order"


def test_ack_first_acks_before_the_handler_runs_and_never_reruns(dsn, conn, connect) -> None:
    """The watermark has moved when the handler starts (the ack is committed first); a handler
    that raises is not run again: at most once."""
    publish(dsn)
    other = connect()
    seen_acked: list[int] = []

    def handler(msg: mysqlq.Message) -> None:
        seen_acked.append(acked(other))
        raise RuntimeError("lost, as at-most-once allows")

    sub = subscriber(dsn, handler, ack_policy=AckPolicy.ACK_FIRST, visibility_timeout=1).start()
    try:
        wait_until(lambda: seen_acked, what="the handler")
        # past its visibility timeout: nothing comes back
        time.sleep(1.5)
    finally:
        sub.stop()
    assert seen_acked == [1]
    assert acked(conn) == 1 and dead_letters(conn) == []


def test_manual_sends_only_what_the_handler_settles(dsn, conn) -> None:
    """The handler returns without settling: the message comes back after its visibility
    timeout, as attempt 2, and the handler acks it then."""
    publish(dsn, 1)
    seen: list[int] = []

    def handler(msg: mysqlq.Message) -> None:
        seen.append(msg.attempt)
        if msg.attempt == 2:
            msg.ack()

    sub = subscriber(
        dsn, handler, ack_policy=AckPolicy.MANUAL, visibility_timeout=1, batch_size=1
    ).start()
    try:
        wait_until(lambda: acked(conn) == 1, timeout=30, what="the manual ack")
    finally:
        sub.stop()
    assert seen == [1, 2]


def test_a_given_up_handler_follows_the_policy(dsn, conn) -> None:
    """REJECT_ON_ERROR: a handler past max_handler_time is a failure: dead-lettered at once."""
    publish(dsn)
    release = threading.Event()

    def handler(msg: mysqlq.Message) -> None:
        release.wait(30)

    sub = subscriber(
        dsn, handler, ack_policy=AckPolicy.REJECT_ON_ERROR, max_handler_time=0.5
    ).start()
    try:
        wait_until(lambda: dead_letters(conn), what="the dead letter")
    finally:
        release.set()
        sub.stop()
    (dl,) = dead_letters(conn)
    assert dl["failures"] == 1 and "max_handler_time" in dl["last_error"]


def test_bad_arguments_are_refused(dsn) -> None:
    with pytest.raises(mysqlq.InvalidArgument, match="ack_policy must be one of"):
        subscriber(dsn, print, ack_policy="sometimes")
    with pytest.raises(mysqlq.InvalidArgument, match=r"retry must be a mysqlq\.retry strategy"):
        subscriber(dsn, print, retry=3)
    with pytest.raises(mysqlq.InvalidArgument, match="not both"):
        subscriber(dsn, print, retry=retry.Constant(1), retry_backoff=2.0)
