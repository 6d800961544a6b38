"""The leader's incremental cooperative assignor (KIP-415), as Kafka Connect does it.

Each round: work that no longer exists or is held twice is revoked; work lost with a
departed worker is held for ``scheduled.rebalance.max.delay.ms`` (so a worker that
comes straight back gets it again; nothing else moves meanwhile), then reassigned; new
work goes to the workers below their balanced share; a worker above its share is asked to
revoke the excess, which is assigned in the next round (revoke first, assign later: nothing
ever runs twice). Connectors and tasks are balanced separately, each within one per worker.

The balanced shares move as little as possible: of ``total`` items over ``n`` workers, the
``total % n`` workers holding the most keep one above ``total // n``. A round costs
O(items log items), whatever the number of workers.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from .protocol import CONNECTOR_TASK, Assignment, MemberMetadata, Work

__all__ = ["IncrementalAssignor", "Item", "balanced_shares"]

Item = tuple[str, int]  # (connector, task); task -1 is the connector instance


def _items(work: Work | None) -> set[Item]:
    return {(c, t) for c, tasks in (work or {}).items() for t in tasks}


def _work(items: set[Item]) -> Work:
    out: Work = {}
    for c, t in sorted(items):
        out.setdefault(c, []).append(t)
    return out


def _is_connector(item: Item) -> bool:
    return item[1] == CONNECTOR_TASK


def balanced_shares(loads: dict[str, int], total: int) -> dict[str, int]:
    """Each member's share of ``total`` items, within one of each other; the extra ones go to the
    members holding the most now (ties: the lower name), so the fewest items move."""
    if not loads:
        return {}
    base, extra = divmod(total, len(loads))
    ranked = sorted(loads, key=lambda m: (-loads[m], m))
    return {m: base + (1 if rank < extra else 0) for rank, m in enumerate(ranked)}


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
        names = sorted(members)
        revoke: dict[str, set[Item]] = {m: set() for m in names}
        assigned: dict[str, set[Item]] = {}
        # 1. Work that is gone, and work held by two members (the first by name keeps it).
        held: set[Item] = set()
        for m in names:
            allocation = members[m].allocation
            current = _items(allocation.assigned if allocation else None)
            revoke[m] = {i for i in current if i not in all_work or i in held}
            assigned[m] = current - revoke[m]
            held |= assigned[m]
        # 2. Work lost with departed members: hold it for the scheduled delay.
        departed = [m for m in self.previous if m not in members]
        if departed:
            newly_lost = set().union(*(self.previous[m] for m in departed)) & all_work - held
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
        # 3. Unheld work to the members below their share, and each member's excess revoked (it is
        # assigned next round). While lost work is held back, nothing moves: its owner may come back.
        revoked_now = set().union(*revoke.values())
        unassigned = all_work - held - self.lost - revoked_now
        if names:
            for is_connector in (True, False):
                kind = sorted(i for i in unassigned if _is_connector(i) == is_connector)
                self._balance(names, assigned, revoke, kind, is_connector, rebalance=not self.lost)
        self.previous = {m: set(a) for m, a in assigned.items()}
        return {m: Assignment(leader, leader_url, config_offset, _work(assigned[m]), _work(revoke[m]), delay_ms)
                for m in names}

    @staticmethod
    def _balance(names: list[str], assigned: dict[str, set[Item]], revoke: dict[str, set[Item]],
                 new: list[Item], is_connector: bool, rebalance: bool) -> None:
        """Hand ``new`` items (of one kind) out, the least loaded first; with ``rebalance``, toward the
        balanced shares: no member past its share gets any, and each member's excess is revoked."""
        loads = {m: sum(1 for i in assigned[m] if _is_connector(i) == is_connector) for m in names}
        shares = balanced_shares(loads, sum(loads.values()) + len(new)) if rebalance else None
        heap = [(loads[m], m) for m in names if shares is None or loads[m] < shares[m]]
        heapq.heapify(heap)
        for item in new:
            load, m = heapq.heappop(heap)
            assigned[m].add(item)
            if shares is None or load + 1 < shares[m]:
                heapq.heappush(heap, (load + 1, m))
        if shares is None:
            return
        for m in names:
            excess = loads[m] - shares[m]
            if excess > 0:  # the highest-numbered first, so a connector's low tasks stay put
                mine = sorted((i for i in assigned[m] if _is_connector(i) == is_connector), reverse=True)
                gone = set(mine[:excess])
                assigned[m] -= gone
                revoke[m] |= gone
