"""Controller election as Kafka's ZooKeeper mode does it: the first broker to create the ephemeral
/controller znode is the controller, and in the same transaction it raises /controller_epoch by one
(a conditional write, so two winners cannot both count the same epoch). Every write of the controller's is
a transaction that checks /controller_epoch's version first (``fenced_transaction``): once another broker
has raised it, the write fails whole (``Fenced``, Kafka's ControllerMovedException)."""

from __future__ import annotations

import logging
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .znodes import CONTROLLER, CONTROLLER_EPOCH, controller_data, parse_controller

__all__ = ["Fenced", "commit_fenced", "elect", "fenced_transaction"]

log = logging.getLogger(__name__)


class Fenced(Exception):
    """/controller_epoch moved on: another broker is controller."""


def fenced_transaction(zk: KazooClient, epoch_version: int) -> TransactionRequest:
    """A transaction whose first operation checks /controller_epoch's version (the controller's when it read
    its epoch)."""
    tx = zk.transaction()
    tx.check(CONTROLLER_EPOCH, epoch_version)
    return tx


def commit_fenced(tx: TransactionRequest) -> list[Any]:
    """Commit a ``fenced_transaction``: the results of the operations after the check (an exception in place
    of each failed or rolled back one); Fenced when the check failed. Blocking."""
    results = tx.commit()
    if isinstance(results[0], BadVersionError):  # (a later op's failure rolls the check back: not fenced)
        raise Fenced
    return list(results[1:])


def elect(zk: KazooClient, broker_id: int) -> int:
    """The controller's id after running for controller when /controller is missing (-1: unreadable, which
    the next watch event reads again). Blocking: call it from a worker thread."""
    while True:
        try:
            raw, _ = zk.get(CONTROLLER)
        except NoNodeError:
            pass
        else:
            try:
                return parse_controller(raw)
            except ValueError as exc:
                log.warning("%s", exc)
                return -1
        raw_epoch, stat = zk.get(CONTROLLER_EPOCH)
        epoch = int(raw_epoch or b"0") + 1
        tx = zk.transaction()
        tx.create(CONTROLLER, controller_data(broker_id), ephemeral=True)
        tx.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            log.info("broker %d is the controller (controller epoch %d)", broker_id, epoch)
            return broker_id
        if not any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            raise next(r for r in results if isinstance(r, Exception))
        # another broker won (or raised the epoch) first: read who
