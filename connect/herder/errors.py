"""What a herder refuses, each mapped to one HTTP status by the REST layer (Kafka Connect's).

All are ``ConnectException``s (connect's one root); each also keeps the builtin it stood for
before (``LookupError``, ``RuntimeError``, ``ValueError``) so callers catching those still do.
"""

from __future__ import annotations

from ..api.errors import ConnectException

__all__ = ["BadRequest", "Conflict", "HerderError", "HerderStopped", "NotFound", "NotLeader", "NotOwner"]


class HerderError(ConnectException):
    """A request the herder refused; the REST layer answers it with a 4xx."""


class NotFound(HerderError, LookupError):
    """404: no such connector, task, topic, group or logger."""


class Conflict(HerderError, RuntimeError):
    """409: the connector exists, or the work is busy (a group with active members)."""


class HerderStopped(Conflict):
    """409: the worker is stopping (or never started) and takes no more writes."""


class BadRequest(HerderError, ValueError):
    """400: the request is invalid; the message names the field and the problem."""


class NotLeader(HerderError):
    """Only the leader may do this; ``url`` is the leader's REST URL (None while unknown)."""

    def __init__(self, url: str | None) -> None:
        super().__init__(f"Cannot complete request because of a conflicting operation (e.g. worker rebalance); "
                         f"the leader is {url or 'not known yet'}")
        self.url = url


class NotOwner(NotLeader):
    """The work runs on another worker, at ``url``."""
