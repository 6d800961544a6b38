"""Securing the broker's ZooKeeper connection and znodes as Kafka's ZooKeeper-mode brokers do.

- TLS (``zookeeper.ssl.client.enable`` and the other ``zookeeper.ssl.*`` properties, Kafka's names and
  defaults): the context is built by the same code as the inter-broker listeners' client side
  (``headwater.kafka.server_tls.client_context``) and applied by a kazoo connection handler of our own, so
  PKCS12 and PEM stores, protocols, cipher suites and host-name checking all behave as on a listener.
- SASL (DIGEST-MD5, through kazoo and pure-sasl): Kafka's ZooKeeper client reads a JAAS file's ``Client``
  section (``java.security.auth.login.config``, ``zookeeper.sasl.clientconfig``, ``zookeeper.sasl.client``, as
  Kafka takes them from system properties) holding ZooKeeper's ``DigestLoginModule`` with username and password.
- ACLs (``zookeeper.set.acl``): every znode the broker creates gets Kafka's ``ZkData.defaultAcls``: the creator
  (every id it authenticated as: its SASL user, its certificate's x509 name) has all rights and the world may
  read, except under Kafka's sensitive paths (the SCRAM credentials in ``/config/users``, the dynamic broker
  configs in ``/config/brokers``, ``/delegation_token/tokens``), which only the creator may read.
  ``SecuredKazooClient`` applies this to every create, ensure_path and transaction, so no creation site can
  miss it.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from headwater.kafka.jaas import JaasError, parse_jaas_file
from headwater.kafka.server_tls import BadSetting, SslConfig, client_context
from headwater.properties import ConfigError

from ..config.broker_config import BrokerConfig

__all__ = ["SecuredKazooClient", "ZkSecurity", "ZkSecurityFailure", "default_acls", "secured_client", "sensitive_path",
           "start_session", "zk_security"]

# Kafka's ZkData.SensitiveRootPaths: /config/users (SCRAM credentials), /config/brokers, delegation tokens
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
CONSUMERS_PATH = "/consumers"  # the old consumers' path: Kafka keeps it open to everyone
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
# Kafka's zookeeper.ssl.* -> the listener ssl.* key the shared TLS code reads
_SSL_KEYS = {
    "zookeeper.ssl.keystore.location": "ssl.keystore.location",
    "zookeeper.ssl.keystore.password": "ssl.keystore.password",
    "zookeeper.ssl.keystore.type": "ssl.keystore.type",
    "zookeeper.ssl.truststore.location": "ssl.truststore.location",
    "zookeeper.ssl.truststore.password": "ssl.truststore.password",
    "zookeeper.ssl.truststore.type": "ssl.truststore.type",
    "zookeeper.ssl.protocol": "ssl.protocol",
    "zookeeper.ssl.enabled.protocols": "ssl.enabled.protocols",
    "zookeeper.ssl.cipher.suites": "ssl.cipher.suites",
    "zookeeper.ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
# a PEM keystore's password is its key's (_tls_context)
_FROM_SSL_KEY = {v: k for k, v in _SSL_KEYS.items()} | {"ssl.key.password": "zookeeper.ssl.keystore.password"}


def sensitive_path(path: str) -> bool:
    """Kafka's ZkData.sensitivePath (a prefix test, as Kafka's)."""
    return path.startswith(SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls: creator-all plus world-read, creator-all alone on a sensitive path, and open
    (world-all) when ACLs are off or on the old consumers' path."""
    if not secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    return list(CREATOR_ALL_ACL) + ([] if sensitive_path(path) else list(READ_ACL_UNSAFE))


@dataclass(frozen=True)
class ZkSecurity:
    """What the broker's ZooKeeper client uses: a TLS context, SASL options for kazoo, and whether its znodes
    get Kafka's secure ACLs."""

    tls: ssl.SSLContext | None = None
    sasl: dict[str, str] | None = None
    set_acl: bool = False

    def describe(self) -> str:
        parts = (["TLS"] if self.tls else []) + ([f"SASL {self.sasl['mechanism']}"] if self.sasl else [])
        return (" + ".join(parts) or "no authentication") + (", secure ACLs" if self.set_acl else "")


def zk_security(config: BrokerConfig) -> ZkSecurity:
    """The ZooKeeper client's security from the broker's properties; ConfigError naming the property when one
    cannot be used (the broker then exits with status 2)."""
    tls = _tls_context(config) if config.zookeeper_ssl_client_enable else None
    sasl = _sasl_options(config)
    # Kafka's KafkaServer check: secure ACLs need an identity for "creator" to mean anything
    if config.zookeeper_set_acl and sasl is None and not (tls and config.zookeeper_ssl_keystore_location):
        raise ConfigError(
            "zookeeper.set.acl: true, but the ZooKeeper connection has no identity: set a JAAS file with a "
            f"{config.zookeeper_sasl_clientconfig!r} section (java.security.auth.login.config) or "
            "zookeeper.ssl.client.enable=true with zookeeper.ssl.keystore.location")
    return ZkSecurity(tls, sasl, config.zookeeper_set_acl)


def _store_type(given: str | None, location: str | None) -> str:
    """ZooKeeper's rule for an unset store type: from the file's extension (.pem, .p12, .pfx), else JKS."""
    if given:
        return given
    suffix = Path(location or "").suffix.lower()
    return {".pem": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12"}.get(suffix, "JKS")


def _tls_context(config: BrokerConfig) -> ssl.SSLContext:
    for key, on in (("zookeeper.ssl.crl.enable", config.zookeeper_ssl_crl_enable),
                    ("zookeeper.ssl.ocsp.enable", config.zookeeper_ssl_ocsp_enable)):
        if on:
            raise ConfigError(f"{key}: revocation checking is not supported here; set it to false")
    keystore_type = _store_type(config.zookeeper_ssl_keystore_type, config.zookeeper_ssl_keystore_location)
    # ZooKeeper's PEM keystore takes its password as the key's (the listeners' ssl.key.password)
    password_key = "ssl.key.password" if keystore_type.upper() == "PEM" else "ssl.keystore.password"
    values: dict[str, Any] = {
        "ssl.keystore.location": config.zookeeper_ssl_keystore_location,
        password_key: config.zookeeper_ssl_keystore_password,
        "ssl.keystore.type": keystore_type,
        "ssl.truststore.location": config.zookeeper_ssl_truststore_location,
        "ssl.truststore.password": config.zookeeper_ssl_truststore_password,
        "ssl.truststore.type": _store_type(config.zookeeper_ssl_truststore_type,
                                           config.zookeeper_ssl_truststore_location),
        # unset: the protocol alone, as ZooKeeper's client (the generic "TLS": every version offered)
        "ssl.enabled.protocols": config.zookeeper_ssl_enabled_protocols or (
            "TLSv1.2,TLSv1.3" if config.zookeeper_ssl_protocol == "TLS" else config.zookeeper_ssl_protocol),
        "ssl.cipher.suites": config.zookeeper_ssl_cipher_suites or "",
        "ssl.endpoint.identification.algorithm": config.zookeeper_ssl_endpoint_identification_algorithm,
        "ssl.protocol": config.zookeeper_ssl_protocol,
    }
    try:
        return client_context(SslConfig.model_validate({k: v for k, v in values.items() if v is not None}))
    except BadSetting as exc:
        raise ConfigError(f"{_FROM_SSL_KEY.get(exc.key, exc.key)}: {exc.problem}") from None


def _sasl_options(config: BrokerConfig) -> dict[str, str] | None:
    """kazoo's sasl_options from the JAAS file's client section (None: no SASL, as Kafka's JaasUtils decides)."""
    location = config.java_security_auth_login_config
    if not config.zookeeper_sasl_client or not location:
        return None
    key, section = "java.security.auth.login.config", config.zookeeper_sasl_clientconfig
    try:
        sections = parse_jaas_file(Path(location).read_text())
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {location} ({exc.strerror})") from None
    except JaasError as exc:
        raise ConfigError(f"{key}: {location} is not a JAAS file: {exc}") from None
    modules = sections.get(section)
    if modules is None:
        raise ConfigError(f"{key}: {location} has no {section!r} section (zookeeper.sasl.clientconfig) for the "
                          "ZooKeeper client; add one or set zookeeper.sasl.client=false")
    module = modules[0]
    if module.class_name != DIGEST_LOGIN_MODULE or len(modules) != 1:
        raise ConfigError(f"{key}: the {section!r} section must hold one {DIGEST_LOGIN_MODULE} (SASL DIGEST-MD5); "
                          f"{module.class_name} is not supported for ZooKeeper here")
    missing = [o for o in ("username", "password") if not module.options.get(o)]
    if missing:
        raise ConfigError(f"{key}: the {section!r} section's {DIGEST_LOGIN_MODULE} needs {' and '.join(missing)}")
    return {"mechanism": "DIGEST-MD5", "username": module.options["username"],
            "password": module.options["password"]}


class _TlsHandler(SequentialThreadingHandler):
    """kazoo's threading handler connecting over TLS with our context (kazoo's own TLS takes only PEM file names
    and no protocol or cipher settings). The last TLS failure is kept to explain a start that never connects."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.context = context
        self.last_error: ssl.SSLError | None = None  # set in kazoo's connection thread, read in the starter's

    def create_connection(self, address: tuple[str, int], hostname: str | None = None,
                          timeout: float | None = None, **_: Any) -> ssl.SSLSocket:
        sock = socket.create_connection(address, timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return self.context.wrap_socket(sock, server_hostname=hostname or address[0])
        except ssl.SSLError as exc:
            self.last_error = exc
            sock.close()
            raise
        except BaseException:
            sock.close()
            raise


class ZkSecurityFailure(ConfigError):
    """ZooKeeper refused this broker's TLS or SASL: its settings must change, so it does not retry."""


class SecuredKazooClient(KazooClient):
    """A KazooClient whose creates get Kafka's default ACLs for their path (the caller's ACL when it gives one)."""

    def __init__(self, *args: Any, set_acl: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.set_acl = set_acl
        self.sasl_user = (kwargs.get("sasl_options") or {}).get("username")
        self.auth_failed = threading.Event()

    def acls_for(self, path: str) -> list[ACL] | None:
        # relative to the chroot, as Kafka's paths are
        return default_acls(True, path) if self.set_acl else None

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, *args: Any, **kwargs: Any) -> Any:
        return super().create_async(path, value, acl if acl is not None else self.acls_for(path), *args, **kwargs)

    def ensure_path_async(self, path: str, acl: Any = None) -> Any:
        return super().ensure_path_async(path, acl if acl is not None else self.acls_for(path))

    def transaction(self) -> TransactionRequest:
        return _SecuredTransaction(self)

    def _session_callback(self, state: str) -> None:
        # kazoo reports a refused SASL login only as this session state (its listeners see LOST)
        if state == KeeperState.AUTH_FAILED:
            self.auth_failed.set()
        super()._session_callback(state)


class _SecuredTransaction(TransactionRequest):
    def create(self, path: str, value: bytes = b"", acl: Any = None, *args: Any, **kwargs: Any) -> None:
        acl = acl if acl is not None else self.client.acls_for(path)
        super().create(path, value, acl, *args, **kwargs)


def secured_client(hosts: str, timeout: float, security: ZkSecurity) -> SecuredKazooClient:
    """The broker's ZooKeeper client with its TLS, SASL and ACLs."""
    handler = _TlsHandler(security.tls) if security.tls is not None else None
    # use_ssl only for kazoo's "Connecting to ..." log line: the handler does the TLS
    return SecuredKazooClient(hosts=hosts, timeout=timeout, handler=handler, sasl_options=security.sasl,
                              set_acl=security.set_acl, use_ssl=handler is not None)


def start_session(zk: SecuredKazooClient, timeout: float) -> bool:
    """Start ``zk`` and wait up to ``timeout`` s for its session: True once connected, False at the timeout.
    ZkSecurityFailure at once when ZooKeeper refused the login or its certificate is not trusted (no retry
    would help)."""
    deadline = time.monotonic() + timeout
    zk.start_async()
    while time.monotonic() < deadline:
        if zk.connected and _answers(zk):
            return True
        failure = _security_failure(zk)
        if failure is not None:
            raise ZkSecurityFailure(failure)
        time.sleep(0.05)
    failure = _security_failure(zk, timed_out=True)
    if failure is not None:
        raise ZkSecurityFailure(failure)
    return bool(zk.connected)


def _answers(zk: SecuredKazooClient) -> bool:
    """Whether a first request succeeds: kazoo reports CONNECTED before its SASL login ends, and a request waits
    for the login (failing with it)."""
    try:
        zk.exists("/")
    except KazooException:  # refused login (auth_failed is set) or a dropped connection: the caller looks again
        return False
    return True


def _security_failure(zk: SecuredKazooClient, timed_out: bool = False) -> str | None:
    """Why ``zk`` cannot connect when it is its TLS or SASL settings (None: not known to be)."""
    if zk.auth_failed.is_set():
        return ("java.security.auth.login.config: ZooKeeper refused the SASL DIGEST-MD5 login of user "
                f"{zk.sasl_user!r} (wrong username or password in the JAAS Client section)")
    handler = zk.handler
    error = handler.last_error if isinstance(handler, _TlsHandler) else None
    if isinstance(error, ssl.SSLCertVerificationError):
        return (f"zookeeper.ssl.truststore.location: ZooKeeper's certificate is not trusted "
                f"({error.verify_message}); the truststore must hold the CA that signed it")
    if error is not None and timed_out:  # other handshake failures may pass (a server restarting): wait first
        return f"zookeeper.ssl.client.enable: the TLS handshake with ZooKeeper failed ({error.reason or error})"
    return None
