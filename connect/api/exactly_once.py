"""What a source connector says about exactly-once delivery (KIP-618), and the connector keys that ask for it.

A connector answers ``SourceConnector.exactly_once_support(config)`` with SUPPORTED or UNSUPPORTED (None: it
does not say), and ``can_define_transaction_boundaries(config)`` with SUPPORTED when it can draw transaction
boundaries itself (``transaction.boundary=connector``). The worker reads them when a config asks for
``exactly.once.support=required``, as Kafka's herder does at validation.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["EXACTLY_ONCE_LEVELS", "TRANSACTION_BOUNDARIES", "ConnectorTransactionBoundaries", "ExactlyOnceSupport",
           "choice"]

EXACTLY_ONCE_LEVELS = ("requested", "required")
TRANSACTION_BOUNDARIES = ("poll", "interval", "connector")


class ExactlyOnceSupport(Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


def choice(value: str, allowed: tuple[str, ...]) -> str:
    """``value`` as one of ``allowed`` (case insensitive, as Kafka's ValidString.in for these keys)."""
    lowered = value.strip().lower()
    if lowered not in allowed:
        raise ValueError(f"String must be one of (case insensitive): {', '.join(allowed)}")
    return lowered
