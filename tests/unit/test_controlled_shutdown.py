"""Controlled shutdown's decisions (broker/cluster/election.py, as Kafka's ControlledShutdownPartitionLeaderElection-
Strategy and shuttingDownBrokerIds), the controller's side (broker/cluster/controlled_shutdown.py) on a controller
whose writes land at once, the broker's retries (broker/server/controlled_shutdown.py, as KafkaServer's) and
ControlledShutdown's wire format (Kafka's schemas, as a broker sends it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.broker.cluster.controlled_shutdown import ControlledShutdowns
from headwater.broker.cluster.election import decide, elect_for_shutdown
from headwater.broker.cluster.topic_meta import TopicMeta
from headwater.broker.cluster.znodes import ClusterView, RegisteredBroker
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.errors import BrokerError
from headwater.broker.protocol.codec import build_response, decode_request, encode_response, parse_request_header
from headwater.broker.protocol.schemas import ControlledShutdownRequest, ControlledShutdownResponse
from headwater.broker.replication.state import NO_LEADER, PartitionState
from headwater.broker.server.controlled_shutdown import shut_down_controlled
from headwater.kafka.errors import ErrorCode

LIVE = frozenset({1, 2, 3})


def state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), epoch: int = 3) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, replicas, zk_version=6)


def _leader(decided: PartitionState | None) -> int | None:
    return decided.leader if decided is not None else None


def test_a_shutting_down_leader_hands_over_to_the_first_other_in_sync_replica() -> None:
    moved = elect_for_shutdown((1, 2, 3), state(1, (1, 3, 2)), LIVE, {1}, 9)
    assert moved == PartitionState(2, 4, (3, 2), 9, (1, 2, 3), zk_version=6)  # assignment order, not the ISR's
    # neither a dead replica nor one out of the ISR nor another broker shutting down takes it
    assert _leader(elect_for_shutdown((1, 2, 3), state(1, (1, 2, 3)), {1, 3}, {1}, 9)) == 3
    assert _leader(elect_for_shutdown((1, 2, 3), state(1, (1, 3)), LIVE, {1}, 9)) == 3
    assert elect_for_shutdown((1, 2, 3), state(1, (1, 2, 3)), LIVE, {1, 2}, 9) == \
        PartitionState(3, 4, (3,), 9, (1, 2, 3), zk_version=6)
    # no other in-sync replica: it keeps its leader
    assert elect_for_shutdown((1, 2, 3), state(1, (1,)), LIVE, {1}, 9) is None


def test_a_broker_shutting_down_is_eligible_for_nothing_but_keeps_what_it_leads() -> None:
    # it leaves the ISR of what it follows; the leader stays
    assert decide((1, 2, 3), state(1, (1, 2, 3)), LIVE, 9, False, True, {2}) == \
        PartitionState(1, 4, (1, 3), 9, (1, 2, 3), zk_version=6)
    # what it still leads (no other in-sync replica) stays as it is
    assert decide((1, 2, 3), state(1, (1,)), LIVE, 9, False, True, {1}) is None
    # the preferred replica does not lead again while it shuts down (auto.leader.rebalance.enable)
    assert decide((1, 2, 3), state(2, (2, 3)), LIVE, 9, False, True, {1}) is None
    assert decide((1, 2, 3), state(2, (2, 3, 1)), LIVE, 9, False, True, {1}) == \
        PartitionState(2, 4, (2, 3), 9, (1, 2, 3), zk_version=6)
    # a leader gone: not elected, clean or unclean
    assert _leader(decide((1, 2, 3), state(3, (3, 1, 2)), {1, 2}, 9, False, True, {1})) == 2
    assert decide((1, 2), state(2, (2,)), {1}, 9, True, True, {1}) == \
        PartitionState(NO_LEADER, 4, (2,), 9, (1, 2), zk_version=6)
    # a new partition's ISR leaves it out
    assert decide((1, 2, 3), None, LIVE, 9, False, True, {1}) == PartitionState(2, 0, (2, 3), 9, (1, 2, 3))
    # nobody shutting down: the decisions as before
    assert decide((1, 2, 3), state(2, (2, 3, 1)), LIVE, 9, False, True) == \
        PartitionState(1, 4, (2, 3, 1), 9, (1, 2, 3), zk_version=6)


class _Sync:
    def __init__(self, topics: dict[str, TopicMeta], deleting: frozenset[str] = frozenset()) -> None:
        self.topics, self.deleting = topics, deleting

    def state_version(self, name: str, index: int) -> int | None:
        held = self.topics[name].states.get(index)
        return held.zk_version if held is not None else None

    async def wait_for_new_states(self, versions: dict[Any, int | None], timeout: float) -> bool:
        return True


class _Controller:
    """A ControllerApi whose writes land at once (``lose`` names partitions a leader's ISR change overtakes once)
    and whose own decisions are election.py's."""

    def __init__(self, topics: dict[str, TopicMeta], deleting: frozenset[str] = frozenset(),
                 lose: set[tuple[str, int]] | None = None) -> None:
        self.sync = _Sync(topics, deleting)
        self.zk: Any = None
        self.epoch, self.epoch_version = 9, 0
        self.active = True
        self.lose = lose or set()
        self.writes: list[tuple[str, int, PartitionState]] = []
        self.shutdowns = ControlledShutdowns(self)  # type: ignore[arg-type]  # (its sync: only what it reads)
        self.shutdowns.view_changed(ClusterView({b: RegisteredBroker(b, {}, epoch=100 + b) for b in LIVE}, 1))

    @property
    def live(self) -> frozenset[int]:
        return LIVE

    def check_active(self) -> None:
        if not self.active:
            raise BrokerError(ErrorCode.NOT_CONTROLLER, "Broker 1 is not the controller.")

    @contextlib.asynccontextmanager
    async def acting(self) -> AsyncIterator[None]:
        self.check_active()
        yield

    def decision(self, name: str, index: int) -> PartitionState | None:
        meta = self.sync.topics[name]
        return decide(meta.assignment[index], meta.states.get(index), LIVE, self.epoch, False, True,
                      self.shutdowns.shutting_down)

    async def write(self, writes: list[tuple[str, int, PartitionState, bool]]) -> set[tuple[str, int]]:
        written = set()
        for name, index, new, _ in writes:
            meta = self.sync.topics[name]
            if (name, index) in self.lose:  # a leader's ISR write came first
                self.lose.discard((name, index))
                held = meta.states[index]
                meta.states[index] = PartitionState(held.leader, held.leader_epoch, held.isr[:-1],
                                                    held.controller_epoch, held.replicas, held.zk_version + 1)
                continue
            meta.states[index] = PartitionState(new.leader, new.leader_epoch, new.isr, new.controller_epoch,
                                                new.replicas, new.zk_version + 1)
            self.writes.append((name, index, meta.states[index]))
            written.add((name, index))
        return written


def _topic(name: str, states: dict[int, PartitionState]) -> TopicMeta:
    return TopicMeta(name, uuid.uuid4(), {p: s.replicas for p, s in states.items()}, {}, 0, 0, dict(states))


def test_the_controller_moves_what_the_broker_leads_and_names_what_stays() -> None:
    orders = _topic("orders", {0: state(1, (1, 2, 3)), 1: state(2, (2, 1, 3), (2, 1, 3)),
                               2: state(1, (1,)), 3: state(3, (3, 2), (3, 2, 1))})
    single = _topic("single", {0: state(1, (1,), (1,))})  # one replica: never moved (Kafka's rule)
    gone = _topic("gone", {0: state(1, (1, 2), (1, 2))})  # being deleted: left alone
    controller = _Controller({"orders": orders, "single": single, "gone": gone}, frozenset({"gone"}),
                             lose={("orders", 0)})
    remaining = asyncio.run(controller.shutdowns.shut_down(1, 101))
    assert remaining == [("orders", 2)]
    assert controller.shutdowns.shutting_down == {1}
    assert orders.states[0].leader == 2 and 1 not in orders.states[0].isr  # decided again after the lost write
    assert orders.states[1].isr == (2, 3) and orders.states[1].leader == 2  # followed: out of the ISR
    assert orders.states[2] == state(1, (1,))  # no other in-sync replica: untouched
    assert orders.states[3] == state(3, (3, 2), (3, 2, 1))  # not in the ISR: nothing to write
    assert single.states[0].leader == 1 and gone.states[0].leader == 1
    assert all(s.leader_epoch == 4 and s.controller_epoch == 9 for _, _, s in controller.writes)
    # its registration gone (or made again): no longer shutting down
    controller.shutdowns.view_changed(ClusterView({2: RegisteredBroker(2, {}, epoch=102)}, 2))
    assert controller.shutdowns.shutting_down == frozenset()


@pytest.mark.parametrize(("broker_id", "epoch", "code", "words"), [
    (1, 100, ErrorCode.STALE_BROKER_EPOCH, "Received controlled shutdown request from an old broker epoch 100 "
                                           "for broker 1. Current broker epoch is 101."),
    (7, 107, ErrorCode.BROKER_NOT_AVAILABLE, "Broker id 7 does not exist."),
])
def test_refusals_change_nothing(broker_id: int, epoch: int, code: int, words: str) -> None:
    orders = _topic("orders", {0: state(1, (1, 2, 3))})
    controller = _Controller({"orders": orders})
    with pytest.raises(BrokerError) as raised:
        asyncio.run(controller.shutdowns.shut_down(broker_id, epoch))
    assert (raised.value.code, raised.value.message) == (code, words)
    assert controller.writes == [] and controller.shutdowns.shutting_down == frozenset()
    # a newer epoch than the controller saw (it re-registered since) or none (v0-v1) is taken
    assert asyncio.run(controller.shutdowns.shut_down(1, -1)) == []
    assert orders.states[0].leader == 2


def test_not_the_controller() -> None:
    controller = _Controller({})
    controller.active = False
    with pytest.raises(BrokerError) as raised:
        asyncio.run(controller.shutdowns.shut_down(1, 101))
    assert raised.value.code == ErrorCode.NOT_CONTROLLER


def test_wire_format_is_kafkas() -> None:
    sent = ControlledShutdownRequest[3](broker_id=2, broker_epoch=4294967296)
    sent.with_header(correlation_id=7, client_id="2")
    frame = memoryview(sent.encode(header=True, framed=True)[4:])
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.client_id) == (7, 3, "2")
    received = decode_request(header, frame)
    assert (received.broker_id, received.broker_epoch) == (2, 4294967296)
    answer = encode_response(build_response(7, 3, {"error_code": 0, "remaining_partitions": [
        {"topic_name": "orders", "partition_index": 2}]}), 7)
    # flexible v3: compact array of (compact string, int32, no tags), the header's and body's tag sections
    assert bytes(answer[4:]) == b"\x00\x00\x00\x07\x00" + b"\x00\x00" + b"\x02" + b"\x07orders" + \
        b"\x00\x00\x00\x02\x00" + b"\x00"
    decoded = ControlledShutdownResponse.decode(bytes(answer[4:]), version=3, header=True)
    assert [(p.topic_name, p.partition_index) for p in decoded.remaining_partitions] == [("orders", 2)]


def _membership(controller_id: int, shutdowns: Any = None) -> Any:
    """What the broker's side reads of its membership: the view, its topics, its own controller."""
    topics = SimpleNamespace(topics={"orders": _topic("orders", {0: state(1, (1, 2), (1, 2))})})
    return SimpleNamespace(view=ClusterView({1: RegisteredBroker(1, {}, epoch=101)}, controller_id), topics=topics,
                           controller=SimpleNamespace(shutdowns=shutdowns) if shutdowns is not None else None)


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig(**{"node.id": "1", "controlled.shutdown.retry.backoff.ms": "10", **props})


def test_the_broker_tries_max_retries_times_then_stops_anyway(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "headwater.broker.server.controlled_shutdown")
    assert asyncio.run(shut_down_controlled(_membership(-1), _config())) is False
    text = caplog.text
    assert text.count("no controller present") == 3
    assert "Retrying controlled shutdown (2 retries remaining)" in text and "(1 retries remaining)" in text
    assert "Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed" in text
    caplog.clear()
    assert asyncio.run(shut_down_controlled(_membership(-1), _config(**{"controlled.shutdown.max.retries": "0"}))) \
        is False
    assert "no controller present" not in caplog.text


def test_the_controller_shutting_down_asks_itself_until_nothing_remains(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "headwater.broker.server.controlled_shutdown")
    asked: list[tuple[int, int]] = []

    class Shutdowns:
        async def shut_down(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
            asked.append((broker_id, broker_epoch))
            return [("orders", 0)] if len(asked) == 1 else []
    assert asyncio.run(shut_down_controlled(_membership(1, Shutdowns()), _config())) is True
    assert asked == [(1, 101), (1, 101)]  # its own epoch: its registration's czxid
    assert "with 1 partitions remaining to move: orders-0" in caplog.text
    assert "Controlled shutdown request returned successfully" in caplog.text


def test_nothing_to_move_asks_nobody() -> None:
    membership = _membership(-1)
    membership.topics.topics["orders"].states[0] = state(2, (2,), (1, 2))  # led by 2, 1 out of the ISR
    assert asyncio.run(shut_down_controlled(membership, _config())) is True
