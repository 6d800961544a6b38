"""Plugin discovery: the ``headwater`` entry-point group and ``plugin.path`` folders.

Everything registers through the same pluggy hooks (``headwater.connect.api.hookspecs``), and
the built-in connectors, converters and transforms come through the same entry-point group as
third-party plugins (``[project.entry-points.headwater]`` in pyproject.toml).
A folder on ``plugin.path`` holds plugins, each a module file or a package directory
(or a directory with a ``src/`` layout) whose top-level module implements the hooks.
With watching on, a plugin dropped into such a folder appears without a restart.

Names resolve as Kafka Connect resolves ``connector.class``: the full Python path, the
class name, the class name without its ``Connector``/``Converter`` suffix, or an alias
such as Kafka's Java class name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from headwater.kernel_limits import inotify_setting, nofile_limit

from .api import Connector, Converter, HeaderConverter, Predicate, SinkConnector, Transformation
from .api.config_provider import ConfigProvider
from .api.errors import ConnectException
from .api.hookspecs import HeadwaterSpec
from .api.rest_extension import RestExtension

__all__ = ["PluginInfo", "PluginRegistry", "UnknownPlugin"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "headwater"
#: The distribution whose entry points are the built-in plugins.
DISTRIBUTION = "headwater"
#: The hooks of the contract, read from the spec so a new hook needs no edit here.
HOOKS = tuple(name for name in vars(HeadwaterSpec) if name.startswith("headwater_"))
#: How long ``plugin.path`` must be quiet after a change before it is scanned (a plugin being copied in)
WATCH_QUIET_SECONDS = 0.5
WATCH_POLL_SECONDS = 5.0  # plugin.path looked at this often when the kernel gives no inotify watch
CLASS_HOOKS = tuple(hook for hook in HOOKS if hook != "headwater_worker_stopped")  # the hooks that return classes


class UnknownPlugin(ConnectException, LookupError):
    """No registered plugin of that kind has that name (still a LookupError, as it was)."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"Failed to find any class that implements {kind} and which name matches {name}")
        self.kind = kind
        self.name = name


@dataclass(frozen=True)
class PluginInfo:
    cls: type
    kind: str  # source, sink, converter, header_converter, transformation, predicate

    @property
    def class_name(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def version(self) -> str:
        return str(getattr(self.cls, "version", "1.0.0"))

    def to_json(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.kind, "version": self.version}


def _kind_of(cls: type, hook: str) -> list[str]:
    if hook == "headwater_connectors":
        return ["sink" if issubclass(cls, SinkConnector) else "source"]
    if hook == "headwater_converters":
        kinds = []
        if issubclass(cls, Converter) or hasattr(cls, "from_connect_data"):
            kinds.append("converter")
        if issubclass(cls, HeaderConverter) or hasattr(cls, "from_connect_header"):
            kinds.append("header_converter")
        return kinds
    return [_KINDS[hook]]


_KINDS = {"headwater_transforms": "transformation", "headwater_predicates": "predicate",
          "headwater_rest_extensions": "rest_extension", "headwater_config_providers": "config_provider"}
_CHECKS: dict[str, type] = {"headwater_connectors": Connector, "headwater_transforms": Transformation,
                            "headwater_predicates": Predicate, "headwater_rest_extensions": RestExtension,
                            "headwater_config_providers": ConfigProvider}


class PluginRegistry:
    """All known plugin classes, looked up by any of their names."""

    def __init__(self, plugin_path: list[str] | None = None) -> None:
        self.pm = pluggy.PluginManager("headwater")
        self.pm.add_hookspecs(HeadwaterSpec)
        self.plugin_path = [Path(p) for p in (plugin_path or [])]
        self._lock = threading.RLock()
        self._infos: list[PluginInfo] = []
        self._names: dict[tuple[str, str], PluginInfo] = {}
        self._loaded_paths: set[Path] = set()
        self._observer: Any = None
        self._timer_lock = threading.Lock()
        self._pending_scan: threading.Timer | None = None
        self._poll_stopped: threading.Event | None = None
        self.listeners: list[Callable[[], None]] = []
        self._load_entry_points()
        self.scan_plugin_path()

    # -- registration -------------------------------------------------------------------------

    def register(self, plugin: object, name: str) -> None:
        """Register one object implementing the hooks (e.g. a plugin built in code, or a test's)."""
        with self._lock:
            if self.pm.get_plugin(name) is None:
                self.pm.register(plugin, name=name)
            self._rebuild()

    def _register_module(self, module: ModuleType) -> None:
        if self.pm.is_registered(module):
            return
        self.pm.register(module, name=module.__name__)

    def _load_entry_points(self) -> None:
        # Headwater's own entry points first, whatever order the environment lists distributions
        # in: pluggy answers the last registered plugin first, so a plugin's class keeps winning a
        # name it shares with a built-in, as when the built-ins were registered before any plugin.
        entry_points = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                              key=lambda ep: ep.dist is None or ep.dist.name != DISTRIBUTION)
        for ep in entry_points:
            try:
                self._register_module(ep.load())
            except Exception:
                log.exception("plugin entry point %s could not be loaded", ep.name)

    def scan_plugin_path(self) -> list[str]:
        """Load plugins found on ``plugin.path`` that are not loaded yet; returns their names."""
        found = []
        with self._lock:
            importlib.invalidate_caches()  # the import system caches folder listings
            for folder in self.plugin_path:
                if not folder.is_dir():
                    continue
                for entry in sorted(folder.iterdir()):
                    if entry in self._loaded_paths or entry.name.startswith((".", "_")):
                        continue
                    module = self._load_path(entry)
                    if module is not None:
                        self._loaded_paths.add(entry)
                        found.append(module.__name__)
            self._rebuild()
        if found:
            log.info("loaded plugins from plugin.path: %s", ", ".join(found))
            for listener in self.listeners:
                listener()
        return found

    def _load_path(self, entry: Path) -> ModuleType | None:
        """Import a plugin module file, package, or project folder (flat or ``src/`` layout)."""
        candidates: list[tuple[Path, str]] = []
        if entry.is_file() and entry.suffix == ".py":
            candidates.append((entry.parent, entry.stem))
        elif entry.is_dir():
            if (entry / "__init__.py").exists():
                candidates.append((entry.parent, entry.name))
            for root in (entry / "src", entry):
                if root.is_dir():
                    for sub in sorted(root.iterdir()):
                        if (sub / "__init__.py").exists() and sub.name not in ("tests", "test"):
                            candidates.append((root, sub.name))
        for root, name in candidates:
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            try:
                module = sys.modules.get(name) or importlib.import_module(name)
            except Exception:
                log.exception("plugin %s could not be imported", entry)
                _forget_modules(name, root)
                continue
            if any(hasattr(module, hook) for hook in HOOKS):
                self._register_module(module)
                return module
            # Perhaps imported while its files were still being copied in: import it afresh next time.
            _forget_modules(name, root)
        return None

    def worker_stopped(self) -> None:
        """Tell every plugin the worker stopped (``headwater_worker_stopped``); a failing plugin is logged."""
        for impl in self.pm.hook.headwater_worker_stopped.get_hookimpls():
            try:
                impl.function()
            except Exception:
                log.exception("plugin %s failed in headwater_worker_stopped", impl.plugin_name)

    def _rebuild(self) -> None:
        infos: list[PluginInfo] = []
        for hook in CLASS_HOOKS:
            for result in getattr(self.pm.hook, hook)():
                for cls in result or []:
                    base = _CHECKS.get(hook)
                    if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
                        log.error("plugin hook %s returned %r, which is not a %s subclass; ignored", hook, cls,
                                  base.__name__)
                        continue
                    for kind in _kind_of(cls, hook):
                        infos.append(PluginInfo(cls, kind))
        names: dict[tuple[str, str], PluginInfo] = {}
        for info in infos:
            group = _group(info.kind)
            for name in _names_for(info.cls):
                names.setdefault((group, name), info)
        self._infos, self._names = infos, names

    # -- lookup -----------------------------------------------------------------------------------

    def plugins(self, kinds: set[str] | None = None) -> list[PluginInfo]:
        with self._lock:
            return [i for i in self._infos if kinds is None or i.kind in kinds]

    def connector(self, name: str) -> type[Connector]:
        return self._find("connector", name)

    def connector_names(self) -> list[str]:
        """Every name ``connector`` resolves: each installed connector's path, class name, short name and aliases."""
        with self._lock:
            return sorted(name for group, name in self._names if group == "connector")

    def converter(self, name: str) -> type:
        return self._find("converter", name)

    def header_converter(self, name: str) -> type:
        return self._find("header_converter", name)

    def transformation(self, name: str) -> type[Transformation]:
        return self._find("transformation", name)

    def predicate(self, name: str) -> type[Predicate]:
        return self._find("predicate", name)

    def rest_extension(self, name: str) -> type[RestExtension]:
        return self._find("rest_extension", name)

    def config_provider(self, name: str) -> type[ConfigProvider]:
        return self._find("config_provider", name)

    def _find(self, group: str, name: str) -> type:
        with self._lock:
            info = self._names.get((group, name.strip()))
        if info is None:
            raise UnknownPlugin(group.replace("_", " "), name)
        return info.cls

    # -- hot reload ---------------------------------------------------------------------------------

    def watch(self) -> None:
        """Load new plugins dropped onto ``plugin.path`` as they appear (watchdog)."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        registry = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("created", "moved", "modified", "closed", "deleted"):
                    registry._scan_when_quiet()

        observer = Observer()
        for folder in self.plugin_path:
            folder.mkdir(parents=True, exist_ok=True)
            observer.schedule(_Handler(), str(folder), recursive=True)
        observer.daemon = True
        try:
            observer.start()
        except OSError as exc:  # the kernel's inotify instances or watches are used up: poll instead
            observer.stop()
            log.warning("cannot watch plugin.path for new plugins (%s: fs.inotify.max_user_instances = %s, "
                        "fs.inotify.max_user_watches = %s, ulimit -n %s); checking it every %.0f s instead. "
                        "To be told at once, raise the limit named (sysctl -w fs.inotify.max_user_instances=<more>)",
                        exc.strerror or exc, inotify_setting("max_user_instances"),
                        inotify_setting("max_user_watches"), nofile_limit(), WATCH_POLL_SECONDS)
            self._poll_plugin_path()
            return
        self._observer = observer

    def _plugin_path_listing(self) -> set[tuple[str, float]]:
        """What a poll compares: every entry under plugin.path's folders with its modification time."""
        seen: set[tuple[str, float]] = set()
        for folder in self.plugin_path:
            for entry in folder.rglob("*") if folder.is_dir() else ():
                try:
                    seen.add((str(entry), entry.stat().st_mtime))
                except OSError:  # removed while listed
                    continue
        return seen

    def _poll_plugin_path(self) -> None:
        """Look at plugin.path every ``WATCH_POLL_SECONDS`` and scan when it changed (no inotify needed)."""
        stopped = threading.Event()
        self._poll_stopped = stopped
        listing = self._plugin_path_listing()  # now, not when the thread first runs: what comes after is new

        def poll() -> None:
            nonlocal listing
            while not stopped.wait(WATCH_POLL_SECONDS):
                try:
                    now = self._plugin_path_listing()
                    if now != listing:
                        listing = now
                        self._scan_when_quiet()
                except Exception:
                    log.exception("polling plugin.path failed")

        threading.Thread(target=poll, name="plugin-path-poll", daemon=True).start()

    def _scan_when_quiet(self) -> None:
        """Scan once plugin.path has been quiet for a moment: a plugin being copied in raises an event per
        file, and most of those scans would find it half there."""
        def scan() -> None:
            try:
                self.scan_plugin_path()
            except Exception:
                log.exception("scanning plugin.path failed")

        with self._timer_lock:
            if self._pending_scan is not None:
                self._pending_scan.cancel()
            self._pending_scan = threading.Timer(WATCH_QUIET_SECONDS, scan)
            self._pending_scan.daemon = True
            self._pending_scan.start()

    def close(self) -> None:
        if self._poll_stopped is not None:
            self._poll_stopped.set()
        with self._timer_lock:
            if self._pending_scan is not None:
                self._pending_scan.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None


def _forget_modules(name: str, root: Path) -> None:
    """Drop module ``name`` and its submodules from ``sys.modules`` if they were imported from ``root``,
    so the next import reads the files again."""
    folder = root.resolve()  # plugin.path may be relative; a module's __file__ is not
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        origin = getattr(sys.modules[loaded], "__file__", None) or ""
        if origin and Path(origin).resolve().is_relative_to(folder):
            del sys.modules[loaded]


def _group(kind: str) -> str:
    return "connector" if kind in ("source", "sink") else kind


def _names_for(cls: type) -> list[str]:
    short = cls.__name__
    names = [f"{cls.__module__}.{cls.__qualname__}", short, *getattr(cls, "aliases", ())]
    for suffix in ("Connector", "Converter"):
        if short.endswith(suffix) and len(short) > len(suffix):
            names.append(short[: -len(suffix)])
    return names
