"""Knob factories shared by the scenarios, the journey and the notebooks.

A scenario, or any other view with sliders, builds its ``KNOBS`` table from
these: the kernel and CPU profile pickers, the route-cache sysctls (their
metadata lives in :data:`routelab.sysctl.SYSCTLS`), and the run length.
They sit below every view, so a view that needs one (``routelab.journey``)
does not import the scenarios layer for it.
"""

from __future__ import annotations

from .hardware import CPUS
from .kernels import KERNELS
from .sysctl import SYSCTLS, Knob

__all__ = ["kernel_knob", "cpu_knob", "cache_knobs", "run_knobs"]


def kernel_knob(default: str) -> Knob:
    """The kernel profile picker (``routelab.kernels.KERNELS``)."""
    return Knob("kernel", default, str, unit="", choices=tuple(KERNELS),
                help="Kernel profile: route-cache, GC and RCU behaviour (routelab.kernels).")


def cpu_knob(default: str) -> Knob:
    """The CPU profile picker (``routelab.hardware.CPUS``)."""
    return Knob("cpu", default, str, choices=tuple(CPUS),
                help="CPU profile (routelab.hardware).")


def cache_knobs(*names: str) -> list[Knob]:
    """The sysctls called ``names``, as knobs (``routelab.sysctl.SYSCTLS``)."""
    return [SYSCTLS[n] for n in names]


def run_knobs(duration: float, max_duration: float) -> list[Knob]:
    """The run length: ``duration`` simulated seconds by default, at most ``max_duration``."""
    return [Knob("duration", duration, float, 0.1, max_duration, "s",
                 "Simulated seconds.", step=0.5)]
