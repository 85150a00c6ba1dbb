"""The IPv4 route cache and its garbage collection.

Kernel: net/ipv4/route.c (2.4.18, 2.4.22, 2.6.11).

Every input packet looks up the cache by (daddr, saddr, iif, tos).  A miss
runs the slow path (martian checks, FIB lookup through the policy rules),
allocates a new entry with ``dst_alloc`` and inserts it with
``rt_intern_hash``.  ``dst_alloc`` calls :meth:`RouteCache.rt_garbage_collect`
whenever the dst entry count exceeds ``gc_thresh``; when the GC fails with
the count still at ``max_size`` the allocation is refused and the packet
dropped ("dst cache overflow").

:meth:`RouteCache.ip_route_input` is what the run calls for every packet:
the hash-chain walk (a hit takes a reference for the packet), else the slow
path.  :func:`ip_rt_send_redirect` and :func:`ip_error` are route.c's ICMP
decisions, which the run calls for redirected and unroutable packets.

Simplifications
---------------
* Routing decisions are precomputed per packet by :meth:`Fib.fib_lookup`
  (the FIB is static during a run); the slow path charges their cost.
* Only input routes are cached; the router's own output (ICMP) charges an
  output lookup's cost but does not create cache entries.
* ``rt_check_expire`` stops after its share of buckets; the kernel's extra
  "jiffies changed" bail-out is not modelled.
* Time is continuous; ages and the GC's ``expire`` are compared in jiffies
  (integer halving, as the kernel does) using the profile's HZ.
"""

from __future__ import annotations

import cython
import numpy as np

from ..core.dev import flush_tx
from ..core.dropreason import OUTCOMES
from ..core.dst import DESTROYED, GARBAGE, HASHED, DstEntry, DstFamily, DstOps, dst_release
from ..core.rcu import Rcu
from ..errors import KnobError
from ..kernels import KernelProfile
from ..sim.clock import Clock
from ..sim.columns import Packets, vec
from ..sim.ledger import NO_DROP, Ledger
from .fib import RTN
from .icmp import ICMP_DEST_UNREACH, ICMP_REDIRECT, Icmp, RedirectState, redirect_allow

_RTN_LOCAL = RTN["local"]
_RTN_BROADCAST = RTN["broadcast"]
_RTN_UNREACHABLE = RTN["unreachable"]
_RTN_BLACKHOLE = RTN["blackhole"]
_RTN_PROHIBIT = RTN["prohibit"]
_O_MARTIAN = OUTCOMES["drop_martian"]
_O_DST_OVERFLOW = OUTCOMES["drop_dst_overflow"]
_O_NEIGH_OVERFLOW = OUTCOMES["drop_neigh_overflow"]
_RTN_UNICAST = RTN["unicast"]
_NO_DROP = NO_DROP

__all__ = ["RouteCache", "gc_scan_cost", "rt_hash_size", "rt_hash_jhash", "rt_hash_fold",
           "STAT_FIELDS", "ip_rt_send_redirect", "ip_error"]

# /proc/net/rt_cache_stat columns, in kernel order.
STAT_FIELDS = ("entries", "in_hit", "in_slow_tot", "in_slow_mc", "in_no_route", "in_brd",
               "in_martian_dst", "in_martian_src", "out_hit", "out_slow_tot", "out_slow_mc",
               "gc_total", "gc_ignored", "gc_goal_miss", "gc_dst_overflow",
               "in_hlist_search", "out_hlist_search")
(S_ENTRIES, S_IN_HIT, S_IN_SLOW_TOT, S_IN_SLOW_MC, S_IN_NO_ROUTE, S_IN_BRD, S_IN_MARTIAN_DST,
 S_IN_MARTIAN_SRC, S_OUT_HIT, S_OUT_SLOW_TOT, S_OUT_SLOW_MC, S_GC_TOTAL, S_GC_IGNORED,
 S_GC_GOAL_MISS, S_GC_DST_OVERFLOW, S_IN_HLIST_SEARCH, S_OUT_HLIST_SEARCH) = range(17)

PAGE_SHIFT = 12
PAGE_SIZE = 1 << PAGE_SHIFT   # i386
BUCKET_BYTES = 8          # chain pointer + lock, 8-byte aligned on 32-bit (kernel.md s1)
JHASH_GOLDEN_RATIO = 0x9E3779B9


def rt_hash_size(ram_mb: int, rhash_entries: int | None = None) -> int:
    """Number of route-cache hash buckets, as ``ip_rt_init`` sizes them.

    Kernel: net/ipv4/route.c ip_rt_init (2.4.24, 2.6.0; MaximeChretien/linux-history).  The
    goal is one page of table per 64 MB of RAM, counted in whole pages:
    ``num_physpages >> (26 - PAGE_SHIFT)``, so the division rounds *down*
    (a 127 MB box asks for one page, a 128 MB box for two); the table is
    then the smallest power-of-two number of pages that reaches the goal,
    and ``struct rt_hash_bucket`` (a chain pointer and a lock, aligned to 8)
    is 8 bytes.  The model's ``num_physpages`` is ``ram_mb`` whole
    megabytes; a real "128 MB" PC whose firmware keeps the top few pages
    counts fewer (set ``ram_mb=127`` for it, 512 buckets).  ``rhash_entries``
    (a later boot parameter, not in these trees) overrides, rounded down to
    a power of two.  The allocation-failure retry at a smaller order is not
    modelled.

    >>> rt_hash_size(256), rt_hash_size(128), rt_hash_size(127)
    (2048, 1024, 512)
    """
    if rhash_entries:
        return 1 << (int(rhash_entries).bit_length() - 1)
    num_physpages = int(ram_mb) << (20 - PAGE_SHIFT)
    goal = num_physpages >> (26 - PAGE_SHIFT)
    order = 0
    while (1 << order) < goal:
        order += 1
    return (PAGE_SIZE << order) // BUCKET_BYTES


def _u32(x):
    return np.asarray(x, dtype=np.uint32)


def rt_hash_jhash(daddr, saddr, iif, tos, rnd: int, mask: int):
    """Bucket index: ``jhash_3words(daddr, saddr ^ (iif << 5), tos, rnd) & mask``.

    Kernel: net/ipv4/route.c rt_hash_code (2.4.22, 2.6.11) with Bob Jenkins'
    jhash_3words (include/linux/jhash.h).  Vectorised over numpy arrays.
    """
    with np.errstate(over="ignore"):
        # (a, b and c are new arrays, so the mixing works in place: half the
        # time of building a temporary per step; the same uint32 arithmetic)
        a = _u32(daddr) + np.uint32(JHASH_GOLDEN_RATIO)
        b = _u32(iif) << np.uint32(5)
        b ^= _u32(saddr)
        b += np.uint32(JHASH_GOLDEN_RATIO)
        c = _u32(tos) + np.uint32(rnd & 0xFFFFFFFF)
        for sa, sb, sc in ((13, 8, 13), (12, 16, 5), (3, 10, 15)):
            a -= b
            a -= c
            a ^= c >> np.uint32(sa)
            b -= c
            b -= a
            b ^= a << np.uint32(sb)
            c -= a
            c -= b
            c ^= b >> np.uint32(sc)
        c &= np.uint32(mask)
    return c.astype(np.int64)


def rt_hash_fold(daddr, saddr, iif, tos, rnd: int, mask: int):
    """Bucket index of 2.4.18: an unkeyed XOR/shift fold (``rnd`` unused).

    Kernel: net/ipv4/route.c rt_hash_code (2.4.18).  Anyone who knows it can
    aim packets at one bucket: the weakness behind CVE-2003-0244.
    """
    d = _u32(daddr)
    h = ((d & np.uint32(0xF0F0F0F0)) >> np.uint32(4)) | ((d & np.uint32(0x0F0F0F0F))
                                                       << np.uint32(4))
    h ^= (_u32(saddr) ^ (_u32(iif) << np.uint32(5))) ^ _u32(tos)
    h ^= h >> np.uint32(16)
    h ^= h >> np.uint32(8)
    return (h & np.uint32(mask)).astype(np.int64)


def gc_scan_cost(cost: dict, buckets: int, entries: int) -> float:
    """Seconds a GC pass spends visiting ``buckets`` chains and ``entries`` entries.

    What ``rt_garbage_collect`` charges for its walk (on top of its entry cost
    ``rt_garbage_collect`` and the frees).
    """
    return buckets * cost["gc_bucket"] + entries * cost["gc_entry"]


def _chain_find(chain: list, key: int, ik: int) -> int:
    """``ip_route_input``'s chain walk: the position of the entry for flow
    (``key``, ``ik``) in its hash chain, or -1.  (Compiled, the same walk runs
    on borrowed pointers: ``_chain_find_c`` in route.pxd; ``tests/ipv4``
    checks that both find the same.)"""
    k = 0
    for x in chain:
        if x.key == key and x.ik == ik:
            return k
        k += 1
    return -1


def chain_find(chain: list, key: int, ik: int) -> int:
    """The chain walk :meth:`RouteCache.ip_route_input` runs: compiled, the
    borrowed-pointer walk of route.pxd (``_chain_find_c``), else
    :func:`_chain_find`.  (For tests: they must agree on every chain.)"""
    if cython.compiled:
        return _chain_find_c(chain, key, ik)  # noqa: F821 (route.pxd)
    return _chain_find(chain, key, ik)


@cython.locals(d=cython.long, now=cython.double, iwire=cython.double, saddr=cython.longlong)
def ip_rt_send_redirect(icmp: Icmp, sysctl: dict, d: int, now: float, e, iwire: float,
                        saddr: int) -> float:
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
        state = icmp.redir.setdefault(saddr, RedirectState())
    if redirect_allow(state, now, sysctl):
        icmp.icmp_send(ICMP_REDIRECT, d, now, iwire, saddr)
        return icmp.send_cost
    return 0.0


@cython.locals(rtype=cython.long, d=cython.long, now=cython.double, iwire=cython.double)
def ip_error(icmp: Icmp, e, rtype: int, key, d: int, now: float, iwire: float,
             saddr) -> int:
    """A packet the FIB could not route: maybe an ICMP error back.

    Kernel: net/ipv4/route.c ip_error: an unreachable route answers host
    unreachable, a prohibited one "administratively prohibited"; blackholes
    discard silently.  Its own token bucket per cached error entry (per
    flow ``key`` without a cache), then ``icmp_send``'s limiter.
    """
    if rtype == _RTN_UNREACHABLE or rtype == _RTN_PROHIBIT:
        if icmp.ip_error_allow(("dst", e.uid) if e is not None else ("flow", key), now):
            icmp.icmp_send(ICMP_DEST_UNREACH, d, now, iwire, saddr)
    return 0


class RouteCache(DstFamily):
    """The route cache of one run, with its GC state visible as attributes.

    Parameters
    ----------
    kernel : KernelProfile
    buckets : int
        Hash buckets (power of two), see :func:`rt_hash_size`.
    sysctl : dict
        Resolved values of ``gc_thresh``, ``max_size``, ``gc_min_interval``,
        ``gc_timeout``, ``gc_interval``, ``gc_elasticity``, ``secret_interval``.
    ncpus : int
    cost : dict
        Seconds per kernel function (``CostTable.fn``).
    rcu_maxbatch : int
    rng : numpy.random.Generator
        Source of the hash keys (``rt_hash_rnd``) and the first
        ``rt_check_expire`` delay.
    ledger : Ledger, optional
        Where the miss path leaves its seconds and drop reasons (shared with
        the run; a new one if not given).
    clock : Clock, optional
        The run's clock: the dst GC, ``rt_check_expire`` and
        ``rt_secret_rebuild`` timers are registered on it, in that order (a
        private clock if not given).

    Attributes
    ----------
    expire, equilibrium, rover, last_gc
        ``rt_garbage_collect``'s function-local statics (``expire`` in
        jiffies, as in the kernel).
    check_rover : int
        ``rt_check_expire``'s saved bucket.
    check_timer, secret_timer : Timer
        The ``rt_check_expire`` and ``rt_secret_rebuild`` timers
        (``check_expire_at``, ``secret_at``: their deadlines).
    on_rekey : callable(now) or None
        Told when ``rt_secret_rebuild`` has drawn a new hash key (the run
        re-hashes the packets still to come).
    stat : list[list[int]]
        Per-CPU ``rt_cache_stat`` counters (column 0 is filled on read).
    hash_rnd : int
        Current hash key.
    """

    def __init__(self, kernel: KernelProfile, buckets: int, sysctl: dict, ncpus: int,
                 cost: dict, rcu_maxbatch: int, rng: np.random.Generator,
                 ledger: Ledger | None = None, clock: Clock | None = None) -> None:
        self.kernel = kernel
        self.hz = kernel.hz
        self.buckets = buckets
        self.mask = buckets - 1
        self.log = buckets.bit_length() - 1
        self.table: list[list[DstEntry]] = [[] for _ in range(buckets)]
        self.max_size = sysctl["max_size"]
        self.gc_min_interval = sysctl["gc_min_interval"]
        self.gc_timeout = sysctl["gc_timeout"]
        self.gc_interval = sysctl["gc_interval"]
        self.gc_elasticity = sysctl["gc_elasticity"]
        self.secret_interval = sysctl["secret_interval"]
        self.cost = cost
        self.rng = rng
        self.hash_rnd = int(rng.integers(0, 2**32))
        self.ncpus = ncpus
        self.stat = [[0] * 17 for _ in range(ncpus)]
        self.ledger = ledger if ledger is not None else Ledger()
        self.clock = clock if clock is not None else Clock()
        self.dst = DstOps(sysctl["gc_thresh"], self, cost, self.ledger, self.clock)
        self.rcu = Rcu(kernel.rcu, ncpus, rcu_maxbatch, self.dst, cost)
        # rt_garbage_collect statics
        self.expire = int(round(self.gc_timeout * self.hz))
        self.equilibrium = 0
        self.rover = 0
        self.last_gc = -1e18
        self.check_rover = 0
        # timers
        first = self.gc_interval
        if kernel.check_expire_random:
            first += float(rng.random()) * self.gc_interval
        self.check_timer = self.clock.timer("rt_check_expire", self.rt_check_expire)
        self.check_timer.mod(first)
        self.secret_timer = self.clock.timer("rt_secret_rebuild", self.rt_secret_rebuild)
        if self.secret_interval > 0:
            self.secret_timer.mod(self.secret_interval)
        self.on_rekey = None
        # the hit path's per-CPU counts (added to rt_cache_stat by finish_stats)
        self.hsearch = vec("q", [0] * ncpus)    # chain entries stepped over
        self.misses = vec("q", [0] * ncpus)     # slow-path calls
        self.devices = []     # the run's NetDevices (TX completions before the slow path)
        self._c_kfree = cost["kfree_skb"]
        self._slot_slow = self.ledger.slot("route_slow")
        self._slot_gc = self.ledger.slot("rt_garbage_collect")
        # the ARP layer (routelab.ipv4.arp.Arp) new unicast routes bind their
        # neighbour through (None: no neighbours modelled, e.g. kernel 2.0)
        self.arp = None
        self.neigh_overflows = 0       # "Neighbour table overflow." (rt_intern_hash)
        self.flushes = 0
        self.hashed = 0             # entries currently in the table
        # one row per pass that ran: (time, cpu, outcome, buckets, entries_visited,
        # freed, seconds -- the pass's CPU time, its frees included)
        self.gc_log: list[tuple] = []
        self._hash = rt_hash_fold if kernel.hash == "fold" else rt_hash_jhash
        self._score_age = kernel.score == "age"
        self._c_rt_free = cost["rt_free"]
        # the profile's choices and the costs the miss path reads, looked up once
        self._intern_none = kernel.intern == "none"
        self._intern_24 = kernel.intern == "2.4"
        self._nocache = kernel.cache_insert == "nocache"
        self._c_slow = cost["ip_route_input_slow"]
        self._c_fib = cost["fib_lookup"]
        self._c_rule = cost["fib_rule"]
        self._c_intern = cost["rt_intern_hash"]
        self._c_step = cost["chain_step"]
        self._c_gc = cost["rt_garbage_collect"]

    # -- hashing --------------------------------------------------------------
    def rt_hash(self, daddr, saddr, iif, tos):
        """Bucket index for arrays of flows with the current key."""
        return self._hash(daddr, saddr, iif, tos, self.hash_rnd, self.mask)

    # -- scoring and expiry ---------------------------------------------------
    def jiffies(self, t: float) -> int:
        return int(t * self.hz)

    @cython.locals(hz=cython.long, score=cython.longlong)
    def rt_score(self, e: DstEntry, now: float) -> int:
        """Eviction score: lower goes first.

        Kernel: net/ipv4/route.c rt_score.  Bit 31 = valuable; bit 30 =
        output route or an ordinary (non broadcast/multicast/local) input
        route; low 30 bits = NOT(age) in 2.6, the use count in 2.4.
        """
        if self._score_age:
            hz = self.hz
            score = ~(int(now * hz) - int(e.lastuse * hz)) & ((1 << 30) - 1)
        else:
            score = min(e.use, (1 << 30) - 1)
        if e.valuable:
            score |= 1 << 31
        if e.output_route or not e.fast_clean and e.rtype != _RTN_LOCAL:
            score |= 1 << 30
        return score

    @cython.locals(age=cython.longlong, fast_clean=cython.bint)
    def rt_may_expire(self, e: DstEntry, tmo1: int, tmo2: int, now_j: int,
                      has_next: bool = True) -> bool:
        """May the GC free this entry?  (``tmo1``/``tmo2`` in jiffies)

        Kernel: net/ipv4/route.c rt_may_expire: never while referenced; yes
        once its own ``expires`` has passed; otherwise kept while young
        enough (``tmo1``, or ``tmo2`` for valuable entries).  A broadcast
        input entry is "fast-clean" (no ``tmo1`` grace) only when another
        entry follows it in the chain (rt_fast_clean tests ``rt_next``):
        ``has_next`` says whether one does.
        """
        if e.refcnt:
            return False
        if e.expires and now_j >= self.jiffies(e.expires):
            return True
        age = now_j - self.jiffies(e.lastuse)
        fast_clean = e.fast_clean and has_next
        if (age <= tmo1 and not fast_clean) or (age <= tmo2 and e.valuable):
            return False
        return True

    # -- freeing ----------------------------------------------------------------
    def rt_free(self, e: DstEntry, now: float, cpu: int) -> float:
        """Unhashed entry -> RCU (2.6) or straight to dst_free (2.4).

        Kernel: net/ipv4/route.c rt_free / rt_drop.
        """
        if e.state == HASHED:
            self.hashed -= 1
        return self._c_rt_free + self.rcu.call_rcu(cpu, e, now)

    # -- the hit path -----------------------------------------------------------
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    @cython.locals(j=cython.Py_ssize_t, now=cython.double, cpu=cython.long, e=DstEntry,
                   steps=cython.Py_ssize_t, chain=list, key=cython.ulonglong, ik=cython.long,
                   hh=cython.long, ts=cython.double, mark=cython.double, lg=Ledger)
    def ip_route_input(self, pk: Packets, j: int, now: float, cpu: int) -> DstEntry | None:
        """Route packet ``j`` of ``pk`` at ``now`` on ``cpu``: the cached entry,
        with a reference taken for the packet, or the slow path's.

        Kernel: net/ipv4/route.c ip_route_input: walk the hash chain of the
        packet's bucket for its (daddr, saddr, iif, tos); a hit updates
        ``lastuse`` and the use count.  A miss runs
        :meth:`ip_route_input_slow` (after the TX completions due by now:
        the slow path reads reference counts).  Adds the walk and the slow
        path to ``ledger.svc``; a refused packet (``None``, ``ledger.why``
        its outcome) is dropped: its outcome written, its path cost taken
        back (it is only freed).
        """
        lg = self.ledger
        key = pk.key[j]
        ik = pk.ik[j]
        hh = pk.h[j]
        chain = self.table[hh]
        if cython.compiled:
            _chain_prefetch(self.table, cython.address(pk.h[j]), pk.n0 - j)  # noqa: F821
            steps = _chain_find_c(chain, key, ik)  # noqa: F821 (route.pxd)
        else:
            steps = _chain_find(chain, key, ik)
        e = None
        if steps >= 0:
            e = cython.cast(DstEntry, chain[steps])
        else:
            steps = len(chain)
        if steps:
            self.hsearch[cpu] += steps
            lg.svc += steps * self._c_step
        if e is not None:
            # (in_hit: lookups minus misses, counted at the end)
            e.lastuse = now
            e.use += 1
            e.refcnt += 1
            lg.why = _NO_DROP
            return e
        self.misses[cpu] += 1
        flush_tx(self.devices, now)
        mark = lg.total
        e = self.ip_route_input_slow(now, cpu, key, ik, hh, pk.rtype[j], pk.oif[j], pk.gw[j],
                                     pk.nrules[j], pk.martian[j], pk.vfib[j])
        ts = lg.t
        lg.svc += ts
        # (the GC and the neighbour layer, if they ran, charged their own slots)
        lg.charge_rest(self._slot_slow, ts, mark)
        if e is None:
            lg.drop(j, lg.why)
            # the packet's cost assumed a completed path; a refused packet is freed
            lg.svc += self._c_kfree - pk.path_cost[j]
        return e

    def finish_stats(self, lookups: list) -> None:
        """End of a run: ``in_hit`` (lookups minus slow-path calls) and
        ``in_hlist_search`` into the per-CPU ``rt_cache_stat`` rows."""
        for cc, row in enumerate(self.stat):
            row[S_IN_HIT] += lookups[cc] - self.misses[cc]
            row[S_IN_HLIST_SEARCH] += self.hsearch[cc]

    # -- slow path ------------------------------------------------------------
    # Each step returns its main result (the entry, or the seconds) and leaves
    # the others on the run's ledger (``self.ledger``: ``t`` seconds, ``why``
    # the drop reason, ``ok``), so that compiled they pass C values, with no
    # tuple or float object made per packet.
    def _check_args(self, cpu: int, h: int = 0) -> None:
        """The entry points' index checks (the compiled miss path then indexes
        the per-CPU statistics and the hash table without bounds checks)."""
        if not 0 <= cpu < self.ncpus:
            raise KnobError("cpu", cpu, f"a CPU number in [0, {self.ncpus - 1}]")
        if not 0 <= h <= self.mask:
            raise KnobError("hash bucket", h, f"an integer in [0, {self.mask}]")

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(e=DstEntry, t=cython.double, lg=Ledger)
    def ip_route_input_slow(self, now: float, cpu: int, key: int, ik: int, h: int,
                            rtype: int, oif: int, gw: int, nrules: int,
                            martian: int, vfib: float = 0.0) -> DstEntry | None:
        """Resolve a cache miss: the new entry, or ``None`` if the packet is refused.

        Kernel: net/ipv4/route.c ip_route_input_slow.  ``martian`` is 0, 1
        (martian source) or 2 (martian destination); martians are counted and
        refused without a cache entry.  ``vfib`` is the time of
        fib_validate_source's reverse FIB lookup(s) (routelab.prepare
        ``_validate_source_cost``), paid by a packet the FIB routes (unicast
        or local) after its own lookup.  A FIB failure makes a cached
        *unreachable* entry (``in_no_route``).  On success the entry comes
        back with a reference held for the packet.  The seconds are left in
        ``ledger.t``, the reason of a refusal in ``ledger.why`` (an outcome
        code: ``drop_martian`` or ``drop_dst_overflow``; ``NO_DROP`` if not
        refused; ``drop_neigh_overflow`` when the new route could not bind a
        neighbour).
        """
        self._check_args(cpu, h)
        lg = self.ledger
        st = self.stat[cpu]
        t = self._c_slow
        if martian:
            st[S_IN_MARTIAN_SRC if martian == 1 else S_IN_MARTIAN_DST] += 1
            lg.t = t
            lg.why = _O_MARTIAN
            return None
        t += self._c_fib + nrules * self._c_rule + vfib
        if rtype == _RTN_UNREACHABLE or rtype == _RTN_BLACKHOLE or rtype == _RTN_PROHIBIT:
            st[S_IN_NO_ROUTE] += 1
        elif rtype == _RTN_BROADCAST:
            st[S_IN_BRD] += 1
        else:
            st[S_IN_SLOW_TOT] += 1
        e = self.dst.dst_alloc(now, cpu)
        t += lg.t
        if e is None:
            lg.t = t
            lg.why = _O_DST_OVERFLOW
            return None
        e.key = key
        e.ik = ik
        e.rtype = rtype
        e.oif = oif
        e.gw = gw
        e.fast_clean = rtype == _RTN_BROADCAST
        e.lastuse = now
        e.use = 1
        e.refcnt = 1          # the packet's reference (skb->dst)
        e = self.rt_intern_hash(e, h, now, cpu)
        lg.t = t + lg.t
        if e is None:
            lg.why = _O_NEIGH_OVERFLOW
            return None
        lg.why = _NO_DROP
        return e

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(r=DstEntry, cand=DstEntry,
                   key=cython.ulonglong, ik=cython.long,
                   length=cython.Py_ssize_t, pos=cython.Py_ssize_t, long_chain=cython.bint,
                   scoring=cython.bint, min_score=cython.longlong, s=cython.longlong,
                   t=cython.double, ts=cython.double, bound=cython.bint, chain=list)
    def rt_intern_hash(self, e: DstEntry, h: int, now: float, cpu: int) -> DstEntry | None:
        """Insert a new entry at the head of its chain; return the entry used.

        Kernel: net/ipv4/route.c rt_intern_hash (2.4.22, 2.4.24, 2.6.0).  If
        an equal key is already cached it is moved to the head and used
        instead.  Otherwise the chain is trimmed by freeing its lowest-scoring
        unreferenced entry when it holds more than ``gc_elasticity`` entries
        (2.4.23+, 2.6) or, in 2.4.22, more than 1 with a non-valuable
        candidate; 2.4.18 never trims.  Then a unicast route binds its
        neighbour (``arp_bind_neighbour``, keyed by the gateway or, on-link,
        the destination itself).  If the neighbour table is full and its
        forced GC frees nothing, the forwarding path (softirq: no retry, no
        route-cache shrink) prints "Neighbour table overflow.", drops the new
        entry and returns ``None``.  The ``nocache`` profile frees the new
        entry instead of inserting it (story 1's hack), after binding it.
        The seconds are left in ``ledger.t`` (the binding's included; the
        neighbour layer charges its own slots).
        """
        self._check_args(cpu, h)
        chain = self.table[h]
        key, ik = e.key, e.ik
        length = len(chain)
        long_chain = length > self.gc_elasticity
        # The kernel scores every unreferenced entry while it looks for the key;
        # the scores only matter if the chain may be trimmed, which its length
        # alone decides (nocache never trims: it does not insert), so the model
        # scores only then.
        scoring = (not self._intern_none and not self._nocache
                   and (long_chain or (self._intern_24 and length > 1)))
        cand = None
        min_score = 1 << 32
        for r in chain:
            if r.key == key and r.ik == ik:
                # someone raced us (or a nocache profile): reuse the cached one
                pos = chain.index(r)
                del chain[pos]
                chain.insert(0, r)
                r.lastuse = now
                r.use += 1
                r.refcnt += 1
                dst_release(e)          # rt_drop: the new entry loses its packet
                t = self._c_intern + (pos + 1) * self._c_step
                self.ledger.t = t + self.rt_free(e, now, cpu)
                return r
            if scoring and r.refcnt == 0:
                s = self.rt_score(r, now)
                if s <= min_score:
                    cand, min_score = r, s
        t = self._c_intern + length * self._c_step
        if self._nocache:
            # Walter's hack: never insert; the packet keeps its own dst, which
            # is freed at once and so lands on the dst garbage list.
            bound = self._bind(e, now)
            ts = self.ledger.t
            t += ts + self.rt_free(e, now, cpu)
            self.ledger.t = t
            return e if bound else None
        # trim: the lowest-scoring unreferenced entry (the last of equal scores)
        if cand is not None and (long_chain or not (min_score >> 31) & 1):
            chain.remove(cand)
            t += self.rt_free(cand, now, cpu)
        bound = self._bind(e, now)
        ts = self.ledger.t
        if not bound:
            # rt_drop: the packet's reference goes, the entry is freed
            t += ts + self.rt_free(e, now, cpu)
            self.ledger.t = t
            return None
        t += ts
        chain.insert(0, e)
        e.state = HASHED
        e.bucket = h
        self.hashed += 1
        self.ledger.t = t
        return e

    def _bind(self, e: DstEntry, now: float) -> bool:
        """arp_bind_neighbour for a unicast route; False on ENOBUFS (the
        entry's packet reference is dropped: rt_drop).  Seconds in ``ledger.t``."""
        if self.arp is None or e.rtype != _RTN_UNICAST:
            self.ledger.t = 0.0
            return True
        gateway = e.gw if e.gw else e.key >> 32        # rt_gateway (rt_set_nexthop)
        n = self.arp.arp_bind_neighbour(e.oif, gateway, now)
        if isinstance(n, int):
            self.neigh_overflows += 1
            dst_release(e)
            return False
        e.neigh = n
        e.hh = n.hh
        return True

    # -- garbage collection ---------------------------------------------------
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(t=cython.double, entries=cython.longlong,
                   goal=cython.longlong, buckets=cython.long, now_j=cython.longlong,
                   expire=cython.longlong, tmo=cython.longlong, mask=cython.long, k=cython.long,
                   visited_b=cython.long, visited_e=cython.long, freed=cython.long,
                   n=cython.Py_ssize_t, i=cython.Py_ssize_t, r=DstEntry, chain=list, keep=list,
                   table=list, dst=DstOps, lg=Ledger)
    def rt_garbage_collect(self, now: float, cpu: int) -> float:
        """Shrink the cache; return the seconds (``ledger.ok``: may the
        allocation go ahead).

        Kernel: net/ipv4/route.c rt_garbage_collect (2.4.22, 2.6.11), called
        from dst_alloc (through :meth:`gc`).  Always runs as if from softirq
        (the forwarding path): one pass over the table at most.  See
        kernel.md s1 for the steps; they are followed in order below.
        """
        self._check_args(cpu)
        lg = self.ledger
        st = self.stat[cpu]
        c = self.cost
        st[S_GC_TOTAL] += 1
        dst = self.dst
        entries = dst.entries
        t = self._c_gc
        if now - self.last_gc < self.gc_min_interval and entries < self.max_size:
            st[S_GC_IGNORED] += 1
            lg.ok = True
            return t
        buckets = self.buckets
        goal = entries - (self.gc_elasticity << self.log)
        if goal <= 0:
            if self.equilibrium < dst.gc_thresh:
                self.equilibrium = dst.gc_thresh
            goal = entries - self.equilibrium
            if goal > 0:
                self.equilibrium += min(goal // 2, buckets)
                goal = entries - self.equilibrium
        else:
            goal = max(goal // 2, buckets)
            self.equilibrium = entries - goal
        if now - self.last_gc >= self.gc_min_interval:
            self.last_gc = now
        if goal <= 0:
            self.equilibrium += goal
            lg.ok = True
            return t + self._work_done()
        # one pass, round-robin from the rover
        now_j = self.jiffies(now)
        expire = self.expire
        table = self.table
        mask = self.mask
        k = self.rover
        visited_b = visited_e = freed = 0
        for visited_b in range(1, buckets + 1):  # noqa: B007 (read after)
            k = (k + 1) & mask
            chain = table[k]
            if chain:
                tmo = expire
                n = len(chain)
                keep = None         # the survivors, once one entry has gone
                for i in range(n):
                    r = chain[i]
                    if self.rt_may_expire(r, tmo, expire, now_j, i != n - 1):
                        t += self.rt_free(r, now, cpu)
                        if keep is None:
                            keep = chain[:i]
                    else:
                        tmo >>= 1
                        if keep is not None:
                            keep.append(r)
                visited_e += n
                if keep is not None:
                    freed += n - len(keep)
                    goal -= n - len(keep)
                    table[k] = keep
                    if goal <= 0:       # (goal only moves here: it starts > 0)
                        break
        self.rover = k
        t += gc_scan_cost(c, visited_b, visited_e)
        if goal <= 0:
            t += self._work_done()
            self.gc_log.append((now, cpu, "done", visited_b, visited_e, freed, t))
            lg.ok = True
            return t
        st[S_GC_GOAL_MISS] += 1
        if self.expire:
            self.expire >>= 1
        if dst.entries < self.max_size:
            self.gc_log.append((now, cpu, "miss", visited_b, visited_e, freed, t))
            lg.ok = True
            return t
        st[S_GC_DST_OVERFLOW] += 1
        self.gc_log.append((now, cpu, "overflow", visited_b, visited_e, freed, t))
        lg.ok = False
        return t

    @cython.locals(mark=cython.double, t=cython.double)
    def gc(self, now: float, cpu: int) -> float:
        """``ipv4_dst_ops.gc``: the seam through which ``dst_alloc`` calls
        :meth:`rt_garbage_collect`, whose seconds it charges to the
        ``rt_garbage_collect`` slot (what the entries it freed charged to
        their own slots -- a neighbour destroyed -- excluded)."""
        mark = self.ledger.total
        t = self.rt_garbage_collect(now, cpu)
        self.ledger.charge_rest(self._slot_gc, t, mark)
        return t

    def _work_done(self) -> float:
        self.expire += int(round(self.gc_min_interval * self.hz))
        if (self.expire > int(round(self.gc_timeout * self.hz))
                or self.dst.entries < self.dst.gc_thresh):
            self.expire = int(round(self.gc_timeout * self.hz))
        return 0.0

    # -- timers -----------------------------------------------------------------
    def rt_check_expire(self, now: float) -> float:
        """Periodic timer: scan a share of the buckets, free idle entries.

        Kernel: net/ipv4/route.c rt_check_expire.  Scans
        ``buckets * gc_interval / gc_timeout`` buckets from its own rover;
        entries whose own ``expires`` passed go even if referenced (they are
        unhashed; the reference keeps them alive on the dst garbage list).
        """
        c = self.cost
        t = c["rt_check_expire"]
        now_j = self.jiffies(now)
        tmo_base = int(round(self.gc_timeout * self.hz))
        n = min(self.buckets, max(1, int(self.buckets * self.gc_interval / self.gc_timeout)))
        k = self.check_rover
        visited_e = 0
        cpu = 0
        for _ in range(n):
            k = (k + 1) & self.mask
            chain = self.table[k]
            if not chain:
                continue
            # Like the GC, each chain starts at the full timeout and halves per kept
            # entry (rt_check_expire: ``unsigned long tmo = ip_rt_gc_timeout``).
            tmo = tmo_base
            keep = []
            last = chain[-1]
            for r in chain:
                visited_e += 1
                if r.expires:
                    # time_before_eq(now, expires): kept up to and including expires
                    if now_j <= self.jiffies(r.expires):
                        tmo >>= 1
                        keep.append(r)
                        continue
                elif not self.rt_may_expire(r, tmo, tmo_base, now_j, r is not last):
                    tmo >>= 1
                    keep.append(r)
                    continue
                t += self.rt_free(r, now, cpu)
            if len(keep) != len(chain):
                self.table[k] = keep
        self.check_rover = k
        self.check_timer.mod(now + self.gc_interval)
        return t + n * c["gc_bucket"] + visited_e * c["gc_entry"]

    def rt_run_flush(self, now: float, cpu: int = 0) -> float:
        """Unhash and free every entry; pick a new hash key.

        Kernel: net/ipv4/route.c rt_run_flush (via rt_cache_flush and
        rt_secret_rebuild), which re-randomises ``rt_hash_rnd``.
        """
        self.hash_rnd = int(self.rng.integers(0, 2**32))
        c = self.cost
        t = 0.0
        for k, chain in enumerate(self.table):
            if chain:
                for r in chain:
                    t += self.rt_free(r, now, cpu)
                self.table[k] = []
        self.flushes += 1
        return t + self.buckets * c["gc_bucket"]

    def rt_secret_rebuild(self, now: float) -> float:
        """``secret_interval`` timer: flush the cache with a new key."""
        self.secret_timer.mod(now + self.secret_interval)
        t = self.rt_run_flush(now)
        if self.on_rekey is not None:
            self.on_rekey(now)
        return t

    @property
    def check_expire_at(self) -> float:
        """When ``rt_check_expire`` runs next."""
        return self.check_timer.at

    @property
    def secret_at(self) -> float:
        """When ``rt_secret_rebuild`` runs next (``inf``: never)."""
        return self.secret_timer.at

    # -- views ------------------------------------------------------------------
    def stat_rows(self) -> list[list[int]]:
        """Per-CPU rt_cache_stat rows, ``entries`` (global) in column 0."""
        rows = []
        for row in self.stat:
            r = list(row)
            r[S_ENTRIES] = self.dst.entries
            rows.append(r)
        return rows

    def census(self) -> dict:
        """Entries by life-cycle state (for invariants): hashed, rcu, garbage."""
        return {"hashed": sum(len(ch) for ch in self.table), "rcu": self.rcu.pending,
                "garbage": len(self.dst.garbage), "entries": self.dst.entries}


__all__ += ["S_IN_HIT", "S_IN_HLIST_SEARCH", "S_GC_DST_OVERFLOW", "DESTROYED", "GARBAGE"]
