"""Scenarios: one module per story, each with ``KNOBS`` and ``run(**knobs, seed=...)``.

``run`` returns a :class:`routelab.result.Result` whose ``summary()`` is a
flat dict of named numbers.  :data:`SCENARIOS` maps CLI names to modules.
"""

from __future__ import annotations

from importlib import import_module

from ..errors import KnobError

__all__ = ["SCENARIOS", "get"]

SCENARIOS = {
    "ping": "routelab.scenarios.ping",
    "worm": "routelab.scenarios.worm",
    "rcu": "routelab.scenarios.rcu",
    "frag": "routelab.scenarios.frag",
    "container": "routelab.scenarios.container",
    "nfs": "routelab.scenarios.nfs",
    "diversity": "routelab.scenarios.diversity",
}


def get(name: str):
    """Return the scenario module called ``name``."""
    if name not in SCENARIOS:
        raise KnobError("scenario", name, "one of " + ", ".join(SCENARIOS))
    return import_module(SCENARIOS[name])
