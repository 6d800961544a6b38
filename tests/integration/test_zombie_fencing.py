"""KIP-618 zombie fencing end to end: distributed worker subprocesses over a real broker subprocess with
transactions, the config topic read with confluent-kafka, zombies played by aiokafka transactional producers.

With ``exactly.once.source.support=enabled`` a source connector's tasks start only after the leader recorded
its task count (``tasks-fencing-<connector>`` {"task-count": N}); when its tasks go from 3 to 1 the leader
fences the transactional ids of all 3 older tasks first, so a zombie producer still holding task 2's id is
refused at its commit; resetting a stopped connector's offsets fences its last generation first.
``PUT /connectors/{name}/fence`` is refused unsigned (403), and a follower forwards a signed one to the
leader, which does the bookkeeping under ``preparing`` too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.signing import session_keys, signed_headers
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess

from headwater.testing.rest import send

pytestmark = pytest.mark.timeout(240)

EOS_ENABLED = {"exactly.once.source.support": "enabled"}
EOS_PREPARING = {"exactly.once.source.support": "preparing"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with BrokerProcess(tmp_path_factory.mktemp("fencing-broker") / "data", *BROKER_OVERRIDES, "num.partitions=1",
                       "transaction.state.log.num.partitions=5") as b:
        yield b


def datagen(topic: str, tasks: int) -> dict[str, str]:
    return {"connector.class": "DataGen", "topic": topic, "tasks.max": str(tasks), "rate.per.sec": "2"}


def topic_with_times(bootstrap: str, topic: str) -> list[tuple[int, str, Any]]:
    """(timestamp ms, key, JSON value) of every record of a one-partition topic up to its end, in order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("fence-read"),
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    out: list[tuple[int, str, Any]] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        for p in partitions:
            end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            if end == 0:
                continue
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            while True:
                msg = consumer.poll(5)
                if msg is None:
                    raise AssertionError(f"{topic}-{p}: no record before its end {end}")
                if msg.error() is None:
                    value = msg.value()
                    out.append((msg.timestamp()[1], (msg.key() or b"").decode(),
                                None if value is None else json.loads(value)))
                    if (msg.offset() or 0) + 1 >= end:
                        break
    finally:
        consumer.close()
    return sorted(out, key=lambda r: r[0])


def task_count_records(cluster: Cluster, name: str) -> list[tuple[int, int]]:
    """(timestamp, task-count) of every ``tasks-fencing-<name>`` record of the config topic, oldest first."""
    assert cluster.settings is not None
    records = topic_with_times(cluster.bootstrap, cluster.settings["config.storage.topic"])
    return [(ts, value["task-count"]) for ts, key, value in records if key == f"tasks-fencing-{name}"]


def wait_task_count(cluster: Cluster, name: str, count: int, after: int = 0) -> int:
    """The timestamp of the newest task-count record of ``name``, once it says ``count`` (and has more than
    ``after`` records before it)."""
    def recorded() -> int | None:
        records = task_count_records(cluster, name)
        return records[-1][0] if len(records) > after and records[-1][1] == count else None

    return wait_for(recorded, 60, 0.3, f"tasks-fencing-{name} = {count}", cluster.logs)


def running_since(cluster: Cluster, name: str, task: int) -> int:
    """The timestamp of the newest RUNNING status of the task."""
    assert cluster.settings is not None
    records = topic_with_times(cluster.bootstrap, cluster.settings["status.storage.topic"])
    times = [ts for ts, key, value in records
             if key == f"status-task-{name}-{task}" and value and value["state"] == "RUNNING"]
    assert times, f"no RUNNING status of {name}-{task}"
    return times[-1]


def stopped(worker: WorkerProcess, name: str) -> bool:
    """The worker has read the connector's stop: STOPPED, and no task configs."""
    status = worker.status(name)
    return (status is not None and status["connector"]["state"] == "STOPPED"
            and worker.ok("GET", f"/connectors/{name}/tasks") == [])


class Zombie:
    """A transactional producer with a task's transactional.id and an open transaction holding one record."""

    def __init__(self, bootstrap: str, transactional_id: str, topic: str) -> None:
        self.bootstrap, self.transactional_id, self.topic = bootstrap, transactional_id, topic
        self.loop = asyncio.new_event_loop()
        self.producer: Any = None

    def begin(self) -> None:
        from aiokafka import AIOKafkaProducer

        async def go() -> None:
            self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id)
            await self.producer.start()  # InitProducerId: this producer now holds the id's newest epoch
            await self.producer.begin_transaction()
            await self.producer.send_and_wait(self.topic, b"from a zombie", partition=0)

        self.loop.run_until_complete(asyncio.wait_for(go(), 30))

    def commit(self) -> BaseException | None:
        """What the commit raised (None: it committed)."""
        async def go() -> BaseException | None:
            try:
                await self.producer.commit_transaction()
            except Exception as exc:
                return exc
            return None

        return self.loop.run_until_complete(asyncio.wait_for(go(), 30))

    def close(self) -> None:
        if self.producer is not None:
            try:
                self.loop.run_until_complete(asyncio.wait_for(self.producer.stop(), 10))
            except Exception:  # a fenced producer may refuse to end its transaction; it is closed anyway
                pass
        self.loop.close()


def fenced(exc: BaseException | None) -> bool:
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    return isinstance(exc, ProducerFenced | InvalidProducerEpoch)


def test_three_to_one_tasks_fences_the_old_producers_before_the_new_task_starts(broker: BrokerProcess,
                                                                                 tmp_path: Path) -> None:
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        assert cluster.settings is not None
        group = cluster.settings["group.id"]
        cluster.settings.update(EOS_ENABLED)
        cluster.start(2)
        leader = cluster.leader()
        name, topic = unique("eos"), unique("eos-data")
        leader.ok("POST", "/connectors", {"name": name, "config": datagen(topic, 3)}, expect=201)
        cluster.wait_running(name, 3, timeout=60)
        # First generation with exactly-once support: nothing to fence, the task count is recorded, and
        # only then do the tasks start (on both workers: the follower asked the leader too).
        first = wait_task_count(cluster, name, 3)
        for task in range(3):
            assert running_since(cluster, name, task) >= first, task

        zombie = Zombie(broker.bootstrap, f"{group}-{name}-2", unique("zombie"))
        try:
            zombie.begin()
            leader.ok("PUT", f"/connectors/{name}/config", {**datagen(topic, 1), "name": name}, expect=200)
            second = wait_task_count(cluster, name, 1, after=1)
            cluster.wait_running(name, 1, timeout=60)
            assert wait_for(lambda: running_since(cluster, name, 0) >= second or None, 30, 0.3,
                            "task 0 running after the second task-count record", cluster.logs)
            # The leader fenced task 2's id (as 0 and 1) before recording: the zombie's commit is refused.
            outcome = zombie.commit()
            assert fenced(outcome), repr(outcome)
        finally:
            zombie.close()
        assert [count for _, count in task_count_records(cluster, name)] == [3, 1]
        assert "fencing the producers of 3 task(s)" in cluster.logs(), cluster.logs()

        # Stopped, its offsets reset through the follower: the leader first fences task 0's producer (a zombie
        # of it included) and records 0 tasks, as Kafka does before it modifies offsets.
        leader.ok("PUT", f"/connectors/{name}/stop", expect=204)
        follower = next(w for w in cluster.workers if w is not leader)
        wait_for(lambda: stopped(follower, name) or None, 30, 0.3, f"{name} stopped on {follower.name}", cluster.logs)
        zombie = Zombie(broker.bootstrap, f"{group}-{name}-0", unique("zombie"))
        try:
            zombie.begin()
            follower.ok("DELETE", f"/connectors/{name}/offsets", expect=200)
            assert [count for _, count in task_count_records(cluster, name)] == [3, 1, 0]
            outcome = zombie.commit()
            assert fenced(outcome), repr(outcome)
        finally:
            zombie.close()


def signed_fence(worker: WorkerProcess, name: str, key: bytes | None):
    headers = {"Content-Type": "application/json"} if key is None else signed_headers(key, b"")
    return send("PUT", f"{worker.rest}/connectors/{name}/fence", b"", headers)


def test_fence_requests_unsigned_refused_signed_forwarded_to_the_leader(broker: BrokerProcess,
                                                                        tmp_path: Path) -> None:
    """Under ``preparing`` nothing asks for fencing by itself (tasks are not held back); the requests here are
    the only ones, so what the leader records comes from them."""
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        assert cluster.settings is not None
        group = cluster.settings["group.id"]
        cluster.settings.update(EOS_PREPARING)
        workers = cluster.start(2)
        leader = cluster.leader()
        follower = next(w for w in workers if w is not leader)
        name = unique("prep")
        leader.ok("POST", "/connectors", {"name": name, "config": datagen(unique("prep-data"), 2)}, expect=201)
        cluster.wait_running(name, 2, timeout=60)  # not held back: the connector is pending fencing all along
        assert task_count_records(cluster, name) == []

        for worker in (leader, follower):
            refused = signed_fence(worker, name, None)
            assert refused.status == 403 and refused.json["error_code"] == 403, (worker.name, refused)
            forged = signed_fence(worker, name, b"k" * 32)
            assert forged.status == 403, (worker.name, forged)
        assert task_count_records(cluster, name) == []

        config_topic = cluster.settings["config.storage.topic"]
        key = wait_for(lambda: (session_keys(cluster.bootstrap, config_topic) or [{}])[-1].get("key"), 30, 0.2,
                       "a session key", cluster.logs)
        # Signed, at the follower: forwarded to the leader, which records the first generation's count.
        resp = signed_fence(follower, name, key)
        assert resp.status == 204, resp
        assert [count for _, count in task_count_records(cluster, name)] == [2]

        # 2 -> 3 tasks: the leader fences the 2 recorded ids, a zombie holding task 1's among them.
        zombie = Zombie(broker.bootstrap, f"{group}-{name}-1", unique("zombie"))
        try:
            zombie.begin()
            leader.ok("PUT", f"/connectors/{name}/config", {**datagen(unique("prep-data"), 3), "name": name},
                      expect=200)
            cluster.wait_running(name, 3, timeout=60)
            resp = signed_fence(follower, name, key)
            assert resp.status == 204, resp
            assert [count for _, count in task_count_records(cluster, name)] == [2, 3]
            outcome = zombie.commit()
            assert fenced(outcome), repr(outcome)
        finally:
            zombie.close()
        # Nothing pending now: a further request records nothing.
        assert signed_fence(leader, name, key).status == 204
        assert [count for _, count in task_count_records(cluster, name)] == [2, 3]
        # An unknown connector is answered 404, a sink connector (no producers to fence) 400, as Kafka's leader answers.
        assert signed_fence(leader, "no-such-connector", key).status == 404
        sink = unique("sink")
        leader.ok("POST", "/connectors", {"name": sink, "config": {
            "connector.class": "FileStreamSinkConnector", "topics": unique("sink-in"),
            "file": str(tmp_path / "sink.txt")}}, expect=201)
        refused = signed_fence(follower, sink, key)
        assert refused.status == 400 and "not a source connector" in refused.json["message"], refused
