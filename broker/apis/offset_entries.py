"""The per-partition checks OffsetCommit and TxnOffsetCommit share: each entry is refused with its own error
(topic ACL, unknown partition, metadata too large) or accepted as an OffsetAndMetadata."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..group.records import OffsetAndMetadata
from .registry import RequestContext

__all__ = ["Accepted", "check_entries", "fail_accepted"]

Accepted = dict[tuple[str, int], OffsetAndMetadata]


class _Partition(Protocol):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None


class _Topic(Protocol):
    name: str
    partitions: Sequence[Any]


def check_entries(ctx: RequestContext, topics: Sequence[_Topic], group_error: ErrorCode | None,
                  with_leader_epoch: bool) -> tuple[Accepted, list[dict[str, Any]]]:
    """The entries to store and the response's topics; every entry gets ``group_error`` when there is one.
    ``with_leader_epoch``: the request version carries ``committed_leader_epoch``."""
    now = int(time.time() * 1000)
    max_meta = ctx.cluster.config.offset_metadata_max_bytes
    accepted: Accepted = {}
    answer = []
    for t in topics:
        partitions = []
        for p in t.partitions:
            code = group_error
            if code is None:
                metadata = p.committed_metadata or ""
                if not ctx.allowed_topic(Op.READ, t.name):
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not ctx.cluster.has_partition(t.name, p.partition_index):  # in a cluster: anywhere in it
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > max_meta:
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    epoch = getattr(p, "committed_leader_epoch", -1) if with_leader_epoch else -1
                    accepted[(t.name, p.partition_index)] = OffsetAndMetadata(p.committed_offset, epoch, metadata, now)
                    code = ErrorCode.NONE
            partitions.append({"partition_index": p.partition_index, "error_code": code})
        answer.append({"name": t.name, "partitions": partitions})
    return accepted, answer


def fail_accepted(topics: list[dict[str, Any]], accepted: Accepted, code: ErrorCode) -> None:
    """The accepted entries' answers become ``code`` (their store failed); the refused keep their own."""
    if not code:
        return
    for t in topics:
        for p in t["partitions"]:
            if (t["name"], p["partition_index"]) in accepted:
                p["error_code"] = code
