"""Errors raised by the partition log."""

from __future__ import annotations

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError

__all__ = ["LogClosed", "OffsetOutOfRange"]


class OffsetOutOfRange(BrokerError):
    """A fetch/read offset outside ``[log_start_offset, log_end_offset]`` (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside the log range [{log_start_offset}, {log_end_offset}]",
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogClosed(RuntimeError):
    """The partition log was closed (or deleted) and can no longer be used."""
