"""TxnOffsetCommit (key 28), v0-v4.

Behavior: a transactional producer's offsets for a group, written to ``__consumer_offsets`` as a
transactional batch and held apart from the group's committed offsets until the transaction's marker: they
become committed on commit (OffsetFetch sees them only then), are dropped on abort. The transaction must be
open with the group's offsets partition in it (AddOffsetsToTxn first; else INVALID_TXN_STATE), at the
producer's current epoch (else INVALID_PRODUCER_EPOCH in every version: Kafka finds an older epoch when it
appends to ``__consumer_offsets``, and answers that since 2.7 so that the client may abort). v3+ carries the consumer's
member id and generation, checked as OffsetCommit checks them when a member id is given (KIP-447).
ACLs: WRITE on the TRANSACTIONAL_ID, READ on the group and on each topic.
In a ZooKeeper cluster a broker that does not coordinate the group answers NOT_COORDINATOR, and the answer waits
until the ISR of the group's partition has the offsets (COORDINATOR_NOT_AVAILABLE when it does not within
``offsets.commit.timeout.ms``), as OffsetCommit's; the transaction itself is checked only when this broker
coordinates its transactional id too (Kafka's group coordinator does not ask the transaction coordinator).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import TxnOffsetCommitRequest
from .offset_entries import check_entries, fail_accepted
from .registry import RequestContext, api


def _group_error(ctx: RequestContext, req: TxnOffsetCommitRequest) -> ErrorCode | None:
    if not ctx.allowed_transactional_id(Op.WRITE, req.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not ctx.allowed_group(Op.READ, req.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    error = ctx.transactions.txn_offset_commit_error(req.transactional_id, req.producer_id, req.producer_epoch,
                                                     req.group_id)
    if error is not None:
        return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED else error
    refused = ctx.groups.coordinator_error(req.group_id) if req.group_id else None
    if refused is not None:  # a cluster's coordinator is elsewhere, or still loading the group's partition
        return refused
    member_id = getattr(req, "member_id", "") if ctx.version >= 3 else ""
    if member_id:
        return ctx.groups.offsets.commit_check(req.group_id, member_id, getattr(req, "generation_id", -1),
                                               getattr(req, "group_instance_id", None))
    return ErrorCode.INVALID_GROUP_ID if not req.group_id else None


@api(key=28, min=0, max=4)
async def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> dict[str, Any]:
    group_error = _group_error(ctx, req)
    accepted, topics = check_entries(ctx, req.topics, group_error, ctx.version >= 2)
    if accepted:
        code = await ctx.groups.offsets.commit_pending(req.group_id, req.producer_id, req.producer_epoch, accepted)
        fail_accepted(topics, accepted, code)
    return {"throttle_time_ms": 0, "topics": topics}
