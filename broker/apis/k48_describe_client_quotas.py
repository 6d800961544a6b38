"""DescribeClientQuotas (key 48), v0-v1.

Behavior: the configured quotas of every entity the filter matches: each component names an entity type
(``user``, ``client-id``, ``ip``) matched EXACT (that name), DEFAULT (the default entity) or SPECIFIED
(any name); ``strict`` also requires the entity to have no other types. Whole-request errors as Kafka:
INVALID_REQUEST for a malformed filter, UNSUPPORTED_VERSION for an unknown entity type. Needs
DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation
from ..access.quotas import ENTITY_TYPES, IP
from ..protocol.requests import DescribeClientQuotasRequest, QuotaComponent
from .acl_wire import denied
from .registry import RequestContext, api

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _problem(components: Sequence[QuotaComponent]) -> tuple[int, str] | None:
    seen: set[str] = set()
    for c in components:
        if not c.entity_type:
            return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
        if c.entity_type in seen:
            return ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more than once in the filter."
        seen.add(c.entity_type)
        if c.entity_type not in ENTITY_TYPES:
            return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}"
        if c.match_type == EXACT and c.match is None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if c.match_type in (DEFAULT, SPECIFIED) and c.match is not None:
            kind = "MATCH_TYPE_DEFAULT" if c.match_type == DEFAULT else "MATCH_TYPE_SPECIFIED"
            return ErrorCode.INVALID_REQUEST, f"Request specified {kind}, but also specified a match string."
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            return ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}"
    if IP in seen and len(seen) > 1:
        return ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component should " \
                                          "not be used with User or ClientId filter component."
    return None


def _matches(entity: dict[str, str | None], components: Sequence[QuotaComponent], strict: bool) -> bool:
    for c in components:
        if c.entity_type not in entity:
            return False
        if c.match_type == EXACT and entity[c.entity_type] != c.match:
            return False
        if c.match_type == DEFAULT and entity[c.entity_type] is not None:
            return False
    return not strict or len(entity) == len(components)


@api(key=48, min=0, max=1)
async def handle(ctx: RequestContext, req: DescribeClientQuotasRequest) -> dict[str, Any]:
    answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": []}
    failed = denied(ctx, AclOperation.DESCRIBE_CONFIGS) or _problem(list(req.components))
    if failed:
        answer["error_code"], answer["error_message"] = failed
        answer["entries"] = None
        return answer
    quotas = ctx.access.quotas.quotas
    for entity, values in quotas.items():
        named = dict(entity)
        if _matches(named, list(req.components), req.strict):
            answer["entries"].append({
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]})
    return answer
