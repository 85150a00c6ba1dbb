"""routelab: a fast, faithful teaching model of the Linux 2.4/2.6 IPv4 forwarding path.

Public API (everything else is reachable through the submodules):

- :class:`Router`, :class:`Device` -- build a router and ``run`` a trace
- :class:`PacketTrace` -- offered packets as arrays
- :class:`Fib`, :class:`Route`, :class:`Rule` -- routes and policy rules
- :data:`KERNELS`, :data:`CPUS`, :data:`NICS` -- profiles
- :data:`SYSCTLS`, :class:`KnobError` -- knob metadata and bad-input errors
- :mod:`routelab.scenarios` -- one ``run(**knobs, seed=...)`` per story
- :mod:`routelab.procfs` -- rt_cache_stat, netstat -i, snmp, perf-top views
- :func:`sweep` -- a scenario over a knob grid and seeds, on any executor (:mod:`routelab.sweep`)
"""

from . import accel

accel.install()   # before the compiled modules are imported (see routelab.accel)

from .core.skbuff import PacketTrace  # noqa: E402
from .errors import KnobError, RoutelabError  # noqa: E402
from .hardware import CPUS, NICS  # noqa: E402
from .ipv4.fib import Fib, Route, Rule  # noqa: E402
from .kernels import KERNELS  # noqa: E402
from .result import OUTCOMES, Result  # noqa: E402
from .router import Device, Router  # noqa: E402
from .sweep import SweepTable, sweep  # noqa: E402
from .sysctl import SYSCTLS  # noqa: E402

__version__ = "0.1.0"

__all__ = ["CPUS", "KERNELS", "NICS", "OUTCOMES", "SYSCTLS", "Device", "Fib", "KnobError",
           "PacketTrace", "Result", "Route", "Router", "RoutelabError", "Rule", "SweepTable",
           "__version__", "sweep"]
