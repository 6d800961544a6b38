"""One registry of API handlers; both dispatch and ApiVersions read it.

Each handler module declares the versions it serves with ``@api(key, min, max)``.
A handler gets the request context and the decoded request (typed by its view in
``protocol/requests.py``) and returns the response body as plain dicts (built into the
versioned message class here, where a key the schema lacks is an error) or None for no
response (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..access.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from ..access.service import user_of
from ..protocol.codec import RequestHeader, build_response

if TYPE_CHECKING:
    from ..access.quotas import Throttler
    from ..access.service import Access
    from ..config.broker_config import Listener
    from ..group.coordinator import GroupCoordinator
    from ..security.session import SaslSession
    from ..topics.cluster import Cluster
    from ..topics.producer_state import ProducerIdManager
    from ..txn import TransactionCoordinator

__all__ = ["ApiSpec", "RequestContext", "REGISTRY", "Services", "api"]

# As the registry keeps handlers: each takes its own request view (protocol/requests.py), which the
# registry cannot name; dispatch hands it what the codec decoded for that key.
Handler = Callable[["RequestContext", Any], Awaitable[dict[str, Any] | None]]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(key: int, min: int = 0, max: int = 0) -> Callable[[H], H]:  # noqa: A002 - Kafka's words
    def register(handler: H) -> H:
        if key in REGISTRY:
            raise RuntimeError(f"API key {key} registered twice")
        REGISTRY[key] = ApiSpec(key, min, max, handler)
        return handler

    return register


@dataclass(frozen=True, slots=True)
class Services:
    """The broker's services the handlers reach through their context (the cluster is a field of its own)."""

    access: Access  # ACLs and client quotas
    producer_ids: ProducerIdManager  # InitProducerId
    groups: GroupCoordinator  # group membership and committed offsets
    transactions: TransactionCoordinator  # transactional ids and their transactions


@dataclass(slots=True)  # one per request: no instance dict
class RequestContext:
    cluster: Cluster
    header: RequestHeader
    peer: str
    services: Services
    closing: Callable[[], bool] = lambda: False
    principal: str = "User:ANONYMOUS"  # no authentication yet: Kafka's principal for PLAINTEXT
    mute: Callable[[int], None] = lambda ms: None  # stop reading this connection's requests for ms
    request_size: int = 0  # bytes of the request as received (what producer quotas count)
    # Decided by the server before the handler runs, so that a client no ACL or quota applies to costs no lookup:
    authorizing: bool = True  # whether the ACLs apply to this principal (Access.acls_apply)
    throttler: Throttler | None = None  # the byte-rate quota this Produce/Fetch counts against (Access.throttler_for)
    # The connection's listener: the address Metadata and FindCoordinator answer with (None: the first listener's),
    # and its SASL state on a SASL listener
    endpoint: Listener | None = None
    sasl: SaslSession | None = None

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0].strip("[]")

    @property
    def advertised(self) -> Listener:
        """This broker's address as clients of the connection's listener must reach it."""
        return self.endpoint if self.endpoint is not None else self.cluster.advertised[0]

    @property
    def access(self) -> Access:
        return self.services.access

    @property
    def groups(self) -> GroupCoordinator:
        return self.services.groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.services.transactions

    def allowed_transactional_id(self, operation: AclOperation, transactional_id: str) -> bool:
        return self.allowed(operation, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if not self.authorizing:
            return True
        return self.services.access.allowed(self.principal, self.host, operation, resource_type, name)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> set[int]:
        """The operations this principal may perform on the resource, among those its type supports: the
        codes of Kafka's authorized-operations bit field (the codec sets bit n for code n)."""
        return {int(op) for op in SUPPORTED_OPERATIONS[resource_type] if self.allowed(op, resource_type, name)}

    def allowed_topic(self, operation: AclOperation, topic: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, topic)

    def allowed_group(self, operation: AclOperation, group: str) -> bool:
        return self.allowed(operation, ResourceType.GROUP, group)

    def allowed_cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    @property
    def user(self) -> str:
        """The principal's name, as client quotas name users."""
        return user_of(self.principal)

    def throttle(self, ms: int) -> int:
        """Mute the connection for ``ms`` after this answer (KIP-219); returns ms for ``throttle_time_ms``."""
        if ms > 0:
            self.mute(ms)
        return ms

    def response(self, values: dict[str, Any]) -> Any:
        return build_response(self.header.api_key, self.header.api_version, values)
