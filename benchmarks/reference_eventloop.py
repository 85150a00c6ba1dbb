"""A discrete-event reference of routelab's forwarding path (a test oracle).

Kernel: the same model as :mod:`routelab.router` -- net/core/dev.c
(netif_rx, net_rx_action, dev_queue_xmit), kernel/softirq.c
(__do_softirq), net/ipv4/route.c, net/core/dst.c (2.4.22, 2.6.11).

``routelab.Router.run`` walks packets in arrival order in one tight loop and
computes queueing by Lindley recursion.  This module re-derives the same
model the slow, obvious way: a priority queue of events, one event object
per packet event, written for clarity rather than speed.  It exists to check
the fast loop (``tests/test_reference_equivalence.py``) and to measure how
much faster the loop is (``benchmarks/bench_forwarding.py``); it is never
used by the package.

What is shared and what is re-derived
-------------------------------------
Shared (these *are* the model): the array stages
:func:`routelab.prepare.prepare` / :func:`routelab.prepare.classify`
(per-packet class, state-independent cost, output device, fragment count,
wire time, hash bucket) and the public stage objects of a
:class:`routelab.router.Run` built for the same router and trace -- its
:class:`~routelab.ipv4.route.RouteCache` with the
:class:`~routelab.core.dst.DstOps` and :class:`~routelab.core.rcu.Rcu`
inside it (slow path, GC, ``rt_intern_hash``, ``dst_run_gc``, RCU
batches) and its :class:`~routelab.ipv4.icmp.Icmp` (the ICMP rate-limit
buckets).  The run's own dispatcher is never called.

Re-derived here, independently of ``Run.dispatch``: the event order, the RX
ring / backlog occupancy, the CPU as a FIFO server, the softirq pass
bookkeeping (a pass ends after ``netdev_max_backlog`` packets or once more
than one jiffy has ticked since it began; each pass start costs
``softirq_entry``; ``do_softirq``'s restarts -- 10 in 2.6, none in 2.4 --
then ksoftirqd), the route-cache hit path (chain walk), the output qdisc
(``tx_ring + txqueuelen`` packets) and link serialisation, TX completions
that drop dst references, and the timers (``dst_run_gc``,
``rt_check_expire``, ``rt_secret_rebuild``, RCU ticks).

The model as this reference states it
-------------------------------------
* Each CPU is a FIFO server.  Its jobs are packets (entering at arrival),
  timer handlers (entering at their deadline, CPU 0), the hard-IRQ time of a
  packet dropped by ``netif_rx`` and RCU tasklets run from a tick; jobs are
  served in order of entry time (a timer re-armed into the past by a late
  handler takes its place among the waiting jobs by its deadline).  A job's
  effects on shared state (route lookup, slow path, GC, timer handler)
  happen when its *service starts*; a timer handler acts with its deadline
  as ``now`` and is skipped if, by then, earlier work moved the deadline.
* A packet occupies its RX ring (NAPI device) or the CPU backlog
  (``netif_rx``) from arrival until its service starts.
* A packet that arrives when its CPU has been idle since *strictly before*
  its arrival starts a new ``net_rx_action`` pass; otherwise it continues
  the current pass (a pass ends, with ``time_squeeze`` counted, after
  ``netdev_max_backlog`` packets or when ``jiffies - start > 1``, noticed
  only between ``dev->poll`` calls: every ``weight`` packets
  of a NAPI device, every packet of the backlog).
* A NAPI device's RX ring holds ``ring`` packets and its FIFO
  ``fifo_slots`` more: a packet that finds the ring full but the FIFO not
  counts in ``rnbc`` (e1000 RNBC) and waits; one that finds both full is
  missed (MPC: ``rx_missed`` and ``rx_fifo``).
* ``dev_queue_xmit`` happens when the packet's service ends; the qdisc holds
  every packet not yet off the wire; a TX completion (the last bit leaves)
  drops the packet's dst reference.
* ICMP errors the router originates (time exceeded, unreachable, prohibited)
  are decided when the packet's service ends, through ``ip_error``'s token
  bucket (per cache entry, per flow without a cache) and ``xrlim_allow``'s
  (per source); a redirect for a packet leaving by its input device is
  decided when its service starts (``ip_rt_send_redirect``: per entry, per
  source without a cache), queued at once, and its CPU time lengthens the
  packet's service.
* Ties at one instant: TX completions, then service ends (and the next
  job's start), then timers (RCU tick, dst GC, rt_check_expire,
  rt_secret_rebuild), then arrivals.  Timers fire up to the end of the
  run, whether packets still arrive or not.

Scope (what both implementations define, and where they are compared)
-------------------------------------------------------------------
* Every device's receive work is on CPU 0 (``Device.cpu == 0``); more CPUs
  may exist but stay idle.  On SMP, ``router.py`` deliberately lets the
  shared route cache see packets in arrival order, which no FIFO event
  model reproduces.
* No user task (``user_task=False``): the scheduler model of story 2 is out
  of scope.
* No hosts (``Router(hosts=..., local_hosts=...)`` must be empty): no packet
  is born in the run.  No neighbour layer (``Router(neighbours=False)``):
  every next hop is taken as resolved.  Ping requests and replies crossing the router are
  plain forwarded packets here.
* RCU (2.6 kernels, NAPI) is supported but compared only with one CPU
  (``ncpus=1``): with idle extra CPUs, ``router.py`` evaluates RCU ticks
  after the lookups of packets still queued on CPU 0.
* Kernels: ``2.0`` (FIB per packet, no cache), ``2.4.18``, ``2.4.24``,
  ``2.4.24-nocache`` (no RCU), and the 2.6 profiles on one CPU.

Two schedulers drive the same handlers: a plain ``heapq`` loop (the
default) and SimPy's event queue (``scheduler="simpy"``), so that the
benchmark can quote the fast loop's speed against both.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np

from routelab import OUTCOMES
from routelab.core.dst import dst_release
from routelab.core.skbuff import KIND
from routelab.core.softirq import MAX_SOFTIRQ_RESTART
from routelab.costs import composed
from routelab.ipv4.fib import RTN
from routelab.ipv4.icmp import RedirectState, redirect_allow
from routelab.ipv4.route import S_IN_HIT, S_IN_HLIST_SEARCH, STAT_FIELDS, RouteCache
from routelab.prepare import (
    C_FRAGNEED,
    C_FWD,
    C_HDR,
    C_LOCAL,
    C_MARTIAN,
    C_NOROUTE,
    C_REDIR,
    C_TTL,
    classify,
    prepare,
)
from routelab.router import Router, Run

__all__ = ["ReferenceResult", "check_scope", "reference_run"]

OC = OUTCOMES

# Event kinds, in the order they run when they fall on the same instant.
TX_DONE, CPU_DONE, TICK_RCU, TIMER_DST_GC, TIMER_CHECK_EXPIRE, TIMER_SECRET, ARRIVAL = range(7)
TIMER_KINDS = (TIMER_DST_GC, TIMER_CHECK_EXPIRE, TIMER_SECRET)

# Job kinds in a CPU's FIFO.
JOB_PACKET, JOB_TIMER, JOB_BUSY = range(3)

# ICMP rate limits (net/ipv4/icmp.c xrlim_allow, net/ipv4/route.c ip_error), seconds


# --------------------------------------------------------------------------- events
class Event:
    """One scheduled occurrence: a packet arrival, a service end, a TX completion, a timer."""

    __slots__ = ("time", "kind", "data")

    def __init__(self, time: float, kind: int, data) -> None:
        self.time = time
        self.kind = kind
        self.data = data


class HeapqScheduler:
    """Events ordered by (time, kind, insertion order) in a binary heap."""

    def __init__(self) -> None:
        self._heap: list = []
        self._seq = 0

    def schedule(self, ev: Event) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (ev.time, ev.kind, self._seq, ev))

    def run(self, handle) -> None:
        heap = self._heap
        while heap:
            ev = heapq.heappop(heap)[3]
            handle(ev)


class SimpyScheduler:
    """The same ordering on SimPy's event queue (priority = event kind).

    SimPy keys its queue on (now + delay, priority, event id); handlers use
    the exact time stored in each :class:`Event`, SimPy's clock only orders.
    """

    def __init__(self) -> None:
        import simpy

        self.env = simpy.Environment()
        self._handle = None

    def schedule(self, ev: Event) -> None:
        env = self.env
        sev = env.event()
        sev._ok = True
        sev._value = ev
        sev.callbacks.append(self._dispatch)
        env.schedule(sev, priority=ev.kind, delay=max(ev.time - env.now, 0.0))

    def _dispatch(self, sev) -> None:
        self._handle(sev._value)

    def run(self, handle) -> None:
        self._handle = handle
        self.env.run()


# --------------------------------------------------------------------------- CPU model
class Job:
    """Work for a CPU: a packet, a timer handler, or plain busy time."""

    __slots__ = ("kind", "j", "fresh", "timer", "due", "w", "dst", "extra", "first_after")

    def __init__(self, kind: int, j: int = -1, fresh: bool = False, timer: int = -1,
                 due: float = 0.0, w: float = 0.0) -> None:
        self.kind = kind
        self.j = j
        self.fresh = fresh
        self.timer = timer
        self.due = due
        self.w = w
        self.dst = None
        self.extra = 0.0      # CPU time added after the service was first costed (redirect)
        self.first_after = 0


class Cpu:
    """One CPU: a FIFO of jobs plus the softirq bookkeeping of ``router.py``."""

    def __init__(self) -> None:
        self.queue: list = []        # heap of (entry time, kind, seq, job)
        self.current: Job | None = None
        self.free_since = 0.0        # when the last job ended (CPU idle since then)
        self.pass_n = 0              # packets in the current net_rx_action pass
        self.pass_t0 = 0.0           # when the current pass began
        self.restarts = 0            # __do_softirq restarts so far
        self.in_ksoftirqd = False
        self.time_squeeze = 0
        self.ctxsw = 0
        self.ksoftirqd_wakeups = 0
        self.busy_s = 0.0
        self.ksd_left = -1           # ticks left of ksoftirqd's slice (-1: a full one)
        self.ksd_expiry = 0          # the tick that ends it while ksoftirqd runs

    def idle(self) -> bool:
        return self.current is None and not self.queue


# --------------------------------------------------------------------------- result
@dataclass
class ReferenceResult:
    """Per-packet outcomes and counters of a reference run (offered packets only)."""

    outcome: np.ndarray
    t_start: np.ndarray
    t_depart: np.ndarray
    counters: dict = field(default_factory=dict)
    events: int = 0


def add_oddities(rng: np.random.Generator, tr, inside: np.ndarray, bands: dict) -> None:
    """Turn slices of a trace into the odd cases the loop must get right.

    Shared by ``tests/test_reference_equivalence.py`` and
    ``bench_forwarding.py``.  One uniform draw per packet; ``bands`` maps a
    case to the ``(lo, hi)`` range of draws it takes (absent = none):
    ``ttl1`` (TTL 1), ``martian`` (source 127.0.0.1), ``bad_csum`` (header
    checksum error), ``local`` (echo requests to the router), ``unreach``,
    ``prohibit``, ``blackhole`` (destinations under such routes, see the
    callers' FIBs), ``df`` (DF set) and ``redirect`` (an inside packet to
    another inside host: out by the device it came in on).
    """
    u = rng.random(len(tr))

    def band(name: str) -> np.ndarray:
        lo, hi = bands.get(name, (0.0, 0.0))
        return (u >= lo) & (u < hi)

    tr.ttl[band("ttl1")] = 1
    tr.saddr[band("martian")] = np.uint32(0x7F000001)
    tr.hdr_err[band("bad_csum")] = 3
    local = band("local")
    tr.daddr[local] = np.uint32(0x0A01FFFE)
    tr.kind[local] = 2
    tr.proto[local] = 1
    unreach = band("unreach")
    tr.daddr[unreach] = np.uint32(0xC6120000) + rng.integers(
        0, 1000, int(unreach.sum())).astype(np.uint32)
    tr.daddr[band("prohibit")] = np.uint32(0xC6140001)
    tr.daddr[band("blackhole")] = np.uint32(0xC6150001)
    redirect = band("redirect") & (tr.iif == 0)
    tr.daddr[redirect] = inside[rng.integers(0, inside.size, int(redirect.sum()))]
    tr.df[band("df")] = True


def check_scope(router: Router) -> None:
    """Raise ValueError if ``router`` uses a feature the reference does not model."""
    if router.user_task:
        raise ValueError("reference: user_task=True is out of scope")
    if router.hosts or router.local_hosts:
        raise ValueError("reference: hosts (packets born in the run) are out of scope")
    if router.neighbours:
        raise ValueError("reference: the neighbour layer is out of scope (neighbours=False)")
    if any(d.cpu != 0 for d in router.devices):
        raise ValueError("reference: every device must hand its receive work to CPU 0")
    if router.kernel.route_cache and router.kernel.rcu != "none" and router.ncpus > 1:
        raise ValueError("reference: RCU kernels are compared on one CPU only (ncpus=1)")


def reference_run(router: Router, trace, duration: float,
                  scheduler: str = "heapq") -> ReferenceResult:
    """Run ``trace`` through the event-driven reference of ``router``.

    Parameters
    ----------
    router : routelab.Router
    trace : routelab.PacketTrace
    duration : float
        As for ``Router.run`` (only validated; time series are not kept).
    scheduler : {"heapq", "simpy"}
    """
    check_scope(router)
    sched = HeapqScheduler() if scheduler == "heapq" else SimpyScheduler()
    sim = _Reference(router, trace, duration, sched)
    return sim.run()


class _Reference:
    """State of one reference run: devices, CPUs, route cache, timers."""

    def __init__(self, router: Router, trace, duration: float, sched) -> None:
        self.r = r = router
        self.tr = trace
        self.sched = sched
        k = r.kernel
        # the model's stateful objects: a Run's public stage objects (its
        # dispatcher is never called)
        run = Run(r, trace, duration)
        self.cache: RouteCache | None = run.cache
        self.icmp_state = run.icmp
        # the stateless array stages (shared with the fast loop)
        p = prepare(r, self.cache, trace, run.cache20)
        classify(r, p)
        self.p = p
        self.n = n = len(trace)
        self.T = trace.t.tolist()
        self.dev = trace.iif.astype(np.int64).tolist()
        self.cls = p["cls"].tolist()
        self.cost = p["cost"].tolist()
        self.oif = p["oif"].tolist()
        self.nfrag = p["nfrag"].tolist()
        self.wire = p["wire_s"].tolist()
        self.key = p["key"].tolist()
        self.ik = p["ik"].tolist()
        self.H = p["h"].tolist()
        self.kind = trace.kind.tolist()
        self.c = r.costs.fn

        # devices
        devs = r.devices
        self.ndev = ndev = len(devs)
        self.napi = [bool(d.profile.napi and k.napi) for d in devs]
        self.ring = [d.ring for d in devs]
        self.weight = [d.weight if self.napi[di] else 1 for di, d in enumerate(devs)]
        self.txcap = [d.profile.tx_ring + (d.txqueuelen if d.txqueuelen is not None
                                           else r.sysctl["txqueuelen"]) for d in devs]
        # RX queues: one per NAPI device, one backlog per CPU for netif_rx devices
        self.rxq_of_dev = [di if self.napi[di] else ndev + devs[di].cpu for di in range(ndev)]
        self.rx_waiting = [0] * (ndev + r.ncpus)    # admitted, service not started
        self.throttle = [False] * r.ncpus
        self.backlog_max = r.sysctl["netdev_max_backlog"]
        self.budget = self.backlog_max
        self.qdisc_len = [0] * ndev                 # packets queued or on the wire
        self.link_free = [0.0] * ndev
        self.stats = {name: [0] * ndev for name in (
            "rx_packets", "rx_errors", "rx_dropped", "rx_missed", "rx_fifo", "rnbc",
            "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "qdisc_drops")}
        self.softnet_dropped = [0] * r.ncpus
        self.softnet_throttled = [0] * r.ncpus
        self.mib = dict.fromkeys(("InReceives", "InHdrErrors", "InAddrErrors", "ForwDatagrams",
                                  "InDelivers", "InDiscards", "OutRequests", "OutNoRoutes",
                                  "OutDiscards", "FragOKs", "FragFails", "FragCreates"), 0)
        self.icmp = dict.fromkeys(("OutMsgs", "OutTimeExcds", "OutDestUnreachs",
                                   "OutRedirects", "OutEchoReps", "InEchos", "RateLimited"), 0)
        self.redir: dict = {}        # redirect state per source (no route cache)

        # CPUs and the softirq structure
        self.cpus = [Cpu() for _ in range(r.ncpus)]
        self.hz = r.kernel.hz
        self.ksd_slice = max(10 * self.hz // 1000, 1)   # nice 19: MIN_TIMESLICE
        # do_softirq passes before ksoftirqd: 1 in 2.4 (a re-raised NET_RX is
        # not rerun), 10 in 2.6
        self.max_restart = 1 if r.kernel.softirq == "2.4" else MAX_SOFTIRQ_RESTART
        self.jiffy = 1.0 / r.kernel.hz
        rcu = self.cache.rcu if self.cache is not None else None
        self.rcu = rcu
        if rcu is not None:
            rcu.hz = self.hz
        self.use_rcu = rcu is not None and rcu.mode != "none"
        kinds = rcu.qs_kinds if rcu is not None else frozenset()
        self.qs_handler = "softirq_handler" in kinds
        self.qs_loop = "softirq_loop" in kinds

        # per-packet results
        self.outcome = [-1] * n
        self.t_start = [math.nan] * n
        self.t_depart = [math.nan] * n
        self.next_arrival = 0                      # index of the next packet to arrive
        # timers run up to the end of the run, with or without packets (the
        # fast loop's rule, routelab.router.Run.dispatch)
        self.t_last = duration
        self.armed = {kind: math.inf for kind in TIMER_KINDS}
        self.events = 0
        self.now = 0.0                  # the clock (monotone)
        self.seq = 0

    # -- timers -------------------------------------------------------------------
    def deadline(self, kind: int) -> float:
        cache = self.cache
        if kind == TIMER_DST_GC:
            return cache.dst.gc_timer_at
        if kind == TIMER_CHECK_EXPIRE:
            return cache.check_expire_at
        return cache.secret_at

    def sync_timers(self) -> None:
        """Schedule an event for every timer whose deadline changed."""
        if self.cache is None:
            return
        for kind in TIMER_KINDS:
            due = self.deadline(kind)
            if due != self.armed[kind]:
                self.armed[kind] = due
                if due <= self.t_last:
                    self.sched.schedule(Event(due, kind, None))

    def on_timer(self, ev: Event) -> None:
        if ev.time != self.armed[ev.kind]:
            return                                   # re-armed since: stale event
        job = Job(JOB_TIMER, timer=ev.kind, due=ev.time)
        job.first_after = bisect_left(self.T, ev.time)   # packets queued behind the timer
        self.enter(0, job, ev.time, ev.kind)

    def run_timer(self, job: Job, now: float) -> float:
        """A timer handler reaches the CPU: act as of its deadline; return its seconds."""
        if self.deadline(job.timer) != job.due:
            return -1.0                              # moved by earlier work: not due after all
        cache = self.cache
        if job.timer == TIMER_DST_GC:
            w = cache.dst.dst_run_gc(job.due)
        elif job.timer == TIMER_CHECK_EXPIRE:
            w = cache.rt_check_expire(job.due)
        else:
            w = cache.rt_secret_rebuild(job.due)
            self.rehash(job.first_after)
        self.sync_timers()
        return w

    def rehash(self, first: int) -> None:
        """New hash key: recompute the bucket of every packet not yet looked up."""
        if first >= self.n:
            return
        tr = self.tr
        sub = slice(first, self.n)
        self.H[first:] = self.cache.rt_hash(tr.daddr[sub], tr.saddr[sub], tr.iif[sub],
                                            tr.tos[sub]).tolist()

    def on_rcu_tick(self, ev: Event) -> None:
        """A timer tick on every CPU: idle CPUs pass a quiescent state and, if RCU
        is pending there, run the RCU tasklet (2.6.0 rcu_check_callbacks)."""
        t = ev.time
        nxt = (round(t * self.hz) + 1) / self.hz
        if nxt <= self.t_last:
            self.sched.schedule(Event(nxt, TICK_RCU, None))
        rcu = self.rcu
        if not rcu.pending:
            return
        for cc, cpu in enumerate(self.cpus):
            if cpu.idle():
                rcu.quiescent(cc, t, "idle")
        for cc, cpu in enumerate(self.cpus):
            if cpu.idle() and rcu.rcu_pending(cc):
                rcu.tick_seen[cc] = math.floor(t * self.hz + 1e-6)
                w = rcu.rcu_tasklet(cc, t)
                self.enter(cc, Job(JOB_BUSY, w=w), t, TICK_RCU)
        self.sync_timers()

    # -- the CPU server -------------------------------------------------------------
    def enter(self, cc: int, job: Job, entry: float, kind: int) -> None:
        """A job joins CPU ``cc``'s FIFO (ordered by entry time); an idle CPU starts it."""
        cpu = self.cpus[cc]
        if cpu.current is None and not cpu.queue:
            self.start(cc, job, self.now)
        else:
            self.seq += 1
            heapq.heappush(cpu.queue, (entry, kind, self.seq, job))

    def start(self, cc: int, job: Job, now: float) -> None:
        cpu = self.cpus[cc]
        cpu.current = job
        if job.kind == JOB_PACKET:
            svc = self.start_packet(cc, job, now)
        elif job.kind == JOB_TIMER:
            svc = self.run_timer(job, now)
            if svc < 0:                              # skipped timer: no CPU time
                cpu.current = None
                self.next_job(cc, now)
                return
        else:
            svc = job.w
        fin = now + svc
        if job.extra:
            fin += job.extra          # (added the way router.py adds it)
            svc += job.extra
        cpu.busy_s += svc
        self.sched.schedule(Event(fin, CPU_DONE, (cc, job)))

    def on_cpu_done(self, ev: Event) -> None:
        cc, job = ev.data
        now = ev.time
        if job.kind == JOB_PACKET:
            self.end_packet(cc, job, now)
        cpu = self.cpus[cc]
        cpu.current = None
        cpu.free_since = now
        self.next_job(cc, now)

    def next_job(self, cc: int, now: float) -> None:
        cpu = self.cpus[cc]
        if cpu.queue:
            self.start(cc, heapq.heappop(cpu.queue)[3], now)

    # -- packets --------------------------------------------------------------------
    def on_arrival(self, ev: Event) -> None:
        j = ev.data
        t = ev.time
        self.next_arrival = j + 1
        if j + 1 < self.n:
            self.sched.schedule(Event(self.T[j + 1], ARRIVAL, j + 1))
        d = self.dev[j]
        cc = self.r.devices[d].cpu
        cpu = self.cpus[cc]
        st = self.stats
        rq = self.rxq_of_dev[d]
        waiting = self.rx_waiting[rq]
        if self.napi[d]:
            # NAPI: a free RX descriptor, else the NIC FIFO, else missed
            if waiting >= self.ring[d]:
                if waiting >= self.ring[d] + int(self.p["fifo_slots"][j]):
                    st["rx_missed"][d] += 1
                    st["rx_fifo"][d] += 1
                    self.outcome[j] = OC["drop_rx_missed"]
                    self.t_start[j] = t
                    return
                st["rnbc"][d] += 1             # waits in the NIC FIFO for a descriptor
            st["rx_packets"][d] += 1
        else:
            # netif_rx: the per-CPU backlog, with its throttle
            st["rx_packets"][d] += 1
            if waiting > self.backlog_max or (waiting and self.throttle[cc]):
                if waiting > self.backlog_max and not self.throttle[cc]:
                    self.throttle[cc] = True
                    self.softnet_throttled[cc] += 1
                self.softnet_dropped[cc] += 1
                self.outcome[j] = OC["drop_backlog"]
                self.t_start[j] = t
                # the hard IRQ still ran and allocated the skb
                w = self.c["irq_rx"] + self.c["netif_rx"] + self.c["kfree_skb"]
                self.enter(cc, Job(JOB_BUSY, w=w), t, ARRIVAL)
                return
            if waiting == 0:
                self.throttle[cc] = False
        self.rx_waiting[rq] += 1
        fresh = cpu.idle() and cpu.free_since < t
        self.enter(cc, Job(JOB_PACKET, j=j, fresh=fresh), t, ARRIVAL)

    def start_packet(self, cc: int, job: Job, now: float) -> float:
        """Service of a packet begins: softirq pass, route lookup; return its seconds."""
        j = job.j
        cpu = self.cpus[cc]
        c = self.c
        self.rx_waiting[self.rxq_of_dev[self.dev[j]]] -= 1
        if job.fresh:
            # net_rx_action starts on a CPU that was idle
            cpu.pass_n = 1
            cpu.pass_t0 = now
            cpu.restarts = 0
            if cpu.in_ksoftirqd:
                # ksoftirqd slept when the CPU went idle: keep what is left of its slice
                k = math.floor(cpu.free_since * self.hz + 1e-6)
                sl = self.ksd_slice
                cpu.ksd_left = sl - (k - cpu.ksd_expiry) % sl if k >= cpu.ksd_expiry \
                    else cpu.ksd_expiry - k
                # (its sleep is a schedule() to the idle task: a switch, a quiescent state)
                cpu.ctxsw += 1
                if self.rcu is not None:
                    self.rcu.quiescent(cc, cpu.free_since, "ctxsw")
            cpu.in_ksoftirqd = False
            svc = c["softirq_entry"]
        else:
            svc = 0.0
            cpu.pass_n += 1
            # the time limit is looked at between dev->poll calls: every ``weight``
            # packets of a NAPI device, every packet of the backlog
            if cpu.pass_n > self.budget or (math.floor(now * self.hz)
                                            - math.floor(cpu.pass_t0 * self.hz) > 1
                                            and (cpu.pass_n - 1) % self.weight[self.dev[j]] == 0):
                cpu.time_squeeze += 1
                svc = c["softirq_entry"] + self.softirq_restart(cc, now)
                cpu.pass_n = 1
                cpu.pass_t0 = now
        self.t_start[j] = now
        self.mib["InReceives"] += 1
        svc += self.cost[j]
        cls = self.cls[j]
        e = None
        if cls != C_HDR and self.cache is not None:
            e, steps = self.ip_route_input(j, now, cc)
            svc += steps * c["chain_step"]
            if e is None:
                rt = self.p
                e = self.cache.ip_route_input_slow(
                    now, cc, self.key[j], self.ik[j], self.H[j], int(rt["rtype"][j]),
                    self.oif[j], int(rt["gw"][j]), int(rt["nrules"][j]), int(rt["martian"][j]),
                    float(rt["vfib_cost"][j]))
                svc += self.cache.ledger.t
                if e is None:
                    if self.cache.ledger.why == OC["drop_dst_overflow"]:
                        self.mib["InDiscards"] += 1
                        self.outcome[j] = OC["drop_dst_overflow"]
                    else:
                        self.mib["InAddrErrors"] += 1
                        self.outcome[j] = OC["drop_martian"]
                    # the cost assumed a completed path; a refused packet is only freed
                    svc += c["kfree_skb"] - float(self.p["path_cost"][j])
            self.sync_timers()
        job.dst = e
        if cls == C_REDIR and self.outcome[j] < 0:
            # ip_forward: the packet leaves by the device it came in on
            job.extra = self.ip_rt_send_redirect(j, now, e)
        return svc

    def ip_route_input(self, j: int, now: float, cc: int):
        """The cache hit path: walk the hash chain; return (entry or None, steps)."""
        cache = self.cache
        key, ik = self.key[j], self.ik[j]
        steps = 0
        found = None
        for x in cache.table[self.H[j]]:
            if x.key == key and x.ik == ik:
                found = x
                break
            steps += 1
        st = cache.stat[cc]
        st[S_IN_HLIST_SEARCH] += steps
        if found is not None:
            st[S_IN_HIT] += 1
            found.lastuse = now
            found.use += 1
            found.refcnt += 1          # dst_hold for skb->dst
        return found, steps

    def softirq_restart(self, cc: int, now: float) -> float:
        """net_rx_action returned with work left: __do_softirq restarts; return tasklet time."""
        cpu = self.cpus[cc]
        rcu = self.rcu
        w = 0.0
        if rcu is not None:
            if self.qs_handler:
                rcu.quiescent(cc, now, "softirq_handler")
            if self.use_rcu:
                w = rcu.tasklet_at(cc, now)     # if a tick scheduled the tasklet
        cpu.restarts += 1
        if cpu.restarts >= self.max_restart:
            cpu.restarts = 0
            if self.qs_loop and rcu is not None:
                rcu.quiescent(cc, now, "softirq_loop")
            k = math.floor(now * self.hz + 1e-6)
            sl = self.ksd_slice
            if not cpu.in_ksoftirqd:
                # wake ksoftirqd, which runs until the queue is empty (no user task)
                cpu.ksoftirqd_wakeups += 1
                cpu.ctxsw += 1
                if rcu is not None:
                    rcu.quiescent(cc, now, "ctxsw")
                cpu.in_ksoftirqd = True
                cpu.ksd_expiry = k + (sl if cpu.ksd_left < 0 else cpu.ksd_left)
            elif k >= cpu.ksd_expiry:
                # its 10 ms slice ran out: cond_resched() -> schedule() picks it
                # again, a quiescent state all the same (2.6.1 kernel/sched.c)
                cpu.ksd_expiry += sl * (1 + (k - cpu.ksd_expiry) // sl)
                cpu.ctxsw += 1
                if rcu is not None:
                    rcu.quiescent(cc, now, "ctxsw")
        return w

    def end_packet(self, cc: int, job: Job, now: float) -> None:
        """Service of a packet ends: dev_queue_xmit, ICMP, or the drop it was."""
        j = job.j
        cls = self.cls[j]
        e = job.dst
        if self.outcome[j] >= 0:          # refused by the slow path
            return
        if cls == C_FWD or cls == C_REDIR:
            self.mib["ForwDatagrams"] += 1
            oif = self.oif[j]
            nf = self.nfrag[j]
            if nf > 1:
                self.mib["FragOKs"] += 1
                self.mib["FragCreates"] += nf
            if self.qdisc_len[oif] >= self.txcap[oif]:
                self.stats["qdisc_drops"][oif] += 1
                self.mib["OutDiscards"] += 1
                self.outcome[j] = OC["drop_qdisc"]
                dst_release(e)
                return
            self.outcome[j] = OC["forwarded"]
            self.t_depart[j] = self.transmit(oif, now, self.wire[j], e)
            self.stats["tx_packets"][oif] += nf - 1     # transmit() counted one
            return
        d = self.dev[j]
        iwire = float(self.p["icmp_wire_s"][j])
        if cls == C_TTL or cls == C_FRAGNEED:
            self.out_route(3, d, j)      # (icmp_send's ip_route_output, before any limit)
            if cls == C_TTL:
                self.outcome[j] = OC["drop_ttl"]
                sent = self.icmp_xrlim_allow(j, now)
                if sent:
                    self.icmp["OutTimeExcds"] += 1
            else:
                self.outcome[j] = OC["drop_frag_needed"]
                self.mib["FragFails"] += 1
                sent = True                      # PMTU discovery is not rate limited
                self.icmp["OutDestUnreachs"] += 1
            if sent:
                self.icmp["OutMsgs"] += 1
                self.emit_icmp(d, now, iwire)
        elif cls == C_LOCAL:
            self.mib["InDelivers"] += 1
            self.outcome[j] = OC["local"]
            if self.kind[j] == KIND["ping_request"]:
                self.out_route(0, d, j)
                self.icmp["InEchos"] += 1
                self.icmp["OutEchoReps"] += 1
                self.icmp["OutMsgs"] += 1
                self.t_depart[j] = self.emit_icmp(d, now, iwire)
        elif cls == C_NOROUTE:
            self.outcome[j] = OC["drop_no_route"]
            self.mib["OutNoRoutes"] += 1
            rtype = int(self.p["rtype"][j])
            # ip_error answers unreachable and prohibit routes; blackholes stay silent
            if (rtype in (RTN["unreachable"], RTN["prohibit"]) and self.ip_error_allow(j, e, now)
                    and self.out_route(3, d, j) and self.icmp_xrlim_allow(j, now)):
                self.icmp["OutMsgs"] += 1
                self.icmp["OutDestUnreachs"] += 1
                self.emit_icmp(d, now, iwire)
        elif cls == C_MARTIAN:
            self.outcome[j] = OC["drop_martian"]
            self.mib["InAddrErrors"] += 1
        else:
            self.outcome[j] = OC["drop_hdr"]
            self.mib["InHdrErrors"] += 1
        dst_release(e)                    # kfree_skb drops skb->dst

    # The rate-limit *decisions* are model logic shared with the router
    # (routelab.ipv4.icmp), like the RouteCache; only the event order is re-derived here.
    def icmp_xrlim_allow(self, j: int, now: float) -> bool:
        ok = self.icmp_state.xrlim_allow(int(self.tr.saddr[j]), now)
        self.icmp["RateLimited"] += not ok
        return ok

    def out_route(self, typ: int, d: int, j: int) -> bool:
        """The output route lookup of an ICMP message about packet ``j`` (its
        hit-or-miss bookkeeping is the model's Icmp.output_route)."""
        self.icmp_state.output_route(typ, d, int(self.tr.saddr[j]))
        return True

    def ip_error_allow(self, j: int, e, now: float) -> bool:
        key = ("dst", e.uid) if e is not None else ("flow", int(self.key[j]))
        ok = self.icmp_state.ip_error_allow(key, now)
        self.icmp["RateLimited"] += not ok
        return ok

    def ip_rt_send_redirect(self, j: int, now: float, e) -> float:
        """Maybe send an ICMP redirect; return the CPU time it took."""
        state = e if e is not None else self.redir.setdefault(int(self.tr.saddr[j]),
                                                              RedirectState())
        if redirect_allow(state, now, self.r.sysctl):
            self.out_route(5, self.dev[j], j)
            self.icmp["OutMsgs"] += 1
            self.icmp["OutRedirects"] += 1
            self.emit_icmp(self.dev[j], now, float(self.p["icmp_wire_s"][j]))
            return composed(self.c, "icmp_send")
        return 0.0

    def emit_icmp(self, d: int, now: float, wire: float) -> float:
        """An ICMP message the router originates, queued on device ``d``."""
        if self.qdisc_len[d] >= self.txcap[d]:
            self.stats["qdisc_drops"][d] += 1
            return math.nan
        return self.transmit(d, now, wire, None)

    def transmit(self, dev: int, now: float, wire: float, e) -> float:
        """Queue a frame on ``dev``: it leaves when the link is free; return its departure."""
        dep = max(self.link_free[dev], now) + wire
        self.link_free[dev] = dep
        self.qdisc_len[dev] += 1
        self.stats["tx_packets"][dev] += 1
        self.sched.schedule(Event(dep, TX_DONE, (dev, e)))
        return dep

    def on_tx_done(self, ev: Event) -> None:
        dev, e = ev.data
        self.qdisc_len[dev] -= 1
        dst_release(e)                    # the skb is freed

    # -- the run ------------------------------------------------------------------------
    def handle(self, ev: Event) -> None:
        self.events += 1
        if ev.time > self.now:
            self.now = ev.time          # a timer re-armed into the past runs late
        kind = ev.kind
        if kind == ARRIVAL:
            self.on_arrival(ev)
        elif kind == TX_DONE:
            self.on_tx_done(ev)
        elif kind == CPU_DONE:
            self.on_cpu_done(ev)
        elif kind == TICK_RCU:
            self.on_rcu_tick(ev)
        else:
            self.on_timer(ev)

    def run(self) -> ReferenceResult:
        if self.n:
            self.sched.schedule(Event(self.T[0], ARRIVAL, 0))
        self.sync_timers()
        if self.use_rcu and self.jiffy <= self.t_last:
            self.sched.schedule(Event(self.jiffy, TICK_RCU, None))
        self.sched.run(self.handle)
        return self.result()

    def result(self) -> ReferenceResult:
        cpus = self.cpus
        counters = {
            "dev": {k: list(v) for k, v in self.stats.items()},
            "ip": dict(self.mib), "icmp": dict(self.icmp),
            "softnet": {"dropped": list(self.softnet_dropped),
                        "throttled": list(self.softnet_throttled),
                        "time_squeeze": [c.time_squeeze for c in cpus],
                        "ctxsw": [c.ctxsw for c in cpus],
                        "ksoftirqd_wakeups": [c.ksoftirqd_wakeups for c in cpus]},
            "cpu_busy_s": [c.busy_s for c in cpus],
        }
        cc = self.cache
        if cc is not None:
            rows = cc.stat_rows()
            ist = self.icmp_state
            for d, dev in enumerate(self.r.devices):
                rows[dev.cpu][STAT_FIELDS.index("out_hit")] += ist.out_hit[d]
                rows[dev.cpu][STAT_FIELDS.index("out_slow_tot")] += ist.out_slow[d]
            counters["rt_cache_stat"] = rows
            counters["dst"] = {"entries": cc.dst.entries, "allocated": cc.dst.allocated,
                               "destroyed": cc.dst.destroyed, "garbage": len(cc.dst.garbage),
                               "gc_runs": cc.dst.gc_runs, "gc_walked": cc.dst.gc_walked,
                               "alloc_failed": cc.dst.alloc_failed, "flushes": cc.flushes}
            counters["rcu"] = {"pending": cc.rcu.pending, "invoked": cc.rcu.invoked,
                               "grace_periods": len(cc.rcu.gp_log)}
        return ReferenceResult(np.asarray(self.outcome, dtype=np.int8),
                               np.asarray(self.t_start, dtype=np.float64),
                               np.asarray(self.t_depart, dtype=np.float64), counters,
                               self.events)
