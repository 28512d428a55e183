"""Procedure bugs found by the reliability work, each pinned by a test (see docs/reliability.md).

G6: queue_fetch takes its clock when the call starts, then waits for the partition's offsets
lock. A release (or a nack without delay) committed in between used to be stamped visible at its
own, later, clock: the fetch saw the cursor batch settled but the message not yet due and started
the next batch past it (offset n+1 before n with batch_size=1; seen in the long chaos run). Such a
row is now due at once (invisible_until = 0). Here the two clocks are injected.
"""

from __future__ import annotations

from helpers.support import Consumer, publish, server_now


def test_fetch_never_passes_a_message_released_after_its_clock(conn) -> None:
    for i in range(1, 4):
        publish(conn, "orders", "k", f"m{i}", b"x")
    c = Consumer(conn, "strict", "orders", "s1", batch_size=1, lease_ms=600_000)
    c.subscribe()
    c.tick()
    t0 = server_now(conn)
    first = c.fetch(now=t0)
    assert [m["offset"] for m in first] == [1]
    # the handler never started: the subscriber gives the message back (at t0 + 5 ms) ...
    c.release_messages(first, now=t0 + 5)
    # ... while a fetch whose clock was read at t0 + 1 waited for the partition's lock
    second = c.fetch(now=t0 + 1)
    assert [m["offset"] for m in second] in ([], [1]), (
        f"strict order broken: {[m['offset'] for m in second]} delivered while 1 is pending"
    )
