"""What CreateAcls, DescribeAcls and DeleteAcls share: filters read from the wire, bindings written to it,
and the cluster permission each needs. v0 requests carry no pattern type (LITERAL)."""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType, invalid_filter
from ..protocol.requests import AclFilterFields
from .registry import RequestContext

__all__ = ["binding_entry", "denied", "read_filter", "wire_enum"]


def wire_enum(kind: type, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN: refused by validation, naming the field


def read_filter(f: AclFilterFields) -> tuple[AclFilter | None, str | None]:
    """A DescribeAcls/DeleteAcls filter, or why it is invalid."""
    acl_filter = AclFilter(wire_enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
                           wire_enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
                           f.principal_filter, f.host_filter, wire_enum(AclOperation, f.operation),
                           wire_enum(AclPermission, f.permission_type))
    problem = invalid_filter(acl_filter)
    return (None, problem) if problem else (acl_filter, None)


def binding_entry(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": int(b.resource_type), "resource_name": b.resource_name,
            "pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission)}


def denied(ctx: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """CLUSTER_AUTHORIZATION_FAILED unless the principal may ``operation`` the cluster."""
    if ctx.allowed_cluster(operation):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
