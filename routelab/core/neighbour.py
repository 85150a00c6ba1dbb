"""The generic neighbour table: NUD states, timers, the unresolved queue, GC.

Kernel: net/core/neighbour.c, include/net/neighbour.h (2.4.24; the same logic
and defaults in 2.6.0).  The ARP specifics (hash, constructor, solicitation,
error report) live in :mod:`routelab.ipv4.arp`, which builds the table.

What matters for story 1:

* The table has a fixed 32 buckets (``NEIGH_HASHMASK``) and is never resized,
  so a chain holds about ``entries / 32`` neighbours.
* ``neigh_alloc`` runs :meth:`NeighTable.neigh_forced_gc` -- a walk over
  *every* entry -- whenever the table holds more than ``gc_thresh3`` entries
  (or more than ``gc_thresh2`` and the last forced GC is over 5 s old), and
  fails (``-ENOBUFS``) if that frees nothing while above ``gc_thresh3``.
  Only entries nobody references (``refcnt == 1``: the table's own) can go;
  every cached route holds one reference and a pending NUD timer another.
* An unresolved neighbour sends ``mcast_probes`` broadcasts ``retrans_time``
  apart, queues up to ``queue_len`` packets (a new one pushes out the
  oldest), then turns FAILED and hands each queued packet to the protocol's
  error report (ICMP host unreachable and route expiry, through the sink).

The engine interface
--------------------
Times are simulated seconds.  The second results follow the ledger
convention of the compiled stages (:mod:`routelab.sim.ledger`): a function
whose main result is the CPU time it cost returns those seconds; one that
returns something else (an entry, an errno, an outcome) leaves its seconds
in ``ledger.t``.  Those totals include the seconds the sink's callbacks
return.  Each function also charges its *own* cost to the ledger slot of
its kernel name (slots made once, when the table is built; sink work
excluded: the sink charges that itself), for the per-function profile.

Packets are opaque tokens ``j`` travelling with their dst (an opaque object
the engine reference-counts).  A token handed to :meth:`neigh_event_send`
that comes back ``NEIGH_QUEUED`` ends later in exactly one sink call:
``sink.neigh_output(j, dst, now)`` (resolved: transmit it),
``sink.neigh_queue_drop(j, dst, now)`` (pushed out of the full queue, or
purged: kfree_skb, so dst_release) or the protocol's error report.
``NEIGH_XMIT`` means "transmit it now", ``NEIGH_DROP`` "freed here"
(kfree_skb).  Each sink method returns the CPU seconds it cost.

Timers use the clock API ``clock.timer(name, fire, cpu) -> Timer`` with
``Timer.mod(at)``, ``Timer.stop()`` and ``Timer.at`` (``inf`` when not
armed); ``fire(now)`` returns CPU seconds.  The table relies on a fired
timer reading ``at == inf`` inside its handler (a kernel timer is detached
before it runs), which is how it tells ``del_timer`` succeeding from not.

Simplifications
---------------
* Continuous time: deadlines are ``now + interval``, not rounded to jiffies
  (the kernel's differ by under one tick, 10 ms at HZ 100); ages are
  compared in seconds.
* One :class:`NeighParms` for every device.  2.4.24 copies the default parms
  into each device's ``in_dev->arp_parms`` when the device comes up, so a
  later write to ``net.ipv4.neigh.default.*`` changes only the table-wide
  ``gc_*`` values for existing devices; the model applies all of them.
* The hardware-header cache is implied: a CONNECTED neighbour's packets go
  straight out (``hh_output`` = ``dev_queue_xmit``) without touching
  ``used``, as they do once the dst has its hh entry.  No proxy ARP, no
  ``neigh_ifdown``/``neigh_changeaddr``, no netlink, no locks (one CPU's
  view: the SMP races the second chain walk in :meth:`neigh_create` guards
  against never happen, but the walk is still paid for).
* :meth:`neigh_forced_gc` charges a walk over every hashed entry, as the
  kernel does, but evaluates its test only on the entries an index says
  are unreferenced (``refcnt == 1``): the others fail the test's first term
  anyway, and the freed set is the same.
* Timer objects are pooled per table and reused by later neighbours, so the
  clock's "ties in creation order" refers to the pool; the kernel runs
  same-jiffy timers in the order they were armed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import KnobError
from ..sim.ledger import Ledger
from ..sysctl import SYSCTLS
from .dst import HHCache
from .skbuff import int_to_ip

__all__ = [
    "NUD_INCOMPLETE", "NUD_REACHABLE", "NUD_STALE", "NUD_DELAY", "NUD_PROBE", "NUD_FAILED",
    "NUD_NOARP", "NUD_PERMANENT", "NUD_NONE", "NUD_IN_TIMER", "NUD_VALID", "NUD_CONNECTED",
    "NUD_NAMES", "NEIGH_HASHMASK", "NEIGH_XMIT", "NEIGH_QUEUED", "NEIGH_DROP",
    "ENOBUFS", "EINVAL", "EPERM", "STAT_FIELDS", "NeighParms", "Neighbour", "NeighTable",
    "NeighSink", "neigh_config",
]

# NUD states (include/net/neighbour.h); the kernel exports these values to user space.
NUD_INCOMPLETE = 0x01
NUD_REACHABLE = 0x02
NUD_STALE = 0x04
NUD_DELAY = 0x08
NUD_PROBE = 0x10
NUD_FAILED = 0x20
NUD_NOARP = 0x40
NUD_PERMANENT = 0x80
NUD_NONE = 0x00
NUD_IN_TIMER = NUD_INCOMPLETE | NUD_DELAY | NUD_PROBE
NUD_VALID = NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY
NUD_CONNECTED = NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE

NUD_NAMES = {NUD_NONE: "NONE", NUD_INCOMPLETE: "INCOMPLETE", NUD_REACHABLE: "REACHABLE",
             NUD_STALE: "STALE", NUD_DELAY: "DELAY", NUD_PROBE: "PROBE", NUD_FAILED: "FAILED",
             NUD_NOARP: "NOARP", NUD_PERMANENT: "PERMANENT"}

NEIGH_HASHMASK = 0x1F          # 32 buckets, fixed in 2.4.24 and 2.6.0

# Outcomes of neigh_event_send / neigh_resolve_output for the packet handed in.
NEIGH_XMIT = 0     # transmit it now (the kernel's return 0)
NEIGH_QUEUED = 1   # held on arp_queue; it ends later through one sink call
NEIGH_DROP = 2     # freed here: no probes configured, entry FAILED (kfree_skb)

# Linux errno values, returned negated as the kernel does.
EPERM = 1
EINVAL = 22
ENOBUFS = 105

_FORCED_GC_AGE = 5.0   # neigh_alloc: forced GC above gc_thresh2 if last_flush is > 5*HZ old
_RAND_INTERVAL = 300.0  # neigh_periodic_timer re-draws reachable_time after 300*HZ

#: Counter names, in the column order of /proc/net/stat/arp_cache.  That file
#: first appears in 2.6.9; 2.4.24 keeps only allocs, res_failed and the two
#: rcv_probes counters (IPv6 only) in tbl->stats and exports none of them.
#: The model keeps the 2.6.9 set (hash_grows stays 0: the table never grows).
STAT_FIELDS = ("entries", "allocs", "destroys", "hash_grows", "lookups", "hits", "res_failed",
               "rcv_probes_mcast", "rcv_probes_ucast", "periodic_gc_runs", "forced_gc_runs")
#: Model counters beyond 2.6.9's file (named like later kernels' columns).
EXTRA_FIELDS = ("table_fulls", "unres_discards")


# --- parameters -----------------------------------------------------------------------------

# NeighParms field -> knob in routelab.sysctl (ranges live there).
_PARMS_KNOBS = {"base_reachable_time": "neigh_base_reachable_time",
                "retrans_time": "neigh_retrans_time",
                "gc_staletime": "neigh_gc_stale_time",
                "delay_probe_time": "neigh_delay_first_probe_time",
                "queue_len": "neigh_unres_qlen",
                "ucast_probes": "neigh_ucast_solicit",
                "mcast_probes": "neigh_mcast_solicit",
                "app_probes": "neigh_app_solicit"}
# NeighTable argument -> knob.
_TABLE_KNOBS = {"gc_thresh1": "neigh_gc_thresh1", "gc_thresh2": "neigh_gc_thresh2",
                "gc_thresh3": "neigh_gc_thresh3", "gc_interval": "neigh_gc_interval"}


@dataclass(slots=True)
class NeighParms:
    """Per-table neighbour parameters, in seconds and counts.

    Kernel: include/net/neighbour.h struct neigh_parms; defaults from
    net/ipv4/arp.c ``arp_tbl`` (2.4.24, HZ 100): base_reachable_time 30 s,
    retrans_time 1 s, gc_staletime 60 s, delay_probe_time 5 s, queue_len 3,
    ucast_probes 3, mcast_probes 3, app_probes 0 (not initialised),
    anycast_delay 1 s, proxy_delay 0.8 s, proxy_qlen 64, locktime 1 s.
    ``reachable_time`` is re-drawn by the table (uniform in [0.5, 1.5) x
    base) at init and by the periodic timer.  Fields with a knob are
    validated against it; set them through :func:`dataclasses.replace`.
    """

    base_reachable_time: float = 30.0
    retrans_time: float = 1.0
    gc_staletime: float = 60.0
    reachable_time: float = 30.0
    delay_probe_time: float = 5.0
    queue_len: int = 3
    ucast_probes: int = 3
    app_probes: int = 0
    mcast_probes: int = 3
    anycast_delay: float = 1.0   # proxy/anycast only: unused by the model
    proxy_delay: float = 0.8     # proxy only: unused by the model
    proxy_qlen: int = 64         # proxy only: unused by the model
    locktime: float = 1.0

    def __post_init__(self) -> None:
        for fld, knob in _PARMS_KNOBS.items():
            setattr(self, fld, SYSCTLS[knob].validate(getattr(self, fld)))
        for fld in ("reachable_time", "anycast_delay", "proxy_delay", "locktime"):
            v = getattr(self, fld)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise KnobError(fld, v, "a number in [0, inf) s")
        if self.reachable_time <= 0:
            raise KnobError("reachable_time", self.reachable_time, "a number in (0, inf) s")

    @property
    def max_probes(self) -> int:
        """neigh_max_probes: ucast + app + mcast solicitations before FAILED."""
        return self.ucast_probes + self.app_probes + self.mcast_probes


def neigh_config(sysctl: Mapping[str, Any] | None = None) -> tuple[NeighParms, dict]:
    """Parms and table arguments from ``neigh_*`` sysctl values.

    Parameters
    ----------
    sysctl : mapping, optional
        Values by knob name (``neigh_retrans_time`` ...); missing or ``None``
        ones take the 2.4.24 defaults.  Other keys are ignored, so a
        router's whole sysctl dict can be passed.

    Returns
    -------
    (NeighParms, dict)
        The parms, and ``gc_thresh1/2/3`` and ``gc_interval`` for
        :class:`NeighTable`.
    """
    sysctl = sysctl or {}

    def get(knob: str) -> Any:
        v = sysctl.get(knob)
        return SYSCTLS[knob].default if v is None else SYSCTLS[knob].validate(v)

    parms = NeighParms(**{fld: get(knob) for fld, knob in _PARMS_KNOBS.items()})
    return parms, {arg: get(knob) for arg, knob in _TABLE_KNOBS.items()}


# --- entries -------------------------------------------------------------------------------


class Neighbour:
    """One neighbour entry (struct neighbour).

    ``key`` is the protocol address (an IPv4 int for ARP), ``dev`` the
    device index the hash mixes in.  ``refcnt`` counts the table's own
    reference (while hashed), one per dst bound to it, one per caller
    holding it, and one while its NUD timer is pending.  ``arp_queue`` holds
    ``(j, dst)`` pairs of packets waiting for resolution, oldest first.
    ``ha`` is an opaque link-layer address (``None`` until learnt).
    """

    __slots__ = ("key", "dev", "hash", "_nud", "probes", "confirmed", "updated", "used",
                 "refcnt", "dead", "ha", "type", "arp_queue", "timer", "hh", "_count")

    def __init__(self, now: float, count: list | None = None) -> None:
        # the table's one-element count of hashed INCOMPLETE entries, kept up
        # to date by the state setter and by NeighTable._unlink
        self._count = count if count is not None else [0]
        self._nud = NUD_NONE
        self.dead = True          # not yet (or no longer) in the hash table
        self.key = 0
        self.dev = 0
        self.hash = 0
        self.hh = HHCache()       # shared with the routes bound to it
        self.nud_state = NUD_NONE
        self.probes = 0
        self.confirmed = now
        self.updated = now
        self.used = now
        self.refcnt = 1
        self.ha: Any = None
        self.type = "unicast"
        self.arp_queue: list[tuple[Any, Any]] = []
        self.timer: _NeighTimer | None = None

    @property
    def nud_state(self) -> int:
        """The NUD state; setting it keeps the header cache in step (a
        CONNECTED entry's routes send straight through it: neigh_connect /
        neigh_suspect switch ``hh_output``)."""
        return self._nud

    @nud_state.setter
    def nud_state(self, state: int) -> None:
        if not self.dead and (self._nud == NUD_INCOMPLETE) != (state == NUD_INCOMPLETE):
            self._count[0] += 1 if state == NUD_INCOMPLETE else -1
        self._nud = state
        self.hh.connected = bool(state & NUD_CONNECTED)

    @property
    def timer_at(self) -> float:
        """Deadline of the pending NUD timer, ``inf`` when none is pending."""
        return math.inf if self.timer is None else self.timer.timer.at

    @property
    def state_name(self) -> str:
        return NUD_NAMES.get(self.nud_state, hex(self.nud_state))

    def __repr__(self) -> str:
        return (f"Neighbour({int_to_ip(self.key)} dev {self.dev} {self.state_name} "
                f"ref {self.refcnt} q {len(self.arp_queue)})")


class _NeighTimer:
    """One clock timer bound to whichever neighbour currently owns it (n->timer)."""

    __slots__ = ("tbl", "neigh", "timer")

    def __init__(self, tbl: NeighTable, clock: Any, cpu: int) -> None:
        self.tbl = tbl
        self.neigh: Neighbour | None = None
        self.timer = clock.timer("neigh_timer_handler", self.fire, cpu)

    def fire(self, now: float) -> float:
        return self.tbl.neigh_timer_handler(self.neigh, now)


class NeighSink(Protocol):
    """What the generic table calls back into the engine for (see module doc)."""

    def neigh_output(self, j: Any, dst: Any, now: float) -> float: ...

    def neigh_queue_drop(self, j: Any, dst: Any, now: float) -> float: ...


#: The table's functions that charge their own cost, each to a ledger slot of its name.
CHARGED = ("neigh_lookup", "neigh_alloc", "neigh_create", "neigh_forced_gc", "neigh_destroy",
           "neigh_periodic_timer", "neigh_timer_handler", "neigh_event_send", "neigh_update")


# --- the table ------------------------------------------------------------------------------


class NeighTable:
    """A neighbour table (struct neigh_table) with its GC and NUD timers.

    Kernel: net/core/neighbour.c (2.4.24).

    Parameters
    ----------
    clock : object
        ``clock.timer(name, fire, cpu) -> Timer`` (see module doc).
    sink : NeighSink
        ``neigh_output`` and ``neigh_queue_drop`` callbacks.
    cost : dict
        Seconds per kernel function (``routelab.costs.cost_table(cpu).fn``).
    hash : callable
        ``hash(key, dev) -> bucket`` in ``[0, 31]`` (``arp_hash``).
    constructor : callable
        ``constructor(n, now) -> err``, seconds in ``ledger.t``: protocol
        setup of a new entry (``arp_constructor``); ``err < 0`` refuses it.
    solicit : callable
        ``solicit(n, now) -> seconds``: send one solicitation
        (``ops->solicit``, reading ``n.probes`` before the increment).
    error_report : callable
        ``error_report(n, j, dst, now) -> seconds``: a queued packet of a
        FAILED entry (``ops->error_report``); the packet ends there.
    parms : NeighParms, optional
    gc_thresh1, gc_thresh2, gc_thresh3 : int
    gc_interval : float
        Table-wide GC settings (knobs ``neigh_gc_*``).
    hz : int
        Jiffies per second, for ``neigh_rand_reach_time`` (100 on 2.4 i386).
    rng : numpy.random.Generator, optional
        Draws ``reachable_time`` (``net_random``); default ``default_rng(0)``.
    now : float
        Time of ``neigh_table_init``.
    cpu : int
        CPU the table's timers run on.
    ledger : Ledger, optional
        Where the seconds of the last call (``ledger.t``) and each
        function's own cost (a slot per name in :data:`CHARGED`) go; the
        constructor and solicit callbacks share it.  Default: a fresh one.
    """

    def __init__(self, clock: Any, sink: NeighSink, cost: Mapping[str, float], *,
                 hash: Callable[[int, int], int],
                 constructor: Callable[[Neighbour, float], int],
                 solicit: Callable[[Neighbour, float], float],
                 error_report: Callable[[Neighbour, Any, Any, float], float],
                 parms: NeighParms | None = None, gc_thresh1: int = 128,
                 gc_thresh2: int = 512, gc_thresh3: int = 1024, gc_interval: float = 30.0,
                 hz: int = 100, rng: np.random.Generator | None = None, now: float = 0.0,
                 cpu: int = 0, ledger: Ledger | None = None) -> None:
        self.clock = clock
        self.sink = sink
        self.hash = hash
        self.constructor = constructor
        self.solicit = solicit
        self.error_report = error_report
        self.parms = parms if parms is not None else NeighParms()
        args = {"gc_thresh1": gc_thresh1, "gc_thresh2": gc_thresh2,
                "gc_thresh3": gc_thresh3, "gc_interval": gc_interval}
        for arg, knob in _TABLE_KNOBS.items():
            setattr(self, arg, SYSCTLS[knob].validate(args[arg]))
        if isinstance(hz, bool) or not isinstance(hz, int) or hz < 1:
            raise KnobError("hz", hz, "an integer >= 1")
        self.hz = hz
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.cpu = cpu
        self.ledger = ledger if ledger is not None else Ledger()
        self._cost_names(cost)
        (self._k_lookup, self._k_alloc, self._k_create, self._k_fgc, self._k_destroy,
         self._k_periodic, self._k_timer, self._k_event, self._k_update) = (
            self.ledger.slot(fn) for fn in CHARGED)
        self.buckets: list[list[Neighbour]] = [[] for _ in range(NEIGH_HASHMASK + 1)]
        self._index: dict[tuple[int, int], Neighbour] = {}
        # hashed entries nobody but the table references (refcnt == 1), in the
        # order they became so: the only candidates of neigh_forced_gc
        self._unpinned: dict[Neighbour, None] = {}
        self._timer_pool: list[_NeighTimer] = []
        self._n_incomplete = [0]
        self.entries = 0
        #: ``None``, or a list that collects ``(time, event, key, state, info)``
        #: tuples as the table works (for teaching figures; off by default)
        self.log: list | None = None
        for f in STAT_FIELDS[1:] + EXTRA_FIELDS:
            setattr(self, f, 0)
        self.neigh_table_init(now)

    def _cost_names(self, cost: Mapping[str, float]) -> None:
        c = cost
        self._c_lookup = c["neigh_lookup"]
        self._c_step = c["neigh_chain_step"]
        self._c_alloc = c["neigh_alloc"]
        self._c_create = c["neigh_create"]
        self._c_fgc = c["neigh_forced_gc"]
        self._c_bucket = c["neigh_gc_bucket"]
        self._c_entry = c["neigh_gc_entry"]
        self._c_destroy = c["neigh_destroy"]
        self._c_periodic = c["neigh_periodic_timer"]
        self._c_timer = c["neigh_timer_handler"]
        self._c_event = c["neigh_event_send"]
        self._c_update = c["neigh_update"]

    def _note(self, now: float, event: str, n: Neighbour | None, info: Any = None) -> None:
        """Append one event to :attr:`log` (the callers test it is not ``None``)."""
        self.log.append((now, event, n.key if n is not None else None,
                         n.state_name if n is not None else "", info))

    def _own(self, k: int, seconds: float) -> float:
        """Charge ``seconds`` to this table's ledger slot ``k``; return them."""
        self.ledger.charge(k, seconds)
        return seconds

    # -- init and timers ----------------------------------------------------------------------
    def neigh_table_init(self, now: float) -> None:
        """Draw reachable_time, arm the periodic GC, set last_flush/last_rand.

        Kernel: net/core/neighbour.c neigh_table_init (2.4.24): first GC run
        at ``now + gc_interval + reachable_time``; ``last_rand`` is set
        ``20 x reachable_time`` in the future (see :meth:`neigh_periodic_timer`).
        """
        p = self.parms
        p.reachable_time = self.neigh_rand_reach_time(p.base_reachable_time)
        self.last_flush = now
        self.last_rand = now + 20 * p.reachable_time
        self.gc_timer = self.clock.timer("neigh_periodic_timer", self.neigh_periodic_timer,
                                         self.cpu)
        self.gc_timer.mod(now + self.gc_interval + p.reachable_time)

    def neigh_rand_reach_time(self, base: float) -> float:
        """Uniform in [base/2, 3 base/2), drawn in jiffies as the kernel does.

        Kernel: net/core/neighbour.c neigh_rand_reach_time:
        ``net_random() % base + base/2`` (in jiffies).
        """
        base_j = max(1, int(round(base * self.hz)))
        return (int(self.rng.integers(0, base_j)) + (base_j >> 1)) / self.hz

    def _mod_timer(self, n: Neighbour, at: float) -> None:
        slot = n.timer
        if slot is None:
            slot = self._timer_pool.pop() if self._timer_pool else \
                _NeighTimer(self, self.clock, self.cpu)
            slot.neigh = n
            n.timer = slot
        slot.timer.mod(at)

    def neigh_del_timer(self, n: Neighbour, now: float) -> bool:
        """Stop a pending NUD timer and drop the reference it held.

        Kernel: net/core/neighbour.c neigh_del_timer.  Returns whether a
        timer was stopped; seconds in ``ledger.t``.
        """
        if n.nud_state & NUD_IN_TIMER and n.timer is not None \
                and n.timer.timer.at != math.inf:
            n.timer.timer.stop()
            self.ledger.t = self.neigh_release(n, now)
            return True
        self.ledger.t = 0.0
        return False

    # -- references ---------------------------------------------------------------------------
    def neigh_hold(self, n: Neighbour) -> None:
        """Take a reference (neigh_hold / neigh_clone)."""
        n.refcnt += 1
        if n.refcnt == 2:
            self._unpinned.pop(n, None)

    def neigh_release(self, n: Neighbour, now: float) -> float:
        """Drop a reference; destroy the entry when it was the last one.

        Kernel: include/net/neighbour.h neigh_release.  Call it for every
        reference taken (a dst bound by ``arp_bind_neighbour`` releases its
        neighbour in ``dst_destroy``).  Returns the seconds spent (non-zero
        only if the entry was destroyed).
        """
        if n.refcnt <= 0:
            raise RuntimeError(f"neigh_release on {n!r}: refcnt would go negative")
        n.refcnt -= 1
        if n.refcnt == 1:
            if not n.dead:
                self._unpinned[n] = None
        elif n.refcnt == 0:
            return self.neigh_destroy(n, now)
        return 0.0

    def neigh_destroy(self, n: Neighbour, now: float) -> float:
        """Free an unhashed entry whose last reference went.

        Kernel: net/core/neighbour.c neigh_destroy: purges the queue
        (kfree_skb: ``sink.neigh_queue_drop``), decrements ``entries``.
        """
        if not n.dead:
            raise RuntimeError(f"destroying a hashed neighbour {n!r}")
        t = 0.0
        if n.timer is not None:
            n.timer.timer.stop()
            n.timer.neigh = None
            self._timer_pool.append(n.timer)
            n.timer = None
        q = n.arp_queue
        while q:
            j, dst = q.pop(0)
            t += self.sink.neigh_queue_drop(j, dst, now)
        self.entries -= 1
        self.destroys += 1
        if self.log is not None:
            self._note(now, "destroyed", n)
        return t + self._own(self._k_destroy, self._c_destroy)

    # -- lookup and creation ------------------------------------------------------------------
    def neigh_lookup(self, key: int, dev: int, now: float) -> Neighbour | None:
        """Find (and hold) the entry for ``(key, dev)``; seconds in ``ledger.t``.

        Kernel: net/core/neighbour.c neigh_lookup: one chain walked from its
        head until the entry matches; pays one step per entry examined.
        """
        self.lookups += 1
        n = self._index.get((dev, key))
        if n is None:
            steps = len(self.buckets[self.hash(key, dev)])
        else:
            steps = self.buckets[n.hash].index(n) + 1
            self.neigh_hold(n)
            self.hits += 1
        self.ledger.t = self._own(self._k_lookup, self._c_lookup + steps * self._c_step)
        return n

    def neigh_alloc(self, now: float) -> Neighbour | None:
        """A fresh, unhashed entry (refcnt 1), or ``None`` when the table is
        full; seconds in ``ledger.t``.

        Kernel: net/core/neighbour.c neigh_alloc (2.4.24): above
        ``gc_thresh3``, or above ``gc_thresh2`` with ``last_flush`` more than
        5 s old, run :meth:`neigh_forced_gc`; if it freed nothing and the
        table is still above ``gc_thresh3``, fail.  So ``entries`` peaks at
        ``gc_thresh3 + 1``.
        """
        t = 0.0
        if self.entries > self.gc_thresh3 or (
                self.entries > self.gc_thresh2 and now - self.last_flush > _FORCED_GC_AGE):
            shrunk = self.neigh_forced_gc(now)
            t = self.ledger.t
            if not shrunk and self.entries > self.gc_thresh3:
                self.table_fulls += 1
                if self.log is not None:
                    self._note(now, "table full", None, self.entries)
                self.ledger.t = t
                return None
        n = Neighbour(now, self._n_incomplete)
        self.allocs += 1
        self.entries += 1
        self.ledger.t = t + self._own(self._k_alloc, self._c_alloc)
        return n

    def neigh_create(self, key: int, dev: int, now: float) -> Neighbour | int:
        """Allocate, construct and hash a new entry; returns it held (refcnt 2),
        seconds in ``ledger.t``.

        Kernel: net/core/neighbour.c neigh_create (2.4.24).  On failure it
        returns a negative errno: ``-ENOBUFS`` when :meth:`neigh_alloc`
        refuses (then neither the constructor nor the second chain walk
        runs), or the constructor's error.  ``confirmed`` starts
        ``2 x base_reachable_time`` in the past.  The chain is walked again
        before the head insert, for an entry a racing CPU may have added.
        """
        lg = self.ledger
        n = self.neigh_alloc(now)
        t = lg.t
        if n is None:
            lg.t = t
            return -ENOBUFS
        n.key = key
        n.dev = dev
        n.hash = self.hash(key, dev)
        err = self.constructor(n, now)
        t += lg.t
        if err < 0:
            lg.t = t + self.neigh_release(n, now)
            return err
        n.confirmed = now - 2 * self.parms.base_reachable_time
        chain = self.buckets[n.hash]
        other = self._index.get((dev, key))
        if other is not None:       # never in the single-threaded model; kept for fidelity
            steps = chain.index(other) + 1
            self.neigh_hold(other)
            t += self.neigh_release(n, now)
            lg.t = t + self._own(self._k_create, self._c_create + steps * self._c_step)
            return other
        steps = len(chain)
        chain.insert(0, n)
        self._index[(dev, key)] = n
        n.dead = False
        if n.nud_state == NUD_INCOMPLETE:       # (constructors leave NONE or NOARP)
            self._n_incomplete[0] += 1
        self.neigh_hold(n)
        if self.log is not None:
            self._note(now, "created", n, self.entries)
        lg.t = t + self._own(self._k_create, self._c_create + steps * self._c_step)
        return n

    def neigh_lookup_errno(self, key: int, dev: int, now: float) -> Neighbour | int:
        """Lookup, else create: the entry held, or a negative errno; seconds
        in ``ledger.t``.

        Kernel: include/net/neighbour.h __neigh_lookup_errno.
        """
        lg = self.ledger
        n = self.neigh_lookup(key, dev, now)
        if n is not None:
            return n
        t = lg.t
        n = self.neigh_create(key, dev, now)
        lg.t = t + lg.t
        return n

    def _unlink(self, n: Neighbour) -> None:
        if n.nud_state == NUD_INCOMPLETE:
            self._n_incomplete[0] -= 1
        self.buckets[n.hash].remove(n)
        del self._index[(n.dev, n.key)]
        self._unpinned.pop(n, None)
        n.dead = True

    # -- garbage collection -------------------------------------------------------------------
    def neigh_forced_gc(self, now: float) -> bool:
        """Free every unreferenced entry; returns whether any went (seconds in
        ``ledger.t``).

        Kernel: net/core/neighbour.c neigh_forced_gc (2.4.24).  Walks all 32
        buckets and every entry (taking each entry's lock); frees an entry if
        only the table references it (``refcnt == 1``), it is not PERMANENT,
        and it is not INCOMPLETE unless unused for more than
        ``retrans_time``.  Sets ``last_flush``.  Pays for every entry
        visited, freed or not.
        """
        self.forced_gc_runs += 1
        visited = len(self._index)
        retrans = self.parms.retrans_time
        victims = [n for n in self._unpinned
                   if not n.nud_state & NUD_PERMANENT
                   and (n.nud_state != NUD_INCOMPLETE or now - n.used > retrans)]
        t = 0.0
        for n in victims:
            self._unlink(n)
            t += self.neigh_release(n, now)
        self.last_flush = now
        if self.log is not None:
            self._note(now, "forced gc", None, (visited, len(victims)))
        walk = (self._c_fgc + (NEIGH_HASHMASK + 1) * self._c_bucket + visited * self._c_entry)
        self.ledger.t = t + self._own(self._k_fgc, walk)
        return bool(victims)

    def neigh_periodic_timer(self, now: float) -> float:
        """The table's GC timer (every ``gc_interval``); returns seconds.

        Kernel: net/core/neighbour.c neigh_periodic_timer (2.4.24; a tasklet
        on SMP).  Re-draws ``reachable_time`` when more than 300 s passed
        since ``last_rand`` -- and at the first run, because ``last_rand``
        starts in the future and the unsigned jiffies difference wraps.
        Walks every entry: skips PERMANENT and timer states; lifts ``used``
        to ``confirmed``; frees unreferenced entries that are FAILED or
        unused for more than ``gc_staletime``; turns REACHABLE entries
        confirmed longer than ``reachable_time`` ago STALE.
        """
        self.periodic_gc_runs += 1
        p = self.parms
        if now < self.last_rand or now - self.last_rand > _RAND_INTERVAL:
            self.last_rand = now
            p.reachable_time = self.neigh_rand_reach_time(p.base_reachable_time)
        visited = 0
        t = 0.0
        for chain in self.buckets:
            for n in list(chain) if chain else ():
                visited += 1
                state = n.nud_state
                if state & (NUD_PERMANENT | NUD_IN_TIMER):
                    continue
                if n.used < n.confirmed:
                    n.used = n.confirmed
                if n.refcnt == 1 and (state == NUD_FAILED or now - n.used > p.gc_staletime):
                    self._unlink(n)
                    t += self.neigh_release(n, now)
                elif state & NUD_REACHABLE and now - n.confirmed > p.reachable_time:
                    n.nud_state = NUD_STALE          # neigh_suspect: slow path from now on
        self.gc_timer.mod(now + self.gc_interval)
        walk = self._c_periodic + (NEIGH_HASHMASK + 1) * self._c_bucket + visited * self._c_entry
        return t + self._own(self._k_periodic, walk)

    # -- NUD state machine --------------------------------------------------------------------
    def neigh_timer_handler(self, n: Neighbour, now: float) -> float:
        """A neighbour's NUD timer fired; returns seconds.

        Kernel: net/core/neighbour.c neigh_timer_handler (2.4.24).  A valid
        entry confirmed within ``reachable_time`` becomes REACHABLE.  DELAY
        becomes PROBE with ``probes = 0``.  With ``probes >= ucast + app +
        mcast`` the entry is FAILED (``res_failed``): each queued packet goes
        to the error report while the state stays FAILED, the rest are
        purged.  Otherwise the timer is re-armed at ``now + retrans_time``
        and one more solicitation sent.  Leaving the timer states drops the
        timer's reference.
        """
        t = self._own(self._k_timer, self._c_timer)
        state = n.nud_state
        p = self.parms
        if not state & NUD_IN_TIMER:
            return t + self.neigh_release(n, now)
        if state & NUD_VALID and now - n.confirmed < p.reachable_time:
            n.nud_state = NUD_REACHABLE              # neigh_connect
            return t + self.neigh_release(n, now)
        if state == NUD_DELAY:
            n.nud_state = NUD_PROBE
            n.probes = 0
        if n.probes >= p.max_probes:
            n.nud_state = NUD_FAILED
            self.res_failed += 1
            q = n.arp_queue
            if self.log is not None:
                self._note(now, "failed", n, len(q))
            # the error report may re-enter the table and revive the entry: stop then
            while n.nud_state == NUD_FAILED and q:
                j, dst = q.pop(0)
                t += self.error_report(n, j, dst, now)
            while q:
                j, dst = q.pop(0)
                t += self.sink.neigh_queue_drop(j, dst, now)
            return t + self.neigh_release(n, now)
        self._mod_timer(n, now + p.retrans_time)
        if self.log is not None:
            self._note(now, "solicit", n, n.probes + 1)
        t += self.solicit(n, now)
        n.probes += 1
        return t

    def neigh_event_send(self, n: Neighbour, j: Any, dst: Any, now: float) -> int:
        """A packet wants to leave through ``n``; returns its outcome (seconds
        in ``ledger.t``).

        Kernel: include/net/neighbour.h neigh_event_send and
        net/core/neighbour.c __neigh_event_send (2.4.24).  Refreshes
        ``used``.  CONNECTED, DELAY and PROBE entries send at once
        (``NEIGH_XMIT``; DELAY/PROBE with the old address).  NONE or FAILED
        start a resolution if ``mcast_probes + app_probes > 0``: INCOMPLETE,
        ``probes = ucast_probes``, a timer reference, the timer at ``now +
        retrans_time`` and the first solicitation (a broadcast); otherwise
        the entry is FAILED and the packet freed (``NEIGH_DROP``).  While
        INCOMPLETE the packet is queued (``NEIGH_QUEUED``), the oldest one
        dropped first when ``queue_len`` are waiting.  STALE becomes DELAY
        (timer at ``now + delay_probe_time``) and the packet is sent.
        ``j=None`` asks without a packet.
        """
        n.used = now
        state = n.nud_state
        lg = self.ledger
        if state & (NUD_CONNECTED | NUD_DELAY | NUD_PROBE):
            lg.t = 0.0
            return NEIGH_XMIT
        t = self._own(self._k_event, self._c_event)
        p = self.parms
        if not state & (NUD_STALE | NUD_INCOMPLETE):
            if p.mcast_probes + p.app_probes:
                n.probes = p.ucast_probes
                n.nud_state = NUD_INCOMPLETE
                self.neigh_hold(n)
                self._mod_timer(n, now + p.retrans_time)
                if self.log is not None:
                    self._note(now, "solicit", n, n.probes + 1)
                t += self.solicit(n, now)
                n.probes += 1
            else:
                n.nud_state = NUD_FAILED
                lg.t = t
                return NEIGH_DROP
        if n.nud_state == NUD_INCOMPLETE:
            if j is not None:
                q = n.arp_queue
                if len(q) >= p.queue_len:
                    j0, dst0 = q.pop(0)
                    self.unres_discards += 1
                    if self.log is not None:
                        self._note(now, "queue drop", n, j0)
                    t += self.sink.neigh_queue_drop(j0, dst0, now)
                q.append((j, dst))
                if self.log is not None:
                    self._note(now, "queued", n, len(q))
            lg.t = t
            return NEIGH_QUEUED
        if n.nud_state == NUD_STALE:
            self.neigh_hold(n)
            n.nud_state = NUD_DELAY
            self._mod_timer(n, now + p.delay_probe_time)
        lg.t = t
        return NEIGH_XMIT

    def neigh_resolve_output(self, n: Neighbour, j: Any, dst: Any, now: float) -> int:
        """Output decision for a packet whose dst is bound to ``n`` (seconds in
        ``ledger.t``).

        Kernel: net/ipv4/ip_output.c ip_finish_output2 and
        net/core/neighbour.c neigh_resolve_output (2.4.24).  A CONNECTED
        entry's packets take the hardware-header cache straight to
        ``dev_queue_xmit`` (``NEIGH_XMIT``, no cost here, ``used`` untouched);
        any other goes through :meth:`neigh_event_send`.
        """
        if n.nud_state & NUD_CONNECTED:
            self.ledger.t = 0.0
            return NEIGH_XMIT
        return self.neigh_event_send(n, j, dst, now)

    def neigh_sync(self, n: Neighbour, now: float) -> float:
        """Bring the state in line with ``confirmed`` before an update.

        Kernel: net/core/neighbour.c neigh_sync: REACHABLE confirmed too long
        ago becomes STALE; another valid state confirmed recently becomes
        REACHABLE (its timer stopped).
        """
        state = n.nud_state
        if state & (NUD_NOARP | NUD_PERMANENT):
            return 0.0
        t = 0.0
        if state & NUD_REACHABLE:
            if now - n.confirmed > self.parms.reachable_time:
                n.nud_state = NUD_STALE
        elif state & NUD_VALID and now - n.confirmed < self.parms.reachable_time:
            self.neigh_del_timer(n, now)
            t = self.ledger.t
            n.nud_state = NUD_REACHABLE
        return t

    def neigh_update(self, n: Neighbour, lladdr: Any, new: int, override: bool, arp: bool,
                     now: float) -> int:
        """Set a new state (and link-layer address); returns an errno (0 on
        success), seconds in ``ledger.t``.

        Kernel: net/core/neighbour.c neigh_update (2.4.24); the caller holds
        a reference.  ``arp`` updates never touch NOARP/PERMANENT entries
        (``-EPERM``).  An invalid new state stops the timer.  A different
        address replaces a valid one only with ``override`` (else
        ``-EPERM``); no address for an invalid entry is ``-EINVAL``.  A
        CONNECTED new state sets ``confirmed``.  An unchanged valid entry
        keeps its state if ``new`` is the same, or STALE while CONNECTED.
        Otherwise the timer stops, the state is set and -- if the entry was
        not valid before -- the queue is flushed through
        :meth:`neigh_resolve_output` (``sink.neigh_output`` per packet) while
        the entry stays valid.
        """
        lg = self.ledger
        t = self._own(self._k_update, self._c_update)
        old = n.nud_state
        if arp and old & (NUD_NOARP | NUD_PERMANENT):
            lg.t = t
            return -EPERM
        if not new & NUD_VALID:
            self.neigh_del_timer(n, now)
            t += lg.t
            n.nud_state = new
            lg.t = t
            return 0
        if lladdr is not None:
            same = bool(old & NUD_VALID) and lladdr == n.ha
            if old & NUD_VALID and not same and not override:
                lg.t = t
                return -EPERM
        else:
            if not old & NUD_VALID:
                lg.t = t
                return -EINVAL
            same = True
        t += self.neigh_sync(n, now)
        old = n.nud_state
        if new & NUD_CONNECTED:
            n.confirmed = now
        n.updated = now
        if old & NUD_VALID and same and (new == old or (new == NUD_STALE
                                                         and old & NUD_CONNECTED)):
            lg.t = t
            return 0
        self.neigh_del_timer(n, now)
        t += lg.t
        n.nud_state = new
        if not same:
            n.ha = lladdr
            if not new & NUD_CONNECTED:
                n.confirmed = now - 2 * self.parms.base_reachable_time
        if new == old:
            lg.t = t
            return 0
        if not old & NUD_VALID:
            if self.log is not None:
                self._note(now, "resolved", n, len(n.arp_queue))
            t += self._flush_queue(n, now)
        lg.t = t
        return 0

    def _flush_queue(self, n: Neighbour, now: float) -> float:
        # neigh_update's loop: each packet through neigh->output (neigh_resolve_output)
        t = 0.0
        q = n.arp_queue
        while n.nud_state & NUD_VALID and q:
            j, dst = q.pop(0)
            rc = self.neigh_resolve_output(n, j, dst, now)
            t += self.ledger.t
            if rc == NEIGH_XMIT:
                t += self.sink.neigh_output(j, dst, now)
            elif rc == NEIGH_DROP:
                t += self.sink.neigh_queue_drop(j, dst, now)
        while q:
            j, dst = q.pop(0)
            t += self.sink.neigh_queue_drop(j, dst, now)
        return t

    def neigh_confirm(self, n: Neighbour, now: float) -> None:
        """Upper-layer proof of reachability (dst_confirm -> neigh_confirm)."""
        n.confirmed = now

    def neigh_event_ns(self, lladdr: Any, key: int, dev: int, now: float) -> Neighbour | None:
        """Learn a sender's address from its solicitation: the entry, held, STALE
        (seconds in ``ledger.t``).

        Kernel: net/core/neighbour.c neigh_event_ns (2.4.24): lookup or
        create, then ``neigh_update(STALE, override)``; ``None`` if the table
        is full.
        """
        lg = self.ledger
        n = self.neigh_lookup_errno(key, dev, now)
        if isinstance(n, int):
            return None
        t = lg.t
        self.neigh_update(n, lladdr, NUD_STALE, True, True, now)
        lg.t = t + lg.t
        return n

    # -- views --------------------------------------------------------------------------------
    def __iter__(self):
        """Hashed entries, bucket by bucket, each chain from its head."""
        for chain in self.buckets:
            yield from chain

    def counters(self) -> dict[str, int]:
        """The 2.6.9 /proc/net/stat/arp_cache counters plus the model's extras."""
        out = {f: getattr(self, f) for f in STAT_FIELDS[1:] + EXTRA_FIELDS}
        out["entries"] = self.entries
        return {f: out[f] for f in STAT_FIELDS + EXTRA_FIELDS}

    def stat_line(self) -> str:
        """Header and row in the hex layout of 2.6.9's /proc/net/stat/arp_cache."""
        c = self.counters()
        head = ("entries  allocs destroys hash_grows  lookups hits  res_failed  "
                "rcv_probes_mcast rcv_probes_ucast  periodic_gc_runs forced_gc_runs")
        groups = (("entries",), ("allocs", "destroys", "hash_grows"), ("lookups", "hits"),
                  ("res_failed",), ("rcv_probes_mcast", "rcv_probes_ucast"),
                  ("periodic_gc_runs", "forced_gc_runs"))
        row = "  ".join(" ".join(f"{c[f]:08x}" for f in g) for g in groups)
        return head + "\n" + row

    def incomplete(self) -> int:
        """Hashed entries waiting for a resolution (INCOMPLETE)."""
        return self._n_incomplete[0]

    def census(self) -> dict[str, int]:
        """Hashed entries by NUD state name, plus totals (for tests and plots)."""
        out = {name: 0 for name in NUD_NAMES.values()}
        queued = timers = 0
        for n in self:
            out[n.state_name] = out.get(n.state_name, 0) + 1
            queued += len(n.arp_queue)
            timers += n.timer_at != math.inf
        out.update(entries=self.entries, hashed=len(self._index), queued=queued,
                   timers=timers)
        return out

    def ip_neigh(self, dev_names: Mapping[int, str] | None = None) -> str:
        """An ``ip -s neigh``-like listing: address, dev, lladdr if valid, ref, state.

        ``ref`` is what netlink reports, the count less the table's own
        reference: neigh_fill_info sets ``ndm_refcnt`` to refcnt - 1
        (net/core/neighbour.c, 2.4.24 and v2.6.0, MaximeChretien/linux-history);
        ``ip`` prints it only with ``-s``."""
        lines = []
        for n in self:
            dev = dev_names.get(n.dev, str(n.dev)) if dev_names else str(n.dev)
            ll = ""
            if n.nud_state & NUD_VALID and n.ha is not None:
                # the model's link-layer addresses are tokens: show a locally
                # administered MAC made from the IPv4 address unless it is text
                ll = n.ha if isinstance(n.ha, str) else "02:00:" + ":".join(
                    f"{(n.key >> s) & 255:02x}" for s in (24, 16, 8, 0))
                ll = f" lladdr {ll}"
            lines.append(f"{int_to_ip(n.key)} dev {dev}{ll} ref {n.refcnt - 1} {n.state_name}")
        return "\n".join(lines)
