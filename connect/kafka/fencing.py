"""Fencing transactional producers, as Kafka's ``Admin.fenceProducers`` does (KIP-618's zombie fencing).

For each transactional id: FindCoordinator (type transaction), then InitProducerId naming the id and no
producer id or epoch. The coordinator bumps the id's epoch and aborts its open transaction, so a producer
still holding the older epoch (a zombie task of an older generation) is refused on its next write or
commit (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH). aiokafka's admin client has no such method.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.errors import for_code
from aiokafka.protocol.transaction import InitProducerIdRequest

from headwater.kafka.errors import ErrorCode

from .clients import admin_client

__all__ = ["FencingFailed", "fence_producers"]

log = logging.getLogger(__name__)

TRANSACTION_COORDINATOR = 1  # FindCoordinator key_type
# Kafka's FenceProducersHandler: try again (the coordinator is loading, or still ending the open transaction) ...
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
# ... or look the coordinator up again
_RELOOKUP = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_BACKOFF_S = 0.1


class FencingFailed(Exception):
    """A transactional id could not be fenced; the message names it and why."""


async def fence_producers(bootstrap: str, admin_props: Mapping[str, str], transactional_ids: Iterable[str],
                          timeout_ms: int) -> None:
    """Fence every producer of ``transactional_ids`` (all at once), within ``timeout_ms``; raises
    FencingFailed naming the first id that could not be fenced. ``timeout_ms`` is also the transaction
    timeout sent with InitProducerId, as Kafka's FenceProducersOptions sends it."""
    ids = list(transactional_ids)
    if not ids:
        return
    admin = admin_client(bootstrap, admin_props, request_timeout_ms=min(timeout_ms, 30000))
    await admin.start()
    try:
        deadline = time.monotonic() + timeout_ms / 1000
        await asyncio.gather(*(_fence_one(admin, tid, timeout_ms, deadline) for tid in ids))
    finally:
        await admin.close()


async def _fence_one(admin: Any, tid: str, timeout_ms: int, deadline: float) -> None:
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            node = await admin.find_coordinator(tid, TRANSACTION_COORDINATOR)
            response = await admin._send_request_to_node(node, InitProducerIdRequest(tid, timeout_ms))
        except Exception as exc:  # no coordinator yet, a connection lost: as retriable as Kafka's handler treats them
            if not getattr(exc, "retriable", False) and not isinstance(exc, OSError | TimeoutError):
                raise FencingFailed(f"fencing the producer of transactional id {tid} failed: "
                                    f"{type(exc).__name__}: {exc}") from exc
            last = f"{type(exc).__name__}: {exc}"
        else:
            code = response.error_code
            if code == ErrorCode.NONE:
                log.debug("fenced transactional id %s: producer id %d, epoch %d", tid, response.producer_id,
                          response.producer_epoch)
                return
            last = for_code(code).__name__
            if code not in _RETRY and code not in _RELOOKUP:
                raise FencingFailed(f"fencing the producer of transactional id {tid} failed: the transaction "
                                    f"coordinator answered {last} (error code {code})")
        await asyncio.sleep(_BACKOFF_S)
    raise FencingFailed(f"fencing the producer of transactional id {tid} did not finish within {timeout_ms} ms "
                        f"(last: {last})")
