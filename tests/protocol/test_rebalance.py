"""Sticky rebalance (G15): a join, a leave, a crash, a member coming back after others took its
partitions, and a restart under the same name move only the partitions fair share needs (G11).

The tests drive queue_acquire_leases and queue_deregister by hand with an injected clock. A group
is brought to a converged state (a whole round of ticks changes nothing), the membership changes,
and the group converges again. A **move** is a partition whose holder differs between the two
converged states. The minimum is what any fair assignment of the new members must move: every
partition of a member that left, plus what the members above their new share must give up when
the ceil(P/S) places go to those that hold the most. Each scenario runs twice on two groups of the
same topic, members ticking in name order in one and in reverse order in the other.
"""

from __future__ import annotations

import pytest
from helpers.support import call, publish, rows, server_now

TOPIC = "orders"
LEASE_MS = 10_000
STEP_MS = 1_000  # between two rounds of ticks: well inside the lease
ORDERS = {"fwd": False, "bwd": True}


def minimal_moves(before: dict[int, str | None], members: list[str]) -> int:
    """The fewest partitions whose holder must change to reach a fair share among ``members``
    from the holdings ``before``: each partition not held by a member (its holder left), and each
    one a member holds above its target, the ceil(P/S) targets going to the largest holders."""
    partitions, live = len(before), len(members)
    floor, extra = divmod(partitions, live)
    held = dict.fromkeys(members, 0)
    orphans = 0
    for holder in before.values():
        if holder in held:
            held[holder] += 1
        else:
            orphans += 1
    largest_first = sorted(held.values(), reverse=True)
    above = sum(
        max(0, n - (floor + 1 if i < extra else floor)) for i, n in enumerate(largest_first)
    )
    return orphans + above


def moves(before: dict[int, str | None], after: dict[int, str | None]) -> int:
    return sum(1 for pid in before if before[pid] != after[pid])


class Group:
    """One consumer group of TOPIC whose members tick by hand on an injected clock."""

    def __init__(self, conn, name: str, now: int, reverse: bool) -> None:
        self.conn = conn
        self.name = name
        self.now = now
        self.reverse = reverse
        self.expiry: dict[str, int] = {}
        call(conn, "queue_subscribe", name, TOPIC, None, None, None, None, now)

    # membership ---------------------------------------------------------------------------

    def subscribe(self, member: str) -> None:
        """What the driver does when a subscriber starts: a heartbeat, no lease yet."""
        call(self.conn, "queue_subscribe", self.name, TOPIC, member, None, None, LEASE_MS, self.now)

    def tick(self, member: str) -> list[dict]:
        held = call(self.conn, "queue_acquire_leases", self.name, TOPIC, member, LEASE_MS, self.now)
        self.expiry[member] = self.now + LEASE_MS
        return held

    def deregister(self, member: str) -> None:
        call(self.conn, "queue_deregister", self.name, TOPIC, member, self.now)

    # state --------------------------------------------------------------------------------

    def leases(self) -> dict[int, dict]:
        return {
            r["partition_id"]: r
            for r in rows(
                self.conn,
                "SELECT partition_id, leased_by, lease_epoch, expires_at "
                "FROM queue_partition_leases WHERE group_name = %s AND topic = %s",
                self.name,
                TOPIC,
            )
        }

    def holders(self) -> dict[int, str | None]:
        return {pid: r["leased_by"] for pid, r in self.leases().items()}

    def converge(
        self, members: list[str], until: int = 0, fair: bool = True, max_rounds: int = 40
    ) -> dict:
        """Tick every member once per round, STEP_MS apart, until a whole round changes nothing
        (and the clock has passed ``until``). Checks the converged state is a fair share (G11):
        every partition held by a member, each holding floor(P/S) or ceil(P/S)."""
        order = sorted(members, reverse=self.reverse)
        previous = None
        for _ in range(max_rounds):
            self.now += STEP_MS
            for member in order:
                self.tick(member)
            state = self.leases()
            # renewing moves expires_at each round; a change of holder moves the epoch
            seen = {pid: (r["leased_by"], r["lease_epoch"]) for pid, r in state.items()}
            if previous == seen and self.now >= until:
                if fair:
                    self.check_fair(members, state)
                return state
            previous = seen
        raise AssertionError(f"{self.name}: no converged state after {max_rounds} rounds")

    @staticmethod
    def check_fair(members: list[str], state: dict[int, dict]) -> None:
        counts = dict.fromkeys(members, 0)
        for pid, r in state.items():
            assert r["leased_by"] in counts, f"partition {pid} held by {r['leased_by']!r}"
            counts[r["leased_by"]] += 1
        floor, extra = divmod(len(state), len(members))
        assert sorted(counts.values(), reverse=True) == [floor + 1] * extra + [floor] * (
            len(members) - extra
        ), counts


def step(before: dict[int, dict], after: dict[int, dict], members: list[str]) -> tuple[int, int]:
    """(moves, minimum) between two converged states; a partition that kept its holder also kept
    its lease epoch: it was never given back and taken again on the way."""
    held_before = {pid: r["leased_by"] for pid, r in before.items()}
    held_after = {pid: r["leased_by"] for pid, r in after.items()}
    for pid in before:
        if held_before[pid] == held_after[pid]:
            assert before[pid]["lease_epoch"] == after[pid]["lease_epoch"], (
                f"partition {pid} stayed with {held_after[pid]} but changed hands meanwhile"
            )
    return moves(held_before, held_after), minimal_moves(held_before, members)


def names(n: int) -> list[str]:
    return [f"m{i}" for i in range(n)]


@pytest.fixture
def groups(conn):
    """Factory: ``groups(P)`` creates P partitions and returns two fresh groups, one ticking in
    name order and one in reverse."""

    def make(partitions: int) -> list[Group]:
        for i in range(partitions):
            publish(conn, TOPIC, f"key-{i:02d}", None, b"x")
        now = server_now(conn)
        return [Group(conn, name, now, reverse) for name, reverse in ORDERS.items()]

    return make


def start(group: Group, members: list[str]) -> dict[int, dict]:
    """Members joining one by one in the group's tick order, each converging before the next: a
    group that has lived (in the reverse group, the last name joined first and holds the most)."""
    joined = sorted(members, reverse=group.reverse)
    for i in range(1, len(joined) + 1):
        group.subscribe(joined[i - 1])
        state = group.converge(joined[:i])
    return state


# P partitions, S members (mostly P mod S != 0, and fewer partitions than members)
SHAPES = [(5, 2), (7, 3), (10, 4), (12, 5), (6, 3), (2, 3), (11, 4)]
SHAPE_IDS = [f"P{p}-S{s}" for p, s in SHAPES]


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
def test_join_moves_only_what_fair_share_needs(groups, partitions, size):
    for g in groups(partitions):
        members = names(size)
        before = start(g, members)
        g.subscribe("a-new")  # first by name
        after = g.converge([*members, "a-new"])
        moved, least = step(before, after, [*members, "a-new"])
        # the newcomer gets floor(P/(S+1)) partitions, and those are the only ones that move
        assert moved == least == partitions // (size + 1), (g.name, moved, least)
        assert moved == sum(1 for r in after.values() if r["leased_by"] == "a-new")


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
def test_graceful_leave_moves_only_the_leavers_partitions(groups, partitions, size):
    for g in groups(partitions):
        members = names(size)
        before = start(g, members)
        # the member holding the most leaves (the hardest case: its extra partition must go)
        leaver = max(members, key=lambda m: sum(r["leased_by"] == m for r in before.values()))
        g.deregister(leaver)
        rest = [m for m in members if m != leaver]
        after = g.converge(rest)
        moved, least = step(before, after, rest)
        assert moved == least == sum(r["leased_by"] == leaver for r in before.values())


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
def test_crash_moves_only_the_crashed_members_partitions(groups, partitions, size):
    for g in groups(partitions):
        members = names(size)
        before = start(g, members)
        crashed = members[0]
        rest = members[1:]
        # until its lease runs out nobody takes its partitions
        held = {pid for pid, r in before.items() if r["leased_by"] == crashed}
        mid = g.converge(rest, fair=False)
        assert g.now < g.expiry[crashed]
        assert {pid for pid, r in mid.items() if r["leased_by"] == crashed} == held
        after = g.converge(rest, until=g.expiry[crashed])
        moved, least = step(before, after, rest)
        assert moved == least == len(held)


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("comes_back", ["sigcont", "restart"])
def test_member_back_after_others_took_over_moves_only_its_new_share(
    groups, partitions, size, comes_back
):
    """SIGCONT after the heartbeat expired (the member just ticks again) or a restart under the
    same name (queue_subscribe, then ticks): the others took all its partitions meanwhile."""
    for g in groups(partitions):
        members = names(size)
        start(g, members)
        away = members[0]
        rest = members[1:]
        taken = g.converge(rest, until=g.expiry[away])
        assert all(r["leased_by"] != away for r in taken.values())
        if comes_back == "restart":
            g.subscribe(away)
        after = g.converge(members)
        moved, least = step(taken, after, members)
        assert moved == least, (g.name, moved, least)
        assert moved == sum(r["leased_by"] == away for r in after.values())


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
def test_restart_under_the_same_name_within_the_lease_moves_nothing(groups, partitions, size):
    for g in groups(partitions):
        members = names(size)
        before = start(g, members)
        g.subscribe(members[0])
        after = g.converge(members)
        assert step(before, after, members) == (0, 0)


@pytest.mark.parametrize(("partitions", "size"), SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("joining", [False, True], ids=["alone", "with-a-join"])
def test_restart_after_the_lease_ran_out_before_a_takeover(groups, partitions, size, joining):
    """The member's leases expired but nobody ticked in between: its queue_subscribe makes it
    live again before the others' next tick, so the others see it holding its partitions (a
    lease nobody took over is still its holder's) and take none of them: nothing moves. With a
    member joining at the same moment, the newcomer's share comes from those above their new
    share, not from the late member's expired leases within its own."""
    for g in groups(partitions):
        members = names(size)
        before = start(g, members)
        # the member holding the most: were it taken for one holding nothing, another member
        # would take its extra partition
        away = max(members, key=lambda m: sum(r["leased_by"] == m for r in before.values()))
        rest = [m for m in members if m != away]
        g.now = g.expiry[away] - 1
        for m in rest:
            g.tick(m)
        g.now = g.expiry[away] + 1  # its leases and heartbeat ran out a moment ago
        g.subscribe(away)
        if joining:
            g.subscribe("a-new")
            rest = ["a-new", *rest]
            members = [*members, "a-new"]
        for m in rest:  # the others tick first
            g.tick(m)
        after = g.converge(members)
        moved, least = step(before, after, members)
        assert moved == least
        if not joining:
            assert moved == 0


def test_the_example_of_issue_11(groups):
    """P=5, A and B: A3/B2; A stops and B takes all 5; A returns: 2 move (B keeps 3), not 3."""
    for g in groups(5):
        g.subscribe("A")
        g.converge(["A"])
        g.subscribe("B")
        before = g.converge(["A", "B"])
        assert sorted(r["leased_by"] for r in before.values()) == ["A", "A", "A", "B", "B"]
        taken = g.converge(["B"], until=g.expiry["A"])
        assert step(before, taken, ["B"]) == (3, 3)
        after = g.converge(["A", "B"])
        assert step(taken, after, ["A", "B"]) == (2, 2)
        assert sorted(r["leased_by"] for r in after.values()) == ["A", "A", "B", "B", "B"]


def test_a_live_member_late_renewing_keeps_its_share_and_gives_up_only_the_rest(conn, groups):
    """A member whose heartbeat is kept (queue_heartbeat) while its lease tick is late: its
    expired leases are taken only above its share; the ones within its share stay its own."""
    (g, _) = groups(6)
    g.subscribe("a")
    g.converge(["a"])
    g.now = g.expiry["a"] + 1
    call(conn, "queue_heartbeat", g.name, TOPIC, "a", LEASE_MS, g.now)
    g.subscribe("b")
    held = g.tick("b")
    assert len(held) == 3
    holders = g.holders()
    assert sorted(holders.values()) == ["a", "a", "a", "b", "b", "b"]
    assert all(r["expires_at"] <= g.now for r in g.leases().values() if r["leased_by"] == "a")
    # a's next tick renews the rest: nothing more moves
    after = g.converge(["a", "b"])
    assert {pid: r["leased_by"] for pid, r in after.items()} == holders


def test_simultaneous_join_and_leave(groups):
    """Several changes between two converged states: still only what fair share needs."""
    for g in groups(11):
        members = names(4)
        before = start(g, members)
        g.deregister("m1")
        g.subscribe("x")
        g.subscribe("y")
        now = ["m0", "m2", "m3", "x", "y"]
        after = g.converge(now)
        moved, least = step(before, after, now)
        assert moved == least
