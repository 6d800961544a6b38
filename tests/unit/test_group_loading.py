"""Loading groups from a ``__consumer_offsets`` partition without holding up the event loop (group/loading.py):
the background load finds what the load at start finds, takes the records appended while it runs, and lets the
loop run between its chunks; the coordinator answers the partition's groups COORDINATOR_LOAD_IN_PROGRESS
meanwhile (Kafka's validateGroupStatus: Heartbeat NONE, SyncGroup REBALANCE_IN_PROGRESS) and serves them once
loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.group.coordinator import GroupCoordinator
from headwater.broker.group.group import Group
from headwater.broker.group.loading import load_partition, load_partitions
from headwater.broker.group.records import OffsetAndMetadata, encode_offset_key, encode_offset_value
from headwater.broker.group.requests import HeartbeatRequest
from headwater.broker.group.store import OFFSETS_TOPIC, offsets_partition
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.topic import Partition
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import Record, build_batch, parse_header

GROUPS = [f"g{n}" for n in range(5)]


def _cluster(tmp_path: Path) -> tuple[Cluster, Partition]:
    cluster = Cluster(BrokerConfig.model_validate({"log.dirs": str(tmp_path / "data")}))
    cluster.load()
    topic = cluster.create_topic(OFFSETS_TOPIC, 1, overrides={"cleanup.policy": "compact"})
    return cluster, topic.partitions[0]


def _commit(partition: Partition, round_: int, partitions: int = 50) -> None:
    """One batch: every group's commit of ``partitions`` partitions of topic t at offsets round_ * 1000 + p."""
    records = [Record(i, 0, encode_offset_key(g, "t", p), encode_offset_value(OffsetAndMetadata(round_ * 1000 + p)))
               for i, (g, p) in enumerate((g, p) for g in GROUPS for p in range(partitions))]
    batch = bytearray(build_batch(records))
    partition.log.append(batch, parse_header(batch))


def _offsets(groups: dict[str, Group]) -> dict[str, dict[tuple[str, int], int]]:
    return {g: {tp: o.offset for tp, o in group.offsets.items()} for g, group in groups.items()}


def _coordinator(tmp_path: Path, buffer_size: int) -> tuple[Cluster, Partition, GroupCoordinator]:
    """A cluster broker's coordinator (not yet leading) and an offsets partition of 30 rounds of commits."""
    cluster, partition = _cluster(tmp_path)
    for r in range(30):
        _commit(partition, r)
    config = BrokerConfig.model_validate({"log.dirs": str(tmp_path / "data"), "zookeeper.connect": "zk:2181",
                                          "broker.id": 1, "offsets.load.buffer.size": buffer_size})
    return cluster, partition, GroupCoordinator(cluster, config)


def test_the_background_load_finds_what_the_load_at_start_finds_and_lets_the_loop_run(tmp_path: Path) -> None:
    cluster, partition = _cluster(tmp_path)
    for r in range(20):
        _commit(partition, r)
    at_start: dict[str, Group] = {}
    load_partitions(at_start, [partition], 1 << 20)

    async def scenario() -> tuple[dict[str, Group], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.get_running_loop().create_task(ticker())
        loaded = await load_partition(partition, 1 << 20, buffer_size=4096)  # many chunks
        ticking.cancel()
        return loaded, ticks

    loaded, ticks = asyncio.run(scenario())
    assert _offsets(loaded) == _offsets(at_start)
    assert _offsets(loaded)["g3"][("t", 7)] == 19_007
    assert ticks > 10  # the loop ran between the chunks
    cluster.close()


def test_commits_appended_while_it_loads_are_loaded_too(tmp_path: Path) -> None:
    cluster, partition = _cluster(tmp_path)
    for r in range(20):
        _commit(partition, r)

    async def scenario() -> dict[str, Group]:
        async def late_commit() -> None:
            await asyncio.sleep(0)
            _commit(partition, 99, partitions=1)  # appended while the load is under way

        late = asyncio.get_running_loop().create_task(late_commit())
        loaded = await load_partition(partition, 1 << 20, buffer_size=2048)
        await late
        return loaded

    loaded = asyncio.run(scenario())
    assert _offsets(loaded)["g0"][("t", 0)] == 99_000 and _offsets(loaded)["g0"][("t", 1)] == 19_001
    cluster.close()


def test_a_cluster_coordinator_answers_load_in_progress_until_its_groups_are_loaded(tmp_path: Path) -> None:
    cluster, partition, coordinator = _coordinator(tmp_path, 4096)
    assert offsets_partition("g1", 1) == 0 and coordinator.store.partition_count() == 1

    async def scenario() -> list[object]:
        seen: list[object] = [coordinator.coordinator_error("g1")]  # not leading it yet
        coordinator.became_leader(OFFSETS_TOPIC, partition)
        seen += [coordinator.coordinator_error("g1"), coordinator.offsets.commit_check("g1", "", -1, None),
                 coordinator.heartbeat(HeartbeatRequest("g1", "m", None, 1)), coordinator.loading]
        while coordinator.loading:
            await asyncio.sleep(0.001)
        seen += [coordinator.coordinator_error("g1"), coordinator.offsets.fetch("g1", [("t", 3)])[("t", 3)]]
        await coordinator.stop()
        return seen

    seen = asyncio.run(scenario())
    assert seen[:5] == [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NONE, True]
    assert seen[5] is None
    loaded = seen[6]
    assert isinstance(loaded, OffsetAndMetadata) and loaded.offset == 29_003
    assert coordinator.load_failures == 0
    cluster.close()


def test_resigning_stops_a_load_and_nothing_is_handed_over(tmp_path: Path) -> None:
    cluster, partition, coordinator = _coordinator(tmp_path, 1024)

    async def scenario() -> None:
        coordinator.became_leader(OFFSETS_TOPIC, partition)
        await asyncio.sleep(0)
        coordinator.resigned(OFFSETS_TOPIC, partition)
        await asyncio.sleep(0.05)
        await coordinator.stop()

    asyncio.run(scenario())
    assert not coordinator.loading and not coordinator.groups
    assert coordinator.coordinator_error("g1") is ErrorCode.NOT_COORDINATOR
    cluster.close()
