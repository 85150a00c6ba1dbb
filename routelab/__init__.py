"""routelab: a fast, faithful teaching model of the Linux 2.4/2.6 IPv4 forwarding path.

Public API (everything else is reachable through the submodules):

- :class:`Router`, :class:`Device` -- build a router and ``run`` a trace
- :class:`PacketTrace` -- offered packets as arrays
- :class:`Fib`, :class:`Route`, :class:`Rule` -- routes and policy rules
- :data:`KERNELS`, :data:`CPUS`, :data:`NICS` -- profiles
- :data:`SYSCTLS`, :class:`KnobError` -- knob metadata and bad-input errors
- :mod:`routelab.scenarios` -- one ``run(**knobs, seed=...)`` per story
- :mod:`routelab.procfs` -- rt_cache_stat, netstat -i, snmp, perf-top views
"""

from .core.skbuff import PacketTrace
from .errors import KnobError, RoutelabError
from .hardware import CPUS, NICS
from .ipv4.fib import Fib, Route, Rule
from .kernels import KERNELS
from .result import OUTCOMES, Result
from .router import Device, Router
from .sysctl import SYSCTLS

__version__ = "0.1.0"

__all__ = ["CPUS", "KERNELS", "NICS", "OUTCOMES", "SYSCTLS", "Device", "Fib", "KnobError",
           "PacketTrace", "Result", "Route", "Router", "RoutelabError", "Rule", "__version__"]
