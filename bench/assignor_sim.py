"""On paper: the distributed herder's IncrementalAssignor (KIP-415) for many workers and tasks.

No broker and no worker: the group protocol's rounds are played in memory. Each round, every member
sends its current allocation (encoded and decoded as in JoinGroup metadata); the leader's assignor
answers each member (encoded and decoded as in SyncGroup); a member then holds what it was assigned.
A round that revokes something is followed by another (the members rejoin at once), and a round
that holds lost work back (``delay_ms``) by another once the simulated clock has passed the delay,
as the workers do. "Settled" means a round revoking nothing and holding nothing back.

Scenarios, in order, on ``--connectors`` connectors x ``--tasks-per-connector`` tasks:

- ``start``: ``--workers`` workers join an empty group together.
- ``join``: one worker joins; ``join10``: ten join at once.
- ``leave``: one worker leaves (or dies); its work is held for ``scheduled.rebalance.max.delay.ms``,
  then reassigned. ``leave10``: ten leave at once.
- ``bounce``: a worker dies and a new one joins within the delay: the lost work goes to the newcomer.
- ``connector+``: a connector is added; ``connector-``: one is removed.

Per scenario: the rounds until settled, the assignor's time per round (the largest and the mean),
the tasks (and connector instances) moved from one worker to another, the *ideal* (what must move for a
balance within 1: the departed worker's work on a leave, the excess over the balanced share on a join),
how many were stopped on a worker that then got them back (a restart on a worker that keeps them;
must be 0), the balance after settling (max - min per worker, tasks and connectors), and the
wire size of the largest round's SyncGroup assignments and JoinGroup metadata together.
Invariants checked in every round: nothing is held by two members, and after settling everything is held.

    .venv/bin/python bench/assignor_sim.py [--workers 100] [--connectors 1000] [--tasks-per-connector 10]
        [--against REV]   # also run the assignor of git revision REV (e.g. main) on the same scenarios
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.assignorkit import owners_of  # noqa: E402

from headwater.connect.herder.protocol import (  # noqa: E402
    CONNECTOR_TASK,
    Assignment,
    MemberMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

DELAY_MS = 1000
MAX_ROUNDS = 50
Item = tuple[str, int]


def load_assignor(rev: str | None) -> type:
    """This tree's IncrementalAssignor, or the one of git revision ``rev``."""
    if rev is None:
        from headwater.connect.herder.assignor import IncrementalAssignor
        return IncrementalAssignor
    source = subprocess.run(["git", "show", f"{rev}:connect/herder/assignor.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "assignor_at_rev.py"
    path.write_text(source)
    # a module of the herder package, so its relative import of .protocol resolves
    spec = importlib.util.spec_from_file_location("headwater.connect.herder._assignor_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.IncrementalAssignor


@dataclass
class Figures:
    scenario: str
    rounds: int = 0
    times_ms: list[float] = field(default_factory=list)
    moved: int = 0
    ideal: int = 0
    restarted_on_keeper: int = 0
    balance_tasks: int = 0
    balance_connectors: int = 0
    wire_bytes: int = 0
    waited_ms: int = 0  # simulated time spent holding lost work back


@dataclass
class Group:
    assignor: Any
    connectors: dict[str, int]
    members: dict[str, Assignment | None] = field(default_factory=dict)
    now: float = 0.0
    _next: int = 0

    def add(self, count: int) -> None:
        for _ in range(count):
            self.members[f"worker-{self._next:04d}"] = None
            self._next += 1

    def owners(self) -> dict[Item, str]:
        return owners_of(self.members)

    def round(self, figures: Figures, revoked_from: dict[Item, set[str]]) -> tuple[bool, int]:
        """One JoinGroup/SyncGroup round; returns (anything revoked, delay_ms)."""
        metadata = {m: encode_metadata(MemberMetadata(f"http://{m}", 0, a)) for m, a in self.members.items()}
        decoded = {m: decode_metadata(raw) for m, raw in metadata.items()}
        leader = min(self.members)
        start = time.perf_counter()
        result = self.assignor.assign(leader, f"http://{leader}", 0, decoded, self.connectors, now=self.now)
        figures.times_ms.append((time.perf_counter() - start) * 1000)
        encoded = {m: encode_assignment(a) for m, a in result.items()}
        figures.wire_bytes = max(figures.wire_bytes, sum(map(len, encoded.values())) + sum(map(len, metadata.values())))
        revoked, delay = False, 0
        for m, raw in encoded.items():
            a = decode_assignment(raw)
            for c, tasks in a.revoked.items():
                for t in tasks:
                    revoked_from.setdefault((c, t), set()).add(m)
                    revoked = True
            delay = max(delay, a.delay_ms)
            self.members[m] = a
        figures.rounds += 1
        self.owners()  # nothing held twice
        return revoked, delay

    def settle(self, figures: Figures) -> Figures:
        before = self.owners()
        revoked_from: dict[Item, set[str]] = {}
        for _ in range(MAX_ROUNDS):
            revoked, delay = self.round(figures, revoked_from)
            if revoked:
                continue
            if delay:
                self.now += delay / 1000
                figures.waited_ms += delay
                continue
            break
        else:
            raise AssertionError(f"{figures.scenario}: not settled after {MAX_ROUNDS} rounds")
        after = self.owners()
        every = {(c, CONNECTOR_TASK) for c in self.connectors} | {
            (c, t) for c, n in self.connectors.items() for t in range(n)}
        assert set(after) == every, f"{figures.scenario}: {len(every - set(after))} items unassigned after settling"
        figures.moved = sum(1 for i, m in after.items() if before.get(i) != m)
        figures.restarted_on_keeper = sum(1 for i, ms in revoked_from.items() if after.get(i) in ms)
        for is_connector in (False, True):
            loads = {m: 0 for m in self.members}
            for (_, t), m in after.items():
                if (t == CONNECTOR_TASK) == is_connector:
                    loads[m] += 1
            spread = max(loads.values()) - min(loads.values())
            if is_connector:
                figures.balance_connectors = spread
            else:
                figures.balance_tasks = spread
        return figures


def excess_over_balance(loads: list[int], total: int, members: int) -> int:
    """What must leave the members above their balanced share (the highest loads keep the +1s)."""
    q, r = divmod(total, members)
    targets = [q + 1 if i < r else q for i in range(members)]
    return sum(max(0, load - target) for load, target in zip(sorted(loads, reverse=True), targets, strict=False))


def ideal_join(group: Group, joining: int) -> int:
    owners = group.owners()
    n = len(group.members) + joining
    out = 0
    for is_connector in (False, True):
        loads = {m: 0 for m in group.members}
        for (_, t), m in owners.items():
            if (t == CONNECTOR_TASK) == is_connector:
                loads[m] += 1
        out += excess_over_balance(list(loads.values()), sum(loads.values()), n)
    return out


def held_by(group: Group, members: list[str]) -> int:
    return sum(1 for m in group.owners().values() if m in members)


def run(assignor_cls: type, workers: int, connectors: int, per_connector: int) -> list[Figures]:
    group = Group(assignor_cls(DELAY_MS), {f"conn-{i:05d}": per_connector for i in range(connectors)})
    out = []
    group.add(workers)
    out.append(group.settle(Figures("start", ideal=connectors * (per_connector + 1))))

    f = Figures("join", ideal=ideal_join(group, 1))
    group.add(1)
    out.append(group.settle(f))

    f = Figures("join10", ideal=ideal_join(group, 10))
    group.add(10)
    out.append(group.settle(f))

    gone = sorted(group.members)[len(group.members) // 2]
    f = Figures("leave", ideal=held_by(group, [gone]))
    del group.members[gone]
    out.append(group.settle(f))

    gone10 = sorted(group.members)[1:11]
    f = Figures("leave10", ideal=held_by(group, gone10))
    for m in gone10:
        del group.members[m]
    out.append(group.settle(f))

    # a worker dies; a replacement (a new member id) joins before the delay ends
    gone = sorted(group.members)[-1]
    f = Figures("bounce", ideal=held_by(group, [gone]))
    del group.members[gone]
    before = group.owners()
    group.round(f, {})
    group.add(1)
    group.now += 0.2
    settled = group.settle(f)
    settled.moved = sum(1 for i, m in group.owners().items() if before.get(i) != m)  # from before the death
    out.append(settled)

    f = Figures("connector+", ideal=per_connector + 1)
    group.connectors[f"conn-{connectors:05d}"] = per_connector
    out.append(group.settle(f))

    f = Figures("connector-", ideal=0)
    del group.connectors[f"conn-{connectors:05d}"]
    out.append(group.settle(f))
    return out


def report(label: str, figures: list[Figures]) -> None:
    print(f"\n{label}")
    print(f"{'scenario':<11} {'rounds':>6} {'max ms':>8} {'mean ms':>8} {'moved':>6} {'ideal':>6} "
          f"{'restarted':>9} {'bal t/c':>7} {'wire KB':>8} {'held ms':>7}")
    for f in figures:
        print(f"{f.scenario:<11} {f.rounds:>6} {max(f.times_ms):>8.1f} {statistics.mean(f.times_ms):>8.1f} "
              f"{f.moved:>6} {f.ideal:>6} {f.restarted_on_keeper:>9} {f.balance_tasks:>3}/{f.balance_connectors:<3} "
              f"{f.wire_bytes / 1024:>8.1f} {f.waited_ms:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--tasks-per-connector", type=int, default=10)
    parser.add_argument("--against", help="also run the assignor of this git revision (e.g. main)")
    args = parser.parse_args()
    print(f"{args.workers} workers, {args.connectors} connectors x {args.tasks_per_connector} tasks "
          f"({args.connectors * args.tasks_per_connector} tasks), scheduled.rebalance.max.delay.ms={DELAY_MS}")
    print("moved: tasks and connector instances that changed worker; ideal: what must move for a balance within 1 "
          "(start: all; leave: the departed's); restarted: stopped on a worker that got them back; "
          "bal t/c: max-min tasks/connectors per worker after settling; wire KB: one round's JoinGroup metadata "
          "and SyncGroup assignments together (the largest round)")
    report("this tree", run(load_assignor(None), args.workers, args.connectors, args.tasks_per_connector))
    if args.against:
        report(f"at {args.against}", run(load_assignor(args.against), args.workers, args.connectors,
                                          args.tasks_per_connector))


if __name__ == "__main__":
    main()
