"""Procedure bugs found by the reliability work, each pinned by a test that fails today.

The procedures belong to another line of work; these tests are marked ``xfail(strict=True)`` so
that the fix turns them into failures to remove the marker from (see docs/reliability.md).
"""

from __future__ import annotations

import pytest
from support import Consumer, publish, server_now


@pytest.mark.xfail(
    strict=True,
    reason=(
        "G6: queue_fetch takes its clock (v_now) when the call starts, but waits for the "
        "partition's queue_offsets lock and then reads committed state. A release (or nack "
        "with delay 0) committed in between is stamped later than v_now, so the fetch sees "
        "cursor_pending = 0 but the released message not yet due, and starts the next cursor "
        "batch past it: with batch_size=1 offset n+1 is delivered before n. Seen in the long "
        "chaos run (strict group, offsets 29/30 of one key); here the two clocks are injected."
    ),
)
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
