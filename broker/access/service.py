"""Who may do what, and how fast: the broker's ACLs (``acls.py``) and client quotas (``quotas.py``) in one
service the API handlers reach through their request context.

Without authentication every client is ``User:ANONYMOUS`` (Kafka's principal for PLAINTEXT); SASL or TLS
would set another principal on the connection and the same checks apply. ACLs are stored and answered by
CreateAcls/DescribeAcls/DeleteAcls always; they are enforced only with ``authorizer.enabled=true``.
"""

from __future__ import annotations

from pathlib import Path

from ..config.broker_config import BrokerConfig
from ..security.credentials import ScramCredentialStore
from .acls import AclOperation, AclStore, Authorizer, ResourceType
from .quotas import QuotaStore, Throttler

__all__ = ["ANONYMOUS", "Access", "user_of"]

ANONYMOUS = "User:ANONYMOUS"


def user_of(principal: str) -> str:
    """The principal's name, as client quotas name users (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1]


class Access:
    def __init__(self, config: BrokerConfig, log_dir: Path) -> None:
        self.acls = AclStore(log_dir)
        super_users = {p.strip() for p in config.super_users.split(";") if p.strip()}
        self.authorizer = Authorizer(self.acls, config.authorizer_enabled, super_users,
                                     config.allow_everyone_if_no_acl_found)
        self.quotas = QuotaStore(log_dir)
        samples, window_ms = config.quota_window_num, config.quota_window_size_seconds * 1000
        self.produce = Throttler(self.quotas, "producer_byte_rate", samples, window_ms)
        self.fetch = Throttler(self.quotas, "consumer_byte_rate", samples, window_ms)
        self.window_ms, self.samples = window_ms, samples
        self.scram = ScramCredentialStore(log_dir)  # SCRAM users (KIP-554), what SASL/SCRAM listeners check

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
