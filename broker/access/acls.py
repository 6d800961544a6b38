"""ACLs as Kafka has them: bindings of a resource pattern to an access-control entry, the filters of
DescribeAcls/DeleteAcls, and the authorizer's decision (Kafka's AclAuthorizer/StandardAuthorizer rules).

A binding allows or denies ``principal`` from ``host`` one ``operation`` on the resources its pattern
names: a LITERAL name (``*`` standing for every resource of the type) or a PREFIXED one. To decide:
super users are allowed everything; a matching DENY wins over any ALLOW; READ, WRITE, DELETE and ALTER
imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, and ALL matches every operation; a resource no
binding names at all is allowed only with ``allow.everyone.if.no.acl.found``. Bindings persist in one
JSON file in the log directory.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from ..config.state_file import read_json, write_json

__all__ = ["AclBinding", "AclFilter", "AclOperation", "AclPermission", "AclStore", "Authorizer", "PatternType",
           "ResourceType", "invalid_binding", "invalid_filter"]

log = logging.getLogger(__name__)

ACLS_FILE = "headwater-acls.json"
CLUSTER_NAME = "kafka-cluster"  # the only name of the CLUSTER resource
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


#: The operations each resource type supports, as Kafka's AclEntry lists them: what "authorized operations"
#: (Metadata, DescribeCluster, DescribeGroups) are reported from.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
}


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW for any of these operations also allows the key (Kafka's implied operations)
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    def names(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern names the resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)

    def to_json(self) -> dict[str, object]:
        return {k: (int(v) if isinstance(v, IntEnum) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AclBinding:
        return cls(ResourceType(data["resource_type"]), str(data["resource_name"]),
                   PatternType(data["pattern_type"]), str(data["principal"]), str(data["host"]),
                   AclOperation(data["operation"]), AclPermission(data["permission"]))


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls match: ANY (or None for a name, principal or host) matches all;
    the MATCH pattern type matches every pattern that names the given resource (literal, ``*``, prefixes)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermission

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not b.names(b.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
                return False
            if self.resource_name is not None and self.resource_name != b.resource_name:
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == AclOperation.ANY or self.operation == b.operation)
                and (self.permission == AclPermission.ANY or self.permission == b.permission))


def invalid_binding(b: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (Kafka answers INVALID_REQUEST with this), or None."""
    if b.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"Invalid operation {b.operation.name}"
    if b.permission in (AclPermission.ANY, AclPermission.UNKNOWN):
        return f"Invalid permissionType {b.permission.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type " \
               "from the principal name)"
    if not b.host:
        return "Invalid null host"
    return None


def invalid_filter(f: AclFilter) -> str | None:
    """Why DescribeAcls/DeleteAcls refuse a filter (UNKNOWN anywhere cannot match), or None."""
    for field, value in (("resourceType", f.resource_type), ("patternType", f.pattern_type),
                         ("operation", f.operation), ("permissionType", f.permission)):
        if value == 0:
            return f"Invalid {field} UNKNOWN in filter"
    return None


class AclStore:
    """Every binding, persisted in ``headwater-acls.json`` on each change (single node), or a cluster's as
    ZooKeeper holds them (broker/cluster/acl_store_zk.py keeps ``bindings``)."""

    def __init__(self, log_dir: Path, local: bool = True) -> None:
        """``local``: the bindings are this file's; otherwise (a cluster) they are set from ZooKeeper and the file's,
        from single-node use, are not used (logged)."""
        self.path = log_dir / ACLS_FILE
        self.local = local
        self.bindings: list[AclBinding] = []
        saved = read_json(self.path)
        if saved and not local:
            if saved.get("acls"):
                log.warning("%d ACLs in %s (from single-node use) are not used: a cluster's ACLs are in ZooKeeper",
                            len(saved["acls"]), self.path)
        elif saved:
            self.bindings = [AclBinding.from_json(b) for b in saved.get("acls", [])]
            log.info("loaded %d ACLs from %s", len(self.bindings), self.path)

    def _save(self) -> None:
        assert self.local, "a cluster's ACLs are written to ZooKeeper, not to the local file"
        write_json(self.path, {"acls": [b.to_json() for b in self.bindings]})

    def create(self, bindings: list[AclBinding]) -> None:
        new = [b for b in dict.fromkeys(bindings) if b not in self.bindings]
        if new:
            self.bindings.extend(new)
            self._save()

    def describe(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings if f.matches(b)]

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding two filters match is reported for the first)."""
        removed: list[list[AclBinding]] = []
        gone: set[AclBinding] = set()
        for f in filters:
            hits = [b for b in self.bindings if b not in gone and f.matches(b)]
            gone.update(hits)
            removed.append(hits)
        if gone:
            self.bindings = [b for b in self.bindings if b not in gone]
            self._save()
        return removed


class Authorizer:
    """Decides whether a principal may perform an operation on a resource (``authorizer.enabled``)."""

    def __init__(self, store: AclStore, enabled: bool, super_users: set[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.enabled = enabled
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def exempt(self, principal: str) -> bool:
        """Whether no ACL applies to the principal: the authorizer is off, or it is a super user."""
        return not self.enabled or principal in self.super_users

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if self.exempt(principal):
            return True
        naming = [b for b in self.store.bindings if b.names(resource_type, name)]
        if not naming:
            return self.allow_if_no_acl
        mine = [b for b in naming if b.applies_to(principal, host)]
        if any(b.permission == AclPermission.DENY and b.operation in (operation, AclOperation.ALL) for b in mine):
            return False
        allowed_by = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(b.permission == AclPermission.ALLOW
                   and (b.operation == AclOperation.ALL or b.operation in allowed_by) for b in mine)

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type may be operated on (Kafka's authorizeByResourceType: an
        idempotent producer needs WRITE on any topic): an ALLOW of it for this principal, and no DENY on
        the ``*`` wildcard; with no binding of the type at all, ``allow.everyone.if.no.acl.found``."""
        if self.exempt(principal):
            return True
        of_type = [b for b in self.store.bindings if b.resource_type == resource_type]
        if not of_type:
            return self.allow_if_no_acl
        mine = [b for b in of_type if b.applies_to(principal, host) and b.operation in (operation, AclOperation.ALL)]
        if any(b.permission == AclPermission.DENY and b.resource_name == WILDCARD for b in mine):
            return False
        return any(b.permission == AclPermission.ALLOW for b in mine)
