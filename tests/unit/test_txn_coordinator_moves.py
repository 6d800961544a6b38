"""A cluster's transaction coordinator, on real logs, without brokers around it: it coordinates the ids of
the ``__transaction_state`` partitions it has come to lead (loading them, completing their prepared
transactions with the partition's leader epoch as coordinator epoch) and answers NOT_COORDINATOR for the rest;
a state write counts only once replicated, refuses other transitions while in flight (CONCURRENT_TRANSACTIONS,
Kafka's pendingState), and a failed or overtaken one changes nothing.

The replication wait (TxnStore.replicated) is the one part replaced: the test decides when, and how, each write's
wait for the ISR ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.group.coordinator import GroupCoordinator
from headwater.broker.log.control import read_marker
from headwater.broker.replication.state import PartitionState
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.producer_state import ProducerIdManager
from headwater.broker.txn import TransactionCoordinator, TxnState
from headwater.broker.txn.marker_sender import LocalMarkerSender
from headwater.broker.txn.store import TRANSACTION_STATE_TOPIC, txn_partition
from headwater.kafka.errors import ErrorCode

PARTITIONS = 3


class Replication:
    """Each write's wait for the ISR, ended by the test (``release``) with the code it chooses."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[int]] = []
        self.auto: int | None = 0  # None: writes wait for ``release``

    async def replicated(self, transactional_id: str, end_offset: int) -> int:
        if self.auto is not None:
            return self.auto
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        return await future

    async def release(self, code: int = 0) -> None:
        while not self.waiting:
            await asyncio.sleep(0)
        self.waiting.pop(0).set_result(code)


def _node(log_dir: Path) -> tuple[Cluster, TransactionCoordinator, Replication]:
    config = BrokerConfig(**{"log.dirs": str(log_dir), "offsets.topic.num.partitions": "2",
                             "transaction.state.log.num.partitions": str(PARTITIONS),
                             "zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})
    cluster = Cluster(config)
    cluster.load()
    if TRANSACTION_STATE_TOPIC not in cluster.topics:  # a cluster's is made by FindCoordinator: here, by hand
        cluster.create_topic(TRANSACTION_STATE_TOPIC, PARTITIONS, 1, {"cleanup.policy": "compact"})
        cluster.create_topic("out", 1, 1, {})
    groups = GroupCoordinator(cluster, config)
    txns = TransactionCoordinator(cluster, config, ProducerIdManager(cluster.log_dir), groups.offsets,
                                  LocalMarkerSender(cluster, groups.offsets))
    replication = Replication()
    txns.store.replicated = replication.replicated  # type: ignore[method-assign]  # the test's ISR
    return cluster, txns, replication


def _lead(cluster: Cluster, txns: TransactionCoordinator, index: int, epoch: int) -> None:
    partition = cluster.partition(TRANSACTION_STATE_TOPIC, index)
    partition.state = PartitionState(leader=1, leader_epoch=epoch, isr=(1,), controller_epoch=1, replicas=(1,))
    txns.became_leader(TRANSACTION_STATE_TOPIC, partition)


def _ids(partition: int) -> list[str]:
    return [t for t in (f"id-{i}" for i in range(100)) if txn_partition(t, PARTITIONS) == partition]


def test_ids_are_coordinated_while_their_partition_is_led(tmp_path: Path) -> None:
    async def run() -> None:
        cluster, txns, _ = _node(tmp_path)
        mine, other = _ids(0)[0], _ids(1)[0]
        assert (await txns.init_producer(mine, 60000))[0] == ErrorCode.NOT_COORDINATOR  # nothing led yet
        _lead(cluster, txns, 0, epoch=4)
        code, pid, epoch = await txns.init_producer(mine, 60000)
        assert (code, epoch) == (ErrorCode.NONE, 0)
        assert (await txns.init_producer(other, 60000))[0] == ErrorCode.NOT_COORDINATOR
        assert await txns.add_partitions(mine, pid, epoch, [("out", 0)]) == ErrorCode.NONE
        # the prepare is written, then this broker stops leading the partition before the markers
        txns.markers.send = _never  # type: ignore[method-assign]  # markers that never get written
        assert await txns.end_transaction(mine, pid, epoch, commit=True) == ErrorCode.NONE  # answered on the prepare
        assert txns.describe(mine).state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        txns.resigned(TRANSACTION_STATE_TOPIC, cluster.partition(TRANSACTION_STATE_TOPIC, 0))
        assert txns.describe(mine) is None and not txns.coordinates(mine)
        assert await txns.end_transaction(mine, pid, epoch, commit=True) == ErrorCode.NOT_COORDINATOR
        assert not _markers(cluster)
        cluster.close()

        # leading it again (a new leader epoch): the id is loaded, its prepared commit completed with the new
        # coordinator epoch
        cluster, txns, _ = _node(tmp_path)
        _lead(cluster, txns, 0, epoch=5)
        await asyncio.gather(*txns._completing.values())
        assert txns.describe(mine).state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert _markers(cluster) == [(True, 5)]
        cluster.close()

    asyncio.run(run())


async def _never(txn: object, commit: bool, coordinator_epoch: int) -> None:
    await asyncio.Event().wait()


def _markers(cluster: Cluster) -> list[tuple[bool, int]]:
    plog = cluster.partition("out", 0).log
    markers = [read_marker(bytes(data[pos:pos + h.size])) for data, pos, h in plog.batches_from(0) if h.is_control]
    return [(m.commit, m.coordinator_epoch) for m in markers]


def test_a_write_in_flight_refuses_other_transitions_and_counts_only_once_replicated(tmp_path: Path) -> None:
    async def run() -> None:
        cluster, txns, replication = _node(tmp_path)
        _lead(cluster, txns, 0, epoch=1)
        tid = _ids(0)[0]
        _, pid, epoch = await txns.init_producer(tid, 60000)
        replication.auto = None
        adding = asyncio.create_task(txns.add_partitions(tid, pid, epoch, [("out", 0)]))
        await asyncio.sleep(0)
        assert txns.describe(tid).pending == TxnState.ONGOING  # type: ignore[union-attr]
        assert txns.describe(tid).state == TxnState.EMPTY  # type: ignore[union-attr]  # not before the ISR has it
        assert (await txns.init_producer(tid, 60000))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        assert await txns.end_transaction(tid, pid, epoch, commit=False) == ErrorCode.CONCURRENT_TRANSACTIONS
        await replication.release(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)  # too few in sync: not taken
        assert await adding == ErrorCode.COORDINATOR_NOT_AVAILABLE
        txn = txns.describe(tid)
        assert txn is not None and (txn.state, txn.partitions, txn.pending) == (TxnState.EMPTY, set(), None)

        adding = asyncio.create_task(txns.add_partitions(tid, pid, epoch, [("out", 0)]))  # the client retries
        await replication.release()
        assert await adding == ErrorCode.NONE
        assert (txn.state, txn.partitions) == (TxnState.ONGOING, {("out", 0)})

        # leadership moves while a write waits: NOT_COORDINATOR, and the id is gone from here
        ending = asyncio.create_task(txns.end_transaction(tid, pid, epoch, commit=True))
        await asyncio.sleep(0)
        txns.resigned(TRANSACTION_STATE_TOPIC, cluster.partition(TRANSACTION_STATE_TOPIC, 0))
        await replication.release()
        assert await ending == ErrorCode.NOT_COORDINATOR
        assert txn.state == TxnState.ONGOING and txns.describe(tid) is None
        cluster.close()

    asyncio.run(run())
