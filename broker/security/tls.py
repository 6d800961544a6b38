"""TLS on SSL and SASL_SSL listeners: the context from Kafka's ``ssl.*`` properties (built by the floor's
``headwater.kafka.server_tls``, which Connect's HTTPS listeners share), and the principal of a client that
presented a certificate."""

from __future__ import annotations

import ssl

from cryptography import x509

from headwater.kafka.server_tls import SSL_KEYS, SslConfig, server_context

from .principal import SslPrincipalMapper, rfc2253

__all__ = ["SSL_KEYS", "SslConfig", "peer_principal", "server_context"]


def peer_principal(ssl_object: ssl.SSLObject | None, mapper: SslPrincipalMapper) -> str | None:
    """``User:<mapped subject DN>`` of the client's certificate, or None when it sent none.
    NoMatchingRule when no mapping rule applies (the connection is then refused, as in Kafka)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return None
    return "User:" + mapper.name(rfc2253(x509.load_der_x509_certificate(der).subject))
