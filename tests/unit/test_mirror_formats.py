"""MirrorMaker 2's internal records: our encoding read back by an independent reader written from the
field layouts (struct.unpack, not our Reader), and round trips of any values."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.kafka import DecodeError
from headwater.kafka.mirror import Checkpoint, Heartbeat, OffsetSync

names = st.text(min_size=0, max_size=40)
offsets = st.integers(min_value=-1, max_value=2**63 - 1)
partitions = st.integers(min_value=0, max_value=2**31 - 1)


def read_string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def test_offset_sync_layout() -> None:
    sync = OffsetSync("orders", 3, 1000, 42)
    topic, pos = read_string(sync.key(), 0)
    assert (topic, struct.unpack_from(">i", sync.key(), pos)[0], len(sync.key())) == ("orders", 3, 2 + 6 + 4)
    assert struct.unpack(">qq", sync.value()) == (1000, 42)  # no version header


def test_checkpoint_layout() -> None:
    cp = Checkpoint("billing", "A.orders", 7, 500, 480, "m")
    group, pos = read_string(cp.key(), 0)
    topic, pos = read_string(cp.key(), pos)
    assert (group, topic, struct.unpack_from(">i", cp.key(), pos)[0]) == ("billing", "A.orders", 7)
    version, upstream, downstream = struct.unpack_from(">hqq", cp.value(), 0)
    metadata, end = read_string(cp.value(), 18)
    assert (version, upstream, downstream, metadata, end) == (0, 500, 480, "m", len(cp.value()))


def test_heartbeat_layout() -> None:
    hb = Heartbeat("A", "B", 1_767_225_600_000)
    source, pos = read_string(hb.key(), 0)
    target, _ = read_string(hb.key(), pos)
    assert (source, target) == ("A", "B")
    assert struct.unpack(">hq", hb.value()) == (0, 1_767_225_600_000)


@given(names, partitions, offsets, offsets)
def test_offset_sync_round_trip(topic: str, partition: int, up: int, down: int) -> None:
    sync = OffsetSync(topic, partition, up, down)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


@given(names, names, partitions, offsets, offsets, names)
def test_checkpoint_round_trip(group: str, topic: str, partition: int, up: int, down: int, meta: str) -> None:
    cp = Checkpoint(group, topic, partition, up, down, meta)
    assert Checkpoint.decode(cp.key(), cp.value()) == cp


@given(names, names, offsets)
def test_heartbeat_round_trip(source: str, target: str, ts: int) -> None:
    hb = Heartbeat(source, target, ts)
    assert Heartbeat.decode(hb.key(), hb.value()) == hb


def test_truncated_records_are_refused() -> None:
    cp = Checkpoint("g", "t", 0, 1, 2, "")
    with pytest.raises(DecodeError):
        Checkpoint.decode(cp.key(), cp.value()[:10])
    with pytest.raises(DecodeError):
        OffsetSync.decode(b"\x00\x05ab", b"")
