"""What the transaction APIs share on the wire: PRODUCER_FENCED as each version understands it."""

from __future__ import annotations

from headwater.kafka.errors import ErrorCode

__all__ = ["fenced_for"]


def fenced_for(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) for versions from ``fenced_since`` on; older clients know it as
    INVALID_PRODUCER_EPOCH, which Kafka answers them instead."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
