"""Sending a transaction's markers: the coordinator's side of Kafka's TransactionMarkerChannelManager.

The transaction coordinator ends a prepared transaction by writing a commit or abort marker into every partition
the transaction wrote to, then its COMPLETE_* state. A ``MarkerSender`` does the writing and returns only once
every marker is written (and, on a cluster, replicated to its partition's ISR); when some cannot be written it
raises ``MarkerError`` and the coordinator keeps the transaction prepared and tries again later, as Kafka's
coordinator keeps retrying a marker until it is written.

``LocalMarkerSender`` is one node's: every partition is local.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..group.offsets import CommittedOffsets
from ..topics.cluster import Cluster
from .markers import write_markers
from .state import TxnMetadata

__all__ = ["LocalMarkerSender", "MarkerError", "MarkerSender"]

log = logging.getLogger(__name__)


class MarkerError(Exception):
    """Some of a transaction's markers could not be written (already logged); the transaction stays prepared."""


class MarkerSender(Protocol):
    async def send(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        """Write ``txn``'s commit/abort marker to each of ``txn.partitions`` (a snapshot taken at the call) on its
        current leader, returning once every one is written and replicated; partitions of deleted topics are
        skipped with a warning; raises MarkerError after logging when some could not be written (the caller
        keeps the transaction prepared and retries)."""
        ...


class LocalMarkerSender:
    """One node: every partition is this broker's, each marker a local append."""

    def __init__(self, cluster: Cluster, offsets: CommittedOffsets) -> None:
        self.cluster = cluster
        self.offsets = offsets

    async def send(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        try:
            write_markers(self.cluster, self.offsets, txn, commit, coordinator_epoch)
        except Exception as exc:
            log.exception("could not write the %s markers of transactional id %s",
                          "commit" if commit else "abort", txn.transactional_id)
            raise MarkerError(f"{'commit' if commit else 'abort'} markers of transactional id "
                              f"{txn.transactional_id}: {exc}") from exc
