"""Kafka client security properties as aiokafka's settings: the one mapping (``headwater.kafka.client_security``)
with Connect's OAUTHBEARER token provider (``oauth``, KIP-768's client-credentials flow) plugged in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.kafka import client_security as mapping
from headwater.kafka.client_security import SECURITY_KEYS, is_security_key, parse_jaas_config

from .oauth import ClientCredentialsTokenProvider

__all__ = ["SECURITY_KEYS", "client_security", "is_security_key", "parse_jaas_config", "security_settings"]


def security_settings(props: Mapping[str, str]) -> dict[str, Any]:
    """aiokafka keyword arguments (``security_protocol``, ``ssl_context``, ``sasl_*``) for a file of client
    properties; a ValueError naming the key for one that is unknown, unsupported or wrong."""
    return mapping.security_settings(props, ClientCredentialsTokenProvider.from_config)


def client_security(props: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka keyword arguments for the security keys among a client's properties (others are not looked at)."""
    return mapping.client_security(props, ClientCredentialsTokenProvider.from_config)
