"""A partition's side of transactions: open transactions and the last stable offset follow data batches
and markers; aborted transactions go to the segments' ``.txnindex``, which survives a reopen and is rebuilt
from the log after a crash; read_committed reads stop at the LSO."""

from __future__ import annotations

import asyncio
from pathlib import Path

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.log.control import marker_batch
from headwater.broker.log.txn_index import AbortedTxn
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.housekeeping import LogHousekeeping
from headwater.broker.topics.topic import Partition
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_header,
)

SEQ: dict[int, int] = {}


def txn_batch(pid: int, n: int = 2, epoch: int = 0, seq: int | None = None) -> bytes:
    base_seq = SEQ.get(pid, 0) if seq is None else seq
    SEQ[pid] = base_seq + n
    records = [Record(i, 1000 + i, f"k{pid}-{i}".encode(), b"v" * 20) for i in range(n)]
    return build_batch(records, attributes=ATTR_TRANSACTIONAL, producer_id=pid, producer_epoch=epoch,
                       base_sequence=base_seq)


def produce(p: Partition, batch: bytes) -> int:
    """What Produce does with a batch of a producer: check, append, update the producer state."""
    header = parse_header(batch)
    code, dup = p.producers.check(header)
    assert code == ErrorCode.NONE and dup == -1, (code, dup)
    base = p.log.append(bytearray(batch), header)
    p.producers.update(header, base)
    return base


def open_cluster(tmp_path: Path, **props: str) -> Cluster:
    cluster = Cluster(BrokerConfig.model_validate({"log.dirs": str(tmp_path / "data"), **props}))
    cluster.load()
    return cluster


def offsets(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def test_lso_follows_open_transactions_and_markers(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("t", 1).partitions[0]
    a = produce(p, txn_batch(1))  # 0-1
    assert p.last_stable_offset() == a == 0
    b = produce(p, txn_batch(2))  # 2-3
    produce(p, txn_batch(1))  # 4-5, same transaction of producer 1
    assert p.last_stable_offset() == 0
    commit = p.append_marker(1, 0, True, 0)  # 6
    assert p.last_stable_offset() == b == 2  # producer 2's transaction still holds it back
    abort = p.append_marker(2, 0, False, 0)  # 7
    assert p.last_stable_offset() == p.log.log_end_offset == 8
    # the abort is indexed with the LSO once it closed; the commit is not
    assert p.log.aborted_transactions(0, 8) == [AbortedTxn(2, 2, abort, 8)]
    assert commit == 6
    # read_committed reads below the LSO only: open a new transaction, it is held back
    produce(p, txn_batch(1))  # 8-9 (sequence goes on after the marker)
    assert p.last_stable_offset() == 8
    assert offsets(p.log.read(0, 1 << 20, max_offset=8)) == [0, 2, 4, 6, 7]
    assert p.log.read(8, 1 << 20, max_offset=8) == b""
    assert offsets(p.log.read(0, 1 << 20)) == [0, 2, 4, 6, 7, 8]  # read_uncommitted: everything
    cluster.close()


def test_a_marker_leaves_sequences_alone_and_an_epoch_bump_restarts_them(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("t", 1).partitions[0]
    produce(p, txn_batch(5, n=3))
    p.append_marker(5, 0, True, 0)
    # the next transaction goes on at sequence 3, not 0, and a gap is still refused
    assert p.producers.check(parse_header(txn_batch(5, seq=7)))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    produce(p, txn_batch(5, seq=3))
    # the coordinator aborting with a bumped epoch: the old epoch is fenced, the new one starts at 0
    p.append_marker(5, 1, False, 0)
    assert p.producers.check(parse_header(txn_batch(5, seq=5)))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    produce(p, txn_batch(5, epoch=1, seq=0))
    cluster.close()


def test_state_and_index_survive_a_clean_restart(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("t", 1).partitions[0]
    produce(p, txn_batch(1))
    p.append_marker(1, 0, False, 0)  # aborted 0-1, marker 2
    produce(p, txn_batch(2))  # open from 3
    cluster.close()
    index = tmp_path / "data" / "t-0" / f"{0:020d}.txnindex"
    assert index.stat().st_size == 34  # Kafka's entry size

    cluster = open_cluster(tmp_path)
    p = cluster.partition("t", 0)
    assert p.last_stable_offset() == 3
    assert p.log.aborted_transactions(0, 3) == [AbortedTxn(1, 0, 2, 3)]
    p.append_marker(2, 0, True, 0)
    assert p.last_stable_offset() == p.log.log_end_offset
    cluster.close()


def test_crash_rebuilds_from_the_log(tmp_path: Path) -> None:
    """A crash: no snapshot covering the tail, a torn last batch, an index entry whose marker was lost."""
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("t", 1).partitions[0]
    produce(p, txn_batch(1))  # 0-1
    p.append_marker(1, 0, False, 0)  # 2
    produce(p, txn_batch(2))  # 3-4
    produce(p, txn_batch(3))  # 5-6
    p.append_marker(3, 0, False, 0)  # 7: its index entry is written, then the crash tears the marker
    directory = p.log.directory
    p.log.flush()
    seg = directory / f"{0:020d}.log"
    for s in p.log.segments:
        s.close()  # as a SIGKILL would leave them: no close(), no snapshot
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 10)
    (directory / "producer-state.json").unlink(missing_ok=True)

    cluster = open_cluster(tmp_path)
    p = cluster.partition("t", 0)
    assert p.log.log_end_offset == 7
    # producers 2 and 3 are open again: nothing of theirs is stable; only producer 1's abort is indexed
    assert p.last_stable_offset() == 3
    assert p.log.aborted_transactions(0, 7) == [AbortedTxn(1, 0, 2, 3)]
    p.append_marker(3, 0, False, 0)
    p.append_marker(2, 0, True, 0)
    assert p.last_stable_offset() == p.log.log_end_offset == 9
    assert p.log.aborted_transactions(0, 9) == [AbortedTxn(1, 0, 2, 3), AbortedTxn(3, 5, 7, 3)]
    cluster.close()


def test_aborted_list_spans_segments_and_retention_drops_it(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("t", 1, overrides={"segment.bytes": "300", "retention.bytes": "0"}).partitions[0]
    produce(p, txn_batch(1))  # its data in the first segment
    while len(p.log.segments) < 3:
        produce(p, txn_batch(2, n=1))  # producer 2's transaction spans segments
    end = p.append_marker(1, 0, False, 0)  # producer 1's abort is indexed in the segment of its marker
    assert p.log.segments[-1].txn_index.entries == [AbortedTxn(1, 0, end, 2)]
    assert p.log.aborted_transactions(0, 2) == [AbortedTxn(1, 0, end, 2)]  # from the first segment on
    assert p.log.aborted_transactions(end + 1, end + 2) == []  # nothing of it past its marker
    p.append_marker(2, 0, True, 0)
    while len(p.log.segments) < 5:
        produce(p, txn_batch(4, n=1))
    indexed = [f for f in p.log.directory.iterdir() if f.suffix == ".txnindex"]
    assert len(indexed) == 1
    assert p.log.apply_retention(0) >= 3
    assert not any(s.txn_index.entries for s in p.log.segments)
    assert not indexed[0].exists()  # went with its segment
    cluster.close()


def committed_view(p: Partition) -> dict[bytes, bytes | None]:
    """Latest value per key as a read_committed consumer sees the partition: batches below the LSO, the
    aborted transactions' data dropped by the aborted list, as Kafka clients do."""
    lso = p.last_stable_offset()
    data = p.log.read(p.log.log_start_offset, 1 << 24, max_offset=lso)
    aborted = sorted(p.log.aborted_transactions(p.log.log_start_offset, lso), key=lambda t: t.first_offset)
    dropping: set[int] = set()
    view: dict[bytes, bytes | None] = {}
    for pos, header in iter_batches(data):
        while aborted and aborted[0].first_offset <= header.base_offset:
            dropping.add(aborted.pop(0).producer_id)
        if header.is_control:
            dropping.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in dropping:
            continue
        for r in decode_batch_records(data[pos : pos + header.size])[1]:
            assert r.key is not None
            view[r.key] = r.value
    return view


def keyed(pid: int, key: bytes, value: bytes) -> bytes:
    base_seq = SEQ.get(pid, 0)
    SEQ[pid] = base_seq + 1
    txn = pid >= 0
    return build_batch([Record(0, 1000, key, value)], attributes=ATTR_TRANSACTIONAL if txn else 0,
                       producer_id=pid, producer_epoch=0 if txn else -1, base_sequence=base_seq if txn else -1)


def test_the_cleaner_drops_aborted_data_and_stops_at_the_lso(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("c", 1, overrides={"cleanup.policy": "compact", "segment.bytes": "200",
                                                "min.cleanable.dirty.ratio": "0.01"}).partitions[0]

    def append(batch: bytes) -> None:
        if parse_header(batch).producer_id >= 0:
            produce(p, batch)
        else:
            p.log.append(bytearray(batch), parse_header(batch))

    append(keyed(-1, b"a", b"committed"))
    append(keyed(1, b"a", b"aborted"))  # a later record of "a" whose transaction aborts
    p.append_marker(1, 0, False, 0)
    append(keyed(2, b"b", b"open"))  # an open transaction over an older "b"...
    append(keyed(-1, b"b", b"old-b"))  # ...and a committed "b" after it (past the LSO)
    append(keyed(2, b"a", b"open-a"))
    for i in range(6):
        append(keyed(-1, b"pad%d" % i, b"x" * 60))  # roll the rest into closed segments
    assert len(p.log.segments) > 3
    before = committed_view(p)
    assert before[b"a"] == b"committed" and b"b" not in before

    housekeeping = LogHousekeeping(cluster, cluster.config)
    assert asyncio.run(housekeeping.clean_logs()) == 1
    stored = offsets(p.log.read(0, 1 << 24))
    assert 1 not in stored  # producer 1's aborted batch is gone; its marker (2) stays
    assert 2 in stored and 3 in stored  # from the LSO on nothing is cleaned
    assert committed_view(p) == before  # the aborted record did not shadow the committed one

    p.append_marker(2, 0, True, 0)
    append(keyed(-1, b"tail", b"y" * 150))  # roll the marker's segment closed
    assert asyncio.run(housekeeping.clean_logs()) == 1
    after = committed_view(p)
    assert after[b"a"] == b"open-a" and after[b"b"] == b"old-b"
    cluster.close()
    cluster = open_cluster(tmp_path)  # cleaned segments came with their index entries
    assert committed_view(cluster.partition("c", 0)) == after
    cluster.close()


def markers_in(p: Partition) -> list[int]:
    return [h.base_offset for _, h in iter_batches(p.log.read(0, 1 << 24)) if h.is_control]


def test_the_cleaner_drops_markers_whose_transactions_left_nothing(tmp_path: Path) -> None:
    """A marker goes once its transaction's data is gone (aborted, or every record superseded) and
    delete.retention.ms has passed; a marker whose transaction still has a record stays; a dropped abort
    marker takes its aborted-index entry with it; what a read_committed reader sees does not change."""
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("m", 1, overrides={"cleanup.policy": "compact", "segment.bytes": "200",
                                                "min.cleanable.dirty.ratio": "0.01",
                                                "delete.retention.ms": "0"}).partitions[0]
    produce(p, keyed(1, b"offset", b"1"))
    p.append_marker(1, 0, True, 0)  # 1: committed, superseded below -> goes
    produce(p, keyed(2, b"offset", b"junk"))
    p.append_marker(2, 0, False, 0)  # 3: aborted -> goes, with its index entry
    produce(p, keyed(3, b"offset", b"2"))
    p.append_marker(3, 0, True, 0)  # 5: committed, superseded below -> goes
    produce(p, keyed(4, b"offset", b"3"))
    p.append_marker(4, 0, True, 0)  # 7: its record is the latest -> stays
    for i in range(6):
        pad = keyed(-1, b"pad%d" % i, b"x" * 60)
        p.log.append(bytearray(pad), parse_header(pad))  # roll the markers' segments closed
    assert markers_in(p) == [1, 3, 5, 7]
    before = committed_view(p)
    assert before[b"offset"] == b"3"

    housekeeping = LogHousekeeping(cluster, cluster.config)
    asyncio.run(housekeeping.clean_logs())  # data goes first; the markers' countdown starts
    asyncio.run(housekeeping.clean_logs())  # past delete.retention.ms (0): the empty transactions' markers go
    assert markers_in(p) == [7]
    assert [t.producer_id for t in p.log.aborted_transactions(0, p.log.log_end_offset)] == []
    assert committed_view(p) == before
    cluster.close()
    cluster = open_cluster(tmp_path)
    reopened = cluster.partition("m", 0)
    assert markers_in(reopened) == [7] and committed_view(reopened) == before
    assert reopened.last_stable_offset() == reopened.log.log_end_offset  # no transaction left open
    cluster.close()


def test_read_committed_stops_at_the_lso_across_segments(tmp_path: Path) -> None:
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("s", 1, overrides={"segment.bytes": "300"}).partitions[0]
    plain = build_batch([Record(0, 1000, b"k", b"p" * 40)])
    for _ in range(5):
        p.log.append(bytearray(plain), parse_header(plain))
    lso = produce(p, txn_batch(9))
    for _ in range(5):
        p.log.append(bytearray(plain), parse_header(plain))
    assert len(p.log.segments) >= 3 and p.last_stable_offset() == lso == 5
    for start in range(lso):
        assert offsets(p.log.read(start, 1 << 20, max_offset=lso)) == list(range(start, lso))
    assert offsets(p.log.read(0, len(plain) * 2, max_offset=lso)) == [0, 1]  # max_bytes still bounds it
    assert offsets(p.log.read(0, 1, max_offset=lso)) == [0]  # the first batch whole, as without the bound
    cluster.close()


def test_a_clients_control_batch_is_refused(tmp_path: Path) -> None:
    """A forged marker through Produce would open a transaction nothing closes (the LSO stuck at it)."""
    SEQ.clear()
    cluster = open_cluster(tmp_path)
    p = cluster.create_topic("f", 1).partitions[0]
    produce(p, txn_batch(3))
    marker = decode_batch_records(marker_batch(3, 0, True, 0))[1][0]
    # a marker carrying the producer's next sequence: the sequence checks alone would take it
    forged = build_batch([marker], attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL, producer_id=3, producer_epoch=0,
                         base_sequence=2)
    assert p.producers.check(parse_header(forged)) == (ErrorCode.INVALID_RECORD, -1)
    assert p.last_stable_offset() == 0
    cluster.close()
