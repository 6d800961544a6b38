"""PartitionLog.truncate_to and the leader-epoch cache through appends, truncation, restarts and crashes.

The yardstick: a log truncated and appended to again must be byte for byte, index for index, the log that
would have been written with only the kept batches and the new ones."""

from __future__ import annotations

from pathlib import Path

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.control import marker_batch
from headwater.broker.log.leader_epochs import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry
from headwater.broker.log.recovery import RECOVERY_POINT_FILE, read_offset_file
from headwater.broker.log.txn_index import AbortedTxn
from headwater.broker.topics.producer_state import load_producer_state, rebuild_after_truncation
from headwater.kafka.records import ATTR_TRANSACTIONAL, Record, build_batch, iter_batches, parse_header


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def config() -> TopicConfig:
    return TopicConfig(segment_bytes=600, index_interval_bytes=150)


def open_log(path: Path) -> PartitionLog:
    return PartitionLog.open(path, config(), clock=Clock())


# One step of a log's history: ("data", n, ts, epoch), ("txn", n, ts, epoch) from producer 7, ("abort", epoch),
# or ("idem", n, ts, epoch) from idempotent producer 9 (sequences go on from batch to batch).
Step = tuple


def write(plog: PartitionLog, steps: list[Step], seqs: dict[int | str, int]) -> list[int]:
    """Append ``steps`` (``seqs``: the next sequence of each producer id, and "txn_first", the first offset of
    the open transaction); the base offset of each."""
    bases = []
    for step in steps:
        kind, epoch = step[0], step[-1]
        if kind == "abort":
            batch = bytearray(marker_batch(7, 0, False, 0, timestamp_ms=5000))
            base = plog.append(batch, parse_header(batch), epoch)
            txn_first = seqs.pop("txn_first")
            plog.record_aborted(AbortedTxn(7, txn_first, base, txn_first))
        else:
            _, n, ts, _ = step
            pid, attrs = {"data": (-1, 0), "txn": (7, ATTR_TRANSACTIONAL), "idem": (9, 0)}[kind]
            seq = seqs.get(pid, 0) if pid >= 0 else -1
            records = [Record(i, ts + i, f"k{ts}-{i}".encode(), b"v" * 40) for i in range(n)]
            batch = bytearray(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                          base_sequence=seq, attributes=attrs))
            base = plog.append(batch, parse_header(batch), epoch)
            if pid >= 0:
                seqs[pid] = seq + n
            if kind == "txn":
                seqs.setdefault("txn_first", base)
        bases.append(base)
    return bases


def shape(plog: PartitionLog) -> dict:
    """Everything a reader or a restart depends on."""
    data = plog.read(plog.log_start_offset, 1 << 24)
    return {
        "end": plog.log_end_offset,
        "bytes": data,
        "epochs": [h.partition_leader_epoch for _, h in iter_batches(data)],
        "segments": [(s.base_offset, s.size, s.offset_index.entries(), s.time_index.entries(),
                      s.txn_index.entries, s.largest_timestamp, s.offset_of_largest_timestamp)
                     for s in plog.segments],
        "leader_epochs": plog.leader_epochs.entries,
        "aborted": plog.aborted_transactions(0, plog.log_end_offset),
    }


HISTORY: list[Step] = [
    ("data", 3, 100, 0), ("idem", 2, 200, 0), ("txn", 2, 300, 1), ("data", 4, 400, 1), ("abort", 1),
    ("idem", 3, 500, 2), ("data", 2, 600, 2), ("txn", 1, 700, 3), ("data", 5, 800, 3), ("abort", 3),
    ("idem", 2, 900, 4), ("data", 3, 1000, 4),
]
AFTER: list[Step] = [("data", 2, 5000, 7), ("idem", 2, 5100, 7), ("data", 6, 5200, 7)]


def test_truncate_mid_segment_then_append_matches_a_log_written_without_the_cut_part(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "a-0")
    bases = write(plog, HISTORY, {})
    assert len(plog.segments) >= 4
    keep = 6  # cut at the 7th batch: in a middle segment, after the first abort, before the second
    cut = bases[keep]
    assert plog.segments[0].base_offset < cut < plog.active_segment.base_offset
    plog.flush()
    assert read_offset_file(tmp_path / "a-0" / RECOVERY_POINT_FILE) == plog.log_end_offset

    plog.truncate_to(cut)
    assert plog.log_end_offset == cut
    assert read_offset_file(tmp_path / "a-0" / RECOVERY_POINT_FILE) == cut
    assert plog.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, bases[2]), EpochEntry(2, bases[5])]
    assert [a.last_offset for a in plog.aborted_transactions(0, cut)] == [bases[4]]
    assert all(seg.base_offset <= cut for seg in plog.segments)
    assert sorted(p.name for p in (tmp_path / "a-0").glob("*.log")) == [
        f"{seg.base_offset:020d}.log" for seg in plog.segments]
    write(plog, AFTER, {9: 5})  # producer 9's sequences go on from its 5 records kept

    expected = open_log(tmp_path / "b-0")
    write(expected, HISTORY[:keep] + AFTER, {})
    assert shape(plog) == shape(expected)
    assert plog.leader_epochs.entries[-1] == EpochEntry(7, cut)

    plog.close()
    reopened = open_log(tmp_path / "a-0")
    expected.close()
    assert shape(reopened) == shape(open_log(tmp_path / "b-0"))
    assert (tmp_path / "a-0" / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == (
        tmp_path / "b-0" / LEADER_EPOCH_CHECKPOINT_FILE).read_text()
    reopened.close()


def test_truncate_inside_a_batch_cuts_the_whole_batch_and_below_the_log_start_empties_the_log(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path / "a-0")
    bases = write(plog, HISTORY, {})
    plog.truncate_to(bases[3] + 2)  # inside the 4th batch (4 records)
    assert plog.log_end_offset == bases[3]
    assert plog.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(1, bases[2])]
    plog.truncate_to(plog.log_end_offset + 5)  # at or past the end: nothing to do
    assert plog.log_end_offset == bases[3]
    plog.close()

    plog = open_log(tmp_path / "b-0")
    write(plog, HISTORY, {})
    second = plog.segments[1].base_offset
    plog.delete_records_before(second)
    assert plog.segments[0].base_offset == second
    plog.truncate_to(second - 1)  # below the log start: emptied, starting there (Kafka's truncateFullyAndStartAt)
    assert (plog.log_start_offset, plog.log_end_offset) == (second - 1, second - 1)
    assert [s.base_offset for s in plog.segments] == [second - 1]
    assert sorted(p.name for p in plog.directory.glob("*.log")) == [f"{second - 1:020d}.log"]
    assert plog.leader_epochs.entries == []
    write(plog, [("data", 1, 100, 9)], {})
    plog.close()
    reopened = open_log(tmp_path / "b-0")
    assert (reopened.log_start_offset, reopened.log_end_offset) == (second - 1, second)
    assert reopened.leader_epochs.entries == [EpochEntry(9, second - 1)]
    reopened.close()


def test_recovery_rebuilds_the_epochs_a_crash_lost(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "a-0")
    bases = write(plog, HISTORY[:6], {})
    plog.flush()  # the epochs so far are durable with the recovery point
    checkpoint = tmp_path / "a-0" / LEADER_EPOCH_CHECKPOINT_FILE
    durable = checkpoint.read_text()
    later = write(plog, HISTORY[6:], {})
    entries = plog.leader_epochs.entries
    assert entries[-1] == EpochEntry(4, later[4])
    # A crash: the segments are in the page cache, the checkpoint's newest writes are lost.
    for seg in plog.segments:
        seg.close()
    checkpoint.write_text(durable)
    recovered = open_log(tmp_path / "a-0")
    assert recovered.leader_epochs.entries == entries
    assert recovered.leader_epochs.end_offset_for(2) == (2, later[1])
    recovered.close()
    # A missing (or unreadable) checkpoint is rebuilt from every batch header and written again.
    checkpoint.write_text("garbage")
    reopened = open_log(tmp_path / "a-0")
    assert reopened.leader_epochs.entries == entries
    assert LEADER_EPOCH_CHECKPOINT_FILE in {p.name for p in (tmp_path / "a-0").iterdir()}
    assert reopened.leader_epochs.entries[:2] == [EpochEntry(0, 0), EpochEntry(1, bases[2])]
    reopened.close()


def test_producer_state_is_rebuilt_after_a_truncation(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "a-0")
    bases = write(plog, HISTORY, {})
    state, _ = load_producer_state(plog.directory, plog)
    assert state.producers[9].last_seq == 6  # 2 + 3 + 2 records
    state.snapshot(plog.log_end_offset)  # a snapshot past the coming cut
    plog.truncate_to(bases[6])
    rebuilt = rebuild_after_truncation(plog)
    assert rebuilt.producers[9].last_seq == 4  # the batches after the cut are gone
    assert [b.first_offset for b in rebuilt.producers[9].batches] == [bases[1], bases[5]]
    assert not rebuilt.path.exists()  # the stale snapshot cannot come back once the log grows past it
    assert rebuilt.last_stable_offset(plog.log_end_offset) == plog.log_end_offset  # no open transaction
    plog.close()
