"""The leader's incremental cooperative assignor (KIP-415), as Kafka Connect does it.

Each round: work that no longer exists or is held twice is revoked; work lost with a
departed worker is held for ``scheduled.rebalance.max.delay.ms`` (so a worker that
comes straight back gets it again), then reassigned; new work goes to the least
loaded workers; an overloaded worker is asked to revoke its excess, which is
assigned in the next round (revoke first, assign later: nothing ever runs twice).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .protocol import CONNECTOR_TASK, Assignment, MemberMetadata, Work

__all__ = ["IncrementalAssignor", "Item"]

Item = tuple[str, int]  # (connector, task); task -1 is the connector instance


def _items(work: Work | None) -> set[Item]:
    return {(c, t) for c, tasks in (work or {}).items() for t in tasks}


def _work(items: set[Item]) -> Work:
    out: Work = {}
    for c, t in sorted(items):
        out.setdefault(c, []).append(t)
    return out


@dataclass
class IncrementalAssignor:
    max_delay_ms: int
    previous: dict[str, set[Item]] = field(default_factory=dict)  # what this leader last handed out
    lost_deadline: float | None = None
    lost: set[Item] = field(default_factory=set)

    def assign(self, leader: str, leader_url: str, config_offset: int, members: dict[str, MemberMetadata],
               connectors: dict[str, int], now: float | None = None) -> dict[str, Assignment]:
        """``connectors`` maps each connector to its task count; returns each member's assignment."""
        now = time.monotonic() if now is None else now
        all_work = {(c, CONNECTOR_TASK) for c in connectors} | {(c, t) for c, n in connectors.items() for t in range(n)}
        current = {m: _items(meta.allocation.assigned if meta.allocation else None) for m, meta in members.items()}
        revoke: dict[str, set[Item]] = {m: set() for m in members}
        # 1. Work that is gone, and work held by two members.
        seen: set[Item] = set()
        for m in sorted(members):
            for item in sorted(current[m]):
                if item not in all_work or item in seen:
                    revoke[m].add(item)
                seen.add(item)
        kept = {m: current[m] - revoke[m] for m in members}
        held = set().union(*kept.values()) if kept else set()
        # 2. Work lost with departed members: hold it for the scheduled delay.
        departed = {m for m in self.previous if m not in members}
        newly_lost = set().union(*(self.previous[m] for m in departed)) & all_work - held if departed else set()
        if newly_lost:
            self.lost |= newly_lost
            if self.lost_deadline is None:
                self.lost_deadline = now + self.max_delay_ms / 1000
        self.lost = (self.lost & all_work) - held
        delay_ms = 0
        if self.lost:
            if self.lost_deadline is not None and now < self.lost_deadline:
                delay_ms = max(int((self.lost_deadline - now) * 1000), 1)
            else:
                self.lost, self.lost_deadline = set(), None
        else:
            self.lost_deadline = None
        # 3. New work to the least loaded, connectors and tasks balanced separately.
        unassigned = all_work - held - self.lost - set().union(*revoke.values())
        assigned = {m: set(kept[m]) for m in members}
        for is_connector in (True, False):
            kind = {i for i in unassigned if (i[1] == CONNECTOR_TASK) == is_connector}
            for item in sorted(kind):
                target = min(sorted(members), key=lambda m: (self._load(assigned[m], is_connector), m))
                assigned[target].add(item)
        # 4. Too much on one member: revoke the excess now, reassign it next round.
        if not any(revoke.values()) and not unassigned and members:
            for is_connector in (True, False):
                loads = {m: self._load(assigned[m], is_connector) for m in members}
                while max(loads.values()) - min(loads.values()) > 1:
                    donor = max(sorted(loads), key=lambda m: loads[m])
                    receiver = min(sorted(loads), key=lambda m: loads[m])
                    item = max(i for i in assigned[donor] if (i[1] == CONNECTOR_TASK) == is_connector)
                    assigned[donor].discard(item)
                    revoke[donor].add(item)
                    loads[donor] -= 1
                    loads[receiver] += 1  # it gets the item in the next round
        self.previous = {m: set(a) for m, a in assigned.items()}
        return {m: Assignment(leader, leader_url, config_offset, _work(assigned[m]), _work(revoke[m]), delay_ms)
                for m in members}

    @staticmethod
    def _load(items: set[Item], connectors: bool) -> int:
        return sum(1 for i in items if (i[1] == CONNECTOR_TASK) == connectors)
