"""The group coordinator against real clients and raw frames.

- Mixed-client groups: confluent-kafka, kafka-python and aiokafka consumers (each in its own
  process, printing its assignment as JSON lines) share one group and balance a 6-partition
  topic; SIGKILL one and the others take over its partitions after the session timeout.
- Committed offsets (one group per client) survive a clean broker restart and a SIGKILL of
  the broker; a new consumer resumes exactly at the committed offsets.
- Static membership: a restarted static member gets its partitions back without a
  rebalance; a second process with the same group.instance.id fences the first.
- Admin APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) and raw protocol
  checks (MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT,
  INCONSISTENT_GROUP_PROTOCOL, follower SyncGroup waiting, a "connect" protocol-type group).

The module's broker runs with group.initial.rebalance.delay.ms=0 and
group.min.session.timeout.ms=1000 so that rebalances and session expiry are quick.

kafka-python 3.0.12 consumers poll with timeout_ms=1000, never 100: when poll()'s timeout
expires while its SyncGroup is in flight (typically the quick second rebalance after a
consumer joined before it had the new topic's metadata), the client drops the SyncGroup
answer, never completes the join and stops heartbeating (seen in about 1 of 3 runs with
100 ms polls; the broker answered the SyncGroup correctly).
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import ConsumerGroupState as CGState
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from support.brokerproc import BrokerProcess
from support.confluent import position
from support.rawkafka import Conn, simple_commit

from headwater.testing.names import unique
from headwater.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

FAST_GROUPS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
MIN_SESSION_MS = 1000
MAX_SESSION_MS = 1800000  # group.max.session.timeout.ms default
TIMEOUT = 30.0  # any single wait for the group to settle

# Kafka error codes
NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """This module's broker: no initial rebalance delay, session timeouts down to 1 s."""
    base = tmp_path_factory.mktemp("groups")
    with BrokerProcess(base / "data", *FAST_GROUPS, "num.partitions=1") as proc:
        yield proc


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                             operation_timeout=10, request_timeout=15)
    fs[topic].result(timeout=TIMEOUT)


def produce_values(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    """``n`` records into each partition, valued ``p<partition>-<index>``."""
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": int(TIMEOUT * 1000)})
    errors: list[Any] = []
    for p, n in per_partition.items():
        for i in range(n):
            prod.produce(topic, value=f"p{p}-{i}".encode(), partition=p,
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert prod.flush(TIMEOUT) == 0
    assert not errors, errors[:3]


# --------------------------------------------------------------------------- consumer processes

# Runs one group consumer in a child process; prints JSON lines: started, assigned, revoked,
# error, exit. The process ends by itself after ``lifetime_s`` (nothing can outlive a test run).
CONSUMER_SCRIPT = r"""
import json, sys, time
cfg = json.loads(sys.argv[1])
def emit(event, **kw):
    print(json.dumps({"event": event, "t": time.monotonic(), **kw}), flush=True)
deadline = time.monotonic() + cfg["lifetime_s"]
client, topic = cfg["client"], cfg["topic"]
if client == "confluent":
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["client_id"],
            "partition.assignment.strategy": "roundrobin", "session.timeout.ms": cfg["session_ms"],
            "heartbeat.interval.ms": cfg["heartbeat_ms"], "max.poll.interval.ms": 30000,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    def on_error(err):
        emit("error", code=err.code(), name=err.name(), fatal=err.fatal(), message=err.str())
    conf["error_cb"] = on_error
    if cfg.get("debug"):
        conf["debug"] = cfg["debug"]
    c = Consumer(conf)
    def on_assign(consumer, parts):
        emit("assigned", partitions=sorted(p.partition for p in parts), member=consumer.memberid())
    def on_revoke(consumer, parts):
        emit("revoked", partitions=sorted(p.partition for p in parts))
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    emit("started")
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error():
            e = m.error()
            emit("error", code=e.code(), name=e.name(), fatal=e.fatal(), message=e.str())
            if e.fatal():
                break
    c.close()
elif client == "kafka-python":
    import logging
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for name in (cfg.get("debug") or "").split(","):
        if name:
            logging.getLogger(name).setLevel(logging.DEBUG)
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    kw = {"group_instance_id": cfg["instance_id"]} if cfg.get("instance_id") else {}
    c = KafkaConsumer(bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["client_id"],
                      partition_assignment_strategy=[RoundRobinPartitionAssignor],
                      session_timeout_ms=cfg["session_ms"], heartbeat_interval_ms=cfg["heartbeat_ms"],
                      max_poll_interval_ms=30000, enable_auto_commit=False, auto_offset_reset="earliest",
                      request_timeout_ms=40000, **kw)
    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))
        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))
    c.subscribe([topic], listener=Listener())
    emit("started")
    while time.monotonic() < deadline:
        try:
            c.poll(timeout_ms=1000)  # not shorter: see the module docstring
            if cfg.get("commit") and c.assignment():
                c.commit()  # synchronous: a fenced member learns it here
        except Exception as exc:
            emit("error", name=type(exc).__name__, message=str(exc))
            time.sleep(0.2)
    c.close()
elif client == "aiokafka":
    import asyncio
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))
        async def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))
    async def main():
        c = AIOKafkaConsumer(bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["client_id"],
                             session_timeout_ms=cfg["session_ms"], heartbeat_interval_ms=cfg["heartbeat_ms"],
                             max_poll_interval_ms=30000, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        c.subscribe([topic], listener=Listener())
        emit("started")
        while time.monotonic() < deadline:
            try:
                await c.getmany(timeout_ms=100)
            except Exception as exc:
                emit("error", name=type(exc).__name__, message=str(exc))
                await asyncio.sleep(0.2)
        await c.stop()
    asyncio.run(main())
emit("exit")
"""


class ConsumerProc:
    """A group consumer in a child process; its JSON-line events are collected by a thread."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, log_dir: Path, *,
                 session_ms: int = 6000, heartbeat_ms: int = 500, instance_id: str | None = None,
                 client_id: str | None = None, lifetime_s: float = 100, debug: str | None = None,
                 commit: bool = False) -> None:
        self.client = client
        self.client_id = client_id or unique(f"hw-{client}")
        cfg = {"client": client, "bootstrap": bootstrap, "topic": topic, "group": group,
               "session_ms": session_ms, "heartbeat_ms": heartbeat_ms, "instance_id": instance_id,
               "client_id": self.client_id, "lifetime_s": lifetime_s, "debug": debug,
               "commit": commit}
        self.stderr_path = log_dir / f"{self.client_id}.stderr"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", CONSUMER_SCRIPT, json.dumps(cfg)],
                                         stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def assignment(self) -> frozenset[int] | None:
        """Partitions owned now (eager protocol: revoke all, then assign), None before the first."""
        current: set[int] | None = None
        for e in self.snapshot():
            if e["event"] == "assigned":
                current = set(e["partitions"])
            elif e["event"] == "revoked" and current is not None:
                current -= set(e["partitions"])
        return None if current is None else frozenset(current)

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["event"] == "error"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def describe(self) -> str:
        err = self.stderr_path.read_text(errors="replace")[-2000:] if self.stderr_path.exists() else ""
        return f"{self.client_id} (rc={self.proc.poll()}): events={self.snapshot()[-8:]} stderr={err}"


@pytest.fixture
def consumer_procs(tmp_path: Path) -> Iterator[Callable[..., ConsumerProc]]:
    started: list[ConsumerProc] = []

    def start(client: str, bootstrap: str, topic: str, group: str, **kw: Any) -> ConsumerProc:
        p = ConsumerProc(client, bootstrap, topic, group, tmp_path, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def balanced(procs: list[ConsumerProc], partitions: int) -> bool:
    """Every process owns partitions/len(procs) partitions, disjoint, together all of them."""
    sets = [p.assignment for p in procs]
    if any(s is None for s in sets):
        return False
    per = partitions // len(procs)
    return (all(len(s) == per for s in sets)  # type: ignore[arg-type]
            and frozenset().union(*sets) == frozenset(range(partitions)))  # type: ignore[arg-type]


def wait_balanced(procs: list[ConsumerProc], partitions: int, timeout: float = TIMEOUT) -> None:
    try:
        wait_until(lambda: balanced(procs, partitions), "balanced assignments", timeout)
    except AssertionError:
        raise AssertionError("no balanced assignment:\n" + "\n".join(p.describe() for p in procs)) from None


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment (any version): topic -> partitions."""
    pos, out = 2, {}
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(n):
        (tlen,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + tlen].decode()
        pos += 2 + tlen
        (count,) = struct.unpack_from(">i", data, pos)
        out[topic] = list(struct.unpack_from(f">{count}i", data, pos + 4))
        pos += 4 + 4 * count
    return out


def wait_stable(port: int, group: str, members: int, timeout: float = TIMEOUT) -> Any:
    """DescribeGroups (raw v2) until the group is Stable with ``members`` members."""
    last: list[Any] = []

    def check() -> Any:
        with RawConn(port) as conn:
            d = describe_raw(conn, group)
        last[:] = [d]
        return d if d.group_state == "Stable" and len(d.members) == members else None

    try:
        return wait_until(check, "a Stable group", timeout, interval=0.2)
    except AssertionError:
        d = last[0] if last else None
        raise AssertionError(f"group {group} not Stable with {members} members: "
                             f"{d.group_state if d else None}, {len(d.members) if d else None} members") from None


def check_described(desc: Any, topic: str, procs: list[ConsumerProc]) -> None:
    """A raw DescribeGroups answer lists exactly ``procs``, each with the partitions it owns."""
    by_client = {m.client_id: m for m in desc.members}
    assert sorted(by_client) == sorted(p.client_id for p in procs)
    for p in procs:
        assigned = parse_assignment(bytes(by_client[p.client_id].member_assignment))
        assert list(assigned) == [topic]
        assert frozenset(assigned[topic]) == p.assignment, p.describe()


# --------------------------------------------------------------------------- 1. mixed clients


def test_three_clients_share_a_group_with_balanced_assignments(gbroker: BrokerProcess, consumer_procs) -> None:
    topic, group = unique("grp-mixed"), unique("g-mixed")
    create_topic(gbroker.bootstrap, topic, 6)
    procs = [consumer_procs(c, gbroker.bootstrap, topic, group) for c in ("confluent", "kafka-python", "aiokafka")]
    wait_balanced(procs, 6)
    desc = wait_stable(gbroker.port, group, 3)
    # the assignments are still the balanced ones once the group is Stable
    assert balanced(procs, 6), "\n".join(p.describe() for p in procs)
    assert (desc.protocol_type, desc.protocol_data) == ("consumer", "roundrobin")
    check_described(desc, topic, procs)
    # the same through confluent's AdminClient (DescribeGroups v4 on this librdkafka)
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    cdesc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert cdesc.state == CGState.STABLE
    assert cdesc.partition_assignor == "roundrobin"
    assert cdesc.is_simple_consumer_group is False
    cmembers = {m.client_id: m for m in cdesc.members}
    assert sorted(cmembers) == sorted(p.client_id for p in procs)
    for p in procs:
        parts = cmembers[p.client_id].assignment.topic_partitions
        assert {tp.topic for tp in parts} == {topic}
        assert frozenset(tp.partition for tp in parts) == p.assignment, p.describe()
    for p in procs:
        assert p.errors() == [], p.describe()
        assert p.proc.poll() is None, p.describe()


# --------------------------------------------------------------------------- 2. SIGKILL failover


def test_sigkilled_consumer_partitions_move_to_the_others(gbroker: BrokerProcess, consumer_procs,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    session_ms, heartbeat_ms = 6000, 500
    topic, group = unique("grp-failover"), unique("g-failover")
    create_topic(gbroker.bootstrap, topic, 6)
    kw = {"session_ms": session_ms, "heartbeat_ms": heartbeat_ms}
    # kafka-python joins first and stays the leader: the victim is the group leader
    victim = consumer_procs("kafka-python", gbroker.bootstrap, topic, group, **kw)
    wait_balanced([victim], 6)
    others = [consumer_procs(c, gbroker.bootstrap, topic, group, **kw) for c in ("confluent", "aiokafka")]
    wait_balanced([victim, *others], 6)
    check_described(wait_stable(gbroker.port, group, 3), topic, [victim, *others])

    killed_at = time.monotonic()
    victim.kill()
    wait_balanced(others, 6, timeout=session_ms / 1000 + TIMEOUT)
    took = time.monotonic() - killed_at
    with capsys.disabled():
        print(f"\n[failover] SIGKILL of the leader -> its partitions reassigned after {took:.2f}s "
              f"(session.timeout.ms={session_ms}, heartbeat.interval.ms={heartbeat_ms})")
    # Kafka does not take a closed connection as a leave: only the session timeout ends the member.
    assert took >= (session_ms - heartbeat_ms) / 1000 - 0.5, f"reassigned after {took:.2f}s, before the session timeout"
    assert took <= session_ms / 1000 + 10, f"reassignment took {took:.2f}s"
    check_described(wait_stable(gbroker.port, group, 2), topic, others)
    for p in others:
        assert p.errors() == [], p.describe()


# --------------------------------------------------------------------------- 3. offsets across restarts

RESTART_COUNTS = {0: 30, 1: 30}
# two rounds of commits per client: before the clean restart, and before the SIGKILL
COMMITS = {
    "confluent": ({0: 7, 1: 19}, {0: 9, 1: 21}),
    "kafka-python": ({0: 12, 1: 3}, {0: 14, 1: 0}),
    "aiokafka": ({0: 30, 1: 25}, {0: 30, 1: 26}),
}


def commit_confluent(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    """Join the group, commit ``offsets`` synchronously, return ``committed()``, leave."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        wait_until(lambda: (c.poll(0.1), len(c.assignment()) == len(offsets))[1], "confluent assignment", TIMEOUT,
                   interval=0)
        res = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        assert [tp.error for tp in res] == [None] * len(offsets)
        got = c.committed([TopicPartition(topic, p) for p in offsets], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def commit_kafka_python(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500, auto_offset_reset="earliest")
    try:
        c.subscribe([topic])
        wait_until(lambda: (c.poll(timeout_ms=1000), len(c.assignment()) == len(offsets))[1],
                   "kafka-python assignment", TIMEOUT, interval=0)
        c.commit({KTP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        return {p: c.committed(KTP(topic, p)) for p in offsets}
    finally:
        c.close()


def commit_aiokafka(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def go() -> dict[int, int]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500, auto_offset_reset="earliest")
        await c.start()
        try:
            c.subscribe([topic])
            while len(c.assignment()) != len(offsets):
                await c.getmany(timeout_ms=100)
            await c.commit({ATP(topic, p): o for p, o in offsets.items()})
            return {p: await c.committed(ATP(topic, p)) for p in offsets}
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


COMMITTERS = {"confluent": commit_confluent, "kafka-python": commit_kafka_python, "aiokafka": commit_aiokafka}


def committed_by_client(client: str, bootstrap: str, topic: str, group: str, partitions: list[int]) -> dict[int, int]:
    """``committed()`` of a fresh consumer of ``client`` that does not join the group."""
    if client == "confluent":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=15)
            return {tp.partition: tp.offset for tp in got}
        finally:
            c.close()
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            return {p: kc.committed(KTP(topic, p)) for p in partitions}
        finally:
            kc.close()
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def go() -> dict[int, int]:
        ac = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await ac.start()
        try:
            return {p: await ac.committed(ATP(topic, p)) for p in partitions}
        finally:
            await ac.stop()

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def raw_offset_fetch(port: int, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    with RawConn(port) as conn:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        resp = conn.call(OffsetFetchRequest[5](group_id=group, topics=[T(name=topic, partition_indexes=partitions)]),
                         OffsetFetchResponse)
    assert resp.error_code == NONE
    out = {}
    for t in resp.topics:
        assert t.name == topic
        for p in t.partitions:
            assert p.error_code == NONE
            out[p.partition_index] = p.committed_offset
    return out


def check_committed(port: int, bootstrap: str, topic: str, groups: dict[str, str], round_: int) -> None:
    parts = sorted(RESTART_COUNTS)
    for client, group in groups.items():
        want = COMMITS[client][round_]
        assert raw_offset_fetch(port, group, topic, parts) == want, f"{client}: OffsetFetch"
        assert committed_by_client(client, bootstrap, topic, group, parts) == want, f"{client}: committed()"


def consume_from_group(client: str, bootstrap: str, topic: str, group: str,
                       expected: int) -> list[tuple[int, int, bytes]]:
    """Join ``group`` and consume until ``expected`` records, then 1 s more to catch extras."""
    got: list[tuple[int, int, bytes]] = []
    if client == "confluent":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        try:
            c.subscribe([topic])
            deadline, extra_until = time.monotonic() + TIMEOUT, None
            while time.monotonic() < (extra_until or deadline):
                m = c.poll(0.1)
                if m is not None:
                    assert not m.error(), m.error()
                    got.append((*position(m), m.value() or b""))
                if extra_until is None and len(got) >= expected and len(c.assignment()) == len(RESTART_COUNTS):
                    extra_until = time.monotonic() + 1.0
        finally:
            c.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer

        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                           auto_offset_reset="earliest", session_timeout_ms=6000)
        try:
            kc.subscribe([topic])
            deadline, extra_until = time.monotonic() + TIMEOUT, None
            while time.monotonic() < (extra_until or deadline):
                for msgs in kc.poll(timeout_ms=1000).values():
                    got += [(m.partition, m.offset, m.value) for m in msgs]
                if extra_until is None and len(got) >= expected and len(kc.assignment()) == len(RESTART_COUNTS):
                    extra_until = time.monotonic() + 1.0
        finally:
            kc.close()
    else:
        from aiokafka import AIOKafkaConsumer

        async def go() -> None:
            ac = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                  auto_offset_reset="earliest", session_timeout_ms=6000)
            await ac.start()
            try:
                ac.subscribe([topic])
                deadline, extra_until = time.monotonic() + TIMEOUT, None
                while time.monotonic() < (extra_until or deadline):
                    for msgs in (await ac.getmany(timeout_ms=100)).values():
                        got.extend((m.partition, m.offset, m.value) for m in msgs)
                    if extra_until is None and len(got) >= expected and len(ac.assignment()) == len(RESTART_COUNTS):
                        extra_until = time.monotonic() + 1.0
            finally:
                await ac.stop()

        asyncio.run(asyncio.wait_for(go(), TIMEOUT + 15))
    return got


@pytest.mark.timeout(150)
def test_committed_offsets_survive_clean_restart_and_sigkill(fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker
    broker.overrides += FAST_GROUPS
    broker.start()
    topic = unique("grp-offsets")
    create_topic(broker.bootstrap, topic, len(RESTART_COUNTS))
    produce_values(broker.bootstrap, topic, RESTART_COUNTS)
    groups = {client: unique(f"g-offsets-{client}") for client in COMMITS}

    # round 0: commit with each client, then a clean restart (SIGTERM)
    for client, group in groups.items():
        assert COMMITTERS[client](broker.bootstrap, topic, group, COMMITS[client][0]) == COMMITS[client][0], client
    check_committed(broker.port, broker.bootstrap, topic, groups, 0)
    assert broker.stop() == 0
    broker.start()
    check_committed(broker.port, broker.bootstrap, topic, groups, 0)

    # round 1: commit again with each client; delete one offset of a group and a whole group
    # (tombstones in __consumer_offsets); then SIGKILL the broker
    for client, group in groups.items():
        assert COMMITTERS[client](broker.bootstrap, topic, group, COMMITS[client][1]) == COMMITS[client][1], client
    partial, deleted = unique("g-offsets-partial"), unique("g-offsets-deleted")
    with RawConn(broker.port) as conn:
        simple_commit(conn, partial, topic, {0: 5, 1: 6})
        simple_commit(conn, deleted, topic, {0: 7, 1: 8})
        od = conn.call(offset_delete_req(partial, topic, [0]), OffsetDeleteResponse)
        assert [(p.partition_index, p.error_code) for t in od.topics for p in t.partitions] == [(0, NONE)]
        dg = conn.call(DeleteGroupsRequest[1](groups_names=[deleted]), DeleteGroupsResponse)
        assert [r.error_code for r in dg.results] == [NONE]
    broker.kill()
    broker.start()
    check_committed(broker.port, broker.bootstrap, topic, groups, 1)
    assert raw_offset_fetch(broker.port, partial, topic, [0, 1]) == {0: -1, 1: 6}
    assert raw_offset_fetch(broker.port, deleted, topic, [0, 1]) == {0: -1, 1: -1}
    with RawConn(broker.port) as conn:
        listed = {g.group_id: g.protocol_type for g in conn.call(ListGroupsRequest[2](), ListGroupsResponse).groups}
        assert deleted not in listed
        assert all(listed.get(g) == "consumer" for g in groups.values()), listed
        # OffsetFetch v2+ with a null topic list: every committed partition of the group
        for client, group in groups.items():
            resp = conn.call(OffsetFetchRequest[5](group_id=group, topics=None), OffsetFetchResponse)
            assert resp.error_code == NONE
            committed = {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}
            assert committed == {(topic, p): o for p, o in COMMITS[client][1].items()}, client

    # a new member of each group resumes exactly at the committed offsets
    for client, group in groups.items():
        start = COMMITS[client][1]
        want = sorted((p, o, f"p{p}-{o}".encode()) for p, n in RESTART_COUNTS.items() for o in range(start[p], n))
        got = consume_from_group(client, broker.bootstrap, topic, group, len(want))
        assert sorted(got) == want, f"{client}: resumed with {len(got)} records, wanted {len(want)}"
        assert len(got) == len(set(got)), f"{client}: duplicates"


# --------------------------------------------------------------------------- 4. static membership


@pytest.mark.slow
def test_static_member_restart_keeps_assignment_without_rebalance(gbroker: BrokerProcess, consumer_procs) -> None:
    session_ms = 10000  # the restarted process (its start and imports: seconds on a loaded machine) joins within it
    topic, group = unique("grp-static"), unique("g-static")
    create_topic(gbroker.bootstrap, topic, 4)
    kw = {"session_ms": session_ms, "heartbeat_ms": 300}
    a = consumer_procs("confluent", gbroker.bootstrap, topic, group, instance_id="inst-a", **kw)
    wait_balanced([a], 4)
    b = consumer_procs("confluent", gbroker.bootstrap, topic, group, instance_id="inst-b", **kw)
    wait_balanced([a, b], 4)
    check_described(wait_stable(gbroker.port, group, 2), topic, [a, b])
    a_parts, b_parts = a.assignment, b.assignment
    b_events = len(b.snapshot())

    killed_at = time.monotonic()
    a.kill()
    a2 = consumer_procs("confluent", gbroker.bootstrap, topic, group, instance_id="inst-a", **kw)
    wait_until(lambda: a2.assignment is not None, "the restarted static member's assignment", TIMEOUT)
    back_after = time.monotonic() - killed_at
    assert a2.assignment == a_parts, a2.describe()
    assert back_after < session_ms / 1000, f"static member got its partitions back only after {back_after:.2f}s"
    # wait past the old member's session timeout: still no rebalance, B keeps its partitions throughout
    time.sleep(max(0.0, killed_at + session_ms / 1000 + 1.5 - time.monotonic()))
    assert b.assignment == b_parts
    assert b.snapshot()[b_events:] == [], f"B saw a rebalance: {b.snapshot()[b_events:]}"
    assert a2.assignment == a_parts
    check_described(wait_stable(gbroker.port, group, 2), topic, [a2, b])
    assert a2.errors() == [] and b.errors() == []
    with RawConn(gbroker.port) as conn:
        desc = describe_raw(conn, group, version=4)  # group_instance_id is in v4+
    assert sorted((m.client_id, m.group_instance_id) for m in desc.members) == \
        sorted([(a2.client_id, "inst-a"), (b.client_id, "inst-b")])


def test_duplicate_static_instance_id_fences_the_old_member(gbroker: BrokerProcess, consumer_procs) -> None:
    """The old member (kafka-python, committing after each poll) gets FencedInstanceIdError from
    commit(). (librdkafka 2.16 logs a fatal "Static consumer fenced" but hands the application no
    error event, and kafka-python's heartbeat thread only logs it.)"""
    topic, group = unique("grp-fence"), unique("g-fence")
    create_topic(gbroker.bootstrap, topic, 4)
    kw = {"session_ms": 6000, "heartbeat_ms": 300}
    # the other member joins first and stays the leader: a kafka-python leader that rejoins assigns
    # before it has the topic's metadata and then rejoins again, a rebalance of its own making
    other = consumer_procs("confluent", gbroker.bootstrap, topic, group, instance_id="inst-y", **kw)
    wait_balanced([other], 4)
    old = consumer_procs("kafka-python", gbroker.bootstrap, topic, group, instance_id="inst-x", commit=True, **kw)
    wait_balanced([old, other], 4)
    check_described(wait_stable(gbroker.port, group, 2), topic, [old, other])
    old_parts, other_events = old.assignment, len(other.snapshot())

    new = consumer_procs("kafka-python", gbroker.bootstrap, topic, group, instance_id="inst-x", **kw)
    wait_until(lambda: new.assignment is not None, "the new static member's assignment", TIMEOUT)
    assert new.assignment == old_parts
    wait_until(lambda: [e for e in old.errors() if e.get("name") == "FencedInstanceIdError"],
               f"FENCED_INSTANCE_ID on the old member: {old.describe()}", 15)
    assert other.snapshot()[other_events:] == [], "the other member saw a rebalance"
    assert new.errors() == [] and other.errors() == []
    check_described(wait_stable(gbroker.port, group, 2), topic, [new, other])


def test_static_membership_raw(gbroker: BrokerProcess) -> None:
    """JoinGroup v5: static members skip MEMBER_ID_REQUIRED; a rejoin with the same instance id
    takes over (same assignment, same generation), the old member id is fenced."""
    group = unique("g-static-raw")
    with RawConn(gbroker.port) as c1, RawConn(gbroker.port) as c2:
        j1 = c1.call(join_req(group, "", version=5, instance_id="i-1"), JoinGroupResponse)
        assert j1.error_code == NONE and j1.generation_id == 1 and j1.leader == j1.member_id
        assert [(m.member_id, m.group_instance_id) for m in j1.members] == [(j1.member_id, "i-1")]
        s1 = c1.call(sync_req(group, 1, j1.member_id, {j1.member_id: b"static-work"}, instance_id="i-1"),
                     SyncGroupResponse)
        assert (s1.error_code, bytes(s1.assignment)) == (NONE, b"static-work")

        j2 = c2.call(join_req(group, "", version=5, instance_id="i-1"), JoinGroupResponse)
        assert j2.error_code == NONE
        assert j2.member_id != j1.member_id
        assert j2.generation_id == 1, "a static rejoin of a Stable group must not bump the generation"
        s2 = c2.call(sync_req(group, 1, j2.member_id, {}, instance_id="i-1"), SyncGroupResponse)
        assert (s2.error_code, bytes(s2.assignment)) == (NONE, b"static-work")

        assert c1.call(hb_req(group, 1, j1.member_id, instance_id="i-1"), HeartbeatResponse).error_code \
            == FENCED_INSTANCE_ID
        assert c2.call(hb_req(group, 1, j2.member_id, instance_id="i-1"), HeartbeatResponse).error_code == NONE
        # a static member leaves by instance id
        LG = LeaveGroupRequest.MemberIdentity
        leaving = [LG(member_id=j2.member_id, group_instance_id="i-1")]
        lv = c2.call(LeaveGroupRequest[3](group_id=group, members=leaving),
                     LeaveGroupResponse)
        assert lv.error_code == NONE and [m.error_code for m in lv.members] == [NONE]
        assert describe_raw(c2, group).group_state == "Empty"


# --------------------------------------------------------------------------- raw protocol helpers


# One TCP connection speaking raw frames; members joined over it report client id "hw-raw".
RawConn = partial(Conn, timeout=15.0, client_id="hw-raw")


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment_bytes(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def join_req(group: str, member_id: str, *, version: int = 4, protocol_type: str = "consumer",
             protocols: list[tuple[str, bytes]] | None = None, session_ms: int = 30000,
             rebalance_ms: int = 20000, instance_id: str | None = None) -> Any:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    protocols = protocols if protocols is not None else [("range", subscription("t"))]
    kw = {"group_instance_id": instance_id} if version >= 5 else {}
    return JoinGroupRequest[version](group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                                     member_id=member_id, protocol_type=protocol_type,
                                     protocols=[P(name=n, metadata=m) for n, m in protocols], **kw)


def sync_req(group: str, generation: int, member_id: str, assignments: dict[str, bytes],
             instance_id: str | None = None) -> Any:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest[3](group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id,
                               assignments=[A(member_id=m, assignment=a) for m, a in assignments.items()])


def hb_req(group: str, generation: int, member_id: str, instance_id: str | None = None) -> Any:
    return HeartbeatRequest[3](group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)


def leave_req(group: str, member_id: str) -> Any:
    return LeaveGroupRequest[1](group_id=group, member_id=member_id)


def describe_raw(conn: Conn, group: str, version: int = 2) -> Any:
    kw = {"include_authorized_operations": False} if version >= 3 else {}
    resp = conn.call(DescribeGroupsRequest[version](groups=[group], **kw), DescribeGroupsResponse)
    assert len(resp.groups) == 1 and resp.groups[0].group_id == group
    return resp.groups[0]


def join_two_step(conn: Conn, group: str, **kw: Any) -> Any:
    """JoinGroup v4+: MEMBER_ID_REQUIRED with the id, then the real join with it."""
    first = conn.call(join_req(group, "", **kw), JoinGroupResponse)
    assert first.error_code == MEMBER_ID_REQUIRED, first
    assert first.member_id and first.generation_id == -1
    resp = conn.call(join_req(group, first.member_id, **kw), JoinGroupResponse)
    assert resp.member_id == first.member_id
    return resp


# --------------------------------------------------------------------------- 5. group admin


def test_list_delete_groups_and_offset_delete(gbroker: BrokerProcess) -> None:
    topic = unique("grp-admin")
    create_topic(gbroker.bootstrap, topic, 2)
    active, empty = unique("g-active"), unique("g-empty")
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    with RawConn(gbroker.port) as conn:
        # an active consumer group with one member (raw), and an empty group with offsets only
        sub = [("range", subscription(topic))]
        j = join_two_step(conn, active, protocols=sub)
        assert j.error_code == NONE and j.leader == j.member_id
        s = conn.call(sync_req(active, j.generation_id, j.member_id, {j.member_id: assignment_bytes(topic, [0, 1])}),
                      SyncGroupResponse)
        assert s.error_code == NONE
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        commit = conn.call(OffsetCommitRequest[2](
            group_id=active, generation_id_or_member_epoch=j.generation_id, member_id=j.member_id,
            retention_time_ms=-1, topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=4,
                                                                      committed_metadata="m")])]),
            OffsetCommitResponse)
        assert commit.topics[0].partitions[0].error_code == NONE
        simple_commit(conn, empty, topic, {0: 11, 1: 22})

        # ListGroups (confluent, and raw v4 with a state filter)
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        assert listed.errors == []
        states = {g.group_id: g.state for g in listed.valid}
        assert states[active] == CGState.STABLE
        assert states[empty] == CGState.EMPTY
        by_type = {g.group_id: g.is_simple_consumer_group for g in listed.valid}
        assert by_type[active] is False
        lg = conn.call(ListGroupsRequest[4](states_filter=["Stable"]), ListGroupsResponse)
        stable_ids = {g.group_id: (g.protocol_type, g.group_state) for g in lg.groups}
        assert stable_ids[active] == ("consumer", "Stable")
        assert empty not in stable_ids
        lg = conn.call(ListGroupsRequest[4](states_filter=["Empty"]), ListGroupsResponse)
        assert {g.group_id: g.group_state for g in lg.groups}.get(empty) == "Empty"
        assert active not in {g.group_id for g in lg.groups}

        # DescribeGroups (raw): state, protocol, member and its assignment
        d = describe_raw(conn, active)
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, bytes(m.member_assignment)) for m in d.members] == \
            [(j.member_id, "hw-raw", assignment_bytes(topic, [0, 1]))]
        assert bytes(d.members[0].member_metadata) == subscription(topic)

        # DeleteGroups: active -> NON_EMPTY_GROUP (client and raw); empty -> deleted with its offsets
        fs = admin.delete_consumer_groups([active], request_timeout=10)
        with pytest.raises(KafkaException) as exc:
            fs[active].result(timeout=15)
        assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        dg = conn.call(DeleteGroupsRequest[1](groups_names=[active, unique("g-missing")]), DeleteGroupsResponse)
        assert [r.error_code for r in dg.results] == [NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND]

        # OffsetDelete on a topic the active group subscribes to -> GROUP_SUBSCRIBED_TO_TOPIC
        od = conn.call(offset_delete_req(active, topic, [0]), OffsetDeleteResponse)
        assert od.error_code == NONE
        assert [(p.partition_index, p.error_code) for p in od.topics[0].partitions] == [(0, GROUP_SUBSCRIBED_TO_TOPIC)]
        assert raw_offset_fetch(gbroker.port, active, topic, [0]) == {0: 4}

        # OffsetDelete (kafka-python admin) on the empty group removes exactly that offset
        from kafka import TopicPartition as KTP
        from kafka import errors as KafkaErrors
        from kafka.admin import KafkaAdminClient

        kadmin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap, request_timeout_ms=15000)
        try:
            res = kadmin.delete_group_offsets(empty, [KTP(topic, 0)])
        finally:
            kadmin.close()
        assert res == {KTP(topic, 0): KafkaErrors.NoError}, res
        assert raw_offset_fetch(gbroker.port, empty, topic, [0, 1]) == {0: -1, 1: 22}

        fs = admin.delete_consumer_groups([empty], request_timeout=10)
        assert fs[empty].result(timeout=15) is None
        assert raw_offset_fetch(gbroker.port, empty, topic, [0, 1]) == {0: -1, 1: -1}
        assert describe_raw(conn, empty).group_state == "Dead"
        listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result(timeout=15).valid}
        assert empty not in listed and active in listed

        # once the last member leaves, the active group is Empty and can be deleted
        assert conn.call(leave_req(active, j.member_id), LeaveGroupResponse).error_code == NONE
        assert describe_raw(conn, active).group_state == "Empty"
        dg = conn.call(DeleteGroupsRequest[1](groups_names=[active]), DeleteGroupsResponse)
        assert [r.error_code for r in dg.results] == [NONE]
        assert raw_offset_fetch(gbroker.port, active, topic, [0]) == {0: -1}


def test_delete_groups_just_after_the_session_timeout_of_a_vanished_member(gbroker: BrokerProcess) -> None:
    """A member gone without LeaveGroup (librdkafka's static members on close, a killed process) is out at its
    own session deadline: DeleteGroups 20 ms after it finds the group empty (with a 100 ms sweep it was "not
    empty" most of the time). The broker's deadline lies between the last heartbeat's sending and its answer,
    so the test's instants hold whatever the load; the unit test tests/unit/test_group_sessions.py pins the
    timer to the millisecond on a virtual clock."""
    group = unique("g-vanished")
    session_ms = 6000
    with RawConn(gbroker.port) as conn:
        j = join_two_step(conn, group, session_ms=session_ms, rebalance_ms=session_ms)
        assert j.error_code == NONE
        s = conn.call(sync_req(group, j.generation_id, j.member_id, {j.member_id: b"work"}), SyncGroupResponse)
        assert s.error_code == NONE
        sent = time.monotonic()
        assert conn.call(hb_req(group, j.generation_id, j.member_id), HeartbeatResponse).error_code == NONE
        answered = time.monotonic()
    # the connection is closed without a LeaveGroup; the member stays until its session runs out
    with RawConn(gbroker.port) as admin:
        time.sleep(max(0.0, sent + session_ms / 2000 - time.monotonic()))
        dg = admin.call(DeleteGroupsRequest[1](groups_names=[group]), DeleteGroupsResponse)
        assert [r.error_code for r in dg.results] == [NON_EMPTY_GROUP]
        time.sleep(max(0.0, answered + session_ms / 1000 + 0.02 - time.monotonic()))
        dg = admin.call(DeleteGroupsRequest[1](groups_names=[group]), DeleteGroupsResponse)
        assert [r.error_code for r in dg.results] == [NONE]
        assert describe_raw(admin, group).group_state == "Dead"


def offset_delete_req(group: str, topic: str, partitions: list[int]) -> Any:
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    P = T.OffsetDeleteRequestPartition
    return OffsetDeleteRequest[0](group_id=group, topics=[T(name=topic, partitions=[P(partition_index=p)
                                                                                   for p in partitions])])


def test_join_group_errors_raw(gbroker: BrokerProcess) -> None:
    group = unique("g-raw-errors")
    with RawConn(gbroker.port) as c1, RawConn(gbroker.port) as c2:
        # session timeouts outside [group.min.session.timeout.ms, group.max.session.timeout.ms]
        for bad in (MIN_SESSION_MS - 1, MAX_SESSION_MS + 1):
            r = c1.call(join_req(group, "", session_ms=bad), JoinGroupResponse)
            assert r.error_code == INVALID_SESSION_TIMEOUT, bad
        # JoinGroup v4: MEMBER_ID_REQUIRED, then the join with that id makes a one-member group
        j = join_two_step(c1, group, protocols=[("range", subscription("t")), ("roundrobin", subscription("t"))])
        assert (j.error_code, j.generation_id, j.leader, j.protocol_name) == (NONE, 1, j.member_id, "range")
        assert [m.member_id for m in j.members] == [j.member_id]
        s = c1.call(sync_req(group, 1, j.member_id, {j.member_id: b"x"}), SyncGroupResponse)
        assert (s.error_code, bytes(s.assignment)) == (NONE, b"x")

        assert c1.call(hb_req(group, 1, j.member_id), HeartbeatResponse).error_code == NONE
        assert c1.call(hb_req(group, 2, j.member_id), HeartbeatResponse).error_code == ILLEGAL_GENERATION
        assert c1.call(hb_req(group, 0, j.member_id), HeartbeatResponse).error_code == ILLEGAL_GENERATION
        assert c1.call(hb_req(group, 1, "no-such-member"), HeartbeatResponse).error_code == UNKNOWN_MEMBER_ID
        assert c1.call(hb_req(unique("g-none"), 1, "no-such-member"), HeartbeatResponse).error_code \
            == UNKNOWN_MEMBER_ID
        assert c1.call(sync_req(group, 7, j.member_id, {}), SyncGroupResponse).error_code == ILLEGAL_GENERATION
        # a join with an id the group never gave out
        assert c2.call(join_req(group, "made-up-id"), JoinGroupResponse).error_code == UNKNOWN_MEMBER_ID

        # protocols the group cannot agree on: other names, or another protocol type
        r = c2.call(join_req(group, "", protocols=[("sticky", subscription("t"))]), JoinGroupResponse)
        assert r.error_code == INCONSISTENT_GROUP_PROTOCOL
        r = c2.call(join_req(group, "", protocol_type="connect", protocols=[("range", b"x")]), JoinGroupResponse)
        assert r.error_code == INCONSISTENT_GROUP_PROTOCOL
        r = c2.call(join_req(group, "", protocols=[]), JoinGroupResponse)
        assert r.error_code == INCONSISTENT_GROUP_PROTOCOL
        # nothing of that disturbed the member
        assert c1.call(hb_req(group, 1, j.member_id), HeartbeatResponse).error_code == NONE
        d = describe_raw(c1, group)
        assert (d.group_state, [m.member_id for m in d.members]) == ("Stable", [j.member_id])

        # a member that never completes the two-step join is not waited for
        r = c2.call(join_req(group, "", session_ms=MIN_SESSION_MS), JoinGroupResponse)
        assert r.error_code == MEMBER_ID_REQUIRED
        assert c1.call(leave_req(group, j.member_id), LeaveGroupResponse).error_code == NONE
        assert c1.call(hb_req(group, 1, j.member_id), HeartbeatResponse).error_code == UNKNOWN_MEMBER_ID
        assert c1.call(leave_req(group, j.member_id), LeaveGroupResponse).error_code == UNKNOWN_MEMBER_ID
        # within 10 s: well under the 20 s rebalance timeout a wait for the pending member would take
        wait_until(lambda: describe_raw(c1, group).group_state == "Empty", "the group to become Empty", 10)


def test_connect_protocol_group_two_members_raw(gbroker: BrokerProcess) -> None:
    """protocol type "connect" with opaque metadata works like "consumer": join, rebalance on a
    second member, the leader sees both metadata, followers wait in SyncGroup for the leader."""
    group = unique("g-connect")
    meta_a, meta_b = b"\x00\x01worker-a\xff\x00opaque", b"\x00\x01worker-b\x00"
    kw: dict[str, Any] = {"protocol_type": "connect", "session_ms": 10000}
    with RawConn(gbroker.port) as a, RawConn(gbroker.port) as b:
        ja = join_two_step(a, group, protocols=[("sessioned", meta_a), ("default", meta_a)], **kw)
        assert (ja.error_code, ja.generation_id, ja.leader) == (NONE, 1, ja.member_id)
        assert ja.protocol_name == "sessioned"
        assert [(m.member_id, bytes(m.metadata)) for m in ja.members] == [(ja.member_id, meta_a)]
        sa = a.call(sync_req(group, 1, ja.member_id, {ja.member_id: b"all-tasks"}), SyncGroupResponse)
        assert (sa.error_code, bytes(sa.assignment)) == (NONE, b"all-tasks")

        # B joins (MEMBER_ID_REQUIRED, then a JoinGroup that waits for the rebalance)
        first = b.call(join_req(group, "", protocols=[("default", meta_b)], **kw), JoinGroupResponse)
        assert first.error_code == MEMBER_ID_REQUIRED
        b_id = first.member_id
        b_join = b.send(join_req(group, b_id, protocols=[("default", meta_b)], **kw))
        assert b.nothing_within(0.3), "B's JoinGroup answered before the leader rejoined"
        assert wait_until(lambda: a.call(hb_req(group, 1, ja.member_id), HeartbeatResponse).error_code
                          == REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS", TIMEOUT, interval=0.1)
        assert describe_raw(a, group).group_state == "PreparingRebalance"
        ja2 = a.call(join_req(group, ja.member_id, protocols=[("sessioned", meta_a), ("default", meta_a)], **kw),
                     JoinGroupResponse)
        got, jb = b.recv(JoinGroupResponse, 4)
        assert got == b_join, "answers out of order"
        for r in (ja2, jb):
            assert (r.error_code, r.generation_id, r.leader) == (NONE, 2, ja.member_id)
            assert r.protocol_name == "default"  # the only protocol B offers
        assert jb.member_id == b_id and jb.members == []
        assert sorted((m.member_id, bytes(m.metadata)) for m in ja2.members) == \
            sorted([(ja.member_id, meta_a), (b_id, meta_b)])
        assert a.call(hb_req(group, 1, ja.member_id), HeartbeatResponse).error_code == ILLEGAL_GENERATION

        # the follower's SyncGroup waits until the leader's arrives
        b_sync = b.send(sync_req(group, 2, b_id, {}))
        assert b.nothing_within(0.5), "the follower's SyncGroup was answered before the leader synced"
        assert describe_raw(a, group).group_state == "CompletingRebalance"
        sa2 = a.call(sync_req(group, 2, ja.member_id, {ja.member_id: b"tasks:0,2", b_id: b"tasks:1,3\x00"}),
                     SyncGroupResponse)
        assert (sa2.error_code, bytes(sa2.assignment)) == (NONE, b"tasks:0,2")
        got, sb = b.recv(SyncGroupResponse, 3)
        assert got == b_sync, "answers out of order"
        assert (sb.error_code, bytes(sb.assignment)) == (NONE, b"tasks:1,3\x00")

        assert a.call(hb_req(group, 2, ja.member_id), HeartbeatResponse).error_code == NONE
        assert b.call(hb_req(group, 2, b_id), HeartbeatResponse).error_code == NONE
        d = describe_raw(a, group)
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "connect", "default")
        assert sorted((m.member_id, bytes(m.member_metadata), bytes(m.member_assignment)) for m in d.members) == \
            sorted([(ja.member_id, meta_a, b"tasks:0,2"), (b_id, meta_b, b"tasks:1,3\x00")])
        lg = {g.group_id: g.protocol_type for g in a.call(ListGroupsRequest[2](), ListGroupsResponse).groups}
        assert lg[group] == "connect"

        # B leaves: A is told to rejoin and gets a one-member generation 3
        assert b.call(leave_req(group, b_id), LeaveGroupResponse).error_code == NONE
        assert a.call(hb_req(group, 2, ja.member_id), HeartbeatResponse).error_code == REBALANCE_IN_PROGRESS
        ja3 = a.call(join_req(group, ja.member_id, protocols=[("sessioned", meta_a), ("default", meta_a)], **kw),
                     JoinGroupResponse)
        assert (ja3.error_code, ja3.generation_id, ja3.protocol_name) == (NONE, 3, "sessioned")
        assert [m.member_id for m in ja3.members] == [ja.member_id]
        assert a.call(leave_req(group, ja.member_id), LeaveGroupResponse).error_code == NONE


def test_describe_groups_every_version(gbroker: BrokerProcess) -> None:
    """DescribeGroups v0-v4 (v3+ carry authorized_operations; librdkafka and kafka-python send v4)."""
    group, missing = unique("g-describe"), unique("g-describe-missing")
    with RawConn(gbroker.port) as conn:
        j = join_two_step(conn, group)
        assert conn.call(sync_req(group, 1, j.member_id, {j.member_id: b"a"}), SyncGroupResponse).error_code == NONE
        for version in range(5):
            d = describe_raw(conn, group, version)
            assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "Stable", "consumer",
                                                                                      "range"), version
            assert [(m.member_id, bytes(m.member_assignment)) for m in d.members] == [(j.member_id, b"a")]
            if version >= 3:  # not requested: -2147483648, which kafka-python decodes as None
                assert d.authorized_operations is None
            d = describe_raw(conn, missing, version)
            assert (d.error_code, d.group_state, d.members) == (NONE, "Dead", []), version
        assert conn.call(leave_req(group, j.member_id), LeaveGroupResponse).error_code == NONE
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert (desc.group_id, desc.state, desc.members) == (group, CGState.EMPTY, [])


# --------------------------------------------------------------------------- commits during a rebalance


def _commit_raw(conn: Conn, group: str, generation: int, member_id: str, topic: str, offset: int) -> int:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    resp = conn.call(OffsetCommitRequest[2](
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, retention_time_ms=-1,
        topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=offset, committed_metadata="")])]),
        OffsetCommitResponse)
    return resp.topics[0].partitions[0].error_code


def test_commit_of_the_current_generation_is_stored_while_a_rebalance_is_prepared(gbroker: BrokerProcess) -> None:
    """As Kafka's coordinator: while the group prepares a rebalance, a member of the current generation
    may commit (consumers do so when their partitions are revoked); only while it completes the
    rebalance (waiting for the leader's SyncGroup) is a commit refused with REBALANCE_IN_PROGRESS."""
    group, topic = unique("g-commit-rebalance"), unique("t-commit-rebalance")
    create_topic(gbroker.bootstrap, topic, 1)
    sub = [("range", subscription(topic))]
    with RawConn(gbroker.port) as a, RawConn(gbroker.port) as b:
        ja = join_two_step(a, group, protocols=sub, session_ms=10000)
        assert a.call(sync_req(group, 1, ja.member_id, {ja.member_id: assignment_bytes(topic, [0])}),
                      SyncGroupResponse).error_code == NONE
        first = b.call(join_req(group, "", protocols=sub, session_ms=10000), JoinGroupResponse)
        b_join = b.send(join_req(group, first.member_id, protocols=sub, session_ms=10000))
        wait_until(lambda: describe_raw(a, group).group_state == "PreparingRebalance", "PreparingRebalance", TIMEOUT)

        assert _commit_raw(a, group, 1, ja.member_id, topic, 7) == NONE  # the revoke-time commit
        assert raw_offset_fetch(gbroker.port, group, topic, [0]) == {0: 7}
        assert _commit_raw(a, group, 0, ja.member_id, topic, 8) == ILLEGAL_GENERATION
        assert _commit_raw(a, group, 1, "not-a-member", topic, 8) == UNKNOWN_MEMBER_ID

        ja2 = a.call(join_req(group, ja.member_id, protocols=sub, session_ms=10000), JoinGroupResponse)
        assert (ja2.error_code, ja2.generation_id) == (NONE, 2)
        got, _ = b.recv(JoinGroupResponse, 4)
        assert got == b_join
        assert describe_raw(a, group).group_state == "CompletingRebalance"
        assert _commit_raw(a, group, 2, ja.member_id, topic, 9) == REBALANCE_IN_PROGRESS
        assert raw_offset_fetch(gbroker.port, group, topic, [0]) == {0: 7}

        assert a.call(sync_req(group, 2, ja.member_id, {ja.member_id: assignment_bytes(topic, [0])}),
                      SyncGroupResponse).error_code == NONE
        assert _commit_raw(a, group, 2, ja.member_id, topic, 9) == NONE
        assert raw_offset_fetch(gbroker.port, group, topic, [0]) == {0: 9}


def test_aiokafka_commit_in_on_partitions_revoked_is_stored(gbroker: BrokerProcess) -> None:
    """A real client: an aiokafka consumer commits its positions in ``on_partitions_revoked`` when a
    second consumer joins; the commit succeeds and the broker stores exactly those positions."""
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka import TopicPartition as ATP

    group, topic = unique("g-revoke-commit"), unique("t-revoke-commit")
    create_topic(gbroker.bootstrap, topic, 2)
    produce_values(gbroker.bootstrap, topic, {0: 30, 1: 20})

    async def go() -> list[Any]:
        results: list[Any] = []

        def consumer() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(bootstrap_servers=gbroker.bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", session_timeout_ms=6000,
                                    heartbeat_interval_ms=200)

        first = consumer()

        class CommitOnRevoke(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: set[ATP]) -> None:
                if not revoked:
                    return
                positions = {tp: await first.position(tp) for tp in revoked}
                try:
                    await first.commit(positions)
                    results.append({tp.partition: o for tp, o in positions.items()})
                except Exception as exc:  # the failure this test is about
                    results.append(exc)

            async def on_partitions_assigned(self, assigned: set[ATP]) -> None:
                pass

        await first.start()
        first.subscribe([topic], listener=CommitOnRevoke())
        second = consumer()
        try:
            got = 0
            while got < 50:
                batch = await first.getmany(timeout_ms=1000)
                got += sum(len(msgs) for msgs in batch.values())
            await second.start()
            second.subscribe([topic])
            deadline = time.monotonic() + 20
            while not results and time.monotonic() < deadline:
                await asyncio.gather(first.getmany(timeout_ms=200), second.getmany(timeout_ms=200))
        finally:
            await second.stop()
            await first.stop()
        return results

    results = asyncio.run(asyncio.wait_for(go(), 60))
    assert results, "the first consumer's partitions were never revoked"
    assert not isinstance(results[0], Exception), f"commit on revoke failed: {results[0]!r}"
    assert results[0] == {0: 30, 1: 20}
    assert raw_offset_fetch(gbroker.port, group, topic, [0, 1]) == {0: 30, 1: 20}
