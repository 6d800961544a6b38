"""Herders: the REST API's view of the cluster (standalone and distributed)."""

from .base import BadRequest, Conflict, Herder, NotFound, NotLeader, NotOwner
from .standalone import StandaloneHerder

__all__ = ["BadRequest", "Conflict", "Herder", "NotFound", "NotLeader", "NotOwner", "StandaloneHerder"]
