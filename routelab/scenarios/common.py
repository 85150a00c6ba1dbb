"""What every scenario shares: validating its knobs, running it, annotating the result.

The knob factories (kernel, CPU, route-cache sysctls, run length) live in
:mod:`routelab.knobs`; they are re-exported here for the scenarios.
"""

from __future__ import annotations

from ..knobs import cache_knobs, cpu_knob, kernel_knob, run_knobs
from ..result import Result
from ..sysctl import validate_all

__all__ = ["kernel_knob", "cpu_knob", "cache_knobs", "run_knobs", "resolve", "SYSCTL_NAMES"]

# sysctls a scenario may pass straight to the Router
SYSCTL_NAMES = ("gc_thresh", "max_size", "gc_min_interval", "gc_elasticity", "gc_timeout",
                "gc_interval", "secret_interval", "ram_mb", "rhash_entries", "txqueuelen",
                "netdev_max_backlog", "rcu_maxbatch", "neigh_gc_thresh1", "neigh_gc_thresh2",
                "neigh_gc_thresh3", "neigh_gc_interval", "neigh_gc_stale_time",
                "neigh_unres_qlen", "neigh_retrans_time", "neigh_mcast_solicit",
                "neigh_ucast_solicit", "neigh_app_solicit", "neigh_base_reachable_time",
                "neigh_delay_first_probe_time")


def resolve(knobs: dict, given: dict) -> dict:
    """Validate ``given`` against ``knobs`` (name -> Knob), filling defaults."""
    return validate_all(knobs, given, what="knob of this scenario")


def sysctl_of(values: dict) -> dict:
    """The sysctl subset of resolved scenario values."""
    return {k: values[k] for k in SYSCTL_NAMES if k in values}


def fill_derived(values: dict, router) -> dict:
    """Knob values with the derived sysctl defaults (``None``) filled in from the router."""
    out = dict(values)
    for k in SYSCTL_NAMES:
        if k in out and out[k] is None and k in router.sysctl:
            out[k] = router.sysctl[k]
    return out


def run_scenario(name: str, knobs: dict, build, given: dict, seed, ping_bytes, *,
                 progress=None, summary=None, bin_s: float | None = None) -> Result:
    """Validate knobs and seed, build the router and trace, run, annotate the result.

    ``ping_bytes`` (a knob name or a number) is the IP length of the echo
    requests: the host side of the round trip -- request and reply each
    crossing the inside wire once -- is added to every RTT.  ``progress`` is
    passed to ``Router.run``; ``summary(res)``, if given, returns the
    scenario's own figures, kept as ``res.extra["scenario_summary"]`` (data:
    ``Result.summary`` adds them).  ``bin_s``: the run's time bins (default
    ``Router.run``'s).
    """
    import numpy as np

    from ..errors import KnobError

    values = resolve(knobs, given)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise KnobError("seed", seed, "a non-negative integer")
    router, trace = build(values, int(seed))
    if bin_s is None:
        res = router.run(trace, values["duration"], progress=progress)
    else:
        res = router.run(trace, values["duration"], progress=progress,
                         bin_s=min(bin_s, values["duration"]))
    res.extra["scenario"] = name
    res.extra["knobs"] = fill_derived(values, router)
    res.extra["seed"] = int(seed)
    size = values[ping_bytes] if isinstance(ping_bytes, str) else ping_bytes
    res.extra["rtt_offset_s"] = 2 * (size + 38) * 8 / router.devices[0].speed
    if summary is not None:
        res.extra["scenario_summary"] = summary(res)
    return res
