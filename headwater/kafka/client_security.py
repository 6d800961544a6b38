"""A Kafka client's security properties (``security.protocol``, ``sasl.*``, ``ssl.*``, as in the file Kafka's
scripts take with ``--command-config``) as aiokafka's client settings.

Supported: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; SASL mechanisms PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 with the user and password from ``sasl.jaas.config`` (``PlainLoginModule`` /
``ScramLoginModule required username="..." password="...";``) or librdkafka's ``sasl.username`` /
``sasl.password``; OAUTHBEARER with KIP-768's client-credentials flow (``sasl.oauthbearer.token.endpoint.url``,
``OAuthBearerLoginModule required clientId="..." clientSecret="..." scope="...";``, the token provider made
by the caller's ``oauth`` factory: Connect's is ``headwater.connect.kafka.oauth``); trust and
client certificates from PEM or PKCS12 stores (``ssl.truststore.*``, ``ssl.keystore.*``, KIP-651's inline PEM,
librdkafka's ``ssl.ca.location`` / ``ssl.certificate.location`` / ``ssl.key.location``);
``ssl.enabled.protocols``. Anything else (GSSAPI, a JKS store, an unknown ``ssl.*`` or ``sasl.*`` key) is
refused naming the key, rather than silently connecting another way.

``security_settings`` reads a file of client properties (every key must be one it knows);
``client_security`` picks the security keys out of a client's whole configuration (``producer.*``, a
connector's overrides, a MirrorMaker cluster's settings, the Spark source's ``kafka.*`` options). The result
is keyword arguments as aiokafka and kafka-python name them. This is the one mapping: Connect's clients
(``headwater.connect.kafka.security``) and the Spark source's both use it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .jaas import JaasError, parse_jaas

__all__ = ["OAUTH_KEYS", "SECURITY_KEYS", "OAuthFactory", "client_security", "is_security_key", "parse_jaas_config",
           "security_settings", "ssl_client_context"]

# Kafka's client-side OAUTHBEARER keys (KIP-768), read by the OAuth factory
OAUTH_KEYS = frozenset({
    "sasl.oauthbearer.token.endpoint.url", "sasl.login.callback.handler.class", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
})
# (the client's properties, the OAuthBearerLoginModule's JAAS options) -> a token provider
OAuthFactory = Callable[[Mapping[str, str], Mapping[str, str]], Any]
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    OAUTH_MODULE: ("OAUTHBEARER",),
}
SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.endpoint.identification.algorithm",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.location.password",
    "ssl.enabled.protocols", *OAUTH_KEYS,
})
# Client keys that do not change how the client connects (other tools share these files; ssl.protocol and
# the JVM's key and trust manager algorithms only pick Java's implementation): accepted, unused
NEUTRAL_KEYS = frozenset({"ssl.protocol", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
                          "client.id", "request.timeout.ms"})
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def is_security_key(key: str) -> bool:
    """A key of how a Kafka client connects: ``security.protocol``, ``sasl.*``, ``ssl.*``."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


def client_security(props: Mapping[str, Any], oauth: OAuthFactory | None = None) -> dict[str, Any]:
    """The settings for the security keys among a client's properties (the others are not looked at);
    PLAINTEXT when there are none."""
    return security_settings({k: str(v) for k, v in props.items() if is_security_key(k)}, oauth)

def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule class> <flag> key="value" ...;`` -> (the class, its options). One module only, as Kafka
    allows in ``sasl.jaas.config``; read by the same JAAS reader as the broker's listeners (errors never
    quote the value: it holds a password)."""
    try:
        modules = parse_jaas(text)
    except JaasError as exc:
        raise ValueError(f"sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;' ({exc})") from None
    if len(modules) != 1:
        raise ValueError(f"sasl.jaas.config: one login module expected, got {len(modules)}")
    return modules[0].class_name, modules[0].options


def _credentials(props: Mapping[str, str], mechanism: str) -> tuple[str, str]:
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        module, options = parse_jaas_config(jaas)
        if module not in LOGIN_MODULES:
            raise ValueError(f"sasl.jaas.config: login module {module} is not supported "
                             f"(use one of {', '.join(LOGIN_MODULES)})")
        if mechanism not in LOGIN_MODULES[module]:
            raise ValueError(f"sasl.jaas.config: {module.rsplit('.', 1)[1]} does not serve sasl.mechanism={mechanism}")
        if options.get("tokenauth", "false").lower() == "true":
            raise ValueError("sasl.jaas.config: tokenauth (delegation tokens) is not supported")
        missing = [k for k in ("username", "password") if k not in options]
        if missing:
            raise ValueError(f"sasl.jaas.config: {' and '.join(missing)} missing")
        return options["username"], options["password"]
    if "sasl.username" in props and "sasl.password" in props:
        return props["sasl.username"], props["sasl.password"]
    raise ValueError(f"sasl.jaas.config: required for security.protocol={props['security.protocol']} "
                     "(or sasl.username and sasl.password)")


def _oauth_provider(props: Mapping[str, str], oauth: OAuthFactory | None) -> Any:
    if oauth is None:
        raise ValueError("sasl.mechanism=OAUTHBEARER: not supported by this client (use PLAIN or SCRAM-SHA-256/512)")
    jaas = props.get("sasl.jaas.config")
    if jaas is None:
        raise ValueError("sasl.jaas.config: required for sasl.mechanism=OAUTHBEARER "
                         f'({OAUTH_MODULE} required clientId="..." clientSecret="...";)')
    module, options = parse_jaas_config(jaas)
    if module != OAUTH_MODULE:
        raise ValueError(f"sasl.jaas.config: {module.rsplit('.', 1)[1]} does not serve sasl.mechanism=OAUTHBEARER "
                         f"(use {OAUTH_MODULE})")
    return oauth(props, options)


def _store_type(props: Mapping[str, str], key: str, location: str) -> str:
    kind = props.get(key, "").upper() or ("PKCS12" if location.lower().endswith((".p12", ".pfx")) else "PEM")
    if kind not in ("PEM", "PKCS12"):
        raise ValueError(f"{key}={props.get(key)}: only PEM and PKCS12 stores are supported (convert a JKS store "
                         "with keytool -importkeystore -deststoretype PKCS12)")
    return kind


def _pkcs12(location: str, password: str | None, key: str) -> tuple[Any, Any, list[Any]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(Path(location).read_bytes(), password.encode() if password else None)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{key}={location}: cannot read the PKCS12 store: {exc}") from None


def _pem(obj: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode()
    return str(obj.public_bytes(serialization.Encoding.PEM).decode())


def _load_chain(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    """The client's certificate chain and key from PEM text (``load_cert_chain`` reads files only): written to
    a file only this user may read, removed at once."""
    fd, name = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        context.load_cert_chain(name, password=password)
    finally:
        os.unlink(name)


def _tls_versions(props: Mapping[str, str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """``ssl.enabled.protocols`` (Kafka's default: TLSv1.2,TLSv1.3) as the lowest and highest version."""
    names = [p.strip() for p in props.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown or not names:
        raise ValueError(f"ssl.enabled.protocols={props.get('ssl.enabled.protocols')}: expected TLSv1.2 and/or "
                         f"TLSv1.3 (older versions are not offered)")
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    return versions[0], versions[-1]


def ssl_client_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The client side of TLS from Kafka's ``ssl.*`` keys (trust, a client certificate, versions, host check);
    other keys in ``props`` are not looked at."""
    # Only the trust store given is trusted, as in Kafka's clients; the system's CAs without one
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = _tls_versions(props)
    trust = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
    key = "ssl.truststore.location" if "ssl.truststore.location" in props else "ssl.ca.location"
    if trust:
        if _store_type(props, "ssl.truststore.type", trust) == "PKCS12":
            _, cert, extra = _pkcs12(trust, props.get("ssl.truststore.password"), key)
            context.load_verify_locations(cadata="".join(_pem(c) for c in [cert, *extra] if c is not None))
        else:
            try:
                context.load_verify_locations(cafile=trust)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"{key}={trust}: cannot read the certificates: {exc}") from None
    if "ssl.truststore.certificates" in props:
        context.load_verify_locations(cadata=props["ssl.truststore.certificates"])
    if not trust and "ssl.truststore.certificates" not in props:
        context.load_default_certs()
    key_password = props.get("ssl.key.password") or props.get("ssl.key.location.password")
    keystore = props.get("ssl.keystore.location")
    try:
        if keystore and _store_type(props, "ssl.keystore.type", keystore) == "PKCS12":
            private, cert, extra = _pkcs12(keystore, props.get("ssl.keystore.password"), "ssl.keystore.location")
            _load_chain(context, "".join(_pem(o) for o in [private, cert, *extra] if o is not None), None)
        elif keystore:
            context.load_cert_chain(keystore, password=key_password)  # one PEM file: key and chain
        elif "ssl.keystore.certificate.chain" in props or "ssl.keystore.key" in props:
            if not ("ssl.keystore.certificate.chain" in props and "ssl.keystore.key" in props):
                raise ValueError("ssl.keystore.key: needs ssl.keystore.certificate.chain with it (and the other way)")
            _load_chain(context, props["ssl.keystore.key"] + "\n" + props["ssl.keystore.certificate.chain"],
                        key_password)
        elif "ssl.certificate.location" in props:
            context.load_cert_chain(props["ssl.certificate.location"], props.get("ssl.key.location"), key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl.keystore: cannot load the client certificate and key: {exc}") from None
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm}: expected https or empty")
    context.check_hostname = algorithm == "https"
    return context


def security_settings(props: Mapping[str, str], oauth: OAuthFactory | None = None) -> dict[str, Any]:
    """aiokafka keyword arguments (``security_protocol``, ``ssl_context``, ``sasl_*``) for these Kafka client
    properties; a ValueError naming the key for one that is unknown, unsupported or wrong."""
    for key in props:
        if key not in SECURITY_KEYS and key not in NEUTRAL_KEYS:
            raise ValueError(f"{key}: not a client security property this client supports "
                             f"(supported: {', '.join(sorted(SECURITY_KEYS))})")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol={props['security.protocol']}: expected one of {', '.join(PROTOCOLS)}")
    out: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()  # Kafka's default
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism={mechanism}: expected one of {', '.join(MECHANISMS)}")
        if mechanism == "OAUTHBEARER":
            out.update(sasl_mechanism=mechanism, sasl_oauth_token_provider=_oauth_provider(props, oauth))
        else:
            stray = sorted(k for k in props if k in OAUTH_KEYS)
            if stray:
                raise ValueError(f"{stray[0]}: an OAUTHBEARER setting, but sasl.mechanism={mechanism}")
            user, password = _credentials({**props, "security.protocol": protocol}, mechanism)
            out.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    else:
        stray = sorted(k for k in props if k.startswith("sasl."))
        if stray:
            raise ValueError(f"{stray[0]}: a SASL setting, but security.protocol={protocol}")
    if protocol.endswith("SSL"):
        out["ssl_context"] = ssl_client_context(props)
    else:
        stray = sorted(k for k in props if k.startswith("ssl.") and k not in NEUTRAL_KEYS)
        if stray:
            raise ValueError(f"{stray[0]}: a TLS setting, but security.protocol={protocol}")
    return out
