"""What each listener needs to secure its connections, from Kafka's properties: its security protocol
(``listener.security.protocol.map``), its TLS context and principal mapping, its SASL mechanisms.

``check_keys`` runs when the configuration is validated (every unknown ``ssl.*``, ``sasl.*`` or
``listener.name.*`` key is an error naming it); ``ListenerSecurity.build`` when the broker starts (and
when ``headwater broker`` checks its configuration), reading keystores and truststores.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .mechanisms import REGISTRY, ListenerMechanisms
from .principal import SslPrincipalMapper
from .settings import BadSetting, ListenerSettings
from .tls import SSL_KEYS, SslConfig, server_context

__all__ = ["DEFAULT_PROTOCOL_MAP", "PROTOCOLS", "ListenerSecurity", "check_keys", "is_security_key",
           "parse_protocol_map"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
SASL_KEYS = frozenset({"sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
                       "sasl.server.max.receive.size"})
# Keys a listener prefix may carry besides ssl.* and sasl.* (also per mechanism: <mechanism>.<key>)
_LISTENER_ONLY = frozenset({"connections.max.reauth.ms"})
_PER_MECHANISM = frozenset({"sasl.jaas.config", "connections.max.reauth.ms"})
_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")
SASL_MAX_RECEIVE = 524288  # Kafka's sasl.server.max.receive.size: the cap on frames before authentication


def is_security_key(key: str) -> bool:
    return key.startswith(_SECURITY_PREFIXES)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; ValueError naming the bad entry."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME:PROTOCOL, got {item!r}")
        protocol = protocol.strip().upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"{item!r}: security protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = protocol
    return out


def _listener_key_ok(rest: str) -> bool:
    if rest in SSL_KEYS or rest in SASL_KEYS or rest in _LISTENER_ONLY:
        return True
    if rest.endswith(".sasl.jaas.config"):
        mechanism, key = rest.removesuffix(".sasl.jaas.config"), "sasl.jaas.config"
    elif rest.endswith(".connections.max.reauth.ms"):
        mechanism, key = rest.removesuffix(".connections.max.reauth.ms"), "connections.max.reauth.ms"
    else:
        return False
    return key in _PER_MECHANISM and mechanism.upper() in REGISTRY


def check_keys(props: dict[str, str], listeners: list[str]) -> dict[str, ListenerSettings]:
    """Each listener's settings from the ``ssl.*``, ``sasl.*`` and ``listener.name.*`` properties;
    BadSetting naming a key no listener can use (an unknown key, or a prefix naming no listener)."""
    settings = {name: ListenerSettings(name) for name in listeners}
    by_lower = {name.lower(): s for name, s in settings.items()}
    for key, value in props.items():
        if key.startswith("listener.name."):
            lname, _, rest = key.removeprefix("listener.name.").partition(".")
            target = by_lower.get(lname)
            if target is None:
                raise BadSetting(key, f"no listener named {lname!r} in listeners ({', '.join(listeners)})")
            if not _listener_key_ok(rest):
                raise BadSetting(key, "unknown property for a listener (ssl.*, sasl.enabled.mechanisms, "
                                      "<mechanism>.sasl.jaas.config, connections.max.reauth.ms)")
            target.prefixed[rest] = value
        elif key in SSL_KEYS or key in SASL_KEYS:
            for s in settings.values():
                s.plain[key] = value
        elif key.startswith("sasl.kerberos."):
            raise BadSetting(key, "Kerberos (GSSAPI) is not supported")
        else:
            raise BadSetting(key, "unknown property")
    return settings


def _ssl_config(settings: ListenerSettings) -> SslConfig:
    try:
        return SslConfig.model_validate(settings.with_prefix(set(SSL_KEYS)))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "ssl"
        raise BadSetting(settings.source(key), err["msg"]) from None


def _int(settings: ListenerSettings, key: str, default: int) -> int:
    text = settings.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadSetting(settings.source(key), f"not a whole number: {text!r}") from None
    if value < 0:
        raise BadSetting(settings.source(key), "must be 0 or more")
    return value


@dataclass
class ListenerSecurity:
    """How one listener secures its connections; decided once, used by each connection as it opens."""

    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    settings: ListenerSettings
    ssl_config: SslConfig | None = None  # SSL and SASL_SSL
    ssl_context: ssl.SSLContext | None = None  # once built
    mapper: SslPrincipalMapper | None = None  # SSL: the client certificate's subject -> principal
    mechanisms: ListenerMechanisms | None = None  # SASL_*
    reauth_ms: int = 0  # connections.max.reauth.ms: 0 = sessions do not expire
    max_receive: int = SASL_MAX_RECEIVE

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def check(cls, name: str, protocol: str, settings: ListenerSettings, reauth_ms: int) -> ListenerSecurity:
        """The listener's settings validated, without reading any file."""
        sec = cls(name, protocol, settings)
        if sec.tls:
            sec.ssl_config = _ssl_config(settings)
            try:
                sec.mapper = SslPrincipalMapper(sec.ssl_config.principal_mapping_rules)
            except ValueError as exc:
                raise BadSetting(settings.source("ssl.principal.mapping.rules"), str(exc)) from None
        if sec.sasl:
            sec.mechanisms = ListenerMechanisms(settings)
            sec.reauth_ms = _int(settings, "connections.max.reauth.ms", reauth_ms)
            sec.max_receive = _int(settings, "sasl.server.max.receive.size", SASL_MAX_RECEIVE)
            for mechanism in sec.mechanisms.names():
                _int(settings, f"{mechanism.lower()}.connections.max.reauth.ms", 0)
        return sec

    @classmethod
    def build(cls, name: str, protocol: str, settings: ListenerSettings, reauth_ms: int,
              services: Any = None) -> ListenerSecurity:
        """Ready to serve: the TLS context built (keystores read) and the mechanisms on the broker's services."""
        sec = cls.check(name, protocol, settings, reauth_ms)
        if sec.ssl_config is not None:
            try:
                sec.ssl_context = server_context(sec.ssl_config)
            except BadSetting as exc:
                raise BadSetting(settings.source(exc.key), exc.problem) from None
        if sec.sasl:
            sec.mechanisms = ListenerMechanisms(settings, services)
        return sec

    def mechanism_reauth_ms(self, mechanism: str) -> int:
        """connections.max.reauth.ms for ``mechanism`` (Kafka lets a listener set it per mechanism)."""
        key = f"{mechanism.lower()}.connections.max.reauth.ms"
        return _int(self.settings, key, self.reauth_ms) if key in self.settings.prefixed else self.reauth_ms
