"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments and ControlledShutdown on a single node
(its own controller: each partition's one replica is this broker) and their authorization (CLUSTER ALTER / DESCRIBE
/ CLUSTER_ACTION, Kafka's error answers); the cluster's behaviour is tests/integration/test_zk_reassign.py's and
test_zk_controlled_shutdown.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

from headwater.broker import apis
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.protocol.codec import RequestHeader
from headwater.broker.protocol.schemas import ControlledShutdownRequest
from headwater.broker.server.broker_server import BrokerServer
from headwater.kafka.errors import ErrorCode

Alter = AlterPartitionReassignmentsRequest
Elect = ElectLeadersRequest
TOPIC = "t"


def _answers(tmp_path: Path, authorizer: bool, requests: list[Any]) -> list[dict[str, Any]]:
    """Each request's answer (as its handler returns it) from a single node with topic ``t`` of two partitions."""
    config = BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                          "node.id": "1", "authorizer.enabled": str(authorizer).lower()})

    async def run() -> list[dict[str, Any]]:
        server = BrokerServer(config)
        await server.start()
        try:
            server.cluster.create_topic(TOPIC, 2)
            answers = []
            for req in requests:
                header = RequestHeader(req.API_KEY, req.API_VERSION, 7, "test", 0)
                ctx = apis.RequestContext(server.cluster, header, "127.0.0.1:1", server.services)
                answer = await apis.REGISTRY[req.API_KEY].handler(ctx, req)
                assert answer is not None
                answers.append(answer)
            return answers
        finally:
            await server.stop()
    return asyncio.run(run())


def _alter(moves: dict[int, list[int] | None], version: int = 0) -> Any:
    return Alter[version](timeout_ms=1000, topics=[Alter.ReassignableTopic(name=TOPIC, partitions=[
        Alter.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r) for p, r in moves.items()])])


def _elect(election_type: int, partitions: list[int] | None) -> Any:
    named = None if partitions is None else [Elect.TopicPartitions(topic=TOPIC, partitions=partitions)]
    return Elect[1](election_type=election_type, topic_partitions=named, timeout_ms=1000)


def _codes(answer: dict[str, Any], topics: str, partitions: str, index: str) -> dict[int, int]:
    return {p[index]: p["error_code"] for t in answer[topics] for p in t[partitions]}


def test_a_single_node_is_its_own_controller(tmp_path: Path) -> None:
    alter, alter_v1, listed, elect, elect_all, unknown_type, itself, another = _answers(tmp_path, False, [
        _alter({0: [1], 1: [1, 2], 5: [1]}),
        _alter({0: [1], 1: None}, version=1),
        ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=None),
        _elect(0, [0, 9]),
        _elect(1, None),
        _elect(7, [0]),
        ControlledShutdownRequest[3](broker_id=1, broker_epoch=-1),
        ControlledShutdownRequest[1](broker_id=2)])
    # nothing to move (one replica each, which Kafka never moves); another broker is not registered
    assert itself == {"error_code": 0, "remaining_partitions": []}
    assert another == {"error_code": ErrorCode.BROKER_NOT_AVAILABLE, "remaining_partitions": []}
    assert alter["error_code"] == 0
    assert _codes(alter, "responses", "partitions", "partition_index") == {
        0: 0, 1: ErrorCode.INVALID_REPLICA_ASSIGNMENT, 5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _codes(alter_v1, "responses", "partitions", "partition_index") == {
        0: 0, 1: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert listed["error_code"] == 0 and listed["topics"] == []
    assert _codes(elect, "replica_election_results", "partition_result", "partition_id") == {
        0: ErrorCode.ELECTION_NOT_NEEDED, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert elect_all["replica_election_results"] == []  # every partition: those not needing one are left out
    assert unknown_type["error_code"] == ErrorCode.INVALID_REQUEST
    assert "election_type: unknown election type 7" in \
        unknown_type["replica_election_results"][0]["partition_result"][0]["error_message"]


@pytest.mark.parametrize("version", [0, 1])
def test_cluster_authorization_needed(tmp_path: Path, version: int) -> None:
    alter, listed, elect, unknown_type, shutdown = _answers(tmp_path, True, [
        _alter({0: [1]}, version=version),
        ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=TOPIC, partition_indexes=[0])]),
        _elect(0, [0, 1]),
        _elect(7, [0]),
        ControlledShutdownRequest[version + 2](broker_id=1, broker_epoch=-1)])
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert shutdown == {"error_code": denied, "remaining_partitions": []}
    assert alter["error_code"] == denied and _codes(alter, "responses", "partitions", "partition_index") == {0: denied}
    assert listed["error_code"] == denied
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in listed["topics"]] == [(TOPIC, [0])]
    assert elect["error_code"] == denied
    assert _codes(elect, "replica_election_results", "partition_result", "partition_id") == {0: denied, 1: denied}
    assert unknown_type["error_code"] == denied  # authorization comes first
