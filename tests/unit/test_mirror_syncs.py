"""Offset syncs as the source task writes them, read back by the store that translates group offsets:
exact to the record inside runs, never ahead of a record a group has not read (hypothesis-generated logs
with compacted gaps, foreign writes downstream and restarted tasks that re-send)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connectors.mirror.syncs import OffsetSyncWriter
from headwater.connectors.mirror.translate import OffsetSyncStore
from headwater.kafka.mirror import OffsetSync

TP = ("orders", 0)


def written(writer: OffsetSyncWriter) -> list[tuple[int, int]]:
    queue, writer._queue = writer._queue, []
    return [(s.upstream_offset, s.downstream_offset) for s in queue]


def test_one_run_needs_a_sync_at_each_end() -> None:
    w = OffsetSyncWriter(None, "syncs")
    upstream = list(range(100, 110))
    w.run(TP, upstream, 0, 10, 500)
    w.flush()
    assert written(w) == [(100, 500), (109, 509)]
    w.run(TP, list(range(110, 115)), 0, 5, 510)  # carries straight on: only its end
    w.flush()
    assert written(w) == [(114, 514)]


def test_a_gap_upstream_or_a_jump_downstream_starts_a_run() -> None:
    w = OffsetSyncWriter(None, "syncs")
    upstream = [0, 1, 2, 7, 8, 9]  # 3..6 compacted away
    w.run(TP, upstream, 0, 6, 0)
    w.flush()
    assert written(w) == [(0, 0), (2, 2), (7, 3), (9, 5)]  # both ends of each run
    w.run(TP, [10, 11], 0, 2, 9)  # three records of someone else landed at 6..8
    w.run(TP, [12], 0, 1, 11)
    w.flush()
    assert written(w) == [(10, 9), (12, 11)]  # the run's start, and the end of what was acknowledged


def test_record_path_leaves_the_end_pending_until_flush() -> None:
    w = OffsetSyncWriter(None, "syncs")
    for u, d in [(0, 0), (1, 1), (2, 2)]:
        w.record(TP, u, d)
    assert written(w) == [(0, 0)]
    w.record(TP, 5, 3)  # 3 and 4 compacted: the run 0..2 ends, another starts
    assert written(w) == [(2, 2), (5, 3)]
    w.flush()
    assert written(w) == []  # the last record acknowledged has its sync


@st.composite
def mirror_histories(draw: st.DrawFn) -> tuple[list[int], list[list[tuple[int, int, int]]]]:
    """Upstream offsets with gaps, and the tasks that mirrored them: each task a list of Kafka batches
    (first index, end index, downstream offset of the first), downstream only ever growing; a later task
    starts again from an earlier record (a restart re-sends)."""
    gaps = draw(st.lists(st.integers(1, 4), min_size=1, max_size=60))
    upstream, offset = [], draw(st.integers(0, 50))
    for g in gaps:
        offset += g
        upstream.append(offset)
    tasks, downstream, start = [], 0, 0
    count = draw(st.integers(1, 3))
    for n in range(count):
        batches, i = [], start
        # a task may stop anywhere (a crash); the last one goes on to the end, as a running task does
        end_at = len(upstream) if n == count - 1 else draw(st.integers(start, len(upstream)))
        while i < end_at:
            size = draw(st.integers(1, end_at - i))
            downstream += draw(st.sampled_from([0, 0, 0, 1, 3]))  # foreign records in between, sometimes
            batches.append((i, i + size, downstream))
            downstream += size
            i += size
        tasks.append(batches)
        if end_at:
            start = draw(st.integers(0, end_at))  # the next task resumes at or before where this one got
    return upstream, tasks


@settings(max_examples=300, deadline=None)
@given(mirror_histories())
def test_translation_never_skips_and_never_rereads_without_restarts(history) -> None:
    upstream, tasks = history
    store = OffsetSyncStore()
    store.read_to_end = True
    latest: dict[int, int] = {}  # upstream offset -> downstream offset of its latest copy
    for batches in tasks:
        w = OffsetSyncWriter(None, "syncs")  # a new task: no memory of the last one's runs
        for first, end, down in batches:
            w.run(TP, upstream, first, end, down)
            for i in range(first, end):
                latest[upstream[i]] = down + i - first
            w.flush()  # after every acknowledged poll, as the task does
        for u, d in written(w):
            store.add(OffsetSync(TP[0], TP[1], u, d))
    if not latest:
        return
    mirrored = sorted(latest)
    for u in range(0, mirrored[-1] + 3):
        got = store.translate(TP[0], TP[1], u)
        if got is None:
            continue
        after = [latest[x] for x in mirrored if x >= u]
        if after:
            assert got <= min(after), (u, got, min(after))  # never skips a record at or after u
        if len(tasks) == 1 and u >= mirrored[0]:
            # one task: nothing mirrored before u is read again (what lies between is others' records)
            before = [latest[x] for x in mirrored if x < u]
            assert got > max(before, default=-1), (u, got, upstream, tasks)
