"""Offset translation: a consumer group's upstream offset to the offset it may resume from in the target.

As Kafka's ``OffsetSyncStore.translateDownstream``: nothing is translated until the offset-syncs topic
was read to its end; then the latest sync whose upstream offset is at or below the group's is used, and
a group behind every sync known gets no translation. MM2 then answers that sync's downstream offset when
the upstream offsets are equal and one past it otherwise, so a group between syncs re-reads records.
Here, when the next sync is one run away (upstream and downstream advanced by the same count, which the
writer in ``syncs`` guarantees means no record was skipped or re-sent in between), the answer is exact:
the sync's downstream offset plus the distance. Otherwise it is MM2's one past the sync: never skip.
"""

from __future__ import annotations

import bisect

from headwater.kafka.mirror import OffsetSync

__all__ = ["OffsetSyncStore"]

KEEP = 64  # syncs kept per partition: the newest, and older ones for groups that lag


class _Partition:
    __slots__ = ("upstream", "downstream", "linked")

    def __init__(self) -> None:
        self.upstream: list[int] = []
        self.downstream: list[int] = []
        self.linked: list[bool] = []  # linked[i]: syncs i and i + 1 lie on one run


class OffsetSyncStore:
    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], _Partition] = {}
        self.read_to_end = False

    def add(self, sync: OffsetSync) -> None:
        p = self._syncs.get((sync.topic, sync.partition))
        if p is None:
            p = self._syncs[(sync.topic, sync.partition)] = _Partition()
        up, down = sync.upstream_offset, sync.downstream_offset
        if p.upstream and up <= p.upstream[-1]:
            # Re-mirrored from an earlier offset (a restarted task) or a recreated topic: the syncs at or
            # after this upstream offset describe copies that are no longer the latest.
            keep = bisect.bisect_left(p.upstream, up)
            del p.upstream[keep:], p.downstream[keep:], p.linked[keep:]
        if p.upstream:
            p.linked[-1] = (up - p.upstream[-1] == down - p.downstream[-1]) and down > p.downstream[-1]
        p.upstream.append(up)
        p.downstream.append(down)
        p.linked.append(False)
        if len(p.upstream) > KEEP:
            self._thin(p)

    @staticmethod
    def _thin(p: _Partition) -> None:
        """Keep the newest half, and every other sync of the older half; a removed sync's link is folded
        into its predecessor's (two runs joined are not one run)."""
        half = len(p.upstream) // 2
        up: list[int] = []
        down: list[int] = []
        linked: list[bool] = []
        for i in range(len(p.upstream)):
            if i < half and i % 2 == 1:
                linked[-1] = linked[-1] and p.linked[i]
                continue
            up.append(p.upstream[i])
            down.append(p.downstream[i])
            linked.append(p.linked[i])
        p.upstream, p.downstream, p.linked = up, down, linked

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset to resume from, or None (not read to the end yet, or no sync at or below)."""
        if not self.read_to_end or upstream_offset < 0:
            return None
        p = self._syncs.get((topic, partition))
        if p is None:
            return None
        i = bisect.bisect_right(p.upstream, upstream_offset) - 1
        if i < 0:
            return None
        up, down = p.upstream[i], p.downstream[i]
        if up == upstream_offset:
            return down
        if p.linked[i]:
            return down + (upstream_offset - up)
        return down + 1

    def partitions(self) -> list[tuple[str, int]]:
        return list(self._syncs)
