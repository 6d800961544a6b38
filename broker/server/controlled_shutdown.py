"""The broker's side of a controlled shutdown, the first step of a clean stop in a ZooKeeper cluster (Kafka's
KafkaServer.controlledShutdown): with ``controlled.shutdown.enable`` the broker asks the controller, while it still
serves, to move its leaderships to other in-sync replicas and take it out of the ISRs
(broker/cluster/controlled_shutdown.py), so clients follow the new leaders before this broker goes and nothing waits
for its session to end.

It sends ControlledShutdown v3 (its broker.id and broker epoch, its registration's czxid) to the controller its view
names, over the controller's inter-broker listener (broker/replication/peer.py: TLS and SASL as replication), or
asks its own controller in-process when it is the controller. An attempt fails when no controller is known, the
connection or the answer fails (``controller.socket.timeout.ms`` to connect, ``request.timeout.ms`` to answer), the
answer is an error, or it names partitions still led here (no other in-sync replica); the broker tries
``controlled.shutdown.max.retries`` times in all, ``controlled.shutdown.retry.backoff.ms`` apart, asking the
controller the view names then, and stops anyway after the last, logging what remains, as Kafka does. A broker
that its view shows leading nothing with other replicas and in no ISR (one the others refuse, say) has nothing to
move and does not ask.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from headwater.properties import ConfigError

from ..errors import BrokerError
from ..protocol.schemas import ControlledShutdownRequest, ControlledShutdownResponse
from ..replication.peer import PeerConnection, PeerError, connect_peer, error_name
from ..security.inter_broker import inter_broker_listener

if TYPE_CHECKING:
    from ..cluster.membership import ClusterMembership
    from ..config.broker_config import BrokerConfig

__all__ = ["shut_down_controlled"]

log = logging.getLogger(__name__)

VERSION = 3  # what Kafka's brokers send since 2.4 (KIP-380's broker epoch, flexible)
Key = tuple[str, int]


class _Attempt(Exception):
    """One attempt that did not succeed; the message says why (logged)."""


async def shut_down_controlled(membership: ClusterMembership, config: BrokerConfig) -> bool:
    """Ask the controller to move this broker's leaderships away, as many times as
    ``controlled.shutdown.max.retries`` says; whether it succeeded (nothing left led here)."""
    if not _in_sync_anywhere(membership, config.node_id):
        log.info("Controlled shutdown not needed: this broker leads no partition with other replicas and follows in "
                 "no ISR")
        return True
    log.info("Starting controlled shutdown")
    client = _ControllerClient(membership, config)
    remaining: list[Key] = []
    try:
        for left in range(config.controlled_shutdown_max_retries - 1, -1, -1):
            started = time.monotonic()
            try:
                remaining = await client.shut_down()
            except _Attempt as exc:
                log.info("Controlled shutdown attempt failed: %s", exc)
            else:
                took = (time.monotonic() - started) * 1000
                if not remaining:
                    log.info("Controlled shutdown request returned successfully after %.0f ms", took)
                    return True
                log.info("Controlled shutdown request returned after %.0f ms with %d partitions remaining to move: "
                         "%s", took, len(remaining), _named(remaining))
            if left:
                await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
                log.info("Retrying controlled shutdown (%d retries remaining)", left)
    finally:
        client.close()
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed%s",
                f"; still leading {_named(remaining)}" if remaining else "")
    return False


def _in_sync_anywhere(membership: ClusterMembership, broker_id: int) -> bool:
    """Whether this broker leads or is in the ISR of a partition with more than one replica, as its view says: else
    the controller would have nothing to move or take it out of (a broker refused by the others, say)."""
    topics = membership.topics
    return topics is None or any(
        broker_id in state.isr or state.leader == broker_id
        for meta in topics.topics.values() for index, state in meta.states.items()
        if len(meta.assignment.get(index, ())) > 1)


def _named(keys: list[Key]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in keys)


class _ControllerClient:
    """Asks the controller of the moment; one connection, made again when the controller changes or a call failed."""

    def __init__(self, membership: ClusterMembership, config: BrokerConfig) -> None:
        self.membership, self.config = membership, config
        self.broker_id = config.node_id
        self.listener = inter_broker_listener(config)
        self._connection: PeerConnection | None = None
        self._connected_to = -1

    async def shut_down(self) -> list[Key]:
        """One attempt: the partitions still led here; _Attempt when it failed."""
        view = self.membership.view
        controller_id = view.controller_id
        registered = view.brokers.get(self.broker_id)
        epoch = registered.epoch if registered is not None else -1
        if controller_id < 0:
            raise _Attempt("no controller present")
        if controller_id == self.broker_id:
            return await self._ask_own(epoch)
        controller = view.brokers.get(controller_id)
        address = controller.endpoints.get(self.listener) if controller is not None else None
        if address is None:
            raise _Attempt(f"the registration of controller {controller_id} (listener {self.listener}) is not known")
        try:
            connection = await self._connect(controller_id, address)
            answer = await connection.call(ControlledShutdownRequest[VERSION](broker_id=self.broker_id,
                                                                              broker_epoch=epoch),
                                           ControlledShutdownResponse, self.config.request_timeout_ms / 1000)
        except (OSError, EOFError, TimeoutError, PeerError, ConfigError) as exc:
            self.close()
            raise _Attempt(f"controller {controller_id} at {address[0]}:{address[1]}: {exc or type(exc).__name__} "
                           f"(leader movement may take longer than controller.socket.timeout.ms and/or "
                           f"request.timeout.ms)") from None
        if answer.error_code:
            raise _Attempt(f"controller {controller_id} answered {error_name(answer.error_code)}")
        return [(p.topic_name, p.partition_index) for p in answer.remaining_partitions]

    async def _ask_own(self, epoch: int) -> list[Key]:
        """This broker is the controller: its own controller moves the partitions (as Kafka's sends itself the
        request); it resigns when the broker's session closes."""
        controller = self.membership.controller
        if controller is None:
            raise _Attempt("this broker's controller is not running")
        try:
            return await controller.shutdowns.shut_down(self.broker_id, epoch)
        except BrokerError as exc:
            raise _Attempt(f"{error_name(exc.code)}: {exc.message}") from None
        except Exception as exc:  # ZooKeeper's connection lost and the like: the next attempt may do
            raise _Attempt(f"this broker's controller failed: {exc!r}") from None

    async def _connect(self, controller_id: int, address: tuple[str, int]) -> PeerConnection:
        if self._connection is not None and self._connected_to == controller_id:
            return self._connection
        self.close()
        self._connection = await connect_peer(self.config, *address, str(self.broker_id),
                                              self.config.controller_socket_timeout_ms / 1000)
        self._connected_to = controller_id
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
