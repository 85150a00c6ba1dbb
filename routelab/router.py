"""The router and its run: a dispatcher over the model's stages.

Kernel: the forwarding path as a whole -- net/core/dev.c (netif_rx,
net_rx_action, dev_queue_xmit), kernel/softirq.c, net/ipv4/ip_input.c,
route.c, ip_forward.c, ip_output.c, icmp.c (2.4.24, 2.6.0).

How a run works (see ``docs/design.md``):

1. The stateless stages run on whole arrays of packets first
   (:mod:`routelab.prepare`): header checks, the FIB lookup, ``ip_forward``'s
   TTL test and ``skb_cow`` decision, fragmentation, and what they cost.
2. :meth:`Run.dispatch` then takes, in time order, the next offered packet
   or the next packet born in the run (a host's reply), fires the timers due
   by then, and hands the packet to the stage functions in the kernel's
   order: the device (``nic_rx`` / ``netif_rx``), the CPU
   (``net_rx_action`` / ``do_softirq``), ``ip_route_input``, then
   ``dev_queue_xmit`` or the ICMP and local-delivery stages.  Each stage is
   a function or method of its kernel module, and writes its costs and
   drops into the run's ledger.
3. The outputs are gathered into a :class:`~routelab.result.Result`, plain
   data with no live objects.

Simplifications are documented where they happen (each stage's docstring).
"""

from __future__ import annotations

import gc
import math
from bisect import bisect_right

import cython
import numpy as np

from . import _malloc
from . import costs as _costs
from .core.dev import Device, NetDevice, SoftnetData, dev_xmit_forwarded, flush_tx
from .core.dst import DstEntry, dst_release
from .core.neighbour import NEIGH_DROP, NEIGH_QUEUED
from .core.rcu import Rcu
from .core.sched import Task, loop_runqueue
from .core.skbuff import PacketTrace, ip_to_int
from .core.softirq import MAX_SOFTIRQ_RESTART, Cpu, TimerTick
from .errors import KnobError
from .hardware import CpuProfile, cpu_profile
from .hosts import Host, kind_mask
from .hosts.echo import PingLog
from .ipv4.arp import Arp, RunSink, every_host_answers
from .ipv4.fib import Fib
from .ipv4.icmp import ICMP_DEST_UNREACH, ICMP_TIME_EXCEEDED, Icmp
from .ipv4.ip_input import ip_local_deliver
from .ipv4.route import RouteCache, ip_error, ip_rt_send_redirect
from .ipv4.route20 import Cache20
from .kernels import KernelProfile, kernel_profile
from .prepare import (
    C_ARP,
    C_FRAGNEED,
    C_FWD,
    C_HDR,
    C_LOCAL,
    C_MARTIAN,
    C_NOROUTE,
    C_REDIR,
    C_TTL,
)
from .result import OUTCOMES, DeviceInfo, Result, RunConfig
from .result.accumulate import Accumulator
from .result.counters import Counters
from .result.samples import Samples
from .seams import RunSeams
from .sim.clock import Clock, Timer
from .sim.columns import Packets
from .sim.ledger import NO_DROP, Ledger
from .sim.schedule import Schedule
from .sysctl import resolve_sysctl
from .traffic import MAX_PACKETS, TraceWindows
from .windows import RunWindows

__all__ = ["Device", "Router", "Run", "OUTCOMES"]

OC = OUTCOMES
INF = math.inf
# the packet classes as C constants when compiled
K_FWD, K_HDR, K_MARTIAN, K_TTL, K_FRAGNEED, K_LOCAL, K_NOROUTE, K_REDIR, K_ARP = (
    C_FWD, C_HDR, C_MARTIAN, C_TTL, C_FRAGNEED, C_LOCAL, C_NOROUTE, C_REDIR, C_ARP)
C_REFUSED = -1            # the route lookup refused it (martian, dst cache overflow)
# outcomes and ICMP types as constants (C ints when compiled)
O_FORWARDED, O_TTL, O_FRAG_NEEDED = OC["forwarded"], OC["drop_ttl"], OC["drop_frag_needed"]
O_NO_ROUTE, O_MARTIAN, O_HDR = OC["drop_no_route"], OC["drop_martian"], OC["drop_hdr"]
O_QDISC, O_BACKLOG, O_MISSED = OC["drop_qdisc"], OC["drop_backlog"], OC["drop_rx_missed"]
O_HELD, O_NEIGH_DROP = OC["held_neigh"], OC["drop_neigh"]
N_QUEUED, N_DROP = NEIGH_QUEUED, NEIGH_DROP
T_TIME_EXCEEDED, T_DEST_UNREACH = ICMP_TIME_EXCEEDED, ICMP_DEST_UNREACH
NOT_DROPPED = NO_DROP
# Runs with more offered packets than this keep only outcome/device/kind/tag
# per packet (no times), so a 50 s flood fits a 2 GB server.
KEEP_TIMES_MAX = 4_000_000
# Compiled, the dispatcher asks for its columns' data this many packets ahead,
# once per cache line (8 values): with a dozen columns read side by side the
# CPU's own stream prefetcher falls behind.  A hint only (see route.pxd);
# 64-256 measured alike (mixed: ~14 % faster, hit ~6 %, paired runs).
_COL_AHEAD = 128


def _no_rcu_callbacks(obj) -> None:
    raise AssertionError(f"call_rcu of {obj!r}: nothing is freed through RCU without a "
                         "route cache in this model")


class Router:
    """A Linux router of a given kernel and CPU.

    Parameters
    ----------
    kernel : str
        Kernel profile (routelab.kernels.KERNELS).
    cpu : str
        CPU profile (routelab.hardware.CPUS).
    devices : list of Device
    fib : Fib
    sysctl : dict, optional
        Overrides of routelab.sysctl.SYSCTLS values (``None`` = default).
    ncpus : int, optional
        CPUs used (default: the profile's count).
    user_task : bool
        A CPU-bound user process runs on every CPU (the gettimeofday loop
        of story 2), scheduled with ksoftirqd by each CPU's 2.6.0 O(1)
        runqueue (routelab.core.sched).  Without it idle time is idle.
    tasks : list of dict, optional
        Further tasks on every CPU (with ``user_task``): keyword arguments
        of :class:`routelab.core.sched.Task` (``name``, ``nice``, ``kind``
        "cpu" or "sleeper", ``burst`` and ``sleep`` in ms, ``sleep_avg_ms``).
    seed : int
        Seed of the run's random numbers (hash keys, timer phases).
    hosts : dict, optional
        ``{device index: Host}``: the host beyond a device's wire (it sees
        the packets of its kinds the router transmits there and may answer;
        see routelab.hosts, e.g. ``EchoHost`` for ping's far end).
    local_hosts : dict, optional
        ``{IP protocol: Host}``: what ``ip_local_deliver`` hands local
        packets of that protocol to.
    arp_exists : callable, optional
        ``arp_exists(dev, addr) -> seconds or None``: how long after an ARP
        request for ``addr`` on device ``dev`` its reply arrives, ``None`` if
        no host has that address.  Default: every address answers after
        ``routelab.ipv4.arp.ARP_REPLY_S``.
    arp_static : iterable of (device, address), optional
        Neighbours already resolved (REACHABLE) when the run starts: a router
        that has been up a while knows its gateways.
    neighbours : bool
        Model the neighbour table and ARP (the kernels with a route cache
        have them); ``False`` leaves them out (every next hop resolved, no
        cost), as the event-loop reference needs.
    cost_overrides : dict, optional
        ``{function: reference cycles}`` replacing routelab.costs.PATH.
    trace_neighbours : bool
        Record the neighbour table's events (created, solicit, queued,
        queue drop, failed, resolved, destroyed, forced gc, table full, and
        the ICMP and route expiry of each failed packet) in
        ``Result.extra["neigh_log"]`` as ``(time, event, address, state,
        info)`` tuples.  For small teaching runs: the log grows without
        bound.
    """

    def __init__(self, kernel: str, cpu: str, devices: list[Device], fib: Fib,
                 sysctl: dict | None = None, ncpus: int | None = None,
                 user_task: bool = False, seed: int = 0, hosts: dict | None = None,
                 local_hosts: dict | None = None, arp_exists=None, arp_static=(),
                 neighbours: bool = True, cost_overrides: dict | None = None,
                 trace_neighbours: bool = False, tasks: list | None = None) -> None:
        self.kernel: KernelProfile = kernel_profile(kernel)
        self.cpu: CpuProfile = cpu_profile(cpu)
        self.ncpus = self.cpu.ncpus if ncpus is None else ncpus
        if not 1 <= self.ncpus <= 64:
            raise KnobError("cpus", ncpus, "an integer in [1, 64]")
        if not devices:
            raise KnobError("devices", devices, "at least one Device")
        for d in devices:
            if not 0 <= d.cpu < self.ncpus:
                raise KnobError(f"{d.name}.cpu", d.cpu, f"an integer in [0, {self.ncpus - 1}]")
        for rt in fib.routes:
            if rt.oif >= len(devices):
                raise KnobError(f"route {rt.prefix} oif", rt.oif,
                                f"an interface index in [0, {len(devices) - 1}]")
        self.devices = devices
        self.fib = fib
        self.user_task = bool(user_task)
        self.tasks = [dict(t) for t in (tasks or [])]
        if self.tasks and not self.user_task:
            raise KnobError("tasks", len(self.tasks), "no further tasks without user_task=True")
        for t in self.tasks:
            try:
                Task(**t)
            except (TypeError, ValueError) as e:
                raise KnobError("tasks", t, f"keyword arguments of a Task ({e})") from None
            if t.get("kind", "cpu") not in ("cpu", "sleeper"):
                raise KnobError("tasks", t, "kind 'cpu' or 'sleeper'")
        self.seed = int(seed)
        self.hosts = dict(hosts or {})
        for d, h in self.hosts.items():
            if not (isinstance(d, int) and 0 <= d < len(devices)):
                raise KnobError("hosts", d, f"a device index in [0, {len(devices) - 1}]")
            if not isinstance(h, Host):
                raise KnobError(f"hosts[{d}]", h, "a routelab.hosts.Host")
        self.local_hosts = dict(local_hosts or {})
        for proto, h in self.local_hosts.items():
            if not (isinstance(proto, int) and 0 <= proto <= 255) or not isinstance(h, Host):
                raise KnobError("local_hosts", proto, "{IP protocol 0-255: Host}")
        if arp_exists is not None and not callable(arp_exists):
            raise KnobError("arp_exists", arp_exists, "a callable (dev, addr) -> seconds or None")
        self.arp_exists = arp_exists if arp_exists is not None else every_host_answers
        self.neighbours = bool(neighbours) and self.kernel.neighbours
        self.trace_neighbours = bool(trace_neighbours)
        self.arp_static = []
        for item in arp_static:
            dev, addr = item
            if not (isinstance(dev, int) and 0 <= dev < len(devices)):
                raise KnobError("arp_static device", dev,
                                f"a device index in [0, {len(devices) - 1}]")
            self.arp_static.append((dev, ip_to_int(addr) if isinstance(addr, str) else int(addr)))
        self.sysctl = resolve_sysctl(self.kernel, sysctl or {})
        self.costs = _costs.cost_table(self.cpu, cost_overrides)

    def config(self) -> RunConfig:
        """What a result keeps of this router (plain data)."""
        devs = []
        for d in self.devices:
            napi = bool(d.profile.napi and self.kernel.napi)
            devs.append(DeviceInfo(d.name, d.nic, d.cpu, d.mtu, d.speed, napi, d.profile,
                                   not (napi or d.pair)))
        devs = tuple(devs)
        return RunConfig(self.kernel, self.cpu, self.ncpus, devs, dict(self.sysctl), self.costs,
                         self.user_task, self.seed)

    # ------------------------------------------------------------------------
    def run(self, trace: PacketTrace | TraceWindows, duration: float, *, bin_s: float = 0.01,
            record_every: float | None = None, progress=None,
            keep_times: bool | None = None) -> Result:
        """Push ``trace`` through the router and return a :class:`Result`.

        Parameters
        ----------
        trace : PacketTrace or TraceWindows
            Offered packets (``iif`` indexes ``devices``).  A
            :class:`~routelab.traffic.TraceWindows` is generated and simulated
            window by window, so memory stays bounded on long runs.
        duration : float
            Length of the run, seconds (time series cover [0, duration]).
        bin_s : float
            Width of the CPU-load time bins.
        record_every : float, optional
            Period of the cache/GC state samples (default: bin_s).
        progress : callable(float), optional
            Called with the fraction of the run done after each window (at
            most ~100 times; once at the end for a plain trace).
        keep_times : bool, optional
            Keep per-packet arrival, service-start and departure times in
            ``Result.packets`` (default: only if at most ``KEEP_TIMES_MAX``
            packets are offered).
        """
        # The run allocates millions of small objects and frees them again without
        # making reference cycles; Python's cyclic collector would walk the whole
        # heap over and over for nothing (~8 % of the run), so it is paused.
        _malloc.tune()      # large freed blocks stay in the process for the next run
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            run = Run(self, trace, duration, bin_s, record_every or bin_s, progress, keep_times)
            return run.dispatch()
        finally:
            if was_enabled:
                gc.enable()


class Run(RunWindows, RunSeams):
    """One run of a router: its stage objects and the dispatcher.

    The stage objects, all public, are what the run calls for each packet
    (and what ``benchmarks/reference_eventloop.py`` drives in its own event
    order): ``devices`` (:class:`~routelab.core.dev.NetDevice`), ``softnet``
    (:class:`~routelab.core.dev.SoftnetData` per CPU), ``cpus``
    (:class:`~routelab.core.softirq.Cpu`), ``cache``
    (:class:`~routelab.ipv4.route.RouteCache` or ``None``), ``icmp``
    (:class:`~routelab.ipv4.icmp.Icmp`), ``clock`` and ``ledger``.  Hosts
    use :meth:`inject`, :meth:`header`, ``clock`` and ``pings``.
    """

    def __init__(self, r: Router, trace, duration: float, bin_s: float = 0.01,
                 record_every: float | None = None, progress=None,
                 keep_times: bool | None = None) -> None:
        record_every = bin_s if record_every is None else record_every
        if not isinstance(duration, (int, float)) or duration <= 0 or not math.isfinite(duration):
            raise KnobError("duration", duration, "a positive number of seconds")
        if not isinstance(bin_s, (int, float)) or not 0 < bin_s <= duration \
                or duration / bin_s > 1_000_000:
            raise KnobError("bin_s", bin_s, f"a number in (0, {duration:g}] s giving at most "
                            "1,000,000 bins")
        if not isinstance(record_every, (int, float)) or record_every <= 0 \
                or duration / record_every > 1_000_000:
            raise KnobError("record_every", record_every,
                            "a positive number of seconds giving at most 1,000,000 samples")
        if len(trace) > MAX_PACKETS:
            raise KnobError("offered packets", len(trace),
                            f"at most {MAX_PACKETS:,} packets per run (split the trace)")
        if progress is not None and not callable(progress):
            raise KnobError("progress", progress, "a callable taking the fraction done")
        self.r = r
        self.trace = trace
        self.duration = duration
        self.bin_s = bin_s
        self.record_every = record_every
        self.progress = progress
        self.keep_times = len(trace) <= KEEP_TIMES_MAX if keep_times is None \
            else bool(keep_times)
        self.rng = np.random.default_rng(r.seed)
        k = r.kernel
        self.ledger = Ledger()
        self.clock = Clock()
        self.clock.runner = self
        self.sch = Schedule(0.0)         # born packets, deliveries, samples
        # (registered first: on ties it fires before the kernel timers)
        tick = TimerTick(self.clock) if k.rcu != "none" else None
        self.cache: RouteCache | None = None
        # (2.0's own cache and ARP table: routelab.ipv4.route20)
        self.cache20 = Cache20(r.costs.fn) if k.cache20 else None
        if k.route_cache:
            self.cache = RouteCache(k, r.sysctl["rt_buckets"], r.sysctl, r.ncpus, r.costs.fn,
                                    r.sysctl["rcu_maxbatch"], self.rng, self.ledger, self.clock)
            self.cache.on_rekey = self._rekeyed
        # RCU, the neighbour table and ARP belong to the kernel, not to its
        # route cache: a kernel without a cache (3.6) has them too
        rcu: Rcu | None = self.cache.rcu if self.cache is not None else (
            Rcu(k.rcu, r.ncpus, r.sysctl["rcu_maxbatch"], _no_rcu_callbacks, r.costs.fn)
            if k.rcu != "none" else None)
        self.softnet = [SoftnetData(c, r.sysctl["netdev_max_backlog"]) for c in range(r.ncpus)]
        self.devices: list[NetDevice] = []
        for i, d in enumerate(r.devices):
            txq_len = d.txqueuelen if d.txqueuelen is not None else r.sysctl["txqueuelen"]
            nd = NetDevice(i, d, d.profile.napi and k.napi, self.softnet[d.cpu],
                           d.profile.tx_ring + txq_len, self.ledger)
            nd.txc_timer = self.clock.timer(f"{d.name} tx completion", nd.tx_complete_timer,
                                            d.cpu, raw=True)
            self.devices.append(nd)
        if self.cache is not None:
            self.cache.devices = self.devices
        restarts = 1 if k.softirq == "2.4" else MAX_SOFTIRQ_RESTART
        self.cpus = [Cpu(c, k.hz, r.sysctl["netdev_max_backlog"], r.costs.fn["softirq_entry"],
                         loop_runqueue(c, r.ncpus, r.tasks) if r.user_task else None, rcu,
                         self.softnet[c], self.devices, self.ledger, restarts)
                     for c in range(r.ncpus)]
        if tick is not None:
            tick.bind(self.cpus, rcu, self.devices, self.ledger, k.hz, r.user_task)
        self.icmp = Icmp(self.devices, r.costs.fn)
        # the neighbour table and ARP (when the kernel profile models them), and
        # their sink: what becomes of the packets the table holds
        self.arp: Arp | None = None
        self.neigh: RunSink | None = None
        local = [ip_to_int(a) for a in r.fib.local_addrs]
        if r.neighbours:
            self.neigh = RunSink(self.clock, r.costs.fn, self.devices, self.cpus, self.icmp,
                                 self.ledger, self.inject, local[0] if local else 0,
                                 [d.speed for d in r.devices],
                                 exists=r.arp_exists, local_addrs=local, sysctl=r.sysctl,
                                 hz=k.hz, rng=np.random.default_rng([r.seed, 7]))
            self.neigh.schedule = self.sch
            self.arp = self.neigh.arp
            if self.cache is not None:
                self.cache.arp = self.arp
                self.cache.dst.neigh_release = self.arp.tbl.neigh_release
            for dev, addr in r.arp_static:
                self.arp.prime(dev, addr, 0.0)
            if r.trace_neighbours:
                self.arp.tbl.log = []
        self._wno = 0                    # the current window's number
        self.pings = PingLog()
        self.local_hosts = r.local_hosts
        self._slot_timers = self.ledger.slot("timers")
        self._slot_local_out = self.ledger.slot("ip_output (local)")
        self._host_slots: dict = {}
        self._slot_irq = self.ledger.slot("rx_drop_irq")
        self._drop_irq = _costs.composed(r.costs.fn, "rx_drop_irq")
        self.counters = Counters(len(r.devices), r.ncpus, [dd.cpu for dd in r.devices],
                                 K_HDR, K_ARP)
        self._mib = self.counters.mib    # (ip_output counts OutRequests)
        self.samples = Samples()
        self.over = False                # past the end: hosts' reactions bear nothing
        self.refused_after_end = 0
        self._born: dict = {}            # their header fields, by j
        self._kept: dict = {}            # headers of packets kept past their window, by ~k
        self._inject_cache: dict = {}
        self._primed: list = []
        self._i0 = 0                     # first offered packet not yet looked up
        self._t_end = math.inf           # the current window's end
        self._last_window = True
        self.pk = None
        self.tr = None
        for d, h in r.hosts.items():
            h.start(self, d)
            self.devices[d].host = h
            self.devices[d].host_mask = kind_mask(h.kinds)
        for h in r.local_hosts.values():
            h.start(self, -1)
        # (priming resolved neighbours charged the table's slots: set-up, not the run)
        self.ledger.clear()

    # -- the clock's runner: a kernel timer runs as softirq work on its CPU --------
    def run_timer(self, timer: Timer, due: float) -> None:
        """Run ``timer``'s handler as of ``due`` on its CPU, after the softirq
        work already queued there (the TX completions up to then have
        happened); charge its time."""
        cpu = self.cpus[timer.cpu]
        flush_tx(self.devices, cpu.busy if cpu.busy > due else due)
        mark = self.ledger.total
        w = timer.fire(due)
        # (handlers with slots of their own -- dst_run_gc, the neighbour
        # table's -- charged them: "timers" gets the rest)
        self.ledger.charge_rest(self._slot_timers, w, mark)
        cpu.charge(due, w)

    def _rekeyed(self, now: float) -> None:
        """rt_secret_rebuild drew a new hash key: re-hash the packets still to come."""
        tr, pk = self.tr, self.pk
        i0 = self._i0
        if tr is None or i0 >= len(tr):
            return
        sub = slice(i0, len(tr))
        h = self.cache.rt_hash(tr.daddr[sub], tr.saddr[sub], tr.iif[sub], tr.tos[sub])
        col = pk.cols["h"]
        if isinstance(col, list):
            col[i0:len(tr)] = h.tolist()
        else:   # (an array the typed views read: written in place)
            pk.array("h", len(tr))[i0:] = h

    # -- the dispatcher -------------------------------------------------------------
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(j=cython.Py_ssize_t, lo=cython.Py_ssize_t, hi=cython.Py_ssize_t,
                   n0=cython.Py_ssize_t, jp=cython.Py_ssize_t, i=cython.Py_ssize_t,
                   d=cython.long, cls=cython.long, ok=cython.long, has_cache=cython.bint,
                   noref=cython.bint, last=cython.bint, t=cython.double, start=cython.double,
                   svc=cython.double, fin=cython.double, w=cython.double,
                   t_end=cython.double, horizon=cython.double, drop_irq=cython.double,
                   e=DstEntry, dv=NetDevice, cp=Cpu, rc=RouteCache,
                   lg=Ledger, clock=Clock, icmp=Icmp, pk=Packets, devs=list, cpus=list,
                   sch=Schedule, slot_irq=cython.long, nr=cython.long)
    def dispatch(self) -> Result:
        """Run every event in time order; return the result.

        The next event is the earliest of: the next offered packet, the next
        packet born in the run, the next delivery to a host, the next timer
        and the next state sample (see :mod:`routelab.sim.schedule`; ties:
        deliveries, timers, samples, then packets).  Packets are taken in
        stretches of offered ones up to the next born one; before a packet
        is looked at, every delivery, timer and sample due by its arrival
        happens.  When a window has no packet left, the events up to its end
        happen, so timers run (and hosts send) with no traffic at all.

        The rule at the end of the run: timers and samples due at or before
        ``duration`` happen, later ones do not.  Packets do not stop: a packet
        born by then is carried through the router whenever it arrives, and
        every packet the router sends is delivered.  A host may still answer
        a packet that reached the router by ``duration`` (the reply to a ping
        still queued at the end comes back), but not a packet that arrived
        after it: :meth:`inject` refuses that reaction and counts it in
        ``Result.extra["refused_after_end"]``, so even a closed loop with no
        timer (data and ACKs) ends.
        """
        lg, clock, rc, icmp, sch = self.ledger, self.clock, self.cache, self.icmp, self.sch
        devs, cpus = self.devices, self.cpus
        has_cache = rc is not None
        noref = not has_cache and self.neigh is not None
        sysctl = self.r.sysctl
        drop_irq = self._drop_irq
        slot_irq = self._slot_irq
        acc = Accumulator(self.keep_times, self.r.ncpus, self._edges())
        n_offered = 0
        trace = self.trace
        if isinstance(trace, TraceWindows):
            windows = trace.windows()
            nwin = max(1, int(math.ceil(self.duration / trace.window - 1e-9)))
        else:
            windows, nwin = [(self.duration, trace)], 1
        report_every = max(1, nwin // 100)
        for wno, (t_end, tr) in enumerate(windows):
            last = wno + 1 == nwin
            self._t_end, self._last_window, self._wno = t_end, last, wno
            horizon = INF if last else t_end
            p, pk = self._open_window(tr)
            n0 = pk.n0
            n_offered += n0
            i = 0
            while True:
                # next stretch: offered packets up to the next born one, or that one
                if sch.bnt < INF and (i >= n0 or sch.bnt < pk.t[i]):
                    lo = sch.born_pop()
                    hi = lo + 1
                elif i < n0:
                    lo = i
                    hi = bisect_right(pk.cols["t"], sch.bnt, i, n0) if sch.bnt < INF else n0
                    i = hi
                else:
                    # no packet left in the window: what is due up to its end
                    self._i0 = n0
                    lg.born = 0
                    self.events_until(horizon)
                    if lg.born:
                        lg.born = 0
                        continue
                    break
                for j in range(lo, hi):
                    if cython.compiled and (j & 7) == 0 and j + _COL_AHEAD < hi:
                        jp = j + _COL_AHEAD
                        _prefetch_columns(pk, jp)  # noqa: F821 (router.pxd)
                    t = pk.t[j]
                    d = pk.dev[j]
                    dv = cython.cast(NetDevice, devs[d])
                    if t < dv.full_until and pk.fifo[j] <= dv.full_slots:
                        continue         # RX ring and NIC FIFO still full: missed
                    # ---- deliveries, timers and state samples due by now ----
                    if t >= clock.nt or t >= sch.nt:
                        self._i0 = j if j < n0 else i
                        self.events_until(t)
                        if lg.born:           # something made a packet: pick afresh
                            lg.born = 0
                            i = j if j < n0 else i
                            if j >= n0:
                                sch.born_push(t, j)
                            break
                    # ---- the device: NIC ring (NAPI) or netif_rx backlog ----
                    ok = dv.nic_rx(t, pk.fifo[j])
                    cp = cython.cast(Cpu, cpus[dv.cpu])
                    if ok <= 0:
                        if ok < 0:   # netif_rx refused it: the hard IRQ still ran
                            lg.drop(j, O_BACKLOG)
                            cp.charge(t, drop_irq)
                            lg.charge(slot_irq, drop_irq)
                        continue
                    # ---- the CPU: net_rx_action, do_softirq, ksoftirqd ----
                    start = cp.net_rx_action(t, dv.weight, pk.cost[j])
                    dv.rxq.push(start)
                    pk.t_start[j] = start
                    # ---- ip_route_input ----
                    cls = pk.cls[j]
                    e = None
                    if has_cache and cls != K_HDR and cls != K_ARP:
                        e = rc.ip_route_input(pk, j, start, cp.num)
                        if e is None and lg.why != NOT_DROPPED:
                            cls = C_REFUSED
                    svc = lg.svc
                    fin = start + svc
                    if cls == K_REDIR:
                        # ip_forward: out by the device it came in on -- maybe a redirect
                        w = ip_rt_send_redirect(icmp, sysctl, d, start, e, pk.iwire[j],
                                                pk.saddr[j])
                        svc += w
                        fin += w
                    nr = 0
                    if e is not None and e.hh is not None and not e.hh.connected \
                            and (cls == K_FWD or cls == K_REDIR):
                        # ip_finish_output2: the neighbour is not CONNECTED
                        nr = self.neigh.ip_finish_output2(j, e, fin)
                        w = lg.t
                        svc += w
                        fin += w
                    elif noref and (cls == K_FWD or cls == K_REDIR):
                        # ip_finish_output2 with no route cache: a neighbour lookup per packet
                        nr = self.neigh.ip_finish_output2_noref(
                            j, pk.oif[j], pk.gw[j] if pk.gw[j] else pk.key[j] >> 32, fin)
                        w = lg.t
                        svc += w
                        fin += w
                    cp.served(start, svc, fin)
                    if nr != 0:
                        if nr == N_QUEUED:
                            lg.drop(j, O_HELD)      # until the neighbour decides
                        else:
                            lg.drop(j, O_NEIGH_DROP)
                            dst_release(e)
                    elif cls == K_FWD or cls == K_REDIR:
                        # ---- ip_forward -> ip_output -> dev_queue_xmit -> the wire ----
                        dev_xmit_forwarded(cython.cast(NetDevice, devs[pk.oif[j]]), lg, sch, pk,
                                           j, fin, e)
                    elif cls != C_REFUSED:
                        _not_forwarded(self, lg, icmp, pk, j, cls, d, fin, e)
                    if lg.born:
                        # a packet was born: pick the next packet afresh
                        lg.born = 0
                        if j < n0:
                            i = j + 1
                        break
            self._close_window(tr, p, pk, acc)
            if progress_due(self.progress, wno, nwin, report_every):
                self.progress(min(1.0, t_end / self.duration))
        return self._finish(acc, n_offered)

    @cython.locals(t=cython.double, tt=cython.double, td=cython.double, tc=cython.double,
                   sch=Schedule,
                   clock=Clock, lg=Ledger)
    def events_until(self, t: float) -> None:
        """Everything due by ``t`` but packets, one instant at a time, in time
        order: deliveries to hosts, timers (ties: deliveries first), then the
        state samples.  A reaction may schedule more; they happen too if due
        by ``t``.  As soon as one bears a packet (``ledger.born``) this
        returns, so that the dispatcher takes that packet before anything
        later happens."""
        sch, clock, lg = self.sch, self.clock, self.ledger
        tt = t if t < self.duration else self.duration   # timers stop at the end
        while True:
            td = sch.dnt
            tc = clock.nt
            if tc <= tt:
                tc = clock.next_due()     # (nt is only a lower bound)
            if td <= t and td < INF and (td <= tc or tc > tt):
                td, host, j = sch.delivery_pop()
                if td > self.duration:
                    # after the end, a host may still answer a packet of the run
                    # (one that reached the router by then), not an answer
                    self.over = self.field(j, "t") > self.duration
                host.deliver(j, td)
            elif tc <= tt:
                clock.run_due(tc)         # the timers due at that instant
            else:
                break
            if lg.born:
                return
        if sch.rec_next <= tt:
            sch.set_rec_next(self._record_until(tt, sch.rec_next))


@cython.locals(cls=cython.long, d=cython.long, fin=cython.double, j=cython.Py_ssize_t)
def _not_forwarded(run, lg: Ledger, icmp: Icmp, pk: Packets, j: int, cls: int, d: int,
                   fin: float, e) -> int:
    """Packets that are not plainly forwarded, at the end of their service:
    ip_forward's ICMP errors, local delivery, ip_error, drops.  (A module
    function, so that compiled the dispatcher calls it in C.)"""
    if cls == K_TTL:
        lg.drop(j, O_TTL)                # ip_forward: ICMP time exceeded
        icmp.icmp_send(T_TIME_EXCEEDED, d, fin, pk.iwire[j], pk.saddr[j])
    elif cls == K_FRAGNEED:
        lg.drop(j, O_FRAG_NEEDED)        # DF and too big: never rate limited
        icmp.icmp_send(T_DEST_UNREACH, d, fin, pk.iwire[j], pk.saddr[j], False)
    elif cls == K_LOCAL:
        ip_local_deliver(run, pk, j, d, fin)
    elif cls == K_NOROUTE:
        lg.drop(j, O_NO_ROUTE)
        ip_error(icmp, e, pk.rtype[j], pk.key[j], d, fin, pk.iwire[j], pk.saddr[j])
    elif cls == K_ARP:
        run.neigh.arp_rcv(j, d, fin)
    elif cls == K_MARTIAN:
        lg.drop(j, O_MARTIAN)
    else:  # K_HDR
        lg.drop(j, O_HDR)
    dst_release(e)                       # kfree_skb (no route: nothing held)
    return 0


def progress_due(progress, wno: int, nwin: int, every: int) -> bool:
    """Whether to report progress after window ``wno`` (of ``nwin``)."""
    return progress is not None and ((wno + 1) % every == 0 or wno + 1 == nwin)
