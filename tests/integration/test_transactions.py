"""Transactions: the transaction coordinator with real transactional producers (issue 29).

confluent-kafka's, aiokafka's and kafka-python's transactional producers commit and abort, and each end
leaves a commit or abort marker (a control batch) in every partition of the transaction; a second producer
with the same transactional.id fences the first and aborts its open transaction; send_offsets_to_transaction's
group offsets appear (OffsetFetch) only when the transaction commits; an open transaction past its timeout is
aborted by the coordinator, which fences its producer; the state survives a SIGKILL of the broker. Raw
requests check the errors clients rarely provoke, and DescribeTransactions / ListTransactions.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from kafka.protocol.admin import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from support.brokerproc import BrokerProcess
from support.confluent import position
from support.hwclients import TIMEOUT, confluent_consumer, create_topic, unique
from support.rawkafka import Conn
from support.rawtxn import add_partitions, init_producer

from headwater.broker.log.control import read_marker
from headwater.kafka.records import Record, build_batch, iter_batches

pytestmark = pytest.mark.timeout(180)

INVALID_TXN_STATE = 48
INVALID_TRANSACTION_TIMEOUT = 50
TRANSACTIONAL_ID_NOT_FOUND = 105
UNSTABLE_OFFSET_COMMIT = 88
# The coordinator looks for timed-out transactions this often (Kafka's default is 10 s)
BROKER_SETTINGS = ("transaction.abort.timed.out.transaction.cleanup.interval.ms=300",
                   "transaction.state.log.num.partitions=5", "transaction.max.timeout.ms=120000")


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory):
    with BrokerProcess(tmp_path_factory.mktemp("txn") / "data", *BROKER_SETTINGS) as proc:
        yield proc


def markers(log_dir: Path, topic: str, partition: int) -> list[tuple[int, str]]:
    """(offset, "commit" | "abort") of every control batch in the partition's first segment."""
    data = (Path(log_dir) / f"{topic}-{partition}" / "00000000000000000000.log").read_bytes()
    return [(h.base_offset, "commit" if read_marker(data[pos:pos + h.size]).commit else "abort")
            for pos, h in iter_batches(data) if h.is_control]


def wait_for(check, what: str, timeout: float = TIMEOUT):
    """Poll ``check`` (which returns a value or None, never raises for "not yet") until it has a value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value is not None:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})


def describe(port: int, tid: str):
    with Conn(port) as conn:
        resp = conn.call(DescribeTransactionsRequest[0](transactional_ids=[tid]), DescribeTransactionsResponse)
    [state] = resp.transaction_states
    return state


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    c = confluent_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)[1]
    finally:
        c.close()


# --------------------------------------------------------------------------- confluent-kafka


def test_confluent_commit_and_abort_leave_markers(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-ca")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=2)
    p = txn_producer(txn_broker.bootstrap, unique("tid"))
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, key=b"k", value=b"committed-%d" % i, partition=0)
    p.produce(topic, key=b"k", value=b"committed-p1", partition=1)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, key=b"k", value=b"aborted-%d" % i, partition=0)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    # partition 0: three records, the commit marker, two records, the abort marker; partition 1 only committed
    assert markers(txn_broker.log_dir, topic, 0) == [(3, "commit"), (6, "abort")]
    assert markers(txn_broker.log_dir, topic, 1) == [(1, "commit")]
    assert high_watermark(txn_broker.bootstrap, topic, 0) == 7


def test_confluent_second_producer_fences_the_first(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-fence")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)
    tid = unique("tid")
    first = txn_producer(txn_broker.bootstrap, tid)
    first.init_transactions(TIMEOUT)
    first.begin_transaction()
    first.produce(topic, value=b"from-the-first", partition=0)
    first.flush(TIMEOUT)
    epoch_before = describe(txn_broker.port, tid).producer_epoch
    second = txn_producer(txn_broker.bootstrap, tid)
    second.init_transactions(TIMEOUT)  # aborts the first's open transaction
    assert markers(txn_broker.log_dir, topic, 0) == [(1, "abort")]
    assert describe(txn_broker.port, tid).producer_epoch > epoch_before
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal(), raised.value.args[0]
    assert "fenced" in str(raised.value.args[0]).lower() or "epoch" in str(raised.value.args[0]).lower()
    second.begin_transaction()
    second.produce(topic, value=b"from-the-second", partition=0)
    second.commit_transaction(TIMEOUT)
    assert markers(txn_broker.log_dir, topic, 0) == [(1, "abort"), (3, "commit")]


def test_confluent_send_offsets_visible_only_after_commit(txn_broker: BrokerProcess) -> None:
    source, target = unique("txn-in"), unique("txn-out")
    create_topic("confluent", txn_broker.bootstrap, source, partitions=1)
    create_topic("confluent", txn_broker.bootstrap, target, partitions=1)
    feeder = Producer({"bootstrap.servers": txn_broker.bootstrap})
    for i in range(6):
        feeder.produce(source, value=b"in-%d" % i, partition=0)
    feeder.flush(TIMEOUT)
    group = unique("txn-group")
    # read_uncommitted: OffsetFetch without require_stable answers the committed offset while a transaction
    # holds newer ones (read_committed would wait for its end: test_require_stable_waits_for_the_transaction)
    consumer = confluent_consumer(txn_broker.bootstrap, **{"group.id": group, "auto.offset.reset": "earliest",
                                                           "isolation.level": "read_uncommitted"})
    consumer.subscribe([source])
    producer = txn_producer(txn_broker.bootstrap, unique("tid"))
    producer.init_transactions(TIMEOUT)
    tp = TopicPartition(source, 0)

    def committed() -> int:
        [got] = consumer.committed([tp], timeout=TIMEOUT)
        return got.offset

    def transform(count: int, commit: bool, committed_before: int) -> None:
        got: list[tuple[int, bytes]] = []  # (offset, value)
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append(position(m)[1:] + (m.value() or b"",))
        assert len(got) == count
        producer.begin_transaction()
        for _, value in got:
            producer.produce(target, value=value.upper(), partition=0)
        producer.send_offsets_to_transaction([TopicPartition(source, 0, got[-1][0] + 1)],
                                             consumer.consumer_group_metadata(), TIMEOUT)
        producer.flush(TIMEOUT)
        assert committed() == committed_before, "the transaction's offset is visible before it ends"
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)

    try:
        transform(3, commit=True, committed_before=-1001)  # OFFSET_INVALID: nothing committed yet
        assert committed() == 3
        transform(3, commit=False, committed_before=3)
        assert committed() == 3, "an aborted transaction's offset became visible"
    finally:
        consumer.close()


def offset_fetch_v7(port: int, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """(committed offset, partition error) of ``topic``-0 for ``group`` by OffsetFetch v7."""
    req = OffsetFetchRequest[7]
    with Conn(port) as conn:
        resp = conn.call(req(group_id=group, require_stable=require_stable,
                             topics=[req.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]),
                         OffsetFetchResponse)
    [t] = resp.topics
    [p] = t.partitions
    return p.committed_offset, p.error_code


def test_require_stable_waits_for_the_transaction(txn_broker: BrokerProcess) -> None:
    """KIP-447: while a transaction holds a group's offsets, OffsetFetch v7 with require_stable answers
    UNSTABLE_OFFSET_COMMIT (without it, the committed offset); a read_committed librdkafka consumer's
    committed() waits for the transaction's end and then sees its offset."""
    source = unique("stable-in")
    create_topic("confluent", txn_broker.bootstrap, source, partitions=1)
    group = unique("stable-group")
    producer = txn_producer(txn_broker.bootstrap, unique("tid"))
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    reader = confluent_consumer(txn_broker.bootstrap, **{"group.id": group})  # read_committed: librdkafka's default
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], reader.consumer_group_metadata(), TIMEOUT)
    try:
        assert offset_fetch_v7(txn_broker.port, group, source, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        assert offset_fetch_v7(txn_broker.port, group, source, require_stable=False) == (-1, 0)
        ended = threading.Timer(1.5, producer.commit_transaction, args=(TIMEOUT,))
        ended.start()
        started = time.monotonic()
        [got] = reader.committed([TopicPartition(source, 0)], timeout=TIMEOUT)
        ended.join()
        assert got.offset == 7, "a read_committed consumer did not get the transaction's offset"
        assert time.monotonic() - started >= 1.0, "committed() answered before the transaction ended"
        assert offset_fetch_v7(txn_broker.port, group, source, require_stable=True) == (7, 0)
    finally:
        reader.close()


def test_open_transaction_times_out_and_is_aborted(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-timeout")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)
    tid = unique("tid")
    # message.timeout.ms may not exceed transaction.timeout.ms (librdkafka)
    p = txn_producer(txn_broker.bootstrap, tid, **{"transaction.timeout.ms": 4000, "message.timeout.ms": 4000})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, value=b"never-committed", partition=0)
    p.flush(TIMEOUT)
    epoch = describe(txn_broker.port, tid).producer_epoch
    assert describe(txn_broker.port, tid).transaction_state == "Ongoing"

    def aborted():
        state = describe(txn_broker.port, tid)
        return state if state.transaction_state == "CompleteAbort" else None

    state = wait_for(aborted, "the coordinator to abort the timed-out transaction")
    assert state.producer_epoch == epoch + 1  # bumped: the producer is fenced
    assert markers(txn_broker.log_dir, topic, 0) == [(1, "abort")]
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)


def test_transaction_state_survives_broker_sigkill(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", *BROKER_SETTINGS).start()
    try:
        topic = unique("txn-kill")
        create_topic("confluent", broker.bootstrap, topic, partitions=1)
        tid = unique("tid")
        p = txn_producer(broker.bootstrap, tid)
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        p.produce(topic, value=b"committed", partition=0)
        p.commit_transaction(TIMEOUT)
        p.begin_transaction()
        p.produce(topic, value=b"open-at-the-kill", partition=0)
        p.flush(TIMEOUT)
        before = describe(broker.port, tid)
        assert before.transaction_state == "Ongoing"
        broker.kill()
        broker.start()
        after = describe(broker.port, tid)  # rebuilt from __transaction_state
        assert (after.transaction_state, after.producer_id, after.producer_epoch) == \
            ("Ongoing", before.producer_id, before.producer_epoch)
        again = txn_producer(broker.bootstrap, tid)
        again.init_transactions(TIMEOUT)
        latest = describe(broker.port, tid)
        assert latest.producer_id == before.producer_id and latest.producer_epoch > before.producer_epoch
        assert markers(broker.log_dir, topic, 0) == [(1, "commit"), (3, "abort")]
    finally:
        broker.kill()


def _read_committed_built() -> bool:
    """Whether the partition side of transactions (Fetch's read_committed over the aborted-transaction
    index) is in this tree: it is built apart from the coordinator."""
    import importlib.util

    return importlib.util.find_spec("headwater.broker.log.txn_index") is not None


@pytest.mark.skipif(not _read_committed_built(), reason="read_committed in Fetch is not in this tree")
def test_read_committed_consumer_sees_committed_transactions_only(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-rc")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)
    p = txn_producer(txn_broker.bootstrap, unique("tid"))
    p.init_transactions(TIMEOUT)
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v, partition=0)
        p.flush(TIMEOUT)
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
    p.begin_transaction()  # left open: a read_committed consumer stops before it
    p.produce(topic, value=b"open", partition=0)
    p.flush(TIMEOUT)
    c = confluent_consumer(txn_broker.bootstrap, **{"isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # long enough for the open transaction's record to show, were it to
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.value() or b"")
    finally:
        c.close()
    assert seen == [b"c1", b"c2", b"c3"]
    p.abort_transaction(TIMEOUT)


# --------------------------------------------------------------------------- aiokafka, kafka-python


def test_aiokafka_commit_and_abort(txn_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    topic = unique("txn-aio")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=unique("tid"))
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"committed", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(go(), 2 * TIMEOUT))
    assert markers(txn_broker.log_dir, topic, 0) == [(1, "commit"), (3, "abort")]


def test_aiokafka_consume_transform_produce_and_fencing(txn_broker: BrokerProcess) -> None:
    """aiokafka's transactional example: a read_committed consumer (no auto commit) feeds a transactional producer
    that writes the transformed records and the consumer's offsets with send_offsets_to_transaction; the group's
    offsets and the output appear together. A second producer with the same transactional id fences the first:
    its next send fails with ProducerFenced and its open transaction's records never reach read_committed."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    from aiokafka.errors import KafkaError, ProducerFenced

    source, target, group, tid = unique("ctp-in"), unique("ctp-out"), unique("ctp-group"), unique("tid")
    for topic in (source, target):
        create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)
    feeder = Producer({"bootstrap.servers": txn_broker.bootstrap})
    for i in range(10):
        feeder.produce(source, value=b"in-%d" % i, partition=0)
    feeder.flush(TIMEOUT)

    async def read_committed(topic: str, want: int) -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=txn_broker.bootstrap, isolation_level="read_committed",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and len(got) <= want:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    got += [r.value or b"" for r in records]
            return got
        finally:
            await consumer.stop()

    async def go() -> tuple[list[bytes], int | None, str]:
        consumer = AIOKafkaConsumer(source, bootstrap_servers=txn_broker.bootstrap, group_id=group,
                                    isolation_level="read_committed", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        first = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid)
        await consumer.start()
        await first.start()
        try:
            batch: list[Any] = []
            deadline = time.monotonic() + TIMEOUT
            while len(batch) < 10 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    batch += records
            async with first.transaction():
                for record in batch:
                    await first.send(target, (record.value or b"").upper(), partition=0)
                await first.send_offsets_to_transaction({ATP(source, 0): batch[-1].offset + 1}, group)
            committed = await consumer.committed(ATP(source, 0))
            await first.begin_transaction()
            await first.send_and_wait(target, b"ZOMBIE", partition=0)
            second = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid)
            await second.start()  # InitProducerId: the first's epoch is fenced, its open transaction aborted
            try:
                outcome = "not fenced"
                try:
                    await first.send_and_wait(target, b"ZOMBIE-2", partition=0)
                    await first.commit_transaction()
                except ProducerFenced:
                    outcome = "fenced"
                except KafkaError as exc:
                    outcome = f"fenced as {type(exc).__name__}" if "fenc" in repr(exc).lower() else repr(exc)
                async with second.transaction():
                    await second.send(target, b"AFTER", partition=0)
            finally:
                await second.stop()
            return await read_committed(target, 11), committed, outcome
        finally:
            await consumer.stop()
            await first.stop()

    output, committed, outcome = asyncio.run(asyncio.wait_for(go(), 3 * TIMEOUT))
    assert committed == 10, "the transaction's group offset did not appear with its records"
    assert outcome.startswith("fenced"), outcome
    assert output == [b"IN-%d" % i for i in range(10)] + [b"AFTER"], output


def test_kafka_python_commit(txn_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = unique("txn-kp")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=unique("tid"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0).get(TIMEOUT)
        producer.abort_transaction()
    finally:
        producer.close(TIMEOUT)
    assert markers(txn_broker.log_dir, topic, 0) == [(1, "commit"), (3, "abort")]


# --------------------------------------------------------------------------- raw requests


def test_timeout_over_the_maximum_is_refused(txn_broker: BrokerProcess) -> None:
    with Conn(txn_broker.port) as conn:
        assert init_producer(conn, unique("tid"), 120001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init_producer(conn, unique("tid"), 0).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init_producer(conn, unique("tid"), 120000).error_code == 0


def test_idempotent_producer_epoch_bump(txn_broker: BrokerProcess) -> None:
    """KIP-360 without a transactional id: a producer naming its id and epoch gets the epoch bumped."""
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    with Conn(txn_broker.port) as conn:
        first = conn.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
        bumped = conn.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                    producer_id=first.producer_id, producer_epoch=0),
                           InitProducerIdResponse)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 1)


def test_transactional_batch_outside_the_transaction_is_refused(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-raw")
    create_topic("confluent", txn_broker.bootstrap, topic, partitions=2)
    tid = unique("tid")
    with Conn(txn_broker.port) as conn:
        init = init_producer(conn, tid)
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(producer_epoch: int) -> bytes:
            return build_batch([Record(0, int(time.time() * 1000), None, b"v")], producer_id=pid,
                               producer_epoch=producer_epoch, base_sequence=0, attributes=0x10)

        # No AddPartitionsToTxn yet: Produce refuses the transactional batch
        assert conn.produce(topic, batch(epoch), 0, acks=-1).error_code == INVALID_TXN_STATE
        assert add_partitions(conn, tid, pid, epoch, topic, [0]) == {0: 0}
        assert add_partitions(conn, tid, pid, epoch - 1, topic, [0]) == {0: 90}  # PRODUCER_FENCED (v2+)
        # KIP-890 part 1: a broker verifying the partitions of a transaction (AddPartitionsToTxn v4, verify_only)
        req = AddPartitionsToTxnRequest[4]
        verified = conn.call(req(transactions=[req.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])]), AddPartitionsToTxnResponse)
        assert verified.error_code == 0
        [result] = verified.results_by_transaction
        assert [(p.partition_index, p.partition_error_code) for t in result.topic_results
                for p in t.results_by_partition] == [(0, 0), (1, INVALID_TXN_STATE)]
        assert conn.produce(topic, batch(epoch), 1, acks=-1).error_code == INVALID_TXN_STATE  # not added
        assert conn.produce(topic, batch(epoch), 0, acks=-1).error_code == 0
        listed = conn.call(ListTransactionsRequest[1](state_filters=["Ongoing", "NoSuchState"],
                                                      producer_id_filters=[pid], duration_filter=-1),
                           ListTransactionsResponse)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
        assert listed.unknown_state_filters == ["NoSuchState"]
        # A newer producer of the same id: the older epoch's batches are refused
        assert init_producer(conn, tid).producer_epoch == epoch + 2  # one bump fenced the open transaction
        assert conn.produce(topic, batch(epoch), 0, acks=-1).error_code == 47  # INVALID_PRODUCER_EPOCH
    state = describe(txn_broker.port, tid)
    assert (state.transaction_state, state.producer_id, state.topics) == ("Empty", pid, [])
    assert describe(txn_broker.port, unique("tid")).error_code == TRANSACTIONAL_ID_NOT_FOUND


# --------------------------------------------------------------------------- ACLs


def test_transactional_id_acls(tmp_path: Path) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    topic = "acl-txn"

    def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
        return AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op,
                          AclPermissionType.ALLOW)

    with BrokerProcess(tmp_path / "data", *BROKER_SETTINGS) as proc:  # not enforced yet: set everything up
        create_topic("confluent", proc.bootstrap, topic, partitions=1)
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        rules = [allow(ResourceType.TOPIC, topic, AclOperation.WRITE),
                 allow(ResourceType.TRANSACTIONAL_ID, "tid-ok", AclOperation.WRITE)]
        for fut in admin.create_acls(rules, request_timeout=10).values():
            fut.result()
    with BrokerProcess(tmp_path / "data", *BROKER_SETTINGS, "authorizer.enabled=true") as proc:
        allowed = txn_producer(proc.bootstrap, "tid-ok")
        allowed.init_transactions(TIMEOUT)
        allowed.begin_transaction()
        allowed.produce(topic, value=b"allowed", partition=0)
        allowed.commit_transaction(TIMEOUT)
        assert markers(proc.log_dir, topic, 0) == [(1, "commit")]
        with Conn(proc.port) as conn:
            assert init_producer(conn, "tid-denied").error_code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        denied = txn_producer(proc.bootstrap, "tid-denied")
        with pytest.raises(KafkaException) as raised:
            denied.init_transactions(TIMEOUT)
        assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
