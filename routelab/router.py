"""The router: devices, CPUs and the per-packet loop of the forwarding path.

Kernel: net/core/dev.c (netif_rx, net_rx_action, dev_queue_xmit),
kernel/softirq.c (__do_softirq, ksoftirqd), net/ipv4/ip_input.c,
route.c, ip_forward.c, ip_output.c (2.4.22, 2.6.11).

How a run works (see ``docs/design.md``):

1. The stateless stages run on whole arrays of packets first:
   ``ip_rcv`` header checks, ``fib_lookup`` (the FIB is static),
   ``ip_forward``'s TTL test and ``skb_cow`` decision, ``ip_output``'s
   fragmentation decision, and the cycles each of them costs.
2. One Python loop then walks the packets in arrival order and does the
   stateful work: NIC ring / backlog admission, the route-cache lookup
   (inlined hit path), slow path, GC, dst reference counts, RCU, the
   softirq loop structure and CPU time, the output qdisc and link, and the
   timers (``rt_check_expire``, ``rt_secret_rebuild``, ``dst_run_gc``,
   RCU), which fire when the clock passes their deadline.
3. Results are gathered into numpy arrays and counters (:class:`Result`).

Simplifications (each also noted where it happens):

* Each CPU is one FIFO server for softirq work, served in arrival order;
  hard-IRQ time is charged into the same queue (it would preempt softirq
  work, which changes the order of completion but not the total).
* The shared route cache sees packets in arrival order, although on an SMP
  box a later arrival on another CPU can be processed first.
* A packet's fragments leave back to back as one unit on the link.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from . import costs as _costs
from .core.dst import dst_release
from .core.skbuff import KIND, PacketTrace, skb_cow_needed
from .errors import KnobError
from .hardware import CpuProfile, NicProfile, cpu_profile, nic_profile
from .ipv4 import ip_forward as _ipf
from .ipv4 import ip_input as _ipin
from .ipv4 import ip_output as _ipout
from .ipv4.fib import RTN, Fib
from .ipv4.route import S_IN_HIT, S_IN_HLIST_SEARCH, RouteCache, rt_hash_size
from .kernels import KernelProfile, kernel_profile
from .result import OUTCOMES, Result
from .sysctl import SYSCTLS

__all__ = ["Device", "Router", "OUTCOMES"]

O = OUTCOMES  # outcome codes
LL_RESERVED = 16  # LL_RESERVED_SPACE for Ethernet: hard_header_len 14 rounded to 16


@dataclass
class Device:
    """One network interface of the router.

    Parameters
    ----------
    name : str                 e.g. "eth0"
    nic : str                  NIC profile name (routelab.hardware.NICS)
    cpu : int                  CPU that handles its receive softirq work
    mtu : int                  bytes
    txqueuelen : int or None   qdisc length (default: sysctl txqueuelen)
    speed_bps : float or None  overrides the NIC's wire speed
    rx_ring : int or None      overrides the NIC's RX descriptors
    """

    name: str
    nic: str = "e100"
    cpu: int = 0
    mtu: int = 1500
    txqueuelen: int | None = None
    speed_bps: float | None = None
    rx_ring: int | None = None
    profile: NicProfile = field(init=False)

    def __post_init__(self) -> None:
        self.profile = nic_profile(self.nic)
        if not (68 <= self.mtu <= 65535):
            raise KnobError("mtu", self.mtu, "an integer in [68, 65535] bytes")

    @property
    def speed(self) -> float:
        return self.profile.speed_bps if self.speed_bps is None else self.speed_bps

    @property
    def ring(self) -> int:
        return self.profile.rx_ring if self.rx_ring is None else self.rx_ring


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
        of story 2).  Without it idle time is idle.
    seed : int
        Seed of the run's random numbers (hash keys, timer phases).
    reflect : dict, optional
        ``{device index: seconds}``: a ping request sent out of that device
        comes back as an echo reply after that delay (the far end).
    cost_overrides : dict, optional
        ``{function: reference cycles}`` replacing routelab.costs.PATH.
    """

    def __init__(self, kernel: str, cpu: str, devices: list[Device], fib: Fib,
                 sysctl: dict | None = None, ncpus: int | None = None,
                 user_task: bool = False, seed: int = 0,
                 reflect: dict | None = None, cost_overrides: dict | None = None) -> None:
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
        self.devices = devices
        self.fib = fib
        self.user_task = bool(user_task)
        self.seed = int(seed)
        self.reflect = dict(reflect or {})
        self.sysctl = self._resolve_sysctl(sysctl or {})
        self.costs = _costs.cost_table(self.cpu, cost_overrides)

    def _resolve_sysctl(self, given: dict) -> dict:
        out = {}
        for name, val in given.items():
            if name not in SYSCTLS:
                raise KnobError(name, val, "a known sysctl: " + ", ".join(sorted(SYSCTLS)))
            out[name] = SYSCTLS[name].validate(val) if val is not None else None
        for name, k in SYSCTLS.items():
            if out.get(name) is None:
                out[name] = k.default
        buckets = rt_hash_size(out["ram_mb"], out["rhash_entries"])
        out["rt_buckets"] = buckets
        if out["gc_thresh"] is None:
            out["gc_thresh"] = buckets
        if out["max_size"] is None:
            out["max_size"] = max(16 * buckets, buckets)
        if out["gc_min_interval"] is None:
            out["gc_min_interval"] = self.kernel.gc_min_interval
        if given.get("secret_interval") is None:
            out["secret_interval"] = self.kernel.secret_interval
        return out

    # ------------------------------------------------------------------------
    def run(self, trace: PacketTrace, duration: float, *, bin_s: float = 0.01,
            record_every: float | None = None) -> Result:
        """Push ``trace`` through the router and return a :class:`Result`.

        Parameters
        ----------
        trace : PacketTrace
            Offered packets (``iif`` indexes ``devices``).
        duration : float
            Length of the run, seconds (time series cover [0, duration]).
        bin_s : float
            Width of the CPU-load time bins.
        record_every : float, optional
            Period of the cache/GC state samples (default: bin_s).
        """
        return _Run(self, trace, duration, bin_s, record_every or bin_s).result


class _Run:
    """State and loop of one run (kept separate so Router stays reusable)."""

    def __init__(self, r: Router, trace: PacketTrace, duration: float, bin_s: float,
                 record_every: float) -> None:
        if duration <= 0 or not math.isfinite(duration):
            raise KnobError("duration", duration, "a positive number of seconds")
        if len(trace) and (int(trace.iif.max()) >= len(r.devices) or int(trace.iif.min()) < 0):
            raise KnobError("iif", int(trace.iif.max()),
                            f"a device index in [0, {len(r.devices) - 1}]")
        self.r = r
        self.duration = duration
        self.rng = np.random.default_rng(r.seed)
        k = r.kernel
        self.cache: RouteCache | None = None
        if k.route_cache:
            self.cache = RouteCache(k, r.sysctl["rt_buckets"], r.sysctl, r.ncpus, r.costs.fn,
                                    r.sysctl["rcu_maxbatch"], self.rng)
        self.result = self._loop(trace, bin_s, record_every)

    # -- stateless stages over arrays ----------------------------------------
    def _prepare(self, tr: PacketTrace) -> dict:
        r, c = self.r, self.r.costs.fn
        devs = r.devices
        napi = np.array([d.profile.napi and r.kernel.napi for d in devs])
        dev_cpu = np.array([d.cpu for d in devs], dtype=np.int64)
        mtu = np.array([d.mtu for d in devs], dtype=np.int64)
        speed = np.array([d.speed for d in devs], dtype=np.float64)
        iif = tr.iif.astype(np.int64)
        p = {}
        p["cpu"] = dev_cpu[iif]
        p["napi"] = napi[iif]
        # receive cost: NAPI poll share, or hard IRQ + netif_rx backlog (2.4)
        rx = np.where(p["napi"], c["napi_poll_rx"], c["irq_rx"] + c["netif_rx"])
        hdr_drop = _ipin.ip_rcv(tr)
        p["pre_drop"] = hdr_drop
        p["rx_cost"] = rx + c["netif_receive_skb"] + c["ip_rcv"]
        # routing decision (static FIB), martians
        rtype, oif, gw, nrules = r.fib.fib_lookup(tr.daddr, tr.saddr, tr.tos, tr.iif)
        if not r.kernel.route_cache:
            nrules = np.zeros_like(nrules)  # 2.0 has no policy rules
        p["rtype"], p["oif"], p["gw"], p["nrules"] = rtype, oif, gw, nrules
        p["martian"] = _ipin.martian_class(tr.saddr, tr.daddr)
        # forward-path decisions and their cost
        fw = _ipf.ip_forward_plan(tr, oif, mtu, c, r.costs.copy_s_per_byte, LL_RESERVED)
        p.update(fw)
        out = _ipout.ip_output_plan(tr.length, oif, mtu, tr.df, c, r.costs.copy_s_per_byte,
                                    napi[np.maximum(oif, 0)])
        p.update(out)
        ser = np.where(speed > 0, 8.0 / np.where(speed > 0, speed, 1.0), 0.0)
        p["wire_s"] = out["wire_bytes"] * ser[np.maximum(oif, 0)]
        p["icmp_wire_s"] = _costs.wire_bytes(np.full(len(tr), 56 + 20)) * ser[iif]
        p["local_cost"] = (c["ip_local_deliver"] + c["icmp_rcv"] + c["icmp_send"]
                           + c["ip_output"] + c["dev_queue_xmit"] + c["hard_start_xmit"]
                           + c["tx_complete"])
        fifo = np.array([d.profile.rx_fifo_bytes for d in devs])[iif]
        p["fifo_slots"] = fifo // _costs.wire_bytes(tr.length)
        if self.cache is not None:
            p["h"] = self.cache.rt_hash(tr.daddr, tr.saddr, tr.iif, tr.tos)
            p["route_hit_cost"] = c["rt_hash"] + c["ip_route_input"]
        else:
            p["h"] = np.zeros(len(tr), dtype=np.int64)
            p["route_hit_cost"] = c["fib_lookup"] + nrules * c["fib_rule"]
        p["key"] = (tr.daddr.astype(np.uint64) << np.uint64(32)) | tr.saddr.astype(np.uint64)
        p["ik"] = (iif << 8) | tr.tos.astype(np.int64)
        return p

    # -- the loop --------------------------------------------------------------
    def _loop(self, tr: PacketTrace, bin_s: float, record_every: float) -> Result:
        r = self.r
        c = r.costs.fn
        cache = self.cache
        k = r.kernel
        hz = k.hz
        jiffy = 1.0 / hz
        ncpu = r.ncpus
        devs = r.devices
        ndev = len(devs)
        p = self._prepare(tr)
        n0 = len(tr)

        # --- per-packet columns as lists (appended to by injected packets) ---
        T = tr.t.tolist()
        DEV = tr.iif.astype(np.int64).tolist()
        CPU = p["cpu"].tolist()
        KEY = p["key"].tolist()
        IK = p["ik"].tolist()
        H = p["h"].tolist()
        RTYPE = p["rtype"].tolist()
        OIF = p["oif"].tolist()
        GW = p["gw"].tolist()
        NRULES = p["nrules"].tolist()
        MART = p["martian"].tolist()
        PRE = p["pre_drop"].tolist()
        RXC = p["rx_cost"].tolist()
        HITC = np.broadcast_to(p["route_hit_cost"], (n0,)).tolist()
        FWDC = p["fwd_cost"].tolist()
        FVERD = p["fwd_verdict"].tolist()
        OUTC = p["out_cost"].tolist()
        NFRAG = p["nfrag"].tolist()
        WIRE = p["wire_s"].tolist()
        IWIRE = p["icmp_wire_s"].tolist()
        FIFO = p["fifo_slots"].tolist()
        KINDL = tr.kind.tolist()
        TAG = tr.tag.tolist()
        COW = p["cow"].tolist()
        LOCALC = float(p["local_cost"])

        # per-packet results
        outcome = [0] * n0
        t_start = [0.0] * n0
        t_done = [0.0] * n0
        t_depart = [math.nan] * n0

        # --- devices ---
        dev_napi = [bool(d.profile.napi and k.napi) for d in devs]
        dev_cpu = [d.cpu for d in devs]
        ring = [d.ring for d in devs]
        txcap = [d.profile.tx_ring + (d.txqueuelen if d.txqueuelen is not None
                                      else r.sysctl["txqueuelen"]) for d in devs]
        # RX queue: per device for NAPI rings, per CPU backlog for netif_rx
        rxq_of_dev = [di if dev_napi[di] else ndev + dev_cpu[di] for di in range(ndev)]
        rxq = [deque() for _ in range(ndev + ncpu)]
        throttle = [False] * ncpu
        backlog_max = r.sysctl["netdev_max_backlog"]
        budget = backlog_max
        stats = {name: [0] * ndev for name in (
            "rx_packets", "rx_errors", "rx_dropped", "rx_missed", "rx_fifo", "rnbc",
            "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "qdisc_drops",
            "rx_bytes", "tx_bytes")}
        rx_packets = stats["rx_packets"]
        softnet_dropped = [0] * ncpu
        softnet_throttled = [0] * ncpu
        time_squeeze = [0] * ncpu
        txq = [deque() for _ in range(ndev)]   # (depart, dst or None)
        link_free = [0.0] * ndev
        next_tx = math.inf

        # --- CPUs ---
        busy = [0.0] * ncpu
        pass_n = [0] * ncpu
        pass_t0 = [0.0] * ncpu
        restarts = [0] * ncpu
        in_ksoftirqd = [False] * ncpu
        user = r.user_task
        user_slice = 0.1        # nice 0 timeslice ~100 ms (2.6 O(1) scheduler)
        ks_slice = 0.01         # nice 19 timeslice 10 ms
        user_left = [user_slice] * ncpu
        ks_until = [0.0] * ncpu
        inv_t0 = [0.0] * ncpu
        iv_s = [[] for _ in range(ncpu)]   # softirq busy intervals: start
        iv_d = [[] for _ in range(ncpu)]   # duration
        ctxsw = [0] * ncpu
        ksoftirqd_wakeups = [0] * ncpu

        # --- route cache plumbing ---
        rcu = cache.rcu if cache is not None else None
        use_rcu = rcu is not None and rcu.mode != "none"
        rcu_kinds = rcu.qs_kinds if rcu is not None else frozenset()
        qs_idle = "idle" in rcu_kinds
        qs_handler = "softirq_handler" in rcu_kinds
        qs_loop = "softirq_loop" in rcu_kinds
        table = cache.table if cache is not None else None
        cstat = cache.stat if cache is not None else None
        step_c = c["chain_step"]
        slow = cache.ip_route_input_slow if cache is not None else None
        dstops = cache.dst if cache is not None else None

        # --- timers (deadline -> work on CPU 0) ---
        def next_timer() -> float:
            if cache is None:
                return math.inf
            nt = min(cache.check_expire_at, cache.secret_at, dstops.gc_timer_at)
            if use_rcu and rcu.pending:
                nt = min(nt, rcu_tick)
            return nt

        rcu_tick = jiffy
        nt = next_timer()
        rec_t = 0.0
        rec = {"t": [], "entries": [], "hashed": [], "garbage": [], "rcu_pending": [],
               "expire": [], "equilibrium": [], "rover": []}

        mib = {"InReceives": 0, "InHdrErrors": 0, "InAddrErrors": 0, "ForwDatagrams": 0,
               "InDelivers": 0, "InDiscards": 0, "OutRequests": 0, "OutNoRoutes": 0,
               "OutDiscards": 0, "FragOKs": 0, "FragFails": 0, "FragCreates": 0}
        icmp = {"OutMsgs": 0, "OutTimeExcds": 0, "OutDestUnreachs": 0, "OutRedirects": 0,
                "OutEchoReps": 0, "InEchos": 0}
        prof_loop = {"rt_garbage_collect+slow": 0.0, "timers": 0.0, "rcu_tasklet": 0.0,
                     "route_hit": 0.0, "chain_walk": 0.0, "rx_drop_irq": 0.0, "icmp_send": 0.0}
        ping_rtt = {}     # tag -> (t_sent, t_back)
        reflect = r.reflect
        dyn = []          # heap of injected packet indices by time
        import heapq

        cost_drop_irq = c["irq_rx"] + c["netif_rx"] + c["kfree_skb"]
        icmp_cost = c["icmp_send"] + c["ip_output"] + c["dev_queue_xmit"] + c["hard_start_xmit"]
        rr = c["softirq_entry"]
        n = n0
        i = 0
        while True:
            # pick next packet: static trace or injected
            if dyn and (i >= n0 or dyn[0][0] < T[i]):
                j = heapq.heappop(dyn)[1]
            elif i < n0:
                j = i
                i += 1
            else:
                break
            t = T[j]
            # ---- timers and TX completions due by now ----
            if t >= nt:
                while cache is not None:
                    due = min(cache.check_expire_at, cache.secret_at, dstops.gc_timer_at,
                              rcu_tick if (use_rcu and rcu.pending) else math.inf)
                    if due > t:
                        break
                    if due == rcu_tick and use_rcu and rcu.pending:
                        # a tick on every CPU: idle CPUs pass a quiescent state
                        # and run their RCU tasklet
                        for cc in range(ncpu):
                            if busy[cc] <= due:
                                rcu.quiescent(cc, due, "user_tick" if user else "idle")
                        for cc in range(ncpu):
                            if busy[cc] <= due and rcu.done[cc]:
                                w = rcu.rcu_tasklet(cc, due)
                                prof_loop["rcu_tasklet"] += w
                                iv_s[cc].append(due)
                                iv_d[cc].append(w)
                                busy[cc] = due + w
                        rcu_tick = (math.floor(t * hz) + 1) * jiffy
                        continue
                    w = 0.0
                    if due == dstops.gc_timer_at:
                        w = dstops.dst_run_gc(due)
                    elif due == cache.check_expire_at:
                        w = cache.rt_check_expire(due)
                    else:
                        w = cache.rt_secret_rebuild(due)
                        # new hash key: re-hash every packet still to come
                        self._rehash(tr, p, H, i)
                    prof_loop["timers"] += w
                    s0 = busy[0] if busy[0] > due else due
                    if iv_s[0] and abs(iv_s[0][-1] + iv_d[0][-1] - s0) < 1e-12:
                        iv_d[0][-1] += w
                    else:
                        iv_s[0].append(s0)
                        iv_d[0].append(w)
                    busy[0] = s0 + w
                nt = next_timer()
            while rec_t <= t and rec_t <= self.duration:
                self._record(rec, rec_t)
                rec_t += record_every
            if t >= next_tx:
                next_tx = math.inf
                for od in range(ndev):
                    q = txq[od]
                    while q and q[0][0] <= t:
                        e = q.popleft()[1]
                        if e is not None:
                            dst_release(e)
                    if q and q[0][0] < next_tx:
                        next_tx = q[0][0]

            d = DEV[j]
            cpu = CPU[j]
            # ---- receive: NIC ring (NAPI) or per-CPU backlog (netif_rx) ----
            qi = rxq_of_dev[d]
            q = rxq[qi]
            while q and q[0] <= t:
                q.popleft()
            ql = len(q)
            if dev_napi[d]:
                if ql >= ring[d]:
                    stats["rnbc"][d] += 1
                    if ql >= ring[d] + FIFO[j]:
                        stats["rx_missed"][d] += 1
                        stats["rx_fifo"][d] += 1
                        outcome[j] = O["drop_rx_missed"]
                        t_start[j] = t_done[j] = t
                        continue
            else:
                rx_packets[d] += 1     # e100 counts in its IRQ handler, before netif_rx
                if ql > backlog_max or (ql and throttle[cpu]):
                    if ql > backlog_max and not throttle[cpu]:
                        throttle[cpu] = True
                        softnet_throttled[cpu] += 1
                    softnet_dropped[cpu] += 1
                    outcome[j] = O["drop_backlog"]
                    # the hard IRQ still ran: it steals CPU time
                    s0 = busy[cpu] if busy[cpu] > t else t
                    busy[cpu] = s0 + cost_drop_irq
                    prof_loop["rx_drop_irq"] += cost_drop_irq
                    if iv_s[cpu] and abs(iv_s[cpu][-1] + iv_d[cpu][-1] - s0) < 1e-12:
                        iv_d[cpu][-1] += cost_drop_irq
                    else:
                        iv_s[cpu].append(s0)
                        iv_d[cpu].append(cost_drop_irq)
                    t_start[j] = t_done[j] = t
                    continue
                if ql == 0:
                    throttle[cpu] = False
            # ---- CPU: softirq loop structure ----
            b = busy[cpu]
            extra = 0.0
            if b < t:
                # CPU was idle (or in user mode) since b: a quiescent state
                if rcu is not None and rcu.gp_active:
                    if user:
                        tick = (math.floor(b * hz) + 1) * jiffy
                        if tick <= t:
                            rcu.quiescent(cpu, tick, "user_tick")
                    elif qs_idle:
                        rcu.quiescent(cpu, b, "idle")
                start = t
                pass_n[cpu] = 1
                pass_t0[cpu] = t
                restarts[cpu] = 0
                inv_t0[cpu] = t
                in_ksoftirqd[cpu] = False
                extra = rr
            else:
                start = b
                pn = pass_n[cpu] + 1
                if pn > budget or start - pass_t0[cpu] >= jiffy:
                    # net_rx_action returns (budget or one jiffy used up)
                    time_squeeze[cpu] += 1
                    if rcu is not None:
                        if qs_handler:
                            rcu.quiescent(cpu, start, "softirq_handler")
                        if use_rcu and rcu.done[cpu]:
                            w = rcu.rcu_tasklet(cpu, start)
                            prof_loop["rcu_tasklet"] += w
                            extra += w
                            nt = next_timer()
                    restarts[cpu] += 1
                    if restarts[cpu] >= 10:
                        # __do_softirq gives up: wake ksoftirqd
                        restarts[cpu] = 0
                        if qs_loop and rcu is not None:
                            rcu.quiescent(cpu, start, "softirq_loop")
                        if not in_ksoftirqd[cpu]:
                            ksoftirqd_wakeups[cpu] += 1
                        if user and not in_ksoftirqd[cpu]:
                            user_left[cpu] -= start - inv_t0[cpu]
                            if user_left[cpu] > 0:
                                # back to the user task until the next tick
                                tick = (math.floor(start * hz) + 1) * jiffy
                                user_left[cpu] -= tick - start
                                if rcu is not None:
                                    rcu.quiescent(cpu, tick, "user_tick")
                                start = tick
                            else:
                                # timeslice used up: switch to ksoftirqd
                                ctxsw[cpu] += 1
                                if rcu is not None:
                                    rcu.quiescent(cpu, start, "ctxsw")
                                in_ksoftirqd[cpu] = True
                                ks_until[cpu] = start + ks_slice
                        elif not in_ksoftirqd[cpu]:
                            ctxsw[cpu] += 1
                            if rcu is not None:
                                rcu.quiescent(cpu, start, "ctxsw")
                            in_ksoftirqd[cpu] = True
                            ks_until[cpu] = math.inf
                        inv_t0[cpu] = start
                    if in_ksoftirqd[cpu] and start >= ks_until[cpu]:
                        # ksoftirqd's slice is over: the user task runs again
                        ctxsw[cpu] += 1
                        if rcu is not None:
                            rcu.quiescent(cpu, start, "ctxsw")
                        in_ksoftirqd[cpu] = False
                        user_left[cpu] = user_slice
                        inv_t0[cpu] = start
                    pn = 1
                    pass_t0[cpu] = start
                    extra += rr
                pass_n[cpu] = pn
            q.append(start)
            t_start[j] = start
            mib["InReceives"] += 1
            if dev_napi[d]:
                rx_packets[d] += 1
            svc = RXC[j] + extra
            pre = PRE[j]
            if pre:
                mib["InHdrErrors"] += 1
                stats["rx_errors"][d] += 0
                outcome[j] = O["drop_hdr"]
                svc += c["kfree_skb"]
                fin = start + svc
                self._account(iv_s[cpu], iv_d[cpu], start, svc)
                busy[cpu] = fin
                t_done[j] = fin
                continue
            # ---- ip_route_input ----
            e = None
            rt = RTYPE[j]
            oif = OIF[j]
            if cache is not None:
                key = KEY[j]
                ik = IK[j]
                h = H[j]
                svc += HITC[j]
                steps = 0
                for x in table[h]:
                    if x.key == key and x.ik == ik:
                        e = x
                        break
                    steps += 1
                st = cstat[cpu]
                if steps:
                    st[S_IN_HLIST_SEARCH] += steps
                    svc += steps * step_c
                now = start
                if e is not None:
                    st[S_IN_HIT] += 1
                    e.lastuse = now
                    e.use += 1
                    e.refcnt += 1
                    rt = e.rtype
                    oif = e.oif
                else:
                    e, ts, why = slow(now, cpu, key, ik, h, rt, oif, GW[j], NRULES[j], MART[j])
                    svc += ts
                    prof_loop["rt_garbage_collect+slow"] += ts
                    nt = next_timer()   # the slow path may have armed dst GC / RCU
                    if e is None:
                        outcome[j] = O["drop_martian"] if why == "martian" else \
                            O["drop_dst_overflow"]
                        if why == "martian":
                            mib["InAddrErrors"] += 1
                        else:
                            mib["InDiscards"] += 1
                        svc += c["kfree_skb"]
                        fin = start + svc
                        self._account(iv_s[cpu], iv_d[cpu], start, svc)
                        busy[cpu] = fin
                        t_done[j] = fin
                        continue
            else:
                svc += HITC[j]
                if MART[j]:
                    outcome[j] = O["drop_martian"]
                    mib["InAddrErrors"] += 1
                    svc += c["kfree_skb"]
                    fin = start + svc
                    self._account(iv_s[cpu], iv_d[cpu], start, svc)
                    busy[cpu] = fin
                    t_done[j] = fin
                    continue
            # ---- dispatch on the route type ----
            if rt == 0:          # unicast: ip_forward
                v = FVERD[j]
                if v:
                    # TTL <= 1 (ICMP time exceeded) or DF + too big (frag needed)
                    svc += FWDC[j] + icmp_cost
                    icmp["OutMsgs"] += 1
                    if v == 1:
                        outcome[j] = O["drop_ttl"]
                        icmp["OutTimeExcds"] += 1
                    else:
                        outcome[j] = O["drop_frag_needed"]
                        icmp["OutDestUnreachs"] += 1
                        mib["FragFails"] += 1
                    fin = start + svc
                    self._emit_icmp(d, fin, IWIRE[j], txq, link_free, txcap, stats)
                    next_tx = min(next_tx, txq[d][-1][0]) if txq[d] else next_tx
                else:
                    svc += FWDC[j] + OUTC[j]
                    fin = start + svc
                    mib["ForwDatagrams"] += 1
                    nf = NFRAG[j]
                    if nf > 1:
                        mib["FragOKs"] += 1
                        mib["FragCreates"] += nf
                    # dev_queue_xmit: qdisc + TX ring, then the wire
                    oq = txq[oif]
                    while oq and oq[0][0] <= fin:
                        x = oq.popleft()[1]
                        if x is not None:
                            dst_release(x)
                    if len(oq) >= txcap[oif]:
                        stats["qdisc_drops"][oif] += 1
                        mib["OutDiscards"] += 1
                        outcome[j] = O["drop_qdisc"]
                        if e is not None:
                            dst_release(e)
                    else:
                        lf = link_free[oif]
                        dep = (lf if lf > fin else fin) + WIRE[j]
                        link_free[oif] = dep
                        oq.append((dep, e))
                        if dep < next_tx:
                            next_tx = dep
                        stats["tx_packets"][oif] += nf
                        outcome[j] = O["forwarded"]
                        t_depart[j] = dep
                        kd = KINDL[j]
                        if kd == 2 and oif in reflect:
                            # the far end answers the echo request
                            jn = self._inject_reply(tr, p, j, oif, dep + reflect[oif], T, DEV, CPU,
                                                    KEY, IK, H, RTYPE, OIF, GW, NRULES, MART, PRE,
                                                    RXC, HITC, FWDC, FVERD, OUTC, NFRAG, WIRE,
                                                    IWIRE, FIFO, KINDL, TAG, COW, outcome,
                                                    t_start, t_done, t_depart)
                            heapq.heappush(dyn, (T[jn], jn))
                            ping_rtt.setdefault(TAG[j], [T[j], math.nan])
                        elif kd == 3:
                            ping_rtt.setdefault(TAG[j], [math.nan, math.nan])[1] = dep
                        e = None
            elif rt == RTN["local"]:
                svc += LOCALC
                mib["InDelivers"] += 1
                outcome[j] = O["local"]
                fin = start + svc
                if KINDL[j] == 2:
                    icmp["InEchos"] += 1
                    icmp["OutEchoReps"] += 1
                    icmp["OutMsgs"] += 1
                    dep = self._emit_icmp(d, fin, IWIRE[j], txq, link_free, txcap, stats)
                    if txq[d]:
                        next_tx = min(next_tx, txq[d][-1][0])
                    t_depart[j] = dep
                    ping_rtt[TAG[j]] = [T[j], dep]
                if e is not None:
                    dst_release(e)
                    e = None
            else:                # unreachable / blackhole / prohibit
                svc += c["kfree_skb"]
                mib["OutNoRoutes"] += 0
                outcome[j] = O["drop_no_route"]
                if rt == RTN["unreachable"]:
                    svc += icmp_cost
                    icmp["OutMsgs"] += 1
                    icmp["OutDestUnreachs"] += 1
                fin = start + svc
                if e is not None:
                    dst_release(e)
                    e = None
            self._account(iv_s[cpu], iv_d[cpu], start, svc)
            busy[cpu] = fin
            t_done[j] = fin

        # ---- drain: transmit completions after the last arrival ----
        for od in range(ndev):
            for _, x in txq[od]:
                if x is not None:
                    dst_release(x)
            txq[od].clear()
        while rec_t <= self.duration:
            self._record(rec, rec_t)
            rec_t += record_every
        return Result.assemble(self, tr, p, outcome, t_start, t_done, t_depart, T, DEV, KINDL,
                               TAG, n0, stats, mib, icmp, softnet_dropped, softnet_throttled,
                               time_squeeze, iv_s, iv_d, bin_s, rec, prof_loop, ping_rtt,
                               ctxsw, ksoftirqd_wakeups)

    # -- helpers ----------------------------------------------------------------
    @staticmethod
    def _account(starts: list, durs: list, s: float, d: float) -> None:
        # merge back-to-back softirq work into one interval (keeps lists short)
        if starts and abs(starts[-1] + durs[-1] - s) < 1e-12:
            durs[-1] += d
        else:
            starts.append(s)
            durs.append(d)

    @staticmethod
    def _emit_icmp(dev: int, t: float, wire: float, txq, link_free, txcap, stats) -> float:
        """Queue an ICMP message the router originates on ``dev``."""
        q = txq[dev]
        if len(q) >= txcap[dev]:
            stats["qdisc_drops"][dev] += 1
            return math.nan
        lf = link_free[dev]
        dep = (lf if lf > t else t) + wire
        link_free[dev] = dep
        q.append((dep, None))
        stats["tx_packets"][dev] += 1
        return dep

    def _rehash(self, tr, p, H, i0: int) -> None:
        cache = self.cache
        if i0 >= len(tr):
            return
        sub = slice(i0, len(tr))
        h = cache.rt_hash(tr.daddr[sub], tr.saddr[sub], tr.iif[sub], tr.tos[sub]).tolist()
        H[i0:len(tr)] = h

    def _record(self, rec: dict, t: float) -> None:
        rec["t"].append(t)
        cache = self.cache
        if cache is None:
            for kk in ("entries", "hashed", "garbage", "rcu_pending", "expire", "equilibrium",
                       "rover"):
                rec[kk].append(0)
            return
        rec["entries"].append(cache.dst.entries)
        rec["hashed"].append(cache.hashed)
        rec["garbage"].append(len(cache.dst.garbage))
        rec["rcu_pending"].append(cache.rcu.pending)
        rec["expire"].append(cache.expire / cache.hz)
        rec["equilibrium"].append(cache.equilibrium)
        rec["rover"].append(cache.rover)

    def _inject_reply(self, tr, p, j, oif, t_arr, *cols) -> int:
        """Append an echo reply arriving at ``t_arr`` on device ``oif``."""
        one = tr.take(np.array([j]))
        one.t[:] = t_arr
        one.iif[:] = oif
        one.saddr[:], one.daddr[:] = tr.daddr[j], tr.saddr[j]
        one.kind[:] = KIND["ping_reply"]
        one.ttl[:] = 64
        one.cloned[:] = False
        sub = self._prepare(one)
        (T, DEV, CPU, KEY, IK, H, RTYPE, OIF, GW, NRULES, MART, PRE, RXC, HITC, FWDC, FVERD,
         OUTC, NFRAG, WIRE, IWIRE, FIFO, KINDL, TAG, COW, outcome, t_start, t_done,
         t_depart) = cols
        T.append(t_arr)
        DEV.append(oif)
        CPU.append(int(sub["cpu"][0]))
        KEY.append(int(sub["key"][0]))
        IK.append(int(sub["ik"][0]))
        H.append(int(sub["h"][0]))
        RTYPE.append(int(sub["rtype"][0]))
        OIF.append(int(sub["oif"][0]))
        GW.append(int(sub["gw"][0]))
        NRULES.append(int(sub["nrules"][0]))
        MART.append(int(sub["martian"][0]))
        PRE.append(int(sub["pre_drop"][0]))
        RXC.append(float(sub["rx_cost"][0]))
        HITC.append(float(np.broadcast_to(sub["route_hit_cost"], (1,))[0]))
        FWDC.append(float(sub["fwd_cost"][0]))
        FVERD.append(int(sub["fwd_verdict"][0]))
        OUTC.append(float(sub["out_cost"][0]))
        NFRAG.append(int(sub["nfrag"][0]))
        WIRE.append(float(sub["wire_s"][0]))
        IWIRE.append(float(sub["icmp_wire_s"][0]))
        FIFO.append(int(sub["fifo_slots"][0]))
        KINDL.append(KIND["ping_reply"])
        TAG.append(int(tr.tag[j]))
        COW.append(bool(sub["cow"][0]))
        outcome.append(0)
        t_start.append(0.0)
        t_done.append(0.0)
        t_depart.append(math.nan)
        return len(T) - 1
