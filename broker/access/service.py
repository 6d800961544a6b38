"""Who may do what, and how fast: the broker's ACLs (``acls.py``) and client quotas (``quotas.py``) in one
service the API handlers reach through their request context.

Without authentication every client is ``User:ANONYMOUS`` (Kafka's principal for PLAINTEXT); SASL or TLS
would set another principal on the connection and the same checks apply. ACLs are stored and answered by
CreateAcls/DescribeAcls/DeleteAcls always; they are enforced only with ``authorizer.enabled=true``.
On a single node the three are kept in files in the log directory; in a cluster in ZooKeeper, shared by every
broker (``SharedSecurityState``, set once the broker has joined), so the changes go through ``Access``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..config.broker_config import BrokerConfig
from ..security.credentials import CredentialChange, ScramCredentialStore
from .acls import AclBinding, AclFilter, AclOperation, AclStore, Authorizer, ResourceType
from .quotas import Entity, QuotaStore, Throttler

__all__ = ["ANONYMOUS", "Access", "SharedSecurityState", "SharedStateUnavailable", "user_of"]

ANONYMOUS = "User:ANONYMOUS"
NOT_JOINED = "this broker has not joined the cluster yet: its ACLs, quotas and credentials are not loaded"


class SharedStateUnavailable(Exception):
    """The cluster's ACLs, quotas or credentials cannot be changed (the message says why): this broker has not
    joined yet, or one entity's change could not be written."""


class SharedSecurityState(Protocol):
    """Where a cluster keeps its ACLs, client quotas and SCRAM credentials (broker/cluster/: ZooKeeper): writes
    go there and every broker's stores here follow what it holds."""

    async def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, tuple[int, str]]:
        """Store the bindings; those not stored, with an error code and message."""
        ...

    async def delete_acls(self, filters: list[AclFilter]
                          ) -> tuple[list[list[AclBinding]], dict[AclBinding, tuple[int, str]]]:
        """The bindings each filter removed, and those that could not be removed (code, message)."""
        ...

    async def alter_quotas(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> dict[Entity, str]:
        """Apply the changes; the entities whose change could not be written, with why."""
        ...

    async def alter_scram(self, changes: list[CredentialChange]) -> dict[str, str]:
        """Apply the changes; the users whose change could not be written, with why."""
        ...


def user_of(principal: str) -> str:
    """The principal's name, as client quotas name users (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1]


class Access:
    def __init__(self, config: BrokerConfig, log_dir: Path) -> None:
        # In a cluster the three stores start empty and follow ZooKeeper once the broker joins (``shared``);
        # what a broker kept in its log directory from single-node use is not used (each store logs it).
        self.local = not config.zookeeper_connect
        self.shared: SharedSecurityState | None = None
        self.acls = AclStore(log_dir, self.local)
        super_users = {p.strip() for p in config.super_users.split(";") if p.strip()}
        self.authorizer = Authorizer(self.acls, config.authorizer_enabled, super_users,
                                     config.allow_everyone_if_no_acl_found)
        self.quotas = QuotaStore(log_dir, self.local)
        samples, window_ms = config.quota_window_num, config.quota_window_size_seconds * 1000
        self.produce = Throttler(self.quotas, "producer_byte_rate", samples, window_ms)
        self.fetch = Throttler(self.quotas, "consumer_byte_rate", samples, window_ms)
        self.window_ms, self.samples = window_ms, samples
        # SCRAM users (KIP-554), what SASL/SCRAM listeners check
        self.scram = ScramCredentialStore(log_dir, self.local)

    # -- changes: the local files, or the cluster's shared state --------------------------------------

    def _shared(self) -> SharedSecurityState:
        if self.shared is None:
            raise SharedStateUnavailable(NOT_JOINED)
        return self.shared

    async def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, tuple[int, str]]:
        """Store the bindings; those not stored, with an error code and message (none on a single node)."""
        if self.local:
            self.acls.create(bindings)
            return {}
        return await self._shared().create_acls(bindings)

    async def delete_acls(self, filters: list[AclFilter]
                          ) -> tuple[list[list[AclBinding]], dict[AclBinding, tuple[int, str]]]:
        if self.local:
            return self.acls.delete(filters), {}
        return await self._shared().delete_acls(filters)

    async def alter_quotas(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> dict[Entity, str]:
        """The entities whose change could not be written, with why (none on a single node)."""
        if self.local:
            self.quotas.alter(changes)
            return {}
        return await self._shared().alter_quotas(changes)

    async def alter_scram(self, changes: list[CredentialChange]) -> dict[str, str]:
        """The users whose change could not be written, with why (none on a single node)."""
        if self.local:
            self.scram.apply(changes)
            return {}
        return await self._shared().alter_scram(changes)

    def acls_apply(self, principal: str) -> bool:
        """Whether this principal's requests are checked against the ACLs at all (decided once per
        connection: otherwise every check answers yes without a lookup)."""
        return not self.authorizer.exempt(principal)

    def throttler_for(self, api_key: int, principal: str, client_id: str) -> Throttler | None:
        """The byte-rate quota a Produce (0) or Fetch (1) request of this client is recorded against, or
        None when none applies to it (then nothing is recorded and its requests are pipelined)."""
        throttler = self.produce if api_key == 0 else self.fetch if api_key == 1 else None
        if throttler is None or not throttler.active or not throttler.applies(user_of(principal), client_id):
            return None
        return throttler

    def allowed(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        return self.authorizer.authorize(principal, host, operation, resource_type, name)

    def allowed_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.authorizer.authorize_any(principal, host, operation, resource_type)
