"""The SASL mechanisms a listener can enable, by name: each entry builds, from the listener's settings,
what makes a fresh :class:`SaslServer` per exchange. A mechanism plugs in with one line in ``REGISTRY``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .mechanism import SaslServer
from .plain import PlainServer, plain_users
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .settings import BadSetting, ListenerSettings

__all__ = ["DEFAULT_MECHANISMS", "REGISTRY", "ListenerMechanisms", "MechanismFactory"]

# (the listener's settings, the broker's apis.Services or None while only checking the configuration)
#   -> a maker of one exchange. BadSetting when the listener's settings cannot serve the mechanism. A factory
# reads its own keys through settings.get(key, mechanism) (listener.name.<l>.<mechanism>.<key> first); with
# services None it only validates (the config check of `headwater broker` and BrokerConfig), and its maker is
# never called.
MechanismFactory = Callable[[ListenerSettings, Any], Callable[[], SaslServer]]


def _plain(settings: ListenerSettings, services: Any) -> Callable[[], SaslServer]:
    users = plain_users(settings)
    return lambda: PlainServer(users)


def _scram(mechanism: str) -> MechanismFactory:
    """SCRAM on the broker's salted credential store (AlterUserScramCredentials keeps it); no listener setting."""

    def factory(settings: ListenerSettings, services: Any) -> Callable[[], SaslServer]:
        if services is None:  # only checking the configuration: nothing is served
            return lambda: _no_services(mechanism)
        store = services.access.scram
        return lambda: store.server(mechanism)

    return factory


def _no_services(mechanism: str) -> SaslServer:
    raise RuntimeError(f"{mechanism}: mechanisms built without the broker's services cannot serve")


REGISTRY: dict[str, MechanismFactory] = {
    "PLAIN": _plain,
    **{name: _scram(name) for name in SCRAM_MECHANISMS},
}
# Kafka's default is GSSAPI, which is not served here; PLAIN is what an unconfigured SASL listener offers.
DEFAULT_MECHANISMS = "PLAIN"
_NOT_SERVED = {"GSSAPI": "Kerberos is not supported", "OAUTHBEARER": "OAUTHBEARER is not supported"}


class ListenerMechanisms:
    """The mechanisms one listener offers (its ``sasl.enabled.mechanisms``, in that order)."""

    def __init__(self, settings: ListenerSettings, services: Any = None) -> None:
        key = "sasl.enabled.mechanisms"
        text = settings.get(key)
        names = [n.strip().upper() for n in (text if text is not None else DEFAULT_MECHANISMS).split(",")
                 if n.strip()]
        if not names:
            raise BadSetting(settings.source(key), "no mechanism: a SASL listener needs at least one")
        self._makers: dict[str, Callable[[], SaslServer]] = {}
        for name in names:
            factory = REGISTRY.get(name)
            if factory is None:
                why = _NOT_SERVED.get(name, "unknown mechanism")
                raise BadSetting(settings.source(key), f"{name}: {why} (served: {', '.join(REGISTRY)})")
            self._makers[name] = factory(settings, services)

    def names(self) -> list[str]:
        return list(self._makers)

    def server(self, mechanism: str) -> SaslServer:
        return self._makers[mechanism]()
