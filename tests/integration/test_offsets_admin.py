"""The group-offsets admin of the aiokafka adapter (``connect.kafka.offsets_admin``), which the offsets
service uses for a sink connector's group: each refusal comes back as its Kafka error code. And Connect
speaks to Kafka through aiokafka alone: kafka-python is imported nowhere under connect/."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import NewTopic

from headwater.connect.kafka import admin_client
from headwater.connect.kafka.offsets_admin import GroupOffsetsAdmin
from headwater.kafka.errors import ErrorCode
from headwater.testing import unique

ROOT = Path(__file__).resolve().parents[2]


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = admin_client(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


def test_connect_imports_no_kafka_python() -> None:
    offenders = []
    for path in (ROOT / "connect").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "kafka" or n.startswith("kafka.")]
    assert offenders == []


def test_group_offsets_committed_deleted_and_the_group_deleted(broker) -> None:
    topic, group = unique("offsets-admin"), unique("offsets-admin-group")

    async def go() -> None:
        await _create_topic(broker.bootstrap, topic, 3)
        async with GroupOffsetsAdmin(broker.bootstrap) as offsets:
            assert await offsets.committed(group) == {}
            assert await offsets.delete(group, [(topic, 0)]) == (ErrorCode.GROUP_ID_NOT_FOUND, {})
            assert await offsets.commit(group, {(topic, 0): 5, (topic, 2): 7}) == {}
            assert await offsets.committed(group) == {(topic, 0): 5, (topic, 2): 7}
            assert await offsets.commit(group, {(topic, 9): 1}) == {(topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert await offsets.delete(group, [(topic, 0)]) == (ErrorCode.NONE, {})
            assert await offsets.committed(group) == {(topic, 2): 7}
            assert await offsets.delete_group(group) == ErrorCode.NONE
            assert await offsets.committed(group) == {}
            assert await offsets.delete_group(group) == ErrorCode.GROUP_ID_NOT_FOUND

    asyncio.run(asyncio.wait_for(go(), 60))


def test_a_group_with_members_refuses_changes_from_outside(broker) -> None:
    topic, group = unique("offsets-admin-busy"), unique("offsets-admin-busy-group")

    async def go() -> None:
        await _create_topic(broker.bootstrap, topic, 1)
        member = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                  auto_offset_reset="earliest")
        await member.start()
        try:
            while not member.assignment():  # joined, with the topic's partition
                await member.getmany(timeout_ms=100)
            async with GroupOffsetsAdmin(broker.bootstrap) as offsets:
                refused = await offsets.commit(group, {(topic, 0): 1})
                assert set(refused) == {(topic, 0)} and refused[(topic, 0)] != ErrorCode.NONE
                assert await offsets.delete_group(group) == ErrorCode.NON_EMPTY_GROUP
                code, failed = await offsets.delete(group, [(topic, 0)])
                assert code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC or failed == {
                    (topic, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}
        finally:
            await member.stop()

    asyncio.run(asyncio.wait_for(go(), 60))
