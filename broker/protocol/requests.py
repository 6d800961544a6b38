"""The requests the handlers read, as types: one view per API over what the codec decodes.

The codec hands over kafka-python's generated message objects as they are (no copy on the request
path); these protocols name the fields each handler reads, with their types, so mypy checks every
``req.x`` against them. A field that only some versions carry is marked with its versions: the handler
decides by ``ctx.version`` (or reads it with ``getattr`` and a default) before trusting it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "AlterClientQuotasRequest", "AlterConfigsRequest", "AlterPartitionReassignmentsRequest",
    "AlterUserScramCredentialsRequest", "ApiVersionsRequest",
    "ConfigResource", "CreateAclsRequest",
    "CreatePartitionsRequest", "CreateTopicsRequest", "DeleteAclsRequest", "DeleteGroupsRequest",
    "DeleteRecordsRequest", "DeleteTopicsRequest", "DescribeAclsRequest", "DescribeClientQuotasRequest",
    "DescribeClusterRequest", "DescribeConfigsRequest", "DescribeGroupsRequest",
    "DescribeUserScramCredentialsRequest", "ElectLeadersRequest", "FetchRequest",
    "FindCoordinatorRequest", "HeartbeatRequest", "IncrementalAlterConfigsRequest", "IncrementalConfigResource",
    "InitProducerIdRequest", "Resource", "AddPartitionsToTxnRequest", "AddOffsetsToTxnRequest", "EndTxnRequest",
    "TxnOffsetCommitRequest", "DescribeTransactionsRequest", "ListTransactionsRequest",
    "JoinGroupRequest", "LeaveGroupRequest", "ListGroupsRequest", "ListOffsetsRequest",
    "ListPartitionReassignmentsRequest", "MetadataRequest",
    "OffsetCommitRequest", "OffsetDeleteRequest", "OffsetFetchRequest", "OffsetForLeaderEpochRequest",
    "ProduceRequest", "SaslAuthenticateRequest",
    "SaslHandshakeRequest", "SyncGroupRequest",
    "WriteTxnMarkersRequest", "ControlledShutdownRequest",
]


# -- records ----------------------------------------------------------------------------------------------

class ProducePartition(Protocol):
    index: int
    records: bytes | None


class ProduceTopic(Protocol):
    name: str
    partition_data: Sequence[ProducePartition]


class ProduceRequest(Protocol):  # key 0
    acks: int
    timeout_ms: int
    topic_data: Sequence[ProduceTopic]


class FetchPartition(Protocol):
    partition: int
    current_leader_epoch: int  # v9+; -1 before
    fetch_offset: int
    partition_max_bytes: int


class FetchTopic(Protocol):
    topic: str
    partitions: Sequence[FetchPartition]


class FetchRequest(Protocol):  # key 1
    replica_id: int  # -1 for consumers; a follower's broker id
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # v3+
    topics: Sequence[FetchTopic]  # session_id (v7+) is read with getattr


class ListOffsetsPartition(Protocol):
    partition_index: int
    timestamp: int  # current_leader_epoch (v4+) by getattr


class ListOffsetsTopic(Protocol):
    name: str
    partitions: Sequence[ListOffsetsPartition]


class ListOffsetsRequest(Protocol):  # key 2
    topics: Sequence[ListOffsetsTopic]


class OffsetForLeaderPartition(Protocol):
    partition: int
    leader_epoch: int  # current_leader_epoch (v2+) by getattr


class OffsetForLeaderTopic(Protocol):
    topic: str
    partitions: Sequence[OffsetForLeaderPartition]


class OffsetForLeaderEpochRequest(Protocol):  # key 23
    replica_id: int  # v3+ (-2 before, the schema's default)
    topics: Sequence[OffsetForLeaderTopic]


class MetadataTopic(Protocol):
    name: str


class MetadataRequest(Protocol):  # key 3
    # None: all topics (v1+); allow_auto_topic_creation (v4+) and include_*_authorized_operations (v8+) by getattr
    topics: Sequence[MetadataTopic] | None


class DeleteRecordsPartition(Protocol):
    partition_index: int
    offset: int


class DeleteRecordsTopic(Protocol):
    name: str
    partitions: Sequence[DeleteRecordsPartition]


class DeleteRecordsRequest(Protocol):  # key 21
    topics: Sequence[DeleteRecordsTopic]


class InitProducerIdRequest(Protocol):  # key 22
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int  # v3+ (KIP-360); -1 before
    producer_epoch: int  # v3+


# -- transactions -----------------------------------------------------------------------------------------

class AddPartitionsToTxnTopic(Protocol):
    name: str
    partitions: Sequence[int]


class AddPartitionsToTxnTransaction(Protocol):  # v4+: one per transactional id (broker to broker)
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    topics: Sequence[AddPartitionsToTxnTopic]


class AddPartitionsToTxnRequest(Protocol):  # key 24
    transactions: Sequence[AddPartitionsToTxnTransaction]  # v4+
    v3_and_below_transactional_id: str  # v0-v3
    v3_and_below_producer_id: int
    v3_and_below_producer_epoch: int
    v3_and_below_topics: Sequence[AddPartitionsToTxnTopic]


class AddOffsetsToTxnRequest(Protocol):  # key 25
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


class EndTxnRequest(Protocol):  # key 26
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


class TxnOffsetCommitPartition(Protocol):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None  # committed_leader_epoch (v2+) by getattr


class TxnOffsetCommitTopic(Protocol):
    name: str
    partitions: Sequence[TxnOffsetCommitPartition]


class TxnOffsetCommitRequest(Protocol):  # key 28
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: Sequence[TxnOffsetCommitTopic]  # generation_id, member_id, group_instance_id (v3+) by getattr


class WritableTxnMarkerTopic(Protocol):
    name: str
    partition_indexes: Sequence[int]


class WritableTxnMarker(Protocol):
    producer_id: int
    producer_epoch: int
    transaction_result: bool  # true: commit
    topics: Sequence[WritableTxnMarkerTopic]
    coordinator_epoch: int


class WriteTxnMarkersRequest(Protocol):  # key 27 (broker to broker)
    markers: Sequence[WritableTxnMarker]


class DescribeTransactionsRequest(Protocol):  # key 65
    transactional_ids: Sequence[str]


class ListTransactionsRequest(Protocol):  # key 66
    state_filters: Sequence[str]
    producer_id_filters: Sequence[int]  # duration_filter (v1+), transactional_id_pattern (v2+) by getattr


# -- groups -----------------------------------------------------------------------------------------------

class OffsetCommitPartition(Protocol):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None  # committed_leader_epoch (v6+) by getattr


class OffsetCommitTopic(Protocol):
    name: str
    partitions: Sequence[OffsetCommitPartition]


class OffsetCommitRequest(Protocol):  # key 8
    group_id: str
    generation_id_or_member_epoch: int  # v1+
    member_id: str  # v1+; group_instance_id (v7+) by getattr
    topics: Sequence[OffsetCommitTopic]


class OffsetFetchTopic(Protocol):
    name: str
    partition_indexes: Sequence[int]


class OffsetFetchRequest(Protocol):  # key 9
    group_id: str
    topics: Sequence[OffsetFetchTopic] | None  # None: every partition the group committed (v2+)
    require_stable: bool  # v7+


class FindCoordinatorRequest(Protocol):  # key 10
    key: str  # key_type (v1+) by getattr


class JoinGroupProtocol(Protocol):
    name: str
    metadata: bytes


class JoinGroupRequest(Protocol):  # key 11
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v1+
    member_id: str
    group_instance_id: str | None  # v5+
    protocol_type: str
    protocols: Sequence[JoinGroupProtocol]


class HeartbeatRequest(Protocol):  # key 12
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None  # v3+


class LeavingMember(Protocol):
    member_id: str
    group_instance_id: str | None


class LeaveGroupRequest(Protocol):  # key 13
    group_id: str
    member_id: str  # v0-v2
    members: Sequence[LeavingMember]  # v3+


class SyncGroupAssignment(Protocol):
    member_id: str
    assignment: bytes


class SyncGroupRequest(Protocol):  # key 14
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None  # v3+
    protocol_type: str | None  # v5+
    protocol_name: str | None  # v5+
    assignments: Sequence[SyncGroupAssignment]


class DescribeGroupsRequest(Protocol):  # key 15; include_authorized_operations (v3+) by getattr
    groups: Sequence[str]


class ListGroupsRequest(Protocol):  # key 16; states_filter (v4+) by getattr
    pass


class DeleteGroupsRequest(Protocol):  # key 42
    groups_names: Sequence[str]


class OffsetDeletePartition(Protocol):
    partition_index: int


class OffsetDeleteTopic(Protocol):
    name: str
    partitions: Sequence[OffsetDeletePartition]


class OffsetDeleteRequest(Protocol):  # key 47
    group_id: str
    topics: Sequence[OffsetDeleteTopic]


# -- topics and configs -----------------------------------------------------------------------------------

class ApiVersionsRequest(Protocol):  # key 18: nothing read
    pass


class CreatableConfig(Protocol):
    name: str
    value: str | None


class CreatableAssignment(Protocol):
    partition_index: int
    broker_ids: Sequence[int]


class CreatableTopic(Protocol):
    name: str
    num_partitions: int
    replication_factor: int
    assignments: Sequence[CreatableAssignment]
    configs: Sequence[CreatableConfig]


class CreateTopicsRequest(Protocol):  # key 19; validate_only (v1+) by getattr
    topics: Sequence[CreatableTopic]


class DeleteTopicsRequest(Protocol):  # key 20
    topic_names: Sequence[str]


class DescribeConfigsResource(Protocol):
    resource_type: int
    resource_name: str
    configuration_keys: Sequence[str] | None  # None: every key


class DescribeConfigsRequest(Protocol):  # key 32; include_synonyms (v1+), include_documentation (v3+) by getattr
    resources: Sequence[DescribeConfigsResource]


class Resource(Protocol):
    """What AlterConfigs and IncrementalAlterConfigs resources share."""

    resource_type: int
    resource_name: str


class AlterableConfig(Protocol):
    name: str
    value: str | None


class ConfigResource(Resource, Protocol):
    configs: Sequence[AlterableConfig]


class AlterConfigsRequest(Protocol):  # key 33
    resources: Sequence[ConfigResource]
    validate_only: bool


class IncrementalAlterableConfig(Protocol):
    name: str
    value: str | None
    config_operation: int  # SET 0, DELETE 1, APPEND 2, SUBTRACT 3


class IncrementalConfigResource(Resource, Protocol):
    configs: Sequence[IncrementalAlterableConfig]


class IncrementalAlterConfigsRequest(Protocol):  # key 44
    resources: Sequence[IncrementalConfigResource]
    validate_only: bool


class CreatePartitionsAssignment(Protocol):
    broker_ids: Sequence[int]


class CreatePartitionsTopic(Protocol):
    name: str
    count: int
    assignments: Sequence[CreatePartitionsAssignment] | None


class CreatePartitionsRequest(Protocol):  # key 37
    topics: Sequence[CreatePartitionsTopic]
    validate_only: bool


class DescribeClusterRequest(Protocol):  # key 60
    include_cluster_authorized_operations: bool


# -- authentication ---------------------------------------------------------------------------------------

class SaslHandshakeRequest(Protocol):  # key 17
    mechanism: str


class SaslAuthenticateRequest(Protocol):  # key 36
    auth_bytes: bytes


# -- access -----------------------------------------------------------------------------------------------

class AclFilterFields(Protocol):
    """A DescribeAcls request, or one filter of a DeleteAcls request; pattern_type_filter (v1+) by getattr."""

    resource_type_filter: int
    resource_name_filter: str | None
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


class DescribeAclsRequest(AclFilterFields, Protocol):  # key 29
    pass


class AclCreation(Protocol):  # resource_pattern_type (v1+) by getattr
    resource_type: int
    resource_name: str
    principal: str
    host: str
    operation: int
    permission_type: int


class CreateAclsRequest(Protocol):  # key 30
    creations: Sequence[AclCreation]


class DeleteAclsRequest(Protocol):  # key 31
    filters: Sequence[AclFilterFields]


class QuotaComponent(Protocol):
    entity_type: str
    match_type: int
    match: str | None


class DescribeClientQuotasRequest(Protocol):  # key 48
    components: Sequence[QuotaComponent]
    strict: bool


class QuotaEntityPart(Protocol):
    entity_type: str
    entity_name: str | None


class QuotaOp(Protocol):
    key: str
    value: float
    remove: bool


class QuotaEntry(Protocol):
    entity: Sequence[QuotaEntityPart]
    ops: Sequence[QuotaOp]


class AlterClientQuotasRequest(Protocol):  # key 49
    entries: Sequence[QuotaEntry]
    validate_only: bool


class ScramUserName(Protocol):
    name: str


class DescribeUserScramCredentialsRequest(Protocol):  # key 50
    users: Sequence[ScramUserName] | None  # null or empty: every user


class ScramCredentialDeletion(Protocol):
    name: str
    mechanism: int


class ScramCredentialUpsertion(Protocol):
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class AlterUserScramCredentialsRequest(Protocol):  # key 51
    deletions: Sequence[ScramCredentialDeletion]
    upsertions: Sequence[ScramCredentialUpsertion]


# -- replica reassignment and leader elections --------------------------------------------------------------

class ReassignablePartition(Protocol):
    partition_index: int
    replicas: Sequence[int] | None  # null: cancel the partition's reassignment


class ReassignableTopic(Protocol):
    name: str
    partitions: Sequence[ReassignablePartition]


class AlterPartitionReassignmentsRequest(Protocol):  # key 45; allow_replication_factor_change (v1+) by getattr
    timeout_ms: int
    topics: Sequence[ReassignableTopic]


class ListPartitionReassignmentsTopic(Protocol):
    name: str
    partition_indexes: Sequence[int]


class ListPartitionReassignmentsRequest(Protocol):  # key 46
    timeout_ms: int
    topics: Sequence[ListPartitionReassignmentsTopic] | None  # null: every reassignment under way


class ElectLeadersTopic(Protocol):
    topic: str
    partitions: Sequence[int]


class ElectLeadersRequest(Protocol):  # key 43; election_type (v1+) by getattr
    topic_partitions: Sequence[ElectLeadersTopic] | None  # null: every partition
    timeout_ms: int


class ControlledShutdownRequest(Protocol):  # key 7 (broker to controller); broker_epoch v2+ by getattr
    broker_id: int
