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

import gc
import heapq
import math
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

import cython
import numpy as np

from . import _malloc
from . import costs as _costs
from .core.dst import DstEntry, DstOps
from .core.queues import IntervalLog, TimeQueue, TxQueue
from .core.rcu import Rcu
from .core.skbuff import KIND, PacketTrace
from .errors import KnobError
from .hardware import CpuProfile, NicProfile, cpu_profile, nic_profile
from .ipv4 import ip_forward as _ipf
from .ipv4 import ip_input as _ipin
from .ipv4 import ip_output as _ipout
from .ipv4.fib import RTN, Fib
from .ipv4.icmp import RedirectState, icmp_error_len, ip_error_allow, redirect_allow, xrlim_allow
from .ipv4.route import S_IN_HIT, S_IN_HLIST_SEARCH, RouteCache, rt_hash_size
from .kernels import KernelProfile, kernel_profile
from .result import OUTCOMES, Result
from .sim.ledger import Ledger
from .sysctl import SYSCTLS
from .traffic import MAX_PACKETS, TraceWindows

__all__ = ["Device", "Router", "OUTCOMES"]

OC = OUTCOMES  # outcome codes
# packet classes after the array stages
C_FWD, C_HDR, C_MARTIAN, C_TTL, C_FRAGNEED, C_LOCAL, C_NOROUTE, C_PING, C_REDIR = range(9)
C_REFUSED = -1            # the route lookup refused it (martian, dst cache overflow)
# the rare path's outcome codes and route types as constants (C ints when compiled)
O_TTL, O_FRAG_NEEDED, O_LOCAL = OC["drop_ttl"], OC["drop_frag_needed"], OC["local"]
O_NO_ROUTE, O_MARTIAN, O_HDR = OC["drop_no_route"], OC["drop_martian"], OC["drop_hdr"]
O_DST_OVERFLOW = OC["drop_dst_overflow"]
RTN_UNREACHABLE, RTN_PROHIBIT = RTN["unreachable"], RTN["prohibit"]
MAX_SOFTIRQ_RESTART = 10   # kernel/softirq.c (2.6)
USER_SLICE = 0.1           # nice-0 timeslice of the 2.6 O(1) scheduler, ~100 ms
KSOFTIRQD_SLICE = 0.01     # nice-19 timeslice, 10 ms (MIN_TIMESLICE)
# Time from the end of an irq_exit softirq batch to the output NIC's next
# TX-completion interrupt (which starts the next batch).  ASSUMED: the e1000
# transmit interrupt delay, TIDV = 64 units of 1.024 us (the driver default
# TxIntDelay as we recall it, unverified); frames are always in flight under
# the flood, so that interrupt always comes.
TX_IRQ_DELAY = 64 * 1.024e-6
# Runs with more offered packets than this keep only outcome/device/kind/tag
# per packet (no times), so a 50 s flood fits a 2 GB server.
KEEP_TIMES_MAX = 4_000_000
# arrays still needed after the loop (results, profile) besides RARE
KEEP_AFTER_COLUMNS = frozenset({"cls", "oif", "nfrag", "napi", "fwd_cost", "out_cost",
                                "route_hit_cost", "rtype", "gw", "nrules", "martian",
                                "icmp_wire_s", "fifo_slots", "path_cost", "saddr", "key"})
# columns read only off the hot path (kept as numpy arrays)
RARE = ("rtype", "gw", "nrules", "martian", "icmp_wire_s", "fifo_slots", "path_cost", "saddr",
        "key")
LL_RESERVED = 16  # LL_RESERVED_SPACE for Ethernet: hard_header_len 14 rounded to 16
_COLUMN_DTYPE = {"d": np.float64, "q": np.int64, "Q": np.uint64}   # array.array codes


def _vec(code: str, values) -> list | array:
    """A per-CPU/per-device vector or a packet column of the loop.

    Compiled, the loop reads these through typed views, so they must be flat
    typed arrays (``array.array`` with type ``code``: "d" float, "q" int,
    "Q" unsigned, "b" flag; a packet column may also be a numpy array of
    that type, see :func:`_column`); interpreted, a list indexes faster.
    Same values either way: a Python float is a C double.
    """
    if cython.compiled:
        return values if isinstance(values, array) else array(code, values)
    return values.tolist() if isinstance(values, array) else list(values)


def _column(a: np.ndarray, code: str, spare: int = 0) -> list | array | np.ndarray:
    """A packet column for the loop (see :func:`_vec`), with ``spare`` zeroed
    slots at the end.

    Compiled and with no spare slots, the column is the numpy array itself
    when it already has the column's type (a typed view reads it as well as
    an ``array.array``), else one converted copy: no fill, no second copy.
    The loop writes such a column only in ``_rehash`` (the hash column, which
    nothing reads after the loop)."""
    if cython.compiled:
        if not spare:
            return np.ascontiguousarray(a, dtype=_COLUMN_DTYPE[code])
        return _array_copy(a, code, spare)
    a = np.ascontiguousarray(a, dtype=_COLUMN_DTYPE[code])
    if spare:
        a = np.concatenate([a, np.zeros(spare, dtype=a.dtype)])
    return a.tolist()


def _array_copy(a: np.ndarray, code: str, spare: int = 0) -> array:
    """A new ``array.array`` of type ``code`` holding ``a``, then ``spare``
    zeros (one copy when ``a`` already has the type)."""
    out = array(code)
    out.frombytes(memoryview(np.ascontiguousarray(a, dtype=_COLUMN_DTYPE[code])).cast("B"))
    out.frombytes(bytes(out.itemsize * spare))
    return out


def _col_np(col, n: int) -> np.ndarray:
    """The first ``n`` values of a loop column (see :func:`_column`) as a numpy
    array: a view of the column when compiled (do not keep it), a new array
    when the column is a list."""
    if isinstance(col, np.ndarray):
        return col[:n]
    if isinstance(col, array):
        return np.frombuffer(col, dtype=_COLUMN_DTYPE[col.typecode], count=n)
    return np.array(col[:n])


def icmp_send_cost(c: dict) -> float:
    """CPU seconds of one ICMP message the router originates: icmp_send (with
    its output route lookup and rate-limit check), ip_output, the qdisc and
    the driver."""
    return c["icmp_send"] + c["ip_output"] + c["dev_queue_xmit"] + c["hard_start_xmit"]


# Compiled, the loop asks for its columns' data this many packets ahead, once
# per cache line (8 values): with a dozen columns read side by side the CPU's
# own stream prefetcher falls behind.  A hint only (see router.pxd); 64-256
# measured alike (mixed: ~14 % faster, hit ~6 %, paired runs in one process).
_COL_AHEAD = 128


def _chain_find(chain: list, key: int, ik: int) -> int:
    """``ip_route_input``'s chain walk: the position of the entry for flow
    (``key``, ``ik``) in its hash chain, or -1.  (Compiled, the loop uses
    ``_chain_find_c`` from router.pxd, the same walk on borrowed pointers.)"""
    k = 0
    for x in chain:
        if x.key == key and x.ik == ik:
            return k
        k += 1
    return -1


def _next_tick(x: float, hz: int) -> float:
    """The first timer tick strictly after time ``x`` (robust to float rounding)."""
    return (math.floor(x * hz + 1e-6) + 1) / hz


# -- the rare path: packets that are not plainly forwarded ------------------------
# Module functions rather than _Run methods so that, compiled, the loop calls
# them as C functions with C arguments (router.pxd).  ~4 % of the mixed
# benchmark's packets come here; as methods reading numpy scalars they took
# 29 % of its loop's instructions.

@cython.locals(cls=cython.long, j=cython.Py_ssize_t, d=cython.long, fin=cython.double,
               iwire=cython.double, saddr=cython.longlong, rtype=cython.long,
               dep=cython.double, sent=cython.bint)
def _other_path(run, cls, j, d, fin, e, outcome, t_depart, txq, link_free, txcap,
                stats, mib, icmp, ping_rtt, T, iwire, saddr, rtype) -> int:
    """Packets that are not plainly forwarded: ICMP errors, local delivery, drops.

    ``iwire`` (wire time of an ICMP reply on the input device), ``saddr`` and
    ``rtype`` are packet ``j``'s; the departure time of a local echo reply
    goes to ``t_depart[j]``.  Returns 0.
    """
    if cls == C_TTL or cls == C_FRAGNEED:
        # ip_forward: TTL <= 1 -> ICMP time exceeded; DF and too big -> frag needed
        if cls == C_TTL:
            outcome[j] = O_TTL
            sent = _icmp_xrlim_allow(run, saddr, fin)
            if sent:
                icmp["OutTimeExcds"] += 1
        else:
            outcome[j] = O_FRAG_NEEDED
            mib["FragFails"] += 1
            sent = True            # PMTU discovery is never rate limited
            icmp["OutDestUnreachs"] += 1
        if sent:
            icmp["OutMsgs"] += 1
            _emit_icmp(d, fin, iwire, txq, link_free, txcap, stats)
    elif cls == C_LOCAL:
        mib["InDelivers"] += 1
        outcome[j] = O_LOCAL
        if run._rare_of(j, "kind") == KIND["ping_request"]:
            icmp["InEchos"] += 1
            icmp["OutEchoReps"] += 1
            icmp["OutMsgs"] += 1
            dep = _emit_icmp(d, fin, iwire, txq, link_free, txcap, stats)
            t_depart[j] = dep
            ping_rtt[run._rare_of(j, "tag")] = [T[j], dep]
    elif cls == C_NOROUTE:
        outcome[j] = O_NO_ROUTE
        mib["OutNoRoutes"] += 1
        # ip_error: unreachable -> host unreachable, prohibit -> packet
        # filtered; blackhole routes discard silently
        if (rtype == RTN_UNREACHABLE or rtype == RTN_PROHIBIT) \
                and _ip_error_allow(run, j, e, fin) and _icmp_xrlim_allow(run, saddr, fin):
            icmp["OutMsgs"] += 1
            icmp["OutDestUnreachs"] += 1
            _emit_icmp(d, fin, iwire, txq, link_free, txcap, stats)
    elif cls == C_MARTIAN:
        outcome[j] = O_MARTIAN
        mib["InAddrErrors"] += 1
    else:  # C_HDR
        outcome[j] = O_HDR
        mib["InHdrErrors"] += 1
    if e is not None:
        e.refcnt -= 1
    return 0


@cython.locals(d=cython.long, now=cython.double, iwire=cython.double, saddr=cython.longlong)
def _ip_rt_send_redirect(run, d, now, e, txq, link_free, txcap, stats, icmp, iwire,
                         saddr) -> float:
    """Maybe send an ICMP redirect for a packet leaving by its input device ``d``.

    Kernel: net/ipv4/route.c ip_rt_send_redirect (2.4.22, 2.6.11): per
    route entry, at most ``redirect_number`` redirects spaced by
    ``redirect_load << n``, then silence until ``redirect_silence`` passes
    with no offending packet.  Simplification: every packet that leaves
    by its input device qualifies (the kernel also wants the source
    on-link and redirects enabled on the device); without a route cache
    (2.0) the state is kept per source address ``saddr``.  ``iwire`` is the
    redirect's wire time on ``d``.  Returns the CPU time.
    """
    if e is not None:
        state = e
    else:
        state = run._redir.setdefault(saddr, RedirectState())
    if redirect_allow(state, now, run.r.sysctl):
        icmp["OutMsgs"] += 1
        icmp["OutRedirects"] += 1
        _emit_icmp(d, now, iwire, txq, link_free, txcap, stats)
        return icmp_send_cost(run.r.costs.fn)
    return 0.0


@cython.locals(now=cython.double, ok=cython.bint)
def _icmp_xrlim_allow(run, saddr, now) -> bool:
    """ICMP error rate limit per peer (routelab.ipv4.icmp.xrlim_allow).

    Simplification: keyed by the offending packet's source address (the
    kernel keys by the output route to it).  The cost of ``icmp_send`` is
    charged either way (the limit is checked inside it).
    """
    ok = xrlim_allow(run._xrlim, saddr, now)
    run._icmp_limited += not ok
    return ok


@cython.locals(now=cython.double, ok=cython.bint)
def _ip_error_allow(run, j, e, now) -> bool:
    """ip_error's limit, per cached unreachable entry (per flow without a cache)."""
    key = ("dst", e.uid) if e is not None else ("flow", run._rare_of(j, "key"))
    ok = ip_error_allow(run._errlim, key, now)
    run._icmp_limited += not ok
    return ok


@cython.locals(dev=cython.long, t=cython.double, wire=cython.double, q=TxQueue,
               lf=cython.double, dep=cython.double)
def _emit_icmp(dev, t, wire, txq, link_free, txcap, stats) -> float:
    """Queue an ICMP message the router originates on ``dev``; return its
    departure time (NaN if the queue is full)."""
    q = cython.cast(TxQueue, txq[dev])
    if q.retire(t) >= txcap[dev]:   # TX completions up to now free their slots
        stats["qdisc_drops"][dev] += 1
        return math.nan
    lf = link_free[dev]
    dep = (lf if lf > t else t) + wire
    link_free[dev] = dep
    q.push(dep, None)
    stats["tx_packets"][dev] += 1
    return dep


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
    napi_weight : int or None  overrides the NIC's NAPI poll weight
    """

    name: str
    nic: str = "e100"
    cpu: int = 0
    mtu: int = 1500
    txqueuelen: int | None = None
    speed_bps: float | None = None
    rx_ring: int | None = None
    napi_weight: int | None = None
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

    @property
    def weight(self) -> int:
        """NAPI poll weight (dev->weight): packets per dev->poll call."""
        return self.profile.weight if self.napi_weight is None else self.napi_weight


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
        for rt in fib.routes:
            if rt.oif >= len(devices):
                raise KnobError(f"route {rt.prefix} oif", rt.oif,
                                f"an interface index in [0, {len(devices) - 1}]")
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
        if out["rcu_maxbatch"] is None:
            out["rcu_maxbatch"] = self.kernel.rcu_maxbatch
        if given.get("secret_interval") is None:
            out["secret_interval"] = self.kernel.secret_interval
        return out

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
            window by window, so memory stays bounded on long runs (echo
            replies cannot be injected then: ``reflect`` must be empty).
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
        # The loop allocates millions of small objects and frees them again without
        # making reference cycles; Python's cyclic collector would walk the whole
        # heap over and over for nothing (~8 % of the run), so it is paused.
        _malloc.tune()      # large freed blocks stay in the process for the next run
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return _Run(self, trace, duration, bin_s, record_every or bin_s, progress,
                        keep_times).result
        finally:
            if was_enabled:
                gc.enable()


class _Run:
    """State and loop of one run (kept separate so Router stays reusable)."""

    def __init__(self, r: Router, trace, duration: float, bin_s: float,
                 record_every: float, progress=None, keep_times: bool | None = None) -> None:
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
        if isinstance(trace, TraceWindows) and r.reflect:
            raise KnobError("reflect", r.reflect, "empty when the trace comes in windows")
        if progress is not None and not callable(progress):
            raise KnobError("progress", progress, "a callable taking the fraction done")
        self.r = r
        self.keep_times = len(trace) <= KEEP_TIMES_MAX if keep_times is None \
            else bool(keep_times)
        self.duration = duration
        self.rng = np.random.default_rng(r.seed)
        k = r.kernel
        self.ledger = Ledger()
        self.cache: RouteCache | None = None
        if k.route_cache:
            self.cache = RouteCache(k, r.sysctl["rt_buckets"], r.sysctl, r.ncpus, r.costs.fn,
                                    r.sysctl["rcu_maxbatch"], self.rng, self.ledger)
        self._xrlim: dict = {}
        self._errlim: dict = {}
        self._reply_cache: dict = {}
        self._redir: dict = {}
        self._icmp_limited = 0
        self.result = self._loop(trace, bin_s, record_every, progress)
        self.result.counters["icmp"]["RateLimited"] = self._icmp_limited

    # -- stateless stages over arrays ----------------------------------------
    def _prepare(self, tr: PacketTrace) -> dict:
        r, c = self.r, self.r.costs.fn
        devs = r.devices
        napi = np.array([d.profile.napi and r.kernel.napi for d in devs])
        dev_cpu = np.array([d.cpu for d in devs], dtype=np.int64)
        mtu = np.array([d.mtu for d in devs], dtype=np.int64)
        speed = np.array([d.speed for d in devs], dtype=np.float64)
        iif = tr.iif.astype(np.int64)
        self._kind = tr.kind
        p = {"iif": iif, "saddr": tr.saddr}
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
        oif_c = np.maximum(oif, 0).astype(np.intp)   # (a plain gather index)
        out = _ipout.ip_output_plan(tr.length, oif, mtu, tr.df, c, r.costs.copy_s_per_byte,
                                    napi[oif_c])
        p.update(out)
        ser = np.where(speed > 0, 8.0 / np.where(speed > 0, speed, 1.0), 0.0)
        p["wire_s"] = out["wire_bytes"] * ser[oif_c]
        # what the router sends back on the input device: an echo reply as long
        # as the request, or an ICMP error quoting the offending packet
        reply_len = np.where(rtype == RTN["local"], tr.length, icmp_error_len(tr.length))
        p["icmp_wire_s"] = _costs.wire_bytes(reply_len) * ser[iif]
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
        # key = daddr << 32 | saddr, ik = iif << 8 | tos (in place: no temporaries)
        key = tr.daddr.astype(np.uint64)
        key <<= np.uint64(32)
        np.bitwise_or(key, tr.saddr, out=key, casting="safe")
        p["key"] = key
        ik = iif << 8
        np.bitwise_or(ik, tr.tos, out=ik, casting="safe")
        p["ik"] = ik
        return p

    def _classify(self, p: dict) -> None:
        """Collapse the array-stage verdicts into one class and one cost per packet."""
        c = self.r.costs.fn
        n = p["rtype"].shape[0]
        cls = np.full(n, C_FWD, dtype=np.int8)
        rt = p["rtype"]
        unicast = rt == RTN["unicast"]
        cls[unicast & (p["fwd_verdict"] == _ipf.FWD_TTL)] = C_TTL
        cls[unicast & (p["fwd_verdict"] == _ipf.FWD_FRAG_NEEDED)] = C_FRAGNEED
        cls[rt == RTN["local"]] = C_LOCAL
        cls[~unicast & (rt != RTN["local"])] = C_NOROUTE
        cls[p["martian"] != 0] = C_MARTIAN
        cls[p["pre_drop"] != 0] = C_HDR
        icmp = icmp_send_cost(c)
        # the path's cost by class: forwarded (most packets) everywhere, then the
        # others by index -- ICMP errors: ip_forward + icmp_send; local delivery;
        # no route: freed, plus icmp_send for an unreachable route; martian and
        # bad header: freed
        path = p["fwd_cost"] + p["out_cost"]
        odd = np.flatnonzero(cls != C_FWD)
        if odd.size:
            oc = cls[odd]
            v = np.full(odd.size, c["kfree_skb"])
            err = (oc == C_TTL) | (oc == C_FRAGNEED)
            v[err] = p["fwd_cost"][odd[err]] + icmp
            v[oc == C_LOCAL] = p["local_cost"]
            v[(oc == C_NOROUTE) & (rt[odd] == RTN["unreachable"])] = c["kfree_skb"] + icmp
            path[odd] = v
        # forwarded echo requests/replies take the (slower) ping-tracking branch
        ping = (cls == C_FWD) & ((self._kind == KIND["ping_request"])
                                 | (self._kind == KIND["ping_reply"]))
        cls[ping] = C_PING
        # leaving by the interface it came in on: ip_forward may send a redirect
        cls[(cls == C_FWD) & (p["oif"] == p["iif"])] = C_REDIR
        p["cls"] = cls
        p["path_cost"] = path
        # everything a packet costs that does not depend on state: receive, route
        # lookup (not reached by a bad header) and path
        routed = p["route_hit_cost"] + path
        hdr = np.flatnonzero(cls == C_HDR)
        routed[hdr] = path[hdr]
        p["cost"] = p["rx_cost"] + routed

    # -- the loop --------------------------------------------------------------
    # C types for the loop's hot variables when this module is compiled (a no-op
    # when it runs as Python; see routelab/accel.py).  Variables that next_timer and
    # flush_tx read (cache, txq, use_rcu, rcu_tick) stay Python objects: Cython
    # cannot share a typed variable with an inner function.
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(hz=cython.long, ncpu=cython.long, ndev=cython.long, budget=cython.long,
                   backlog_max=cython.long, i=cython.Py_ssize_t, j=cython.Py_ssize_t,
                   lo=cython.Py_ssize_t, hi=cython.Py_ssize_t, n0=cython.Py_ssize_t,
                   jp=cython.Py_ssize_t,
                   d=cython.long, cpu=cython.long, pn=cython.long, steps=cython.long,
                   ql=cython.Py_ssize_t, cls=cython.long, oif=cython.long, cap=cython.long,
                   fifo=cython.long, wd=cython.long,
                   has_cache=cython.bint,
                   jiffy=cython.double, t=cython.double, ne=cython.double, nt=cython.double,
                   rec_next=cython.double, start=cython.double,
                   svc=cython.double, fin=cython.double, b=cython.double, lf=cython.double,
                   dep=cython.double, step_c=cython.double, rr=cython.double,
                   cost_drop_irq=cython.double, slow_total=cython.double, cost=cython.double,
                   key=cython.ulonglong, ik=cython.long, fu=cython.double, p0=cython.double,
                   wire=cython.double, c_fwd=cython.long, c_hdr=cython.long,
                   c_ping=cython.long, c_redir=cython.long, c_refused=cython.long,
                   e=DstEntry, q=TimeQueue, oq=TxQueue, lg=IntervalLog,
                   rc=RouteCache, dops=DstOps, rcu_c=Rcu, ts=cython.double, ledger=Ledger,
                   why=cython.long,
                   rt_=cython.long, nr_=cython.long, ma_=cython.long, gw_=cython.longlong,
                   T=cython.double[:], COST=cython.double[:], WIRE=cython.double[:],
                   DEV=cython.longlong[:], IK=cython.longlong[:], H=cython.longlong[:],
                   CLS=cython.longlong[:], OIF=cython.longlong[:], FIFO=cython.longlong[:],
                   KEY=cython.ulonglong[:], RTYPE=cython.longlong[:], GW=cython.longlong[:],
                   NRULES=cython.longlong[:], MART=cython.longlong[:],
                   SADDR=cython.longlong[:], IWIRE=cython.double[:], iw=cython.double,
                   sa=cython.longlong,
                   t_start=cython.double[:], t_depart=cython.double[:], table=list,
                   busy=cython.double[:], pass_t0=cython.double[:],
                   full_until=cython.double[:], link_free=cython.double[:],
                   pass_n=cython.longlong[:], full_slots=cython.longlong[:],
                   rx_lim=cython.longlong[:], ring=cython.longlong[:], weight=cython.longlong[:],
                   dev_cpu=cython.longlong[:], txcap=cython.longlong[:], misses=cython.longlong[:],
                   hsearch=cython.longlong[:], rnbc=cython.longlong[:],
                   softnet_dropped=cython.longlong[:], softnet_throttled=cython.longlong[:],
                   time_squeeze=cython.longlong[:],
                   dev_napi=cython.schar[:], throttle=cython.schar[:],
                   in_ksoftirqd=cython.schar[:],
                   rxq_dev=list, ivlog=list,
                   chain=list, outcome=bytearray)
    def _loop(self, trace, bin_s: float, record_every: float, progress) -> Result:
        r = self.r
        c = r.costs.fn
        cache = self.cache
        ledger = self.ledger
        k = r.kernel
        hz = k.hz
        jiffy = 1.0 / hz
        ncpu = r.ncpus
        devs = r.devices
        ndev = len(devs)
        duration = self.duration

        # --- devices ---
        # (per-device and per-CPU numbers the loop reads for every packet: C arrays
        # when this module is compiled, lists when it runs as Python; see _vec)
        dev_napi = _vec("b", [bool(dv.profile.napi and k.napi) for dv in devs])
        dev_cpu = _vec("q", [dv.cpu for dv in devs])
        ring = _vec("q", [dv.ring for dv in devs])
        # net_rx_action looks at its time limit between dev->poll calls: every
        # ``weight`` packets of a NAPI device (every packet of the backlog, as the
        # 2.4 loop does)
        weight = _vec("q", [dv.weight if dev_napi[di] else 1 for di, dv in enumerate(devs)])
        txq_len = [dv.txqueuelen if dv.txqueuelen is not None else r.sysctl["txqueuelen"]
                   for dv in devs]
        txcap = _vec("q", [dv.profile.tx_ring + n for dv, n in zip(devs, txq_len, strict=True)])
        # RX queue: per device for NAPI rings, per CPU backlog for netif_rx; it holds
        # the service start of every admitted packet.  Starts that have passed are
        # retired lazily: only when the queue might be full (``rx_lim``) or the
        # backlog is throttled does the exact occupancy matter.
        rxq = [TimeQueue(ring[di] + 2 if dev_napi[di] else 16) for di in range(ndev)] \
            + [TimeQueue(r.sysctl["netdev_max_backlog"] + 2) for _ in range(ncpu)]
        rxq_dev = [rxq[di] if dev_napi[di] else rxq[ndev + devs[di].cpu] for di in range(ndev)]
        throttle = _vec("b", [False] * ncpu)
        backlog_max = r.sysctl["netdev_max_backlog"]
        budget = backlog_max
        rx_lim = _vec("q", [ring[di] if dev_napi[di] else backlog_max + 1
                             for di in range(ndev)])
        # A NAPI ring and the NIC FIFO behind it are full until the next service
        # start on that device: every arrival before ``full_until`` (no larger than
        # ``full_slots`` FIFO slots' worth) is missed without further work.
        full_until = _vec("d", [-math.inf] * ndev)
        full_slots = _vec("q", [0] * ndev)
        stats = {name: [0] * ndev for name in (
            "rx_packets", "rx_errors", "rx_dropped", "rx_missed", "rx_fifo", "rnbc",
            "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "qdisc_drops")}
        # per-CPU softnet counters and the per-device RNBC count, as C vectors (an
        # overloaded NAPI NIC counts RNBC for most packets: a Python int each)
        softnet_dropped = _vec("q", [0] * ncpu)
        softnet_throttled = _vec("q", [0] * ncpu)
        time_squeeze = _vec("q", [0] * ncpu)
        rnbc = _vec("q", [0] * ndev)
        # (depart, dst or None), FIFO per link; frames already off the wire are
        # retired lazily, before anything reads a reference count or when the
        # qdisc looks full
        txq = [TxQueue(n) for n in txcap]
        link_free = _vec("d", [0.0] * ndev)

        # --- CPUs and the two tasks of each (see _softirq_boundary) ---
        # (the helpers below get the array objects, ``*_arr``; the loop reads the
        # same memory through ``busy`` etc., typed views when compiled)
        busy_arr = busy = _vec("d", [0.0] * ncpu)
        pass_n = _vec("q", [0] * ncpu)
        pass_t0 = _vec("d", [0.0] * ncpu)
        restarts = [0] * ncpu
        ksd_arr = in_ksoftirqd = _vec("b", [False] * ncpu)
        user = r.user_task
        user_left = [USER_SLICE] * ncpu
        ks_left = [KSOFTIRQD_SLICE] * ncpu
        acct_t0 = [0.0] * ncpu             # when the current task's slice last was charged
        ivlog = [IntervalLog() for _ in range(ncpu)]   # softirq busy intervals
        ctxsw = [0] * ncpu
        ksoftirqd_wakeups = [0] * ncpu
        sched = {"user_ticks": [0] * ncpu, "slivers": [0] * ncpu,
                 "user_expired": [0] * ncpu, "ksoftirqd_expired": [0] * ncpu,
                 # seconds ksoftirqd was the current task (what top charges to it)
                 "ksoftirqd_s": [0.0] * ncpu}
        ks_since = sched["_ksoftirqd_since"] = [0.0] * ncpu

        # --- route cache plumbing ---
        rcu = cache.rcu if cache is not None else None
        use_rcu = rcu is not None and rcu.mode != "none"
        rcu_kinds = rcu.qs_kinds if rcu is not None else frozenset()
        qs_idle = "idle" in rcu_kinds
        qs_handler = "softirq_handler" in rcu_kinds
        qs_loop = "softirq_loop" in rcu_kinds
        rcu_wake = rcu is not None and (user or qs_idle)   # an idle CPU may report a QS
        has_cache = cache is not None
        table = cache.table if has_cache else None
        step_c = c["chain_step"]
        dstops = cache.dst if has_cache else None
        # the same cache, DstOps and RCU objects as C-typed variables for the loop
        # body (the closures below read the untyped ones)
        rc = cache
        dops = dstops
        rcu_c = rcu
        misses = _vec("q", [0] * ncpu)    # slow-path calls per CPU (in_hit at the end)
        hsearch = _vec("q", [0] * ncpu)   # chain entries stepped over (in_hlist_search)
        self._lookups = [0] * ncpu         # route lookups per CPU (from the outcomes)
        rcu_tick = jiffy

        @cython.locals(nt_=cython.double, rc_=RouteCache, d_=DstOps)
        def next_timer() -> float:
            if cache is None:
                return math.inf
            rc_ = cache
            d_ = dstops
            nt_ = min(rc_.check_expire_at, rc_.secret_at, d_.gc_timer_at)
            if use_rcu and rc_.rcu.pending and rcu_tick < nt_:
                nt_ = rcu_tick
            return nt_

        @cython.locals(now=cython.double, oq_=TxQueue)
        def flush_tx(now: float) -> None:
            # TX completions up to ``now``: free the skbs, release their dsts.
            # Reference counts are only *read* by the slow path, the GCs and
            # the RCU callbacks, so completions are applied just before those
            # run rather than after every packet (same result, less work).
            for oq_ in txq:
                if oq_.n and oq_.first() <= now:
                    oq_.retire(now)

        nt = next_timer()
        rec_next = 0.0
        ne = nt if nt < rec_next else rec_next   # next timer or state sample
        rec = {"t": [], "entries": [], "hashed": [], "garbage": [], "rcu_pending": [],
               "expire": [], "equilibrium": [], "rover": []}
        mib = dict.fromkeys(("InReceives", "InHdrErrors", "InAddrErrors", "ForwDatagrams",
                             "InDelivers", "InDiscards", "OutRequests", "OutNoRoutes",
                             "OutDiscards", "FragOKs", "FragFails", "FragCreates"), 0)
        icmp = dict.fromkeys(("OutMsgs", "OutTimeExcds", "OutDestUnreachs", "OutRedirects",
                              "OutEchoReps", "InEchos"), 0)
        prof_loop = dict.fromkeys(("route_slow", "timers", "rcu_tasklet", "rx_drop_irq"), 0.0)
        ping_rtt: dict = {}
        reflect = r.reflect
        heappop = heapq.heappop

        cost_drop_irq = c["irq_rx"] + c["netif_rx"] + c["kfree_skb"]
        rr = c["softirq_entry"]
        O_QDISC = OC["drop_qdisc"]
        # the packet classes as C constants for the loop
        c_fwd, c_hdr, c_ping, c_redir, c_refused = C_FWD, C_HDR, C_PING, C_REDIR, C_REFUSED
        O_MISSED = OC["drop_rx_missed"]
        O_BACKLOG = OC["drop_backlog"]
        slow_total = 0.0
        nb = max(1, int(math.ceil(duration / bin_s)))
        edges = np.arange(nb + 1) * bin_s
        acc = _Accumulator(self.keep_times, r.ncpus, edges)
        windows = trace.windows() if isinstance(trace, TraceWindows) \
            else [(duration, trace)]
        nwin = max(1, int(math.ceil(duration / trace.window - 1e-9))) \
            if isinstance(trace, TraceWindows) else 1
        report_every = max(1, nwin // 100)
        n_offered = 0
        iw, sa, rt_ = 0.0, 0, 0   # (a redirect's or the rare path's: set per packet before use)
        for wno, (t_end, tr) in enumerate(windows):
            self._check_iif(tr)
            n0 = len(tr)
            n_offered += n0
            p = self._prepare(tr)
            self._classify(p)
            # room for the echo replies this window's requests may bring back
            spare = int(np.count_nonzero(p["cls"] == C_PING)) if reflect else 0
            cols = self._columns(tr, p, spare)
            T, DEV, KEY, IK, H, CLS, COST, OIF, NFRAG, WIRE, FIFO = cols
            # the same columns as objects, for the helpers (T etc. are typed views
            # when compiled)
            T_arr, DEV_arr, H_arr, CLS_arr, OIF_arr = cols[0], cols[1], cols[4], cols[5], cols[7]
            rare = self._rare = {name: p[name] for name in RARE}
            rare["kind"], rare["tag"] = tr.kind, tr.tag
            # the hot columns now live in flat arrays; free the ones nothing reads again
            for name in [col for col in p if col not in KEEP_AFTER_COLUMNS]:
                del p[name]
            self._rare_extra = {}
            # what the slow path and the rare path need of a packet (offered packets
            # only: an injected reply's come from _rare_extra)
            RTYPE, GW, NRULES, MART, SADDR = [_column(rare[name], "q") for name in
                                              ("rtype", "gw", "nrules", "martian", "saddr")]
            IWIRE = _column(rare["icmp_wire_s"], "d")

            # compact per-packet outputs: 1 byte / 8 bytes each instead of a Python
            # object per element.  Every packet starts as "missed by the NIC" with
            # its service start at its arrival, so a packet the full RX ring misses
            # costs the loop no write at all.
            outcome = bytearray([O_MISSED]) * n0
            # (flat arrays with the columns' spare slots; the helpers get the objects)
            t_start_arr = t_start = _array_copy(tr.t, "d", spare)
            t_depart_arr = t_depart = array("d", [math.nan]) * (n0 + spare)
            dyn: list = []
            i = 0
            while True:
                # next stretch of packets: offered ones up to the next injected echo
                # reply, or that reply alone
                if dyn and (i >= n0 or dyn[0][0] < T[i]):
                    lo = heappop(dyn)[1]
                    hi = lo + 1
                elif i < n0:
                    lo = i
                    hi = bisect_right(T_arr, dyn[0][0], i, n0) if dyn else n0
                    i = hi
                else:
                    break
                for j in range(lo, hi):
                    if cython.compiled:
                        if (j & 7) == 0 and j + _COL_AHEAD < hi:
                            jp = j + _COL_AHEAD
                            _rl_prefetch(cython.address(T[jp]))  # noqa: F821 (router.pxd)
                            _rl_prefetch(cython.address(DEV[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(KEY[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(IK[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(H[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(CLS[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(COST[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(OIF[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(WIRE[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(FIFO[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(t_start[jp]))  # noqa: F821
                            _rl_prefetch(cython.address(t_depart[jp]))  # noqa: F821
                    t = T[j]
                    d = DEV[j]
                    fu = full_until[d]
                    if t < fu:
                        fifo = FIFO[j]
                        if fifo <= full_slots[d]:
                            continue         # RX ring and NIC FIFO still full: missed
                    # ---- timers, samples and TX completions due by now ----
                    if t >= ne:
                        if t >= nt:
                            rcu_tick = self._fire_timers(
                                t, flush_tx, busy_arr, ivlog, prof_loop,
                                rcu_tick, use_rcu, user, ncpu, hz, jiffy, tr, H_arr,
                                j if j < n0 else i)
                            nt = next_timer()
                        if t >= rec_next:
                            while rec_next <= t and rec_next <= duration:
                                self._record(rec, rec_next)
                                rec_next += record_every
                            if rec_next > duration:
                                rec_next = math.inf
                        ne = nt if nt < rec_next else rec_next

                    cpu = dev_cpu[d]
                    # ---- receive: NIC ring (NAPI) or per-CPU backlog (netif_rx) ----
                    q = cython.cast(TimeQueue, rxq_dev[d])   # (every element is one)
                    if q.n >= rx_lim[d] or throttle[cpu]:
                        # possibly full: retire the packets whose service has begun
                        ql = q.retire(t)
                        if dev_napi[d]:
                            if ql >= ring[d]:
                                if ql >= ring[d] + FIFO[j]:
                                    # no descriptor and the NIC FIFO is full: missed
                                    # (counted per device at the end of the window)
                                    outcome[j] = O_MISSED
                                    t_start[j] = t
                                    full_until[d] = q.first()
                                    full_slots[d] = FIFO[j]
                                    continue
                                # no free descriptor: the frame waits in the NIC FIFO
                                # (e1000 RNBC, reported as rx_dropped)
                                rnbc[d] += 1
                        else:
                            if ql > backlog_max or (ql and throttle[cpu]):
                                if ql > backlog_max and not throttle[cpu]:
                                    throttle[cpu] = True
                                    softnet_throttled[cpu] += 1
                                softnet_dropped[cpu] += 1
                                outcome[j] = O_BACKLOG
                                # the hard IRQ still ran and allocated the skb: CPU time lost
                                self._charge(cpu, t, cost_drop_irq, busy_arr, ivlog)
                                prof_loop["rx_drop_irq"] += cost_drop_irq
                                t_start[j] = t
                                continue
                            if ql == 0:
                                throttle[cpu] = False
                    # (rx_packets: counted at the end -- e100 counts every packet in its
                    # IRQ handler, before netif_rx; NAPI drivers the ones they receive)
                    # ---- CPU: the softirq loop (net_rx_action, __do_softirq, ksoftirqd) ----
                    b = busy[cpu]
                    cost = COST[j]
                    if b < t:
                        # the CPU had no softirq work since b (nothing to do unless
                        # ksoftirqd was running or RCU waits for a quiescent state)
                        if in_ksoftirqd[cpu] or (rcu_wake and rcu_c.gp_active):
                            start = self._cpu_was_free(cpu, b, t, rcu, rcu_wake, user,
                                                       ksd_arr, ks_left, acct_t0, ctxsw,
                                                       hz, sched)
                        else:
                            start = t
                        pass_n[cpu] = 1
                        pass_t0[cpu] = start
                        restarts[cpu] = 0
                        svc = rr + cost
                    else:
                        start = b
                        svc = cost
                        pn = pass_n[cpu] + 1
                        p0 = pass_t0[cpu]
                        wd = weight[d]
                        if pn > budget or (start - p0 >= jiffy and (pn - 1) % wd == 0):
                            # net_rx_action returns with work left: budget used up, or a
                            # jiffy gone (looked at between dev->poll calls, every
                            # ``weight`` packets)
                            time_squeeze[cpu] += 1
                            if use_rcu and rcu_c.done[cpu]:
                                flush_tx(start)   # the RCU callbacks read reference counts
                            start, w = self._softirq_boundary(
                                cpu, start, rcu, use_rcu, qs_handler, qs_loop, restarts,
                                ksd_arr, ksoftirqd_wakeups, user, user_left, ks_left,
                                acct_t0, ctxsw, hz, prof_loop, sched)
                            svc = rr + w + cost
                            if w:
                                nt = next_timer()
                                ne = nt if nt < rec_next else rec_next
                            pn = 1
                            pass_t0[cpu] = start
                        pass_n[cpu] = pn
                    q.push(start)
                    t_start[j] = start
                    cls = CLS[j]
                    e = None
                    if has_cache and cls != c_hdr:
                        # ---- ip_route_input: walk the hash chain ----
                        key = KEY[j]
                        ik = IK[j]
                        chain = table[H[j]]
                        if cython.compiled:
                            _chain_prefetch(table, cython.address(H[j]), n0 - j)  # noqa: F821
                            steps = _chain_find_c(chain, key, ik)  # noqa: F821 (router.pxd)
                        else:
                            steps = _chain_find(chain, key, ik)
                        if steps >= 0:
                            e = cython.cast(DstEntry, chain[steps])
                        else:
                            steps = len(chain)
                        if steps:
                            hsearch[cpu] += steps
                            svc += steps * step_c
                        if e is not None:
                            # (in_hit: lookups minus misses, counted at the end)
                            e.lastuse = start
                            e.use += 1
                            e.refcnt += 1
                        else:
                            misses[cpu] += 1
                            flush_tx(start)
                            if j < n0:
                                rt_, gw_, nr_, ma_ = RTYPE[j], GW[j], NRULES[j], MART[j]
                            else:
                                ex = self._rare_extra[j]
                                rt_, gw_, nr_, ma_ = (ex["rtype"], ex["gw"], ex["nrules"],
                                                      ex["martian"])
                            e = rc.ip_route_input_slow(start, cpu, key, ik, H[j], rt_, OIF[j],
                                                       gw_, nr_, ma_)
                            ts = ledger.t
                            svc += ts
                            slow_total += ts
                            # the slow path may have armed the dst GC timer or queued RCU
                            # work.  ``nt`` only needs to be a lower bound (_fire_timers
                            # does nothing before the first deadline), so it is refreshed
                            # only when one of those could now come first.
                            if dops.gc_timer_at < nt or (use_rcu and rcu_tick < nt):
                                nt = next_timer()
                                ne = nt if nt < rec_next else rec_next
                            if e is None:
                                why = ledger.why
                                outcome[j] = why
                                if why == O_DST_OVERFLOW:
                                    mib["InDiscards"] += 1
                                else:
                                    mib["InAddrErrors"] += 1
                                # COST assumed a completed path; a refused packet is freed here
                                svc += c["kfree_skb"] - self._path_cost_of(j)
                                cls = c_refused
                    # the CPU is busy with this packet until fin
                    fin = start + svc
                    if cls != c_fwd and cls != c_ping and cls != c_refused:
                        # what a redirect or the rare path reads of the packet
                        if j < n0:
                            iw, sa, rt_ = IWIRE[j], SADDR[j], RTYPE[j]
                        else:
                            ex = self._rare_extra[j]
                            iw, sa, rt_ = ex["icmp_wire_s"], ex["saddr"], ex["rtype"]
                    if cls == c_redir:
                        # ip_forward: out by the device it came in on -- maybe a redirect
                        w = _ip_rt_send_redirect(self, d, start, e, txq, link_free, txcap,
                                                 stats, icmp, iw, sa)
                        svc += w
                        fin += w
                    busy[cpu] = fin
                    lg = cython.cast(IntervalLog, ivlog[cpu])
                    lg.add(start, svc, fin)
                    if cls == c_fwd or cls == c_ping or cls == c_redir:
                        # ---- ip_forward -> ip_output -> dev_queue_xmit -> the wire ----
                        # (ForwDatagrams, FragOKs/FragCreates, tx_packets: at the end)
                        oif = OIF[j]
                        oq = cython.cast(TxQueue, txq[oif])
                        cap = txcap[oif]
                        if oq.n < cap or oq.retire(fin) < cap:
                            lf = link_free[oif]
                            wire = WIRE[j]
                            dep = (lf if lf > fin else fin) + wire
                            link_free[oif] = dep
                            oq.push(dep, e)
                            t_depart[j] = dep
                            outcome[j] = 0
                            if cls == c_ping and self._ping_forwarded(
                                    tr, j, oif, dep, cols, outcome, t_start_arr, t_depart_arr,
                                    dyn, ping_rtt, reflect, T_arr):
                                # an echo reply was injected: pick the next packet afresh
                                if j < n0:
                                    i = j + 1
                                break
                        else:
                            stats["qdisc_drops"][oif] += 1
                            mib["OutDiscards"] += 1
                            outcome[j] = O_QDISC
                            if e is not None:
                                e.refcnt -= 1
                    elif cls != c_refused:
                        _other_path(self, cls, j, d, fin, e, outcome, t_depart, txq, link_free,
                                    txcap, stats, mib, icmp, ping_rtt, T, iw, sa, rt_)
            self._count_window(tr, p, outcome, DEV_arr, CLS_arr, OIF_arr, NFRAG, stats, mib, n0)
            acc.add(self, tr, p, outcome, t_start_arr, t_depart_arr, T_arr, DEV_arr, n0)
            del cols, T, DEV, KEY, IK, H, CLS, COST, OIF, NFRAG, WIRE, FIFO, p, rare
            del T_arr, DEV_arr, H_arr, CLS_arr, OIF_arr
            if progress is not None and ((wno + 1) % report_every == 0 or wno + 1 == nwin):
                progress(min(1.0, t_end / duration))

        prof_loop["route_slow"] = slow_total
        if self.cache is not None:
            for cc, row in enumerate(self.cache.stat):
                row[S_IN_HIT] += self._lookups[cc] - misses[cc]
                row[S_IN_HLIST_SEARCH] += hsearch[cc]
        # ---- drain: transmit completions after the last arrival ----
        for oq in txq:
            oq.drain()
        while rec_next <= duration:
            self._record(rec, rec_next)
            rec_next += record_every
        stats["rnbc"] = list(rnbc)
        res = Result.assemble(self, acc, n_offered, stats, mib, icmp, softnet_dropped,
                              softnet_throttled, time_squeeze, ivlog, bin_s, rec, prof_loop,
                              ping_rtt, ctxsw, ksoftirqd_wakeups)
        for cc in range(ncpu):
            if in_ksoftirqd[cc]:
                # still running at the end: until its work is done (or the run ends)
                _Run._ksoftirqd_stops(cc, max(min(busy[cc], duration), ks_since[cc]), ksd_arr,
                                      sched)
        del sched["_ksoftirqd_since"]
        res.counters["sched"] = sched
        return res

    # -- pieces of the loop that run rarely ---------------------------------------
    def _check_iif(self, tr: PacketTrace) -> None:
        r = self.r
        if len(tr):
            lo, hi = int(tr.iif.min()), int(tr.iif.max())
            if hi >= len(r.devices) or lo < 0:
                raise KnobError("iif", hi if hi >= len(r.devices) else lo,
                                f"a device index in [0, {len(r.devices) - 1}]")

    def _count_window(self, tr, p, outcome, DEV, CLS, OIF, NFRAG, stats, mib, n0) -> None:
        """Counters the loop leaves to the end of each window: they follow from the outcomes.

        rx_missed/rx_fifo (NAPI ring and FIFO full), rx_packets (every packet
        the NIC did not miss), InReceives (every packet past the ring/backlog),
        ForwDatagrams, FragOKs/FragCreates (forwarded or dropped by the qdisc),
        tx_packets of forwarded frames, route lookups per CPU (rt_cache_stat
        in_hit = lookups minus slow-path calls, at the end of the run).
        """
        n = len(outcome)
        extra = slice(n0, n)
        o = np.frombuffer(outcome, dtype=np.uint8).astype(np.int8)
        dev = np.concatenate([tr.iif.astype(np.int64), np.asarray(DEV[extra], dtype=np.int64)])
        cls = np.concatenate([p["cls"], np.asarray(CLS[extra], dtype=np.int8)])
        oif = np.concatenate([p["oif"], np.asarray(OIF[extra], dtype=np.int64)])
        nfrag = np.concatenate([p["nfrag"], np.asarray(NFRAG[extra], dtype=np.int64)])
        ndev = len(stats["rx_packets"])
        per_dev = np.bincount(dev, minlength=ndev)
        missed = o == OC["drop_rx_missed"]
        per_dev_missed = np.bincount(dev[missed], minlength=ndev)
        for di in range(ndev):
            stats["rx_missed"][di] += int(per_dev_missed[di])
            stats["rx_fifo"][di] += int(per_dev_missed[di])
            stats["rx_packets"][di] += int(per_dev[di]) - int(per_dev_missed[di])
        received = ~missed & (o != OC["drop_backlog"])
        mib["InReceives"] += int(np.count_nonzero(received))
        fwd = (o == OC["forwarded"]) | (o == OC["drop_qdisc"])
        mib["ForwDatagrams"] += int(np.count_nonzero(fwd))
        frag = fwd & (nfrag > 1)
        mib["FragOKs"] += int(np.count_nonzero(frag))
        mib["FragCreates"] += int(nfrag[frag].sum())
        sent = o == OC["forwarded"]
        # (packets not sent are counted in an extra bin ndev and ignored)
        tx = np.bincount(np.where(sent, oif, ndev), weights=nfrag, minlength=ndev + 1)
        for di in range(ndev):
            stats["tx_packets"][di] += int(tx[di])
        if self.cache is not None:
            dev_cpu = np.array([d.cpu for d in self.r.devices], dtype=np.int64)
            looked = received & (cls != C_HDR)
            lk = np.bincount(dev_cpu[dev[looked]], minlength=len(self._lookups))
            for cc in range(len(self._lookups)):
                self._lookups[cc] += int(lk[cc])

    def _columns(self, tr: PacketTrace, p: dict, spare: int = 0) -> tuple:
        """Hot per-packet columns (see :func:`_column`), each with ``spare`` zeroed
        slots at the end for the echo replies the loop may inject."""
        return tuple(_column(a, code, spare) for a, code in (
            (tr.t, "d"), (tr.iif, "q"), (p["key"], "Q"), (p["ik"], "q"), (p["h"], "q"),
            (p["cls"], "q"), (p["cost"], "d"), (p["oif"], "q"), (p["nfrag"], "q"),
            (p["wire_s"], "d"), (p["fifo_slots"], "q")))

    def _rare_of(self, j: int, name: str):
        """A rarely used column of packet ``j`` (offered or injected)."""
        if j in self._rare_extra:
            return self._rare_extra[j][name]
        return self._rare[name].item(j)   # (ndarray.item: no numpy scalar made)

    def _path_cost_of(self, j: int) -> float:
        return float(self._rare_of(j, "path_cost"))

    def _ping_forwarded(self, tr, j, oif, dep, cols, outcome, t_start, t_depart, dyn, ping_rtt,
                        reflect, T) -> bool:
        """Track an echo request/reply crossing the router; inject the far end's reply.

        Returns True if a reply was injected (the loop must then look again at
        which packet comes next).
        """
        kind = self._rare_of(j, "kind")
        tag = self._rare_of(j, "tag")
        if kind == KIND["ping_request"] and oif in reflect:
            jn = self._inject_reply(tr, j, oif, dep + reflect[oif], cols, outcome, t_start,
                                    t_depart)
            heapq.heappush(dyn, (T[jn], jn))
            ping_rtt.setdefault(tag, [T[j], math.nan])
            return True
        if kind == KIND["ping_reply"]:
            ping_rtt.setdefault(tag, [math.nan, math.nan])[1] = dep
        return False

    def _fire_timers(self, t, flush_tx, busy, ivlog, prof_loop, rcu_tick,
                     use_rcu, user, ncpu, hz, jiffy, tr, H, i) -> float:
        """Run every timer due by ``t`` (on CPU 0, or on each CPU for RCU ticks)."""
        cache = self.cache
        dstops = cache.dst
        rcu = cache.rcu
        while True:
            rcu_due = rcu_tick if (use_rcu and rcu.pending) else math.inf
            due = min(cache.check_expire_at, cache.secret_at, dstops.gc_timer_at, rcu_due)
            if due > t:
                return rcu_tick
            if due == rcu_due:
                flush_tx(due)
                # a tick on every CPU: idle ones pass a quiescent state and run
                # their RCU tasklet
                for cc in range(ncpu):
                    if busy[cc] <= due:
                        rcu.quiescent(cc, due, "user_tick" if user else "idle")
                for cc in range(ncpu):
                    if busy[cc] <= due and rcu.done[cc]:
                        w = rcu.rcu_tasklet(cc, due)
                        prof_loop["rcu_tasklet"] += w
                        self._charge(cc, due, w, busy, ivlog)
                rcu_tick = _next_tick(due, hz)
                continue
            # the handler gets CPU 0 after the softirq work queued before it:
            # the TX completions up to then have happened
            flush_tx(busy[0] if busy[0] > due else due)
            if due == dstops.gc_timer_at:
                w = dstops.dst_run_gc(due)
            elif due == cache.check_expire_at:
                w = cache.rt_check_expire(due)
            else:
                w = cache.rt_secret_rebuild(due)
                self._rehash(tr, H, i)   # new hash key for every packet still to come
            prof_loop["timers"] += w
            self._charge(0, due, w, busy, ivlog)

    @staticmethod
    def _charge(cpu, due, w, busy, ivlog) -> None:
        """Charge ``w`` seconds of work (a timer, the RCU tasklet, the hard IRQ of a
        dropped packet) to ``cpu``, starting at ``due`` or when it is next free."""
        s0 = busy[cpu] if busy[cpu] > due else due
        ivlog[cpu].add(s0, w, s0 + w)
        busy[cpu] = s0 + w

    @staticmethod
    def _cpu_was_free(cpu, b, t, rcu, rcu_wake, user, in_ksoftirqd, ks_left, acct_t0, ctxsw, hz,
                      sched) -> float:
        """A packet arrives at ``t`` on a CPU that has had no softirq work since ``b``.

        The driver's RX interrupt is enabled again (the ring was drained), so
        its interrupt starts a fresh ``do_softirq`` from ``irq_exit``.  Returns
        the time the packet's service may start (``t``).

        Kernel: kernel/softirq.c ksoftirqd (sleeps when no softirq is pending),
        kernel/sched.c schedule.  If ksoftirqd was running it went to sleep at
        ``b``: with a user task that is a context switch (a quiescent state)
        and the user task runs from ``b``; without one the CPU idled.  A timer
        tick between ``b`` and ``t`` lands in user mode (or in idle).
        """
        if in_ksoftirqd[cpu]:
            _Run._ksoftirqd_stops(cpu, b, in_ksoftirqd, sched)
            if user:
                ks_left[cpu] -= b - acct_t0[cpu]
                acct_t0[cpu] = b
                ctxsw[cpu] += 1
                if rcu is not None:
                    rcu.quiescent(cpu, b, "ctxsw")
        if rcu_wake and rcu.gp_active:
            if user:
                tick = _next_tick(b, hz)
                if tick <= t:
                    rcu.quiescent(cpu, tick, "user_tick")
                    sched["user_ticks"][cpu] += 1
            else:
                rcu.quiescent(cpu, b, "idle")
        return t

    @staticmethod
    def _softirq_boundary(cpu, start, rcu, use_rcu, qs_handler, qs_loop, restarts,
                          in_ksoftirqd, ksoftirqd_wakeups, user, user_left, ks_left, acct_t0,
                          ctxsw, hz, prof_loop, sched):
        """net_rx_action returned with work left; what runs next, and where.

        Kernel: kernel/softirq.c __do_softirq (restart at most 10 times, then
        wake ksoftirqd), ksoftirqd; net/core/dev.c net_rx_action; kernel/sched.c
        (2.6.0 O(1) scheduler: scheduler_tick, schedule).  Returns the time
        the next ``net_rx_action`` pass starts and the RCU tasklet work done at
        this boundary.

        The model of one CPU under a NAPI flood, with a CPU-bound user task
        (the gettimeofday loop, nice 0) and ksoftirqd (nice 19):

        * While the user task is *current*, softirqs run from ``irq_exit`` of
          whatever interrupt comes (the timer tick, the output NIC's
          TX-completion interrupt; the input NIC's RX interrupt stays masked
          while it is being polled).  One ``do_softirq`` makes at most 10
          passes (the first plus 9 restarts), then wakes ksoftirqd and
          returns to the user task.  The user task is current all along, so
          the timer tick charges the softirq time to *its* timeslice
          (scheduler_tick decrements ``current->time_slice``): its 100 ms
          slice runs out after 100 ms of wall time, however little of it the
          task really had.
        * Back in user mode the task runs until the next interrupt:
          ``TX_IRQ_DELAY`` later (the output NIC's TX-completion interrupt,
          frames are always in flight under the flood) or the next tick,
          whichever is first.  Only if the tick comes first does a tick land
          in user mode -- a quiescent state in every RCU flavour.
        * When the user task's slice has run out, schedule() (a quiescent
          state) moves it to the *expired* array and runs ksoftirqd (woken
          into the *active* array).  ksoftirqd runs ``do_softirq`` back to
          back in process context (ticks land in kernel mode: no quiescent
          state) until its 10 ms slice runs out; then it is expired too, the
          arrays swap, and the user task (better priority) runs again with a
          fresh slice (a context switch: a quiescent state).  If ksoftirqd
          finds nothing pending it sleeps (see ``_cpu_was_free``).
        * Without a user task, ksoftirqd runs until the work is done (its
          own slice expiries are not modelled).

        Time with ksoftirqd current is summed per CPU (``sched["ksoftirqd_s"]``,
        summary ``cpu_ksoftirqd_pct``): top charges a task every tick that lands
        while it is current, so this is what top shows on the ksoftirqd line,
        hard IRQs that interrupt it included.

        Simplified / unverified: every kernel gets 2.6's restart rule (2.4's
        ``do_softirq`` is recalled as re-running only softirqs raised *during*
        its pass, so a NET_RX that re-raises itself would wake ksoftirqd after
        the first pass, not the tenth); interrupts are instantaneous (hard-IRQ time
        is folded into the per-packet costs); the user task and ksoftirqd are
        the only tasks on the CPU; priorities are the static ones (nice 0
        beats nice 19 whatever the sleep bonus); the TX-completion interrupt
        delay is the e1000 default as we recall it (``TX_IRQ_DELAY``).
        """
        w = 0.0
        if rcu is not None:
            if qs_handler:
                rcu.quiescent(cpu, start, "softirq_handler")
            if use_rcu and rcu.done[cpu]:
                w = rcu.rcu_tasklet(cpu, start)
                prof_loop["rcu_tasklet"] += w
        restarts[cpu] += 1
        if restarts[cpu] < MAX_SOFTIRQ_RESTART:
            return start, w
        # this do_softirq invocation gives up
        restarts[cpu] = 0
        if qs_loop and rcu is not None:
            rcu.quiescent(cpu, start, "softirq_loop")
        if in_ksoftirqd[cpu]:
            # ksoftirqd's loop: cond_resched() between do_softirq calls
            if not user:
                return start, w
            ks_left[cpu] -= start - acct_t0[cpu]
            acct_t0[cpu] = start
            if ks_left[cpu] > 0:
                return start, w
            # ksoftirqd's slice is used up: expired; the arrays swap, the user runs
            sched["ksoftirqd_expired"][cpu] += 1
            ks_left[cpu] = KSOFTIRQD_SLICE
            user_left[cpu] = USER_SLICE
            _Run._ksoftirqd_stops(cpu, start, in_ksoftirqd, sched)
            ctxsw[cpu] += 1
            if rcu is not None:
                rcu.quiescent(cpu, start, "ctxsw")
        else:
            # irq_exit: wakeup_softirqd
            ksoftirqd_wakeups[cpu] += 1
            if not user:
                _Run._ksoftirqd_runs(cpu, start, rcu, in_ksoftirqd, ctxsw, sched)
                return start, w
            user_left[cpu] -= start - acct_t0[cpu]
            acct_t0[cpu] = start
            if user_left[cpu] <= 0:
                # the user task's slice ran out during the batch: schedule() puts it
                # in the expired array and runs ksoftirqd
                sched["user_expired"][cpu] += 1
                _Run._ksoftirqd_runs(cpu, start, rcu, in_ksoftirqd, ctxsw, sched)
                return start, w
        # back in user mode until the next interrupt
        sched["slivers"][cpu] += 1
        end = start + TX_IRQ_DELAY
        tick = _next_tick(start, hz)
        if tick <= end:
            end = tick
            sched["user_ticks"][cpu] += 1
            if rcu is not None:
                rcu.quiescent(cpu, tick, "user_tick")
        return end, w

    @staticmethod
    def _ksoftirqd_runs(cpu, t, rcu, in_ksoftirqd, ctxsw, sched) -> None:
        """schedule() switches to ksoftirqd at ``t``: a context switch (a
        quiescent state), and ksoftirqd is the current task from now on."""
        ctxsw[cpu] += 1
        if rcu is not None:
            rcu.quiescent(cpu, t, "ctxsw")
        in_ksoftirqd[cpu] = True
        sched["_ksoftirqd_since"][cpu] = t

    @staticmethod
    def _ksoftirqd_stops(cpu, t, in_ksoftirqd, sched) -> None:
        """ksoftirqd stops being the current task at ``t`` (it sleeps, or its
        slice ran out): the time since it started is top's ksoftirqd time."""
        in_ksoftirqd[cpu] = False
        sched["ksoftirqd_s"][cpu] += t - sched["_ksoftirqd_since"][cpu]

    def _rehash(self, tr, H, i0: int) -> None:
        cache = self.cache
        if i0 >= len(tr):
            return
        sub = slice(i0, len(tr))
        h = cache.rt_hash(tr.daddr[sub], tr.saddr[sub], tr.iif[sub], tr.tos[sub])
        if isinstance(H, list):
            H[i0:len(tr)] = h.tolist()
        else:   # (compiled: a view of the column, written in place)
            _col_np(H, len(tr))[i0:] = h

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

    def _inject_reply(self, tr, j, oif, t_arr, cols, outcome, t_start, t_depart) -> int:
        """Append an echo reply arriving at ``t_arr`` on device ``oif``.

        The reply's array stages depend only on its header (and the hash
        key), so they are computed once per ping series and reused.
        """
        rnd = self.cache.hash_rnd if self.cache is not None else 0
        key = (int(tr.saddr[j]), int(tr.daddr[j]), oif, int(tr.length[j]), int(tr.tos[j]), rnd)
        hit = self._reply_cache.get(key)
        if hit is None:
            one = tr.take(np.array([j]))
            one.t[:] = t_arr
            one.iif[:] = oif
            one.saddr[:], one.daddr[:] = tr.daddr[j], tr.saddr[j]
            one.kind[:] = KIND["ping_reply"]
            one.ttl[:] = 64
            one.cloned[:] = False
            sub = self._prepare(one)
            self._classify(sub)
            vals = [v[0] for v in self._columns(one, sub)]
            rare = {name: sub[name][0].item() for name in RARE}
            hit = self._reply_cache[key] = (vals, rare)
        vals, rare = hit
        # the next spare slot of the columns (``outcome`` grows by one per reply)
        jn = len(outcome)
        for col, val in zip(cols, vals, strict=True):
            col[jn] = val
        cols[0][jn] = t_arr
        self._rare_extra[jn] = dict(rare, kind=KIND["ping_reply"], tag=int(tr.tag[j]))
        outcome.append(OC["drop_rx_missed"])    # (as every packet before the NIC takes it)
        t_start[jn] = t_arr
        t_depart[jn] = math.nan
        return jn



class _Accumulator:
    """Per-packet outputs and array-derived statistics, gathered window by window.

    A plain trace is one window.  With ``keep_times`` off, only the outcome,
    device, kind and tag of each packet are kept (8 bytes a packet).
    """

    def __init__(self, keep_times: bool, ncpu: int, edges: np.ndarray) -> None:
        self.keep_times = keep_times
        self.edges = edges
        self.parts: dict[str, list] = {k: [] for k in ("outcome", "dev", "kind", "tag", "t",
                                                         "t_start", "t_depart")}
        self.irq = np.zeros((ncpu, edges.size - 1))
        self.prof: dict[str, float] = {}

    def add(self, run, tr, p, outcome, t_start, t_depart, T, DEV, n0) -> None:
        """Keep one window's packets (offered ones first, then injected replies)."""
        from .result import hardirq_in_bins, profile_packets

        n = len(outcome)
        o = np.frombuffer(outcome, dtype=np.uint8).astype(np.int8)
        dev = _col_np(DEV, n).astype(np.int16)
        extra = sorted(run._rare_extra)
        kinds = np.concatenate([tr.kind, np.array([run._rare_extra[x]["kind"] for x in extra],
                                                  dtype=np.uint8)])
        tags = np.concatenate([tr.tag, np.array([run._rare_extra[x]["tag"] for x in extra],
                                                dtype=np.int32)])
        ts = np.frombuffer(t_start, dtype=np.float64, count=n)
        part = self.parts
        part["outcome"].append(o)
        part["dev"].append(dev)
        part["kind"].append(kinds)
        part["tag"].append(tags)
        if self.keep_times:
            part["t"].append(_col_np(T, n).astype(np.float64))
            part["t_start"].append(ts.copy())
            part["t_depart"].append(np.frombuffer(t_depart, dtype=np.float64, count=n).copy())
        self.irq += hardirq_in_bins(run.r, p, {"outcome": o, "t_start": ts, "dev": dev}, n0,
                                    self.edges)
        for name, secs in profile_packets(run, p, o[:n0]).items():
            self.prof[name] = self.prof.get(name, 0.0) + secs

    def packets(self) -> dict:
        """The per-packet arrays of the whole run."""
        out = {}
        for name, parts in self.parts.items():
            if parts:
                out[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.parts = {}
        return out

