"""Herders: the REST API's view of the cluster (standalone and distributed)."""

from .base import BaseHerder
from .errors import BadRequest, Conflict, NotFound, NotLeader, NotOwner
from .interface import Herder
from .standalone import StandaloneHerder

__all__ = ["BadRequest", "BaseHerder", "Conflict", "Herder", "NotFound", "NotLeader", "NotOwner", "StandaloneHerder"]
