"""The package's layering stays acyclic (docs/design.md, "Layout"):

* ``routelab.sim`` (the engine: clock, ledger, columns, queues) imports
  nothing of routelab outside ``routelab.sim``;
* ``routelab.core`` imports nothing of the layers above it (``ipv4``,
  ``hosts``, the router, results, scenarios and views).

Every import counts: module level, inside functions (``ast.walk``), and the
``cimport`` lines of the ``.pxd`` files the compiled modules are built with.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "routelab"
# what routelab.core may not import (everything it builds on is sim/, errors,
# hardware, sysctl, costs, kernels: the floors below it)
ABOVE_CORE = ("routelab.ipv4", "routelab.hosts", "routelab.router", "routelab.prepare",
              "routelab.result", "routelab.scenarios", "routelab.notebook", "routelab.journey",
              "routelab.procfs", "routelab.cli", "routelab.__main__", "routelab.worms",
              "routelab.residence", "routelab.traffic")


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, text: str | None = None) -> set[str]:
    """Absolute names of the modules a ``.py`` or ``.pxd`` file imports."""
    text = path.read_text() if text is None else text
    name = module_name(path)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    if path.suffix == ".pxd":
        out = set()
        for m in re.finditer(r"^\s*(?:from\s+(\S+)\s+c?import|c?import\s+(\S+))", text, re.M):
            out.add(m.group(1) or m.group(2))
        return out
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            # "from . import x" / "from ..core import dst": x may be a module
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(folder: str, forbidden) -> dict[str, list[str]]:
    """Per file of ``routelab/<folder>``, the imports ``forbidden(name)`` rejects."""
    out = {}
    for path in sorted((PKG / folder).rglob("*")):
        if path.suffix not in (".py", ".pxd"):
            continue
        bad = sorted(n for n in imports_of(path) if forbidden(n))
        if bad:
            out[str(path.relative_to(PKG.parent))] = bad
    return out


def sim_forbids(name: str) -> bool:
    return _within(name, ("routelab",)) and not _within(name, ("routelab.sim",))


def core_forbids(name: str) -> bool:
    return _within(name, ABOVE_CORE)


def test_sim_imports_nothing_of_the_model():
    assert violations("sim", sim_forbids) == {}


def test_core_imports_nothing_from_the_layers_above():
    assert violations("core", core_forbids) == {}


@pytest.mark.parametrize("text, suffix, bad", [
    ("from ..core.dst import DstEntry\n", ".py",
     ["routelab.core.dst", "routelab.core.dst.DstEntry"]),
    ("def f():\n    from routelab.ipv4 import route\n", ".py",
     ["routelab.ipv4", "routelab.ipv4.route"]),
    ("from .. import costs\n", ".py", ["routelab", "routelab.costs"]),
    ("from routelab.core.dst cimport DstEntry\n", ".pxd", ["routelab.core.dst"]),
    ("from .clock import Clock\nimport numpy\n", ".py", []),
])
def test_the_sim_check_sees_an_upward_import(text, suffix, bad):
    """The check itself: sim/queues.py's old ``DstEntry`` import (and others) is named."""
    path = PKG / "sim" / ("queues" + suffix)
    assert sorted(n for n in imports_of(path, text) if sim_forbids(n)) == bad


def test_the_core_check_sees_a_function_level_import():
    path = PKG / "core" / "dev.py"
    text = "from ..sim.ledger import Ledger\n\ndef f():\n    from ..ipv4.route import RouteCache\n"
    assert {n for n in imports_of(path, text) if core_forbids(n)} == {
        "routelab.ipv4.route", "routelab.ipv4.route.RouteCache"}


def test_journey_does_not_import_the_scenarios_layer():
    """journey (a view beside the scenarios) takes its knob factories from routelab.knobs."""
    bad = [n for n in imports_of(PKG / "journey.py") if _within(n, ("routelab.scenarios",))]
    assert bad == []


def test_scenarios_keep_their_knob_factory_names():
    from routelab import knobs
    from routelab.scenarios import common

    for name in knobs.__all__:
        assert getattr(common, name) is getattr(knobs, name)
