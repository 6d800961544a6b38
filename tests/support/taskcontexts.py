"""Task contexts for driving a source or sink task directly (no worker)."""

from __future__ import annotations

from typing import Any

from headwater.connect.api import OffsetStorageReader, SourceTaskContext, TopicPartition
from headwater.connect.api.sink import SinkTaskContext

__all__ = ["FakeSourceContext", "FixedSinkContext", "NoOffsets"]


class NoOffsets(OffsetStorageReader):
    """A source task's offsets when nothing was committed yet."""

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return None


class FakeSourceContext(SourceTaskContext):
    """``configs`` and no committed offsets."""

    def __init__(self, configs: dict[str, str]) -> None:
        self.configs = configs

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return NoOffsets()


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
