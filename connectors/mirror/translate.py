"""Offset translation: a consumer group's upstream offset to the offset it may resume from in the target.

As Kafka's ``OffsetSyncStore.translateDownstream``: nothing is translated until the offset-syncs topic
was read to its end; then the latest sync whose upstream offset is at or below the group's wins. The
group resumes at that sync's downstream offset when the two upstream offsets are equal, and one past it
otherwise (the records between may or may not have been replicated yet: never skip one). A group
behind every sync known gets no translation.
"""

from __future__ import annotations

import bisect

from headwater.kafka.mirror import OffsetSync

__all__ = ["OffsetSyncStore"]

KEEP = 64  # syncs kept per partition: the newest, and older ones for groups that lag


class OffsetSyncStore:
    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}  # by upstream offset, ascending
        self.read_to_end = False

    def add(self, sync: OffsetSync) -> None:
        syncs = self._syncs.setdefault((sync.topic, sync.partition), [])
        if syncs and sync.upstream_offset < syncs[-1].upstream_offset:
            # the upstream partition was truncated or recreated: what was known no longer holds
            syncs.clear()
        elif syncs and sync.upstream_offset == syncs[-1].upstream_offset:
            syncs.pop()
        syncs.append(sync)
        if len(syncs) > KEEP:
            # keep the newest half dense, thin the older half out (every other one)
            half = len(syncs) // 2
            syncs[:] = syncs[:half:2] + syncs[half:]

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset to resume from, or None (not read to the end yet, or no sync at or below)."""
        if not self.read_to_end or upstream_offset < 0:
            return None
        syncs = self._syncs.get((topic, partition))
        if not syncs:
            return None
        i = bisect.bisect_right([s.upstream_offset for s in syncs], upstream_offset) - 1
        if i < 0:
            return None
        sync = syncs[i]
        return sync.downstream_offset if sync.upstream_offset == upstream_offset else sync.downstream_offset + 1
