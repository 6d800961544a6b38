"""The floors of the house: which package may import which.

``headwater.kafka``, ``headwater.spark`` and ``headwater.properties`` are the floor; ``broker`` and
``connect`` stand on it and never import each other; ``connectors`` stand on ``connect``, whose plugin
API (``headwater.connect.api``) imports nothing else of ``connect``; only the front
door (``headwater.cli``, ``headwater.up``) composes them all, and so may the plugin authors' test
kit (``headwater.testing``), which nothing else imports. Relative imports are resolved, so
``from ..broker import x`` is caught as well as ``import headwater.broker``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"headwater": "headwater", "broker": "headwater.broker", "connect": "headwater.connect",
            "connectors": "headwater.connectors"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (relative imports resolved against ``module``)."""
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names)
    return names


MODULES = _modules()
IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _offenders(importer_prefix: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for name, imported in IMPORTS.items():
        if name == importer_prefix or name.startswith(importer_prefix + "."):
            for target in sorted(imported):
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    bad.append(f"{name} imports {target}")
    return bad


def test_the_module_map_sees_every_room() -> None:
    for module in ("headwater.cli", "headwater.kafka.errors", "headwater.spark.client", "headwater.broker.server",
                   "headwater.connect.api.errors", "headwater.connect.runtime.worker", "headwater.connectors.file"):
        assert module in MODULES, module


@pytest.mark.parametrize(("importer", "forbidden"), [
    ("headwater.broker", ("headwater.connect", "headwater.connectors", "headwater.cli", "headwater.up")),
    ("headwater.connect", ("headwater.broker", "headwater.connectors", "headwater.cli", "headwater.up")),
    ("headwater.connectors", ("headwater.broker", "headwater.cli", "headwater.up")),
    ("headwater.kafka", ("headwater.broker", "headwater.connect", "headwater.connectors", "headwater.cli",
                         "headwater.up")),
    ("headwater.spark", ("headwater.broker", "headwater.connect", "headwater.connectors", "headwater.cli",
                         "headwater.up")),
    ("headwater.properties", ("headwater.broker", "headwater.connect", "headwater.connectors")),
])
def test_floors(importer: str, forbidden: tuple[str, ...]) -> None:
    assert _offenders(importer, forbidden) == []


def _outside_the_api(imported: set[str]) -> list[str]:
    """What of ``imported`` is part of ``headwater.connect`` but not of its plugin API."""
    return sorted(target for target in imported
                  if (target == "headwater.connect" or target.startswith("headwater.connect."))
                  and not (target == "headwater.connect.api" or target.startswith("headwater.connect.api.")))


def test_the_plugin_api_imports_nothing_else_of_connect() -> None:
    # Plugins build on connect/api alone, so the runtime behind it can change without breaking them
    assert [f"{name} imports {target}" for name, imported in IMPORTS.items()
            if name == "headwater.connect.api" or name.startswith("headwater.connect.api.")
            for target in _outside_the_api(imported)] == []


def test_the_api_check_catches_an_import_of_the_runtime(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from ..runtime.errors import ErrorReporter\nfrom . import data\n")
    assert _outside_the_api(_imports("headwater.connect.api.bad", bad)) == [
        "headwater.connect.runtime.errors", "headwater.connect.runtime.errors.ErrorReporter"]


def test_only_tests_use_the_test_kit() -> None:
    # headwater.testing composes a broker and workers as headwater.up does; the product never needs it
    importers = {name: imported for name, imported in IMPORTS.items() if not name.startswith("headwater.testing")}
    assert [f"{name} imports {target}" for name, imported in importers.items() for target in sorted(imported)
            if target == "headwater.testing" or target.startswith("headwater.testing.")] == []


def test_the_floor_check_catches_a_relative_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from ...broker.config import BrokerConfig\n")
    assert "headwater.broker.config.BrokerConfig" in _imports("headwater.connect.runtime.bad", bad)


def test_the_broker_has_no_import_cycle() -> None:
    # Every import counts, those under TYPE_CHECKING and inside functions too: a cycle hidden in either still
    # ties the two modules together (as broker/metrics.py and broker/server.py once were).
    broker = {name: {t for t in IMPORTS[name] if t in MODULES and t.startswith("headwater.broker")}
              for name in MODULES if name.startswith("headwater.broker")}
    cycles: list[list[str]] = []
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycles.append(path[path.index(name):] + [name])
            return
        if name in done:
            return
        for target in sorted(broker[name] - {name}):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(broker):
        visit(name, [])
    assert cycles == []


def test_the_broker_keeps_its_modules_in_role_packages() -> None:
    # errors.py is the room's error root, which every package raises from
    loose = sorted(p.name for p in (ROOT / "broker").glob("*.py") if p.name not in ("__init__.py", "errors.py"))
    assert loose == []
