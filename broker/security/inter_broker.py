"""How this broker connects to the other brokers, as Kafka's broker builds its client channel
(ChannelBuilders.clientChannelBuilder for the inter-broker listener): the listener is
``inter.broker.listener.name``, else the one named after (or speaking) ``security.inter.broker.protocol``,
PLAINTEXT by default; its security protocol says the rest.

- SSL / SASL_SSL: the listener's own ``ssl.*`` settings (``listener.name.<l>.ssl.*`` over ``ssl.*``) on the client
  side: its truststore checks the other broker's certificate (and host, ``ssl.endpoint.identification.algorithm``),
  its keystore is this broker's client certificate.
- SASL_PLAINTEXT / SASL_SSL: the mechanism is ``sasl.mechanism.inter.broker.protocol`` (Kafka's default, GSSAPI,
  is not served here, so it must be set), one the listener enables; the login is the ``username`` and
  ``password`` options of the listener's JAAS entry for that mechanism
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``), as Kafka's PlainLoginModule / ScramLoginModule take them
  on a broker.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from headwater.kafka.jaas import JaasError, parse_jaas
from headwater.kafka.server_tls import client_context
from headwater.properties import ConfigError

from .listeners import ListenerSecurity, parse_protocol_map
from .plain import PLAIN_LOGIN_MODULE
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .settings import BadSetting

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig

__all__ = ["InterBrokerSecurity", "inter_broker_listener", "inter_broker_security"]

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"


def inter_broker_listener(config: BrokerConfig) -> str:
    """The listener the other brokers are reached on (Kafka's inter.broker.listener.name, else the listener
    named after security.inter.broker.protocol, else the first one speaking it; PLAINTEXT by default)."""
    protocols = parse_protocol_map(config.listener_security_protocol_map)
    names = [listener.name for listener in config.listener_list()]
    if config.inter_broker_listener_name:
        return config.inter_broker_listener_name.upper()
    wanted = (config.security_inter_broker_protocol or "PLAINTEXT").upper()
    return next((n for n in names if n == wanted), None) or \
        next((n for n in names if protocols.get(n) == wanted), names[0])


@dataclass(frozen=True)
class InterBrokerSecurity:
    """What a connection to another broker's inter-broker listener needs."""

    listener: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None  # SSL and SASL_SSL (None while only checking)
    mechanism: str | None = None  # SASL_*
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def _login(security: ListenerSecurity, mechanism: str) -> tuple[str, str]:
    """The username and password of the listener's JAAS entry for ``mechanism``; BadSetting naming its key."""
    settings = security.settings
    key = "sasl.jaas.config"
    source = settings.source(key, mechanism)
    module_name = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    text = settings.get(key, mechanism)
    if text is None:
        raise BadSetting(source, f'required for inter-broker SASL {mechanism}: {module_name} required '
                                 f'username="<broker>" password="<secret>" ...;')
    try:
        modules = parse_jaas(text)
    except JaasError as exc:
        raise BadSetting(source, str(exc)) from None
    module = next((m for m in modules if m.class_name == module_name), None)
    if module is None:
        raise BadSetting(source, f"inter-broker SASL {mechanism} needs the login module {module_name}")
    missing = [k for k in ("username", "password") if not module.options.get(k)]
    if missing:
        raise BadSetting(source, f"{' and '.join(missing)} missing: the login this broker uses towards the "
                                 f"other brokers on listener {security.name}")
    return module.options["username"], module.options["password"]


def inter_broker_security(config: BrokerConfig, check_only: bool = False) -> InterBrokerSecurity:
    """The client side of the inter-broker listener; with ``check_only`` nothing is read from disk (no TLS
    context). ConfigError naming the property when it cannot be used."""
    name = inter_broker_listener(config)
    try:
        security = config.listener_security(check_only=True)[name]
        protocol = security.protocol
        ssl_context = mechanism = username = password = None
        if security.tls and not check_only:
            assert security.ssl_config is not None  # set by ListenerSecurity.check for SSL and SASL_SSL
            try:
                ssl_context = client_context(security.ssl_config)
            except BadSetting as exc:
                raise BadSetting(security.settings.source(exc.key), exc.problem) from None
        if security.sasl:
            assert security.mechanisms is not None
            mechanism = (security.settings.get(MECHANISM_KEY) or "").strip().upper()
            served = security.mechanisms.names()
            if not mechanism:
                raise BadSetting(MECHANISM_KEY, f"required: the inter-broker listener {name} is {protocol} "
                                                f"(Kafka's default GSSAPI is not supported; one of "
                                                f"{', '.join(served)})")
            if mechanism not in served:
                raise BadSetting(security.settings.source(MECHANISM_KEY),
                                 f"{mechanism} is not enabled on the inter-broker listener {name} "
                                 f"(sasl.enabled.mechanisms: {', '.join(served)})")
            if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
                raise BadSetting(security.settings.source(MECHANISM_KEY),
                                 f"{mechanism} cannot be used between brokers (PLAIN, SCRAM-SHA-256/512)")
            username, password = _login(security, mechanism)
    except BadSetting as exc:
        raise ConfigError(str(exc)) from None
    return InterBrokerSecurity(name, protocol, ssl_context, mechanism, username, password)
