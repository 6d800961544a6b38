"""Leader-epoch checks with a partition led in a cluster (``Partition.state`` set, as the cluster code sets it):
OffsetForLeaderEpoch, Fetch and Produce against a broker in process, the handlers called as dispatch does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest
from kafka.protocol.producer import ProduceRequest

from headwater.broker import apis
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.protocol.codec import RequestHeader
from headwater.broker.replication.state import PartitionState
from headwater.broker.server.broker_server import BrokerServer
from headwater.kafka.records import Record, build_batch, iter_batches, parse_header

TOPIC = "t"
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER = 74, 75, 6


def epochs_request(leader_epoch: int, current: int, replica_id: int = -1) -> Any:
    T = OffsetForLeaderEpochRequest[4].OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest[4](replica_id=replica_id, topics=[T(topic=TOPIC, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=leader_epoch)])])


def fetch_request(current: int) -> Any:
    T = FetchRequest[11].FetchTopic
    return FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                                T(topic=TOPIC, partitions=[T.FetchPartition(
                                    partition=0, current_leader_epoch=current, fetch_offset=0, log_start_offset=-1,
                                    partition_max_bytes=1 << 20)])])


def test_epochs_of_a_partition_led_in_a_cluster(tmp_path: Path) -> None:
    config = BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                          "node.id": "1"})

    async def run() -> None:
        server = BrokerServer(config)
        await server.start()
        try:
            server.cluster.create_topic(TOPIC, 1)
            partition = server.cluster.partition(TOPIC, 0)

            async def call(key: int, version: int, request: Any) -> dict[str, Any]:
                ctx = apis.RequestContext(server.cluster, RequestHeader(key, version, 7, "test", 0), "127.0.0.1:1",
                                          server.services)
                body = await apis.REGISTRY[key].handler(ctx, request)
                assert body is not None
                return body

            async def end_offset_for(leader_epoch: int, current: int, replica_id: int = -1) -> tuple[int, int, int]:
                body = await call(23, 4, epochs_request(leader_epoch, current, replica_id))
                p = body["topics"][0]["partitions"][0]
                return p["error_code"], p["leader_epoch"], p["end_offset"]

            batch = build_batch([Record(i, 1000, None, b"v") for i in range(3)])
            partition.log.append(bytearray(batch), parse_header(batch), 0)  # written while a single node led
            partition.state = PartitionState(leader=1, leader_epoch=5, isr=(1, 2), controller_epoch=1,
                                             replicas=(1, 2))
            assert await end_offset_for(5, 5) == (0, 5, 3)  # the new leader's epoch starts at its log end
            assert await end_offset_for(0, 5) == (0, 0, 3)  # epoch 0 ended where epoch 5 began
            assert await end_offset_for(3, -1) == (0, 0, 3)  # between the two: the epoch before
            assert (await end_offset_for(5, 4))[0] == FENCED_LEADER_EPOCH
            assert (await end_offset_for(5, 6))[0] == UNKNOWN_LEADER_EPOCH

            # Produce stamps the partition's epoch; Fetch checks the one its sender knows.
            body = await call(0, 8, _produce())
            assert body["responses"][0]["partition_responses"][0]["base_offset"] == 3
            fetched = await call(1, 11, fetch_request(5))
            data = fetched["responses"][0]["partitions"][0]["records"]
            assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [0, 5]
            assert partition.log.leader_epochs.entries == [(0, 0), (5, 3)]
            for current, code in ((4, FENCED_LEADER_EPOCH), (6, UNKNOWN_LEADER_EPOCH), (-1, 0)):
                fetched = await call(1, 11, fetch_request(current))
                assert fetched["responses"][0]["partitions"][0]["error_code"] == code, current

            # Another broker leads: only it answers, but for the debugging replica id.
            partition.state = PartitionState(leader=2, leader_epoch=6, isr=(1, 2), controller_epoch=1,
                                             replicas=(1, 2))
            assert (await end_offset_for(5, 6))[0] == NOT_LEADER_OR_FOLLOWER
            assert await end_offset_for(5, 6, replica_id=-2) == (0, 5, 4)
            assert partition.log.leader_epochs.latest == 5  # a follower records no epoch of its own
        finally:
            await server.stop()

    asyncio.run(run())


def _produce() -> Any:
    T = ProduceRequest.TopicProduceData
    batch = build_batch([Record(0, 2000, None, b"w")])
    return ProduceRequest[8](acks=1, timeout_ms=5000, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=batch)])])
