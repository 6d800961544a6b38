"""A sink task's context for driving a task directly (no worker): a fixed assignment, requests ignored."""

from __future__ import annotations

from headwater.connect.api import TopicPartition
from headwater.connect.api.sink import SinkTaskContext

__all__ = ["FixedSinkContext"]


class FixedSinkContext(SinkTaskContext):
    """Assigned ``partitions`` for good; offset resets, timeouts, pauses and commit requests go nowhere."""

    def __init__(self, *partitions: TopicPartition) -> None:
        self.partitions = set(partitions)

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        pass

    def timeout(self, ms: int) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.partitions)

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass
