"""The incremental cooperative assignor's properties, played over JoinGroup/SyncGroup rounds in memory.

Each round the members send their allocation (encoded as in JoinGroup metadata) and hold what the
leader assigned them (decoded from SyncGroup); a round that revokes is followed by another at once, one
that holds lost work back by another once the clock passed the delay (as the workers rejoin).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from support.assignorkit import owners_of

from headwater.connect.herder.assignor import IncrementalAssignor, Item, balanced_shares
from headwater.connect.herder.protocol import (
    CONNECTOR_TASK,
    Assignment,
    MemberMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

DELAY_MS = 1000


@dataclass
class Group:
    connectors: dict[str, int]
    assignor: IncrementalAssignor = field(default_factory=lambda: IncrementalAssignor(DELAY_MS))
    members: dict[str, Assignment | None] = field(default_factory=dict)
    now: float = 100.0
    revoked: list[tuple[Item, str]] = field(default_factory=list)  # every revocation, in order
    rounds: int = 0

    def add(self, *names: str) -> None:
        for n in names:
            self.members[n] = None

    def owners(self) -> dict[Item, str]:
        return owners_of(self.members)

    def round(self) -> tuple[bool, int]:
        meta = {m: decode_metadata(encode_metadata(MemberMetadata(f"http://{m}", 0, a)))
                for m, a in self.members.items()}
        result = self.assignor.assign(min(meta), "http://leader", 0, meta, self.connectors, now=self.now)
        assert set(result) == set(self.members)
        revoked, delay = False, 0
        for m, a in result.items():
            a = decode_assignment(encode_assignment(a))
            for c, tasks in a.revoked.items():
                for t in tasks:
                    self.revoked.append(((c, t), m))
                    revoked = True
            delay = max(delay, a.delay_ms)
            self.members[m] = a
        self.rounds += 1
        self.owners()  # nothing is held twice, in any round
        return revoked, delay

    def settle(self) -> None:
        for _ in range(20):
            revoked, delay = self.round()
            if revoked:
                continue
            if not delay:
                return
            self.now += delay / 1000
        raise AssertionError("the group did not settle in 20 rounds")

    def every(self) -> set[Item]:
        return {(c, CONNECTOR_TASK) for c in self.connectors} | {
            (c, t) for c, n in self.connectors.items() for t in range(n)}

    def spread(self, connectors: bool) -> int:
        loads = {m: 0 for m in self.members}
        for (_, t), m in self.owners().items():
            if (t == CONNECTOR_TASK) == connectors:
                loads[m] += 1
        return max(loads.values()) - min(loads.values())

    def assert_settled_and_balanced(self) -> None:
        assert set(self.owners()) == self.every(), "everything is held once settled"
        assert self.spread(connectors=False) <= 1 and self.spread(connectors=True) <= 1


def group_of(workers: int, connectors: int = 40, tasks: int = 10) -> Group:
    g = Group({f"c{i:03d}": tasks for i in range(connectors)})
    g.add(*(f"w{i:02d}" for i in range(workers)))
    g.settle()
    g.revoked.clear()
    g.rounds = 0
    return g


def moved(before: dict[Item, str], after: dict[Item, str]) -> int:
    return sum(1 for i, m in after.items() if before.get(i) != m)


def test_start_assigns_everything_once_and_balanced() -> None:
    g = Group({f"c{i:03d}": 10 for i in range(40)})
    g.add(*(f"w{i}" for i in range(7)))
    g.settle()
    g.assert_settled_and_balanced()
    assert g.rounds == 1 and not g.revoked


@pytest.mark.parametrize("joining", [1, 3])
def test_join_moves_only_the_excess_and_restarts_nothing_kept(joining: int) -> None:
    g = group_of(6)  # 400 tasks over 6: 67 or 66 each; 40 connectors: 7 or 6
    before = g.owners()
    g.add(*(f"new{i}" for i in range(joining)))
    g.settle()
    g.assert_settled_and_balanced()
    after = g.owners()
    # The ideal: each old member gives up only what is above its new balanced share.
    ideal = 0
    for connectors in (True, False):
        loads = {m: sum(1 for (_, t), o in before.items() if o == m and (t == CONNECTOR_TASK) == connectors)
                 for m in g.members}
        total = sum(loads.values())
        ideal += sum(max(0, loads[m] - s) for m, s in balanced_shares(loads, total).items())
    assert moved(before, after) == ideal
    assert all(after[i].startswith("new") for i in after if before[i] != after[i]), "work moved only to newcomers"
    assert all(after[i] != m for i, m in g.revoked), "a revoked item came back to the member that stopped it"
    assert g.rounds == 2  # revoke, then assign


def test_leave_holds_lost_work_for_the_delay_then_moves_only_it() -> None:
    g = group_of(5)
    before = g.owners()
    gone = "w02"
    lost = {i for i, m in before.items() if m == gone}
    del g.members[gone]

    revoked, delay = g.round()
    assert not revoked and 0 < delay <= DELAY_MS
    held = g.owners()
    assert not lost & set(held), "lost work is held back during the delay"
    assert all(held[i] == m for i, m in before.items() if m != gone), "nothing else moved meanwhile"

    g.now += delay / 1000
    g.settle()
    g.assert_settled_and_balanced()
    after = g.owners()
    assert moved(before, after) == len(lost)
    assert not g.revoked


def test_replacement_within_the_delay_takes_the_lost_work_and_nobody_elses() -> None:
    g = group_of(5)
    before = g.owners()
    lost = {i for i, m in before.items() if m == "w04"}
    del g.members["w04"]
    assert g.round()[1] > 0
    g.add("w05")  # a new member id: the restarted worker
    g.now += 0.2
    g.settle()
    g.assert_settled_and_balanced()
    after = g.owners()
    assert {i for i, m in after.items() if m == "w05"} == lost
    assert moved(before, after) == len(lost) and not g.revoked


def test_removed_and_added_connectors() -> None:
    g = group_of(4, connectors=12, tasks=3)
    before = g.owners()
    del g.connectors["c005"]
    g.connectors["c100"] = 5
    g.settle()
    g.assert_settled_and_balanced()
    after = g.owners()
    assert not any(c == "c005" for c, _ in after)
    kept = {i: m for i, m in before.items() if i[0] != "c005"}
    # only the new connector's items, and what rebalancing needs, are placed anew
    assert sum(1 for i, m in kept.items() if after[i] != m) <= 2


def test_an_item_held_twice_is_revoked_from_one() -> None:
    g = group_of(3, connectors=3, tasks=2)
    owners = g.owners()
    item = next(i for i, m in owners.items() if m == "w00" and i[1] != CONNECTOR_TASK)
    w1 = g.members["w01"]
    assert w1 is not None
    w1.assigned.setdefault(item[0], []).append(item[1])  # w01 claims it too (e.g. a stale leader's round)
    revoked, _ = g.round()
    assert revoked and (item, "w01") in g.revoked
    g.settle()
    g.assert_settled_and_balanced()


def test_ten_thousand_tasks_over_a_hundred_workers_in_a_fraction_of_a_second() -> None:
    # The assignor runs on the leader's loop at each rebalance: its time is the group's pause.
    g = Group({f"c{i:04d}": 10 for i in range(1000)})
    g.add(*(f"w{i:03d}" for i in range(100)))
    meta = {m: MemberMetadata(f"http://{m}", 0, None) for m in g.members}
    start = time.perf_counter()
    result = g.assignor.assign("w000", "http://leader", 0, meta, g.connectors, now=g.now)
    elapsed = time.perf_counter() - start
    assert sum(len(a.tasks()) for a in result.values()) == 10_000
    assert elapsed < 3.0, f"one round took {elapsed:.2f}s"
