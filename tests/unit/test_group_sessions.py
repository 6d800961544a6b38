"""Session timeouts of the group coordinator, on an event loop whose clock is virtual: time moves only
when every task waits, by exactly as far as the next timer. So a member's expiry is observable to the
millisecond whatever the load on the machine: out of its group at its own deadline, not at the next tick
of a periodic sweep."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.group.coordinator import GroupCoordinator
from headwater.broker.group.group import GroupState
from headwater.broker.group.requests import HeartbeatRequest, JoinRequest, SyncRequest
from headwater.broker.topics.cluster import Cluster
from headwater.kafka.errors import ErrorCode

T = TypeVar("T")
SESSION_MS = 6000


class _VirtualSelector(selectors.SelectSelector):
    """Never blocks: with nothing ready it moves the loop's clock to the next timer instead of sleeping."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready:
            if timeout is None:
                raise RuntimeError("the virtual clock loop has nothing to wait for")
            self._loop.now += timeout
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now


def run(coro: Coroutine[Any, Any, T]) -> T:
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _join_request(group: str, member_id: str = "") -> JoinRequest:
    """A v5 JoinGroup of a consumer: a new member first gets MEMBER_ID_REQUIRED."""
    return JoinRequest(group_id=group, member_id=member_id, instance_id=None, session_timeout_ms=SESSION_MS,
                       rebalance_timeout_ms=SESSION_MS, protocol_type="consumer", protocols=[("range", b"")],
                       member_id_required=True, client_id="c", client_host="/127.0.0.1")


async def _stable_member(groups: GroupCoordinator, group: str) -> str:
    """One consumer through JoinGroup (v5: MEMBER_ID_REQUIRED first) and SyncGroup as leader; its member id."""
    first = await groups.join(_join_request(group))
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    joined = await groups.join(_join_request(group, first["member_id"]))
    assert joined["error_code"] == 0 and joined["leader"] == joined["member_id"]
    member_id: str = joined["member_id"]
    sync = SyncRequest(group_id=group, member_id=member_id, instance_id=None, generation_id=joined["generation_id"],
                       protocol_type="consumer", protocol_name="range", assignments={member_id: b"a"})
    synced = await groups.sync(sync)
    assert synced["error_code"] == 0
    assert groups.groups[group].state == GroupState.STABLE
    return member_id


@pytest.fixture
def coordinator(tmp_path: Path) -> GroupCoordinator:
    config = BrokerConfig(**{"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"})
    cluster = Cluster(config)
    cluster.load()
    groups = GroupCoordinator(cluster, config)
    groups.load()
    return groups


def test_a_member_expires_at_its_own_deadline(coordinator: GroupCoordinator) -> None:
    """The last heartbeat at an instant off any 100 ms grid; 1 ms before its deadline the member is in, 1 ms
    after it the group is empty and DeleteGroups succeeds (a 100 ms sweep would still find it "not empty")."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        coordinator.start()
        try:
            member_id = await _stable_member(coordinator, "g")
            group = coordinator.groups["g"]
            await asyncio.sleep(1.2345)
            heartbeat = HeartbeatRequest(group_id="g", member_id=member_id, instance_id=None,
                                         generation_id=group.generation)
            assert coordinator.heartbeat(heartbeat) == ErrorCode.NONE
            deadline = loop.time() + SESSION_MS / 1000
            member = group.members[member_id]
            assert member.expiry is not None and member.expiry.when() == deadline
            await asyncio.sleep(deadline - 0.001 - loop.time())
            assert member_id in group.members
            assert coordinator.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
            await asyncio.sleep(0.002)
            assert group.state == GroupState.EMPTY and not group.members
            assert coordinator.delete_group("g") == ErrorCode.NONE
        finally:
            await coordinator.stop()

    run(scenario())


def test_a_heartbeat_moves_the_deadline(coordinator: GroupCoordinator) -> None:
    """Each heartbeat re-arms the timer: a member heartbeating every 3 s outlives many session timeouts."""

    async def scenario() -> None:
        coordinator.start()
        try:
            member_id = await _stable_member(coordinator, "g")
            group = coordinator.groups["g"]
            heartbeat = HeartbeatRequest(group_id="g", member_id=member_id, instance_id=None,
                                         generation_id=group.generation)
            for _ in range(10):
                await asyncio.sleep(3)
                assert coordinator.heartbeat(heartbeat) == ErrorCode.NONE
            assert group.state == GroupState.STABLE
            await asyncio.sleep(SESSION_MS / 1000 + 0.001)
            assert group.state == GroupState.EMPTY
        finally:
            await coordinator.stop()

    run(scenario())


def test_an_unused_member_id_is_forgotten_at_its_deadline(coordinator: GroupCoordinator) -> None:
    """An id handed out with MEMBER_ID_REQUIRED and never used leaves the pending set at session.timeout.ms."""

    async def scenario() -> None:
        coordinator.start()
        try:
            await asyncio.sleep(0.0345)  # off any 100 ms grid
            first = await coordinator.join(_join_request("p"))
            group = coordinator.groups["p"]
            assert group.pending_members == {first["member_id"]}
            await asyncio.sleep(SESSION_MS / 1000 - 0.001)
            assert group.pending_members == {first["member_id"]}
            await asyncio.sleep(0.002)
            assert not group.pending_members
        finally:
            await coordinator.stop()

    run(scenario())
