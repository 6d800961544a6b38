"""AlterClientQuotas (key 49), v0-v1.

Behavior: sets or removes quota keys on entities (``user``, ``client-id``, ``user`` + ``client-id``, or
``ip``; a null name is the default entity), persisted in the log directory and applied at once (in a cluster
written to ZooKeeper's ``/config/users``, ``/config/clients``, ``/config/ips`` and applied by every broker). Each
entry is validated on its own as Kafka validates it (INVALID_REQUEST naming the problem: an unknown
entity type or key, a key that does not apply to the entity, a value not above 0, a fraction for a
byte rate, an empty name, duplicates); the others still apply. ``validate_only`` changes nothing. In a cluster
an entity ZooKeeper could not take is answered UNKNOWN_SERVER_ERROR with the reason.
Needs ALTER_CONFIGS on the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation
from ..access.quotas import ENTITY_TYPES, IP, QUOTA_KEYS, Entity, entity
from ..access.service import SharedStateUnavailable
from ..protocol.requests import AlterClientQuotasRequest, QuotaEntityPart, QuotaOp
from .acl_wire import denied
from .registry import RequestContext, api

INTEGRAL = {"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"}


def _check(raw: Sequence[QuotaEntityPart],
           ops: Sequence[QuotaOp]) -> tuple[Entity | None, dict[str, float | None], str | None]:
    if not raw:
        return None, {}, "Invalid empty client quota entity"
    types: set[str] = set()
    for e in raw:
        if e.entity_type not in ENTITY_TYPES:
            return None, {}, f"Unhandled client quota entity type: {e.entity_type}"
        if e.entity_type in types:
            return None, {}, f"Invalid client quota entity, duplicate entity entry {e.entity_type}"
        types.add(e.entity_type)
        if e.entity_name == "":
            return None, {}, f"Empty {e.entity_type} not supported"
    if IP in types and len(types) > 1:
        return None, {}, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
    changes: dict[str, float | None] = {}
    for op in ops:
        applies = QUOTA_KEYS.get(op.key)
        if applies is None or not types <= applies:
            return None, {}, f"Invalid configuration key {op.key}"
        if op.key in changes:
            return None, {}, f"Duplicate quota key {op.key} not updating quota for this entity"
        if op.remove:
            changes[op.key] = None
            continue
        if op.value <= 0:
            return None, {}, f"Quota {op.key} must be greater than 0"
        if op.key in INTEGRAL and abs(op.value - round(op.value)) > 1e-6:
            return None, {}, f"{op.key} cannot be a fractional value."
        changes[op.key] = float(op.value)
    return entity((e.entity_type, e.entity_name) for e in raw), changes, None


@api(key=49, min=0, max=1)
async def handle(ctx: RequestContext, req: AlterClientQuotasRequest) -> dict[str, Any]:
    refused = denied(ctx, AclOperation.ALTER_CONFIGS)
    results: list[dict[str, Any]] = []
    changes: dict[int, tuple[Entity, dict[str, float | None]]] = {}  # result index -> change
    for item in req.entries:
        echo = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in item.entity]
        if refused:
            results.append({"error_code": refused[0], "error_message": refused[1], "entity": echo})
            continue
        ent, ops, problem = _check(list(item.entity), list(item.ops))
        if problem or ent is None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem, "entity": echo})
            continue
        changes[len(results)] = (ent, ops)
        results.append({"error_code": 0, "error_message": None, "entity": echo})
    if changes and not req.validate_only:
        try:
            failed = await ctx.access.alter_quotas(list(changes.values()))
        except SharedStateUnavailable as exc:
            failed = {ent: str(exc) for ent, _ in changes.values()}
        for index, (ent, _) in changes.items():
            if ent in failed:
                results[index]["error_code"], results[index]["error_message"] = ErrorCode.UNKNOWN_SERVER_ERROR, \
                    failed[ent]
    return {"throttle_time_ms": 0, "entries": results}
