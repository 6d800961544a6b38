"""The durable partition log: segments of record batches with sparse offset and time indexes."""

from .errors import LogClosed, OffsetOutOfRange
from .partition_log import PartitionLog
from .segment import LogSegment

__all__ = ["LogClosed", "LogSegment", "OffsetOutOfRange", "PartitionLog"]
