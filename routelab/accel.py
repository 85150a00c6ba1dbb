"""Which of routelab's per-packet modules run compiled, and a switch to turn that off.

The modules on the per-packet path (:data:`ACCELERATED`) are plain Python.
At install time ``setup.py`` also compiles them, unchanged, with Cython
(C types come from the ``.pxd`` file beside a module and its
``@cython.locals`` declarations).  Python then imports the compiled
extension instead of the ``.py`` file.  Both run the same code and give
bit-identical results; the compiled one is several times faster.

This module makes that choice visible and safe:

* the compiled modules are used all together or not at all (they share C
  types: the compiled loop cannot take a ``DstEntry`` from the source);
  if any of them is missing, or its ``.py`` source has changed since it
  was built (an edit in an editable install, a ``git pull`` without a
  rebuild), every one is imported from source, with a
  :class:`UserWarning` saying how to rebuild;
* ``ROUTELAB_PURE=1`` in the environment makes routelab import the
  sources even when fresh compiled modules exist (tests use this to check
  that both give the same results);
* :func:`status` says, per module, what is in use and why.

It must run before the accelerated modules are first imported, which
``routelab/__init__.py`` ensures.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

__all__ = ["ACCELERATED", "install", "status", "compiled", "needs_build"]

#: module name -> source path relative to the repository root (as setup.py)
ACCELERATED = {
    "routelab.sim.ledger": "routelab/sim/ledger.py",
    "routelab.sim.clock": "routelab/sim/clock.py",
    "routelab.sim.columns": "routelab/sim/columns.py",
    "routelab.sim.queues": "routelab/sim/queues.py",
    "routelab.sim.schedule": "routelab/sim/schedule.py",
    "routelab.core.dst": "routelab/core/dst.py",
    "routelab.core.rcu": "routelab/core/rcu.py",
    "routelab.core.dev": "routelab/core/dev.py",
    "routelab.core.softirq": "routelab/core/softirq.py",
    "routelab.ipv4.icmp": "routelab/ipv4/icmp.py",
    "routelab.ipv4.ip_input": "routelab/ipv4/ip_input.py",
    "routelab.ipv4.route": "routelab/ipv4/route.py",
    "routelab.router": "routelab/router.py",
}
_PKG = Path(__file__).resolve().parent
_MANIFEST = _PKG / "_accel_manifest.json"
_status: dict[str, str] = {}


def _source(name: str) -> Path:
    return _PKG.parent / ACCELERATED[name]


def source_digest(rel: str, root: Path | None = None) -> str:
    """SHA-256 of a module's ``.py`` source and its ``.pxd`` (C types), if any;
    ``setup.py`` records it at build time, :func:`install` compares."""
    src = (root or _PKG.parent) / rel
    h = hashlib.sha256(src.read_bytes())
    pxd = src.with_suffix(".pxd")
    if pxd.exists():
        h.update(pxd.read_bytes())
    return h.hexdigest()


def _has_extension(name: str) -> bool:
    src = _source(name)
    return any(p.name.startswith(src.stem + ".") and p.suffix in (".so", ".pyd")
               for p in src.parent.iterdir())


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Import the listed modules from their ``.py`` source, never an extension."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


def install() -> None:
    """Decide, once per process, compiled or source for each accelerated module."""
    if _status:
        return
    try:
        built = json.loads(_MANIFEST.read_text())
    except (OSError, ValueError):
        built = {}
    have = {name for name in ACCELERATED if _has_extension(name)}
    stale = [rel for name, rel in ACCELERATED.items()
             if name in have and built.get(rel) != source_digest(rel)]
    if not have:
        why = "not compiled"
    elif os.environ.get("ROUTELAB_PURE", "") not in ("", "0"):
        why = "ROUTELAB_PURE is set"
    elif len(have) < len(ACCELERATED):
        why = "some modules are not compiled"
    elif stale:
        why = "compiled from an older source"
    else:
        why = ""
    for name in ACCELERATED:
        _status[name] = f"pure Python ({why})" if why else "compiled"
    if why and have:
        sys.meta_path.insert(0, _SourceFinder(set(ACCELERATED)))
    if stale and why == "compiled from an older source":
        warnings.warn(
            "routelab: the compiled " + ", ".join(stale) + " no longer match their source; "
            "running all of routelab from source (slower).  Rebuild with `make build` "
            "(or `pip install --no-deps -e .`).", stacklevel=2)


def status() -> dict[str, str]:
    """Per accelerated module: ``"compiled"`` or ``"pure Python (<why>)"``."""
    install()
    return dict(_status)


def needs_build() -> bool:
    """True when compiled modules exist but cannot be used as they are (one is
    missing or older than its source): ``make build`` would fix that.  False
    for an install without compiled modules (no C compiler, ``ROUTELAB_PURE``)."""
    install()
    return any(v.endswith(("(some modules are not compiled)", "(compiled from an older source)"))
               for v in _status.values())


def compiled() -> bool:
    """True when every accelerated module runs compiled."""
    return all(v == "compiled" for v in status().values())
