"""API handlers, one module per Kafka API; importing this package registers them all."""

from . import (  # noqa: F401 - imported for their @api registrations
    k00_produce,
    k01_fetch,
    k02_list_offsets,
    k03_metadata,
    k08_offset_commit,
    k09_offset_fetch,
    k10_find_coordinator,
    k11_join_group,
    k12_heartbeat,
    k13_leave_group,
    k14_sync_group,
    k15_describe_groups,
    k16_list_groups,
    k17_sasl_handshake,
    k18_api_versions,
    k19_create_topics,
    k20_delete_topics,
    k21_delete_records,
    k22_init_producer_id,
    k29_describe_acls,
    k30_create_acls,
    k31_delete_acls,
    k32_describe_configs,
    k33_alter_configs,
    k36_sasl_authenticate,
    k37_create_partitions,
    k42_delete_groups,
    k44_incremental_alter_configs,
    k47_offset_delete,
    k48_describe_client_quotas,
    k49_alter_client_quotas,
    k60_describe_cluster,
)
from .registry import REGISTRY, ApiSpec, RequestContext, Services, api

__all__ = ["REGISTRY", "ApiSpec", "RequestContext", "Services", "api"]
