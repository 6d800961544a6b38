"""Produce (key 0), v0-v11 (v9+ flexible).

Behavior: each partition's records must be exactly one v2 batch (as Kafka requires
for v3+). The batch is checked (size, magic, length, CRC-32C, record count) and
appended as received; only its base offset is rewritten, plus the timestamp and CRC
when the topic uses LogAppendTime. acks=0 gets no response at all; acks=1 and -1 are
answered after the append, and after the fsync when the partition's ``flush.messages``
is reached.
Per-record checks (KIP-467, log/validator.py), only for topics that need them: a null key
on a compacted topic is INVALID_RECORD, a CreateTime timestamp outside
``message.timestamp.before/after.max.ms`` INVALID_TIMESTAMP; the whole batch is rejected,
``record_errors`` (v8) lists every bad record's index and message, ``error_message`` Kafka's summary.
Errors as Kafka answers them: CORRUPT_MESSAGE (damaged bytes), INVALID_RECORD (more
than one batch, impossible counts), MESSAGE_TOO_LARGE (> max.message.bytes),
UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUIRED_ACKS;
these carry no error_message and log_start_offset -1, as Kafka's do.
An internal topic (``__consumer_offsets``, topics/topic.py's INTERNAL_TOPICS) is INVALID_TOPIC_EXCEPTION
"Cannot append to internal topic X" after the WRITE check, as in Kafka's ReplicaManager; Kafka lets the
client id ``__admin_client`` through, which any client can claim: here no client id does (the broker
writes its own records through the log).
A batch the broker decompresses to check its records may expand to at most
``DECOMPRESSED_BATCH_FACTOR`` times the topic's ``max.message.bytes`` (log/validator.py); beyond that it is
MESSAGE_TOO_LARGE, found without expanding it further.
``min.insync.replicas`` never refuses acks=-1 on a single node: Kafka (3.7+, KAFKA-15583) caps it at the
partition's replica count, which is 1 on one node, so the one in-sync replica always suffices.
In a ZooKeeper cluster (``Partition.replica`` set, replication/produce.py): a broker that does not lead the
partition answers NOT_LEADER_OR_FOLLOWER; acks=-1 with fewer in-sync replicas than min.insync.replicas
(capped at the replica count) is NOT_ENOUGH_REPLICAS before the append; batches are stamped with the leader
epoch; acks=-1 is answered once the high watermark covers the records (NOT_ENOUGH_REPLICAS_AFTER_APPEND if
the ISR shrank below min.insync.replicas meanwhile), or REQUEST_TIMED_OUT after the request's timeout_ms.
Idempotent producers (producer id >= 0): a batch repeating one of the producer's
last five is acknowledged with its original offset and not stored again; a gap is
OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH.
Transactional batches (txn/coordinator.py's check_produce, as KIP-890's verification): a partition not in the
producer's ongoing transaction is INVALID_TXN_STATE, an epoch other than its transactional id's current one
INVALID_PRODUCER_EPOCH.
Not implemented: recompression for topics whose compression.type is
not ``producer`` (batches are kept as the producer compressed them).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import (
    HEADER_SIZE,
    InvalidBatch,
    iter_batches,
    parse_header,
    set_log_append_time,
    validate_batch,
)

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..log.validator import needs_record_checks, validate_records
from ..metrics.stats import TopicCounters
from ..protocol.requests import ProduceRequest
from ..replication.epochs import current_leader_epoch
from ..replication.produce import leader_refusal, wait_for_isr
from ..topics.topic import INTERNAL_TOPICS, Partition
from .registry import RequestContext, api

log = logging.getLogger(__name__)


def _append(ctx: RequestContext, topic_name: str, index: int, records: bytes | None,
            counted: tuple[TopicCounters, ...], acks: int,
            replicated: list[tuple[dict[str, Any], Any]]) -> tuple[dict[str, Any], Partition | None]:
    """Validate and append one partition's batch; returns its response entry and the partition appended to.

    An appended batch adds its bytes and its header's record count to ``counted``; records are decoded only
    for the per-record checks a topic asks for (log/validator.py).
    """
    cluster = ctx.cluster
    entry: dict[str, Any] = {"index": index, "error_code": 0, "base_offset": -1, "log_append_time_ms": -1,
                             "log_start_offset": -1, "record_errors": [], "error_message": None}
    try:
        partition = cluster.partition(topic_name, index)
    except BrokerError as exc:
        entry["error_code"] = exc.code
        return entry, None
    replica = partition.replica
    if replica is not None:  # a ZooKeeper cluster: only the leader appends, and acks=-1 needs the ISR
        code = leader_refusal(replica, acks)
        if code:
            entry["error_code"] = code
            return entry, None
    plog = partition.log
    config = plog.config
    if not records:
        entry["log_start_offset"] = plog.log_start_offset
        return entry, None
    size = len(records)
    if size > config.max_message_bytes:
        entry["error_code"] = ErrorCode.MESSAGE_TOO_LARGE
        return entry, None
    try:
        first = parse_header(records) if size >= HEADER_SIZE else None
        if first is not None and first.magic in (0, 1):
            raise BrokerError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "message format v0/v1 is not supported")
        first_len = first.size if first is not None else size
        if HEADER_SIZE <= first_len < size:
            # Bytes after the first batch: a second whole batch is INVALID_RECORD (Kafka wants exactly one);
            # anything else means the first batch's length is wrong, i.e. the data is corrupt.
            rest = list(iter_batches(records, first_len))
            whole = rest and rest[-1][0] + rest[-1][1].size == size
            raise InvalidBatch("a produce request must carry exactly one record batch per partition"
                               if whole else f"record batch length does not match the {size} bytes sent",
                               corrupt=not whole)
        header = validate_batch(records, header=first)  # the header parsed above, not parsed again
    except InvalidBatch as exc:
        entry["error_code"] = ErrorCode.CORRUPT_MESSAGE if exc.corrupt else ErrorCode.INVALID_RECORD
        log.warning("rejected produce to %s-%d from %s: %s", topic_name, index, ctx.peer, exc)
        return entry, None
    except BrokerError as exc:
        entry["error_code"] = exc.code
        entry["error_message"] = exc.message
        return entry, None
    entry["log_start_offset"] = plog.log_start_offset
    if needs_record_checks(config, header):
        try:
            rejected = validate_records(records, header, config, f"{topic_name}-{index}", int(time.time() * 1000))
        except InvalidBatch as exc:
            entry.update(error_code=ErrorCode.MESSAGE_TOO_LARGE if exc.too_large else ErrorCode.INVALID_RECORD,
                         log_start_offset=-1, error_message=str(exc) if exc.too_large else None)
            log.warning("rejected produce to %s-%d from %s: %s", topic_name, index, ctx.peer, exc)
            return entry, None
        if rejected is not None:
            entry.update(error_code=rejected.code, error_message=rejected.message,
                         record_errors=[{"batch_index": i, "batch_index_error_message": m} for i, m in rejected.errors])
            return entry, None
    if header.is_transactional:  # only into a partition of the producer's ongoing transaction, at its epoch
        code = ctx.transactions.check_produce(header.producer_id, header.producer_epoch, topic_name, index)
        if code:
            entry["error_code"] = code
            return entry, None
    state = partition.producers if header.producer_id >= 0 else None
    if state is not None:
        code, duplicate_at = state.check(header)
        if code:
            entry["error_code"] = code
            return entry, None
        if duplicate_at >= 0:  # a retry of a batch already stored: acknowledge it again
            entry["base_offset"] = duplicate_at
            if replica is not None and acks == -1:  # once the ISR has the original, as for a first append
                replicated.append((entry, replica.wait_for(duplicate_at + header.last_offset_delta + 1)))
            return entry, None
    batch = bytearray(records)
    if config.message_timestamp_type == "LogAppendTime":
        now = int(time.time() * 1000)
        set_log_append_time(batch, 0, header, now)
        entry["log_append_time_ms"] = now
    entry["base_offset"] = base = plog.append(batch, header, current_leader_epoch(partition))
    for counters in counted:
        counters.bytes_in += size
        counters.messages_in += header.record_count
    if state is not None:
        state.update(header, base)
    return entry, partition


@api(key=0, min=0, max=11)
async def handle(ctx: RequestContext, req: ProduceRequest) -> dict[str, Any] | None:
    acks = req.acks
    responses = []
    to_flush = []
    appended: list[tuple[str, int]] = []
    replicated: list[tuple[dict[str, Any], Any]] = []  # acks=-1 in a cluster: (entry, wait for the ISR)
    for topic in req.topic_data:
        counted = ctx.cluster.counters(topic.name)
        partitions = []
        writable = ctx.allowed_topic(Op.WRITE, topic.name)
        internal = topic.name in INTERNAL_TOPICS
        for pdata in topic.partition_data:
            if acks not in (-1, 0, 1) or not writable or internal:
                code = (ErrorCode.INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1)
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED if not writable
                        else ErrorCode.INVALID_TOPIC_EXCEPTION)
                partitions.append({"index": pdata.index, "error_code": code, "base_offset": -1,
                                   "error_message": f"Cannot append to internal topic {topic.name}"
                                   if code == ErrorCode.INVALID_TOPIC_EXCEPTION else None})
                continue
            entry, appended_to = _append(ctx, topic.name, pdata.index, pdata.records, counted, acks, replicated)
            partitions.append(entry)
            if appended_to is not None:
                appended.append((topic.name, pdata.index))
                plog = appended_to.log
                if appended_to.replica is not None:
                    appended_to.replica.advance_high_watermark()  # an ISR of the leader alone has it now
                    if acks == -1:
                        replicated.append((entry, appended_to.replica.wait_for(plog.log_end_offset)))
                if plog.unflushed_messages >= plog.config.flush_messages:
                    to_flush.append((appended_to.flusher, plog.log_end_offset))
        failed = sum(1 for p in partitions if p["error_code"])
        for counters in counted:
            counters.produce_requests += len(partitions)
            counters.failed_produce += failed
        responses.append({"name": topic.name, "partition_responses": partitions})
    if appended:
        ctx.cluster.notify_data(appended)
    for flusher, end in to_flush:
        await flusher.flush_to(end)
    if replicated:
        await wait_for_isr(replicated, req.timeout_ms)
    throttle = 0
    if ctx.throttler is not None:  # producer_byte_rate: the request's size, as Kafka counts it
        throttle = ctx.throttle(ctx.throttler.record(ctx.user, ctx.header.client_id or "", ctx.request_size,
                                                     time.time() * 1000))
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": throttle}
