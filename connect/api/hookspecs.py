"""The whole contract between Headwater and its plugins: six pluggy hooks that return classes, and
one that tells plugins the worker stopped.

A plugin module (found through the ``headwater`` entry-point group or in a folder on
``plugin.path``) implements any of them with ``@hookimpl`` and returns classes.
Headwater's own connectors, converters and transforms register the same way.
"""

from __future__ import annotations

import pluggy

__all__ = ["hookimpl", "hookspec", "HeadwaterSpec"]

hookspec = pluggy.HookspecMarker("headwater")
hookimpl = pluggy.HookimplMarker("headwater")


class HeadwaterSpec:
    @hookspec
    def headwater_connectors(self) -> list[type]:
        """Connector classes (subclasses of SourceConnector or SinkConnector)."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_converters(self) -> list[type]:
        """Converter and HeaderConverter classes."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_transforms(self) -> list[type]:
        """Transformation classes."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_predicates(self) -> list[type]:
        """Predicate classes."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_rest_extensions(self) -> list[type]:
        """RestExtension classes (``rest.extension.classes``)."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_config_providers(self) -> list[type]:
        """ConfigProvider classes (``config.providers.<name>.class``)."""
        raise NotImplementedError  # a specification: plugins implement it

    @hookspec
    def headwater_worker_stopped(self) -> None:
        """The worker process's Connect worker stopped: release what plugins share across tasks (a
        Spark session, a connection pool). Optional; called once per stop."""
