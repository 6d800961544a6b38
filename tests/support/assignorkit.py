"""What a group of Connect workers holds, read from the assignments they were handed (in-memory rounds)."""

from __future__ import annotations

from headwater.connect.herder.assignor import Item
from headwater.connect.herder.protocol import Assignment

__all__ = ["owners_of"]


def owners_of(members: dict[str, Assignment | None]) -> dict[Item, str]:
    """Each connector and task with the member holding it; AssertionError when two members hold one."""
    out: dict[Item, str] = {}
    for m, a in members.items():
        for c, tasks in (a.assigned if a else {}).items():
            for t in tasks:
                assert (c, t) not in out, f"{(c, t)} held by {out[(c, t)]} and {m}"
                out[(c, t)] = m
    return out
