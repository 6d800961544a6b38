"""The server side of TLS from Kafka's ``ssl.*`` properties: an ``ssl.SSLContext`` for the broker's SSL and
SASL_SSL listeners and for Connect's ``https://`` REST listeners; and, from the same properties, the client side
a broker uses towards the other brokers' inter-broker listener (``client_context``, as Kafka's broker builds its
client channel from that listener's ``ssl.*`` settings).

Keystores: PEM (a file with key and chain, or KIP-651's inline ``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``) and PKCS12. Java's JKS format has no well-kept Python reader: such a file is refused
with the keytool command that converts it. As on Java 9+, a PKCS12 file is read whatever the type says
(``JKS`` is Kafka's default type). Python's ``ssl`` loads keys from files only: the key is written,
encrypted with a one-time password, to a private temporary file that is removed once loaded.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12
from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["SSL_KEYS", "BadSetting", "SslConfig", "client_context", "server_context"]

_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")  # JKS, JCEKS
_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
              "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class BadSetting(ValueError):
    """A security setting that cannot be used; ``key`` is Kafka's name of it (unprefixed)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key, self.problem = key, problem


class SslConfig(BaseModel):
    """A listener's ``ssl.*`` properties with Kafka's names and defaults. The last four are accepted for the
    files written for Kafka and have no effect here (JVM providers, and the client side's host check)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    keystore_type: str = Field("JKS", alias="ssl.keystore.type")
    keystore_location: str | None = Field(None, alias="ssl.keystore.location")
    keystore_password: SecretStr | None = Field(None, alias="ssl.keystore.password")
    keystore_certificate_chain: SecretStr | None = Field(None, alias="ssl.keystore.certificate.chain")
    keystore_key: SecretStr | None = Field(None, alias="ssl.keystore.key")
    key_password: SecretStr | None = Field(None, alias="ssl.key.password")
    truststore_type: str = Field("JKS", alias="ssl.truststore.type")
    truststore_location: str | None = Field(None, alias="ssl.truststore.location")
    truststore_password: SecretStr | None = Field(None, alias="ssl.truststore.password")
    truststore_certificates: SecretStr | None = Field(None, alias="ssl.truststore.certificates")
    client_auth: Literal["none", "requested", "required"] = Field("none", alias="ssl.client.auth")
    enabled_protocols: str = Field("TLSv1.2,TLSv1.3", alias="ssl.enabled.protocols")
    protocol: str = Field("TLSv1.3", alias="ssl.protocol")
    cipher_suites: str = Field("", alias="ssl.cipher.suites")
    principal_mapping_rules: str = Field("DEFAULT", alias="ssl.principal.mapping.rules")
    endpoint_identification_algorithm: str = Field("https", alias="ssl.endpoint.identification.algorithm")
    keymanager_algorithm: str = Field("SunX509", alias="ssl.keymanager.algorithm")
    trustmanager_algorithm: str = Field("PKIX", alias="ssl.trustmanager.algorithm")
    secure_random_implementation: str | None = Field(None, alias="ssl.secure.random.implementation")


SSL_KEYS = frozenset(f.alias for f in SslConfig.model_fields.values() if f.alias)


def _secret(value: SecretStr | None) -> bytes | None:
    return None if value is None else value.get_secret_value().encode()


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise BadSetting(key, f"cannot read {path}: {exc.strerror or exc}") from None


def _pem_key(key: str, data: bytes, password: bytes | None) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(data, password)
    except TypeError:
        raise BadSetting("ssl.key.password", "the private key is encrypted: set ssl.key.password" if password is None
                         else "the private key is not encrypted: remove ssl.key.password") from None
    except ValueError as exc:
        raise BadSetting(key, f"no readable PEM private key ({exc}; a wrong ssl.key.password reads so too)") from None


def _pem_certs(key: str, data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise BadSetting(key, "no PEM certificate (-----BEGIN CERTIFICATE-----) in it") from None


def _refuse_jks(key: str, data: bytes, path: str) -> None:
    if data[:4] in _JKS_MAGIC:
        raise BadSetting(key, f"{path} is a Java JKS keystore, which cannot be read here; convert it to PKCS12: "
                              f"keytool -importkeystore -srckeystore {path} -destkeystore {path}.p12 "
                              f"-deststoretype PKCS12, then set the .p12 file and type PKCS12")


def _pkcs12(location_key: str, type_key: str, data: bytes, password: bytes | None) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(data, password)
    except ValueError:
        raise BadSetting(location_key, f"not a PKCS12 store, or the password is wrong (the {type_key} is what the "
                                       "file must hold: PEM, PKCS12; JKS must be converted to PKCS12)") from None


def _keystore(cfg: SslConfig) -> tuple[PrivateKeyTypes, list[x509.Certificate]]:
    store_type = cfg.keystore_type.upper()
    key_password = _secret(cfg.key_password)
    if cfg.keystore_key is not None or cfg.keystore_certificate_chain is not None:
        if store_type != "PEM":
            raise BadSetting("ssl.keystore.type", "must be PEM with ssl.keystore.key / ssl.keystore.certificate.chain")
        if cfg.keystore_key is None or cfg.keystore_certificate_chain is None:
            missing = "ssl.keystore.key" if cfg.keystore_key is None else "ssl.keystore.certificate.chain"
            raise BadSetting(missing, "required with the other inline PEM key (KIP-651)")
        if cfg.keystore_location is not None:
            raise BadSetting("ssl.keystore.location", "set either it or the inline ssl.keystore.key, not both")
        return (_pem_key("ssl.keystore.key", _secret(cfg.keystore_key) or b"", key_password),
                _pem_certs("ssl.keystore.certificate.chain", _secret(cfg.keystore_certificate_chain) or b""))
    if cfg.keystore_location is None:
        raise BadSetting("ssl.keystore.location", "required on an SSL or SASL_SSL listener (or ssl.keystore.type=PEM "
                                                  "with ssl.keystore.key and ssl.keystore.certificate.chain)")
    path = cfg.keystore_location
    data = _read("ssl.keystore.location", path)
    if store_type == "PEM":
        if cfg.keystore_password is not None:
            raise BadSetting("ssl.keystore.password", "not used with a PEM keystore: the key's is ssl.key.password")
        return _pem_key("ssl.keystore.location", data, key_password), _pem_certs("ssl.keystore.location", data)
    if store_type not in ("PKCS12", "JKS"):
        raise BadSetting("ssl.keystore.type", f"{cfg.keystore_type!r} is not one of PEM, PKCS12, JKS")
    _refuse_jks("ssl.keystore.location", data, path)
    store = _pkcs12("ssl.keystore.location", "ssl.keystore.type", data,
                    _secret(cfg.keystore_password) or key_password)
    if store.key is None or store.cert is None:
        raise BadSetting("ssl.keystore.location", f"{path} holds no private key with its certificate")
    return store.key, [store.cert.certificate, *(c.certificate for c in store.additional_certs)]


def _trusted(cfg: SslConfig) -> str | None:
    """The trusted CA certificates as PEM text, or None when no truststore is set."""
    store_type = cfg.truststore_type.upper()
    if cfg.truststore_certificates is not None:
        if store_type != "PEM":
            raise BadSetting("ssl.truststore.type", "must be PEM with ssl.truststore.certificates")
        text = cfg.truststore_certificates.get_secret_value()
        _pem_certs("ssl.truststore.certificates", text.encode())
        return text
    if cfg.truststore_location is None:
        return None
    path = cfg.truststore_location
    data = _read("ssl.truststore.location", path)
    if store_type == "PEM":
        return "".join(c.public_bytes(serialization.Encoding.PEM).decode()
                       for c in _pem_certs("ssl.truststore.location", data))
    if store_type not in ("PKCS12", "JKS"):
        raise BadSetting("ssl.truststore.type", f"{cfg.truststore_type!r} is not one of PEM, PKCS12, JKS")
    _refuse_jks("ssl.truststore.location", data, path)
    store = _pkcs12("ssl.truststore.location", "ssl.truststore.type", data, _secret(cfg.truststore_password))
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise BadSetting("ssl.truststore.location", f"{path} holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_chain(ctx: ssl.SSLContext, key: PrivateKeyTypes, chain: list[x509.Certificate]) -> None:
    password = secrets.token_urlsafe(24)
    pem = serialization.Encoding.PEM
    data = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password.encode()))
    data += b"".join(c.public_bytes(pem) for c in chain)
    fd, path = tempfile.mkstemp(prefix="headwater-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise BadSetting("ssl.keystore.location", f"the key does not fit the certificate or cannot be used ({exc})") \
            from None
    finally:
        os.unlink(path)


def _protocols(ctx: ssl.SSLContext, enabled: str) -> None:
    names = [p.strip() for p in enabled.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if unknown or not names:
        raise BadSetting("ssl.enabled.protocols", f"{', '.join(unknown) or 'empty'}: expected some of "
                                                  f"{', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[p] for p in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _openssl_cipher(name: str) -> str | None:
    """Java's (IANA) suite name -> OpenSSL's, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 ->
    ECDHE-RSA-AES128-GCM-SHA256; None for a TLS 1.3 suite (Python's ssl cannot restrict those)."""
    if "_WITH_" not in name:
        return None if name.startswith("TLS_") else name  # TLS 1.3, or already OpenSSL's name
    kx, cipher = name.removeprefix("TLS_").removeprefix("SSL_").split("_WITH_", 1)
    cipher = (cipher.replace("AES_128_", "AES128-").replace("AES_256_", "AES256-")
              .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").replace("_", "-"))
    if cipher.startswith(("AES128-CBC-", "AES256-CBC-")):
        cipher = cipher.replace("-CBC", "")
    kx = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    return kx + cipher


def _ciphers(ctx: ssl.SSLContext, suites: str) -> None:
    names = [s.strip() for s in suites.split(",") if s.strip()]
    openssl = [c for c in (_openssl_cipher(n) for n in names) if c is not None]
    if not openssl:
        return  # empty, or TLS 1.3 suites only: OpenSSL's defaults
    try:
        ctx.set_ciphers(":".join(openssl))
    except ssl.SSLError:
        raise BadSetting("ssl.cipher.suites", f"none of {', '.join(names)} is available here") from None
    available = {c["name"] for c in ctx.get_ciphers()}
    missing = [n for n, o in zip(names, (_openssl_cipher(n) for n in names), strict=True)
               if o is not None and o not in available]
    if missing:
        raise BadSetting("ssl.cipher.suites", f"not available here: {', '.join(missing)}")


def server_context(cfg: SslConfig) -> ssl.SSLContext:
    """The listener's server-side context; BadSetting naming the key when something cannot be used (the broker
    checks ``ssl.principal.mapping.rules`` itself: only its listeners map certificates to principals)."""
    if cfg.protocol not in ("TLS", *_PROTOCOLS):
        raise BadSetting("ssl.protocol", f"{cfg.protocol!r} is not one of TLS, {', '.join(_PROTOCOLS)}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, cfg.enabled_protocols)
    key, chain = _keystore(cfg)
    _load_chain(ctx, key, chain)
    trusted = _trusted(cfg)
    if trusted is not None:
        ctx.load_verify_locations(cadata=trusted)
    elif cfg.client_auth != "none":
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[cfg.client_auth]
    _ciphers(ctx, cfg.cipher_suites)
    return ctx


def client_context(cfg: SslConfig) -> ssl.SSLContext:
    """The client side of a listener's TLS settings, as a broker connecting to another broker's listener of the
    same name: the other broker's certificate checked against the truststore (the system's CAs without one) and,
    with ``ssl.endpoint.identification.algorithm=https`` (the default), against the host connected to; this
    broker's keystore presented as its client certificate (for ``ssl.client.auth``); the same protocols and
    cipher suites. BadSetting naming the key as ``server_context``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, cfg.enabled_protocols)
    if cfg.keystore_location is not None or cfg.keystore_key is not None:
        key, chain = _keystore(cfg)
        _load_chain(ctx, key, chain)
    trusted = _trusted(cfg)
    if trusted is not None:
        ctx.load_verify_locations(cadata=trusted)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = cfg.endpoint_identification_algorithm.strip().lower()
    if algorithm not in ("https", ""):
        raise BadSetting("ssl.endpoint.identification.algorithm", f"{algorithm!r}: expected https or empty")
    ctx.check_hostname = algorithm == "https"
    _ciphers(ctx, cfg.cipher_suites)
    return ctx
