"""The settlement (mysqlq.settlement) on its own, without a server: what each outcome queues for
the flush loop, the ack policy and retry strategy after a handler, fencing of a handler that was
given up, and the subscriber's settings (mysqlq.settings) that both subscribers are built from.

What the queued outcomes do on a real server is the business of the other driver tests.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import pytest

import mysqlq
import mysqlq.aio
from mysqlq import retry
from mysqlq.batching import BatchHoldings
from mysqlq.flusher import Pending
from mysqlq.holdings import Holdings
from mysqlq.message import Message
from mysqlq.policy import AckPolicy
from mysqlq.settings import SubscriberSettings
from mysqlq.settlement import Settlement, clock
from mysqlq.tally import Tally

NOWHERE = "mysql://nobody@127.0.0.1:1/none"  # never connected to: the arguments fail first


class Queue:
    """The flusher's queue, as the settlement sees it."""

    def __init__(self) -> None:
        self.pending: list[Pending] = []

    def enqueue(self, pending: Pending) -> None:
        self.pending.append(pending)

    def sent(self) -> list[tuple]:
        return [(p.outcome, p.message.offset, p.delay_ms, p.error) for p in self.pending]


class NoSessions:
    def connection(self) -> Any:
        raise AssertionError("no connection in these tests")

    def discard(self) -> None:
        pass

    def transaction(self, message: Message, ack: Any) -> Any:
        raise AssertionError("no transaction in these tests")


def settlement(
    policy: AckPolicy = AckPolicy.NACK_ON_ERROR, strategy: retry.RetryStrategy | None = None
) -> tuple[Settlement, Queue, Holdings, Tally]:
    queue, holdings, tally = Queue(), Holdings(max_handler_time=60.0), Tally()
    s = Settlement(
        group="g",
        name="sub-1",
        policy=policy,
        retry=strategy or retry.Constant(2.0),
        max_handler_time=60.0,
        holdings=holdings,
        flusher=queue,  # type: ignore[arg-type]
        tally=tally,
        sessions=NoSessions(),
    )
    holdings.set_leases({7: 1}, time.monotonic() + 60)
    return s, queue, holdings, tally


def message(s: Settlement, offset: int = 1, attempt: int = 1) -> Message:
    row = {
        "topic": "t",
        "partition_key": "k",
        "offset": offset,
        "id": f"m-{offset}",
        "payload": b"x",
        "metadata": None,
        "attempt": attempt,
        "partition_id": 7,
        "token": 100 + offset,
        "published_at": 0,
        "visible_until": 0,
    }
    return Message.from_row(row, s)


def counts(tally: Tally) -> dict[str, int]:
    return tally.snapshot()[0]


def test_explicit_outcomes_are_queued_once_and_the_first_is_final() -> None:
    s, queue, _, _ = settlement()
    a, b, c = message(s, 1), message(s, 2), message(s, 3)
    a.ack()
    a.nack()  # after the ack: nothing more
    b.nack(delay=0.25, error="later")
    c.dead_letter("poison")
    message(s, 4).nack()  # no delay given: the retry strategy's
    assert queue.sent() == [
        ("ack", 1, 0, None),
        ("nack", 2, 250, "later"),
        ("dead_letter", 3, 0, "poison"),
        ("nack", 4, 2000, "nacked by handler"),
    ]
    assert a.settled and b.settled and c.settled


@pytest.mark.parametrize(
    ("policy", "failed", "expected"),
    [
        (AckPolicy.NACK_ON_ERROR, False, ("ack", 0, None)),
        (AckPolicy.NACK_ON_ERROR, True, ("nack", 2000, "ValueError: boom")),
        (AckPolicy.ACK, True, ("ack", 0, None)),
        (AckPolicy.REJECT_ON_ERROR, True, ("dead_letter", 0, "ValueError: boom")),
        (AckPolicy.MANUAL, False, None),
        (AckPolicy.MANUAL, True, None),
        (AckPolicy.ACK_FIRST, True, None),
    ],
)
def test_what_follows_a_handler_is_its_ack_policys(policy, failed, expected) -> None:
    s, queue, _, tally = settlement(policy)
    m = message(s)
    s.handled(m, clock(), ValueError("boom") if failed else None)
    sent = [(o, d, e) for o, _, d, e in queue.sent()]
    assert sent == ([expected] if expected else [])
    assert m.settled == (expected is not None)
    assert counts(tally).get("handler_errors", 0) == int(failed)
    assert tally.snapshot()[1] >= 0


def test_a_strategy_that_gives_up_dead_letters_and_a_handlers_own_outcome_wins() -> None:
    s, queue, _, _ = settlement(strategy=retry.NoRetry())
    s.handled(message(s, 1), clock(), RuntimeError("no"))
    settled_itself = message(s, 2)
    settled_itself.ack()
    s.handled(settled_itself, clock(), RuntimeError("raised after its ack"))
    assert queue.sent() == [("dead_letter", 1, 0, "RuntimeError: no"), ("ack", 2, 0, None)]


def test_a_given_up_handler_settles_nothing_more() -> None:
    s, queue, holdings, tally = settlement()
    m = message(s, attempt=2)
    ((pid, generation),) = holdings.add([m], time.monotonic() + 60)
    held, stale = holdings.take(pid, generation, False, time.monotonic(), worker="w1")
    assert held is not None and held.worker == "w1" and stale == []
    ((overdue, new_generation),) = holdings.overdue(time.monotonic() + 61)
    assert overdue is held and new_generation != generation
    s.give_up(m)
    m.ack()  # the handler, late: dropped
    m.extend(30)
    assert queue.sent() == [("nack", 1, 2000, "handler exceeded max_handler_time (60s)")]
    assert counts(tally)["given_up"] == 1 and counts(tally)["late_outcomes"] == 2


def test_extend_moves_the_give_up_deadline_and_checks_its_argument() -> None:
    s, queue, holdings, _ = settlement()
    m = message(s)
    ((pid, generation),) = holdings.add([m], time.monotonic() + 60)
    holdings.take(pid, generation, False, time.monotonic())
    m.extend(120)
    assert not holdings.overdue(time.monotonic() + 90)  # 60 s was its own; it asked for 120
    assert queue.sent() == [("extend", 1, 120_000, None)]
    with pytest.raises(mysqlq.InvalidArgument, match="seconds"):
        m.extend(0)


def test_what_follows_a_message_that_cannot_start_goes_back_with_it() -> None:
    """G6: message 1 (an earlier fetch) saw its visibility run out in the buffer, message 2 (a
    later fetch) has time left. 1 is not started, and 2 must not start before 1's next
    delivery: the runner gives 2 back too, and ends."""
    s, _, holdings, _ = settlement()
    now = time.monotonic()
    ((pid, generation),) = holdings.add([message(s, 1)], now + 1)
    assert holdings.add([message(s, 2)], now + 60) == []  # the same runner takes it
    held, stale = holdings.take(pid, generation, False, now + 2)
    assert held is None and [h.message.offset for h in stale] == [1, 2]
    assert holdings.buffered == 0 and holdings.running == 0
    assert holdings.take(pid, generation, False, now + 2) == (None, [])  # the runner ended
    # 1 and 2 come back in a later fetch: a new runner starts them, in order
    ((_, again),) = holdings.add([message(s, 1), message(s, 2)], now + 60)
    assert again != generation
    held, stale = holdings.take(pid, again, False, now + 2)
    assert held is not None and held.message.offset == 1 and stale == []


def test_a_batch_takes_nothing_after_a_message_that_cannot_start() -> None:
    """The batch handler's holdings: the same rule within one take."""
    s, _, _, _ = settlement()
    holdings = BatchHoldings(max_handler_time=60.0)
    holdings.set_leases({7: 1}, time.monotonic() + 60)
    now = time.monotonic()
    ((pid, generation),) = holdings.add([message(s, 1)], now + 1)
    holdings.add([message(s, 2), message(s, 3)], now + 60)
    run, stale, _ = holdings.take_batch([(pid, generation)], 10, now + 2, lambda held: held)
    assert run is None
    assert [h.message.offset for h in stale] == [1, 2, 3]


def test_releases_give_the_attempt_back_and_count_what_expired() -> None:
    s, queue, _, tally = settlement()
    s.expire(message(s, 1))
    s.release(message(s, 2))
    assert queue.sent() == [("release", 1, 0, None), ("release", 2, 0, None)]
    assert counts(tally) == {"expired_unstarted": 1}


def test_a_message_in_a_transaction_cannot_be_settled_twice() -> None:
    s, _, _, _ = settlement()
    m = message(s)
    m.ack()
    with pytest.raises(mysqlq.Error, match="already settled"):
        s.settle_in(m, "ack", conn=None)


# --------------------------------------------------------------------------- the settings


ARGUMENTS = {
    "dsn": None,
    "topic": inspect.Parameter.empty,
    "group": inspect.Parameter.empty,
    "handler": None,
    "handlers": None,
    "batch_handler": None,
    "batch_max": 100,
    "batch_wait": 0.05,
    "name": None,
    "batch_size": 10,
    "visibility_timeout": 60.0,
    "max_attempts": None,
    "lease_duration": 30.0,
    "rebalance_interval": 1.0,
    "max_buffered": None,
    "poll_interval": 0.1,
    "probe_interval": 0.01,
    "concurrency": 4,
    "retry_backoff": 1.0,
    "max_backoff": 300.0,
    "ack_policy": AckPolicy.NACK_ON_ERROR,
    "retry": None,
    "dlq_topic": None,
    "max_handler_time": 600.0,
    "maintenance_interval": 10.0,
    "metrics": None,
    "check_version": True,
}


@pytest.mark.parametrize("cls", [mysqlq.Subscriber, mysqlq.aio.Subscriber])
def test_both_subscribers_take_every_argument_with_its_default(cls) -> None:
    params = inspect.signature(cls).parameters
    assert {n: p.default for n, p in params.items()} == ARGUMENTS
    assert params["dsn"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in params.items() if n != "dsn")


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"concurrency": 2.5}, "concurrency"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"visibility_timeout": -1}, "visibility_timeout"),
        ({"max_buffered": 100_001}, "max_buffered"),
        ({"poll_interval": True}, "poll_interval"),
        ({"probe_interval": 0.0005}, "probe_interval must be between 0.001 and 1 s"),
        ({"probe_interval": 2}, "probe_interval"),
        ({"retry_backoff": -1}, "retry_backoff"),
        ({"ack_policy": "sometimes"}, "ack_policy"),
        ({"maintenance_interval": 0.5}, "maintenance_interval"),
        ({"handler": None}, "handler"),
    ],
)
@pytest.mark.parametrize("cls", [mysqlq.Subscriber, mysqlq.aio.Subscriber])
def test_bad_arguments_are_refused_before_the_database(cls, bad, named) -> None:
    args = {"topic": "t", "group": "g", "handler": print, **bad}
    with pytest.raises(mysqlq.InvalidArgument, match=named):
        cls(NOWHERE, **args)


def test_the_settings_complete_what_was_left_to_the_subscriber() -> None:
    s = SubscriberSettings(NOWHERE, topic="t", group="g", handlers={"*": print}, concurrency=2)
    assert s.ack_policy is AckPolicy.NACK_ON_ERROR and isinstance(s.retry, retry.Exponential)
    assert s.max_buffered == 2 * 10 * 8 and s.name and s.dsn == NOWHERE
    assert callable(s.handler) and s.handler is not print
    aio = mysqlq.aio.Subscriber(NOWHERE, topic="t", group="g", handler=print, name="n")
    assert (aio.name, aio.topic, aio.batch_size, aio.handler) == ("n", "t", 10, print)
    assert aio.settings.ack_policy is aio.ack_policy
    secret = SubscriberSettings(
        "mysql://app:sekr1t@127.0.0.1:1/db", topic="t", group="g", handler=print
    )
    assert "sekr1t" not in repr(secret) and "topic='t'" in repr(secret)
