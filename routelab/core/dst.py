"""The protocol-independent destination cache.

Kernel: net/core/dst.c, include/net/dst.h (2.4.18, 2.6.11).

What matters for the stories:

* ``entries`` counts every dst that has been allocated and not yet
  *destroyed*.  An entry unhashed from the route cache but still waiting for
  an RCU grace period, or parked on the garbage list because a packet still
  holds it, still counts against ``gc_thresh`` and ``max_size``.
* ``dst_alloc`` runs the family's garbage collector whenever ``entries``
  exceeds ``gc_thresh`` and fails (the packet is dropped) if the GC fails.
* ``dst_free`` destroys an unreferenced entry at once; a referenced one goes
  on ``dst_garbage_list``, which the ``dst_run_gc`` timer walks, destroying
  the entries whose references have dropped.  The timer backs off while the
  list stays non-empty: 0.1, 0.6, 1.6, 3.1, 5.1 ... s (DST_GC_MIN 0.1 s,
  DST_GC_INC 0.5 s, DST_GC_MAX 120 s), and snaps back to 0.1 s when an entry
  is added to a backed-off list.

Simplifications: one global lock is not modelled (``spin_trylock`` never
fails), and ``dst_destroy`` does not chain to child dsts (no xfrm bundles).
"""

from __future__ import annotations

import cython

from ..sim.clock import Clock
from ..sim.ledger import Ledger

__all__ = ["DstEntry", "DstFamily", "DstOps", "HHCache", "dst_set_expires", "dst_hold",
           "dst_release", "DST_GC_MIN", "DST_GC_INC", "DST_GC_MAX", "LIVE", "HASHED",
           "RCU_PENDING", "GARBAGE", "DESTROYED", "HOOKS"]

DST_GC_MIN = 0.1     # HZ/10
DST_GC_INC = 0.5     # HZ/2
DST_GC_MAX = 120.0   # 120*HZ

# Life-cycle states of an entry (for invariants and plots; the kernel infers
# them from obsolete/refcnt and list membership).
LIVE, HASHED, RCU_PENDING, GARBAGE, DESTROYED = range(5)

#: Observation hooks for tests (not kernel behaviour).  A ``DstOps`` created
#: while ``HOOKS["dst_destroy"]`` is set calls it as ``hook(ops, entry)``
#: after destroying an entry.  (The compiled classes cannot be monkeypatched,
#: so invariant checks hook in here.)
HOOKS: dict = {"dst_destroy": None}


class HHCache:
    """The hardware-header cache a neighbour shares with its routes.

    Kernel: include/linux/netdevice.h ``struct hh_cache`` and its
    ``hh_output``: while the neighbour is CONNECTED, packets of every route
    bound to it go straight to ``dev_queue_xmit`` with the cached header;
    otherwise through ``neigh_resolve_output``.  ``connected`` is what the
    run tests per packet (a C field when compiled); the neighbour table keeps
    it in step with the entry's NUD state.
    """

    __slots__ = ("connected",)

    def __init__(self) -> None:
        self.connected = False


class DstEntry:
    """A dst_entry / rtable: a cached routing decision.

    Only the fields the model uses.  ``key``/``ik`` identify the flow
    (daddr<<32|saddr, iif<<8|tos); ``rtype``/``oif``/``gw`` are the routing
    decision; ``refcnt`` counts packets (and lookups) holding the entry;
    ``neigh`` is the neighbour it is bound to (held until ``dst_destroy``)
    and ``hh`` that neighbour's header cache.
    """

    __slots__ = ("key", "ik", "refcnt", "lastuse", "use", "created", "expires", "valuable",
                 "fast_clean", "output_route", "rtype", "oif", "gw", "obsolete", "state",
                 "bucket", "rate_tokens", "rate_last", "uid", "neigh", "hh")

    def __init__(self, uid: int, now: float) -> None:
        self._reset(uid, now)

    def _reset(self, uid: int, now: float) -> None:
        """Every field to its fresh value (``dst_alloc`` zeroes the entry)."""
        self.uid = uid
        self.key = 0
        self.ik = 0
        self.refcnt = 0
        self.lastuse = now
        self.use = 0
        self.created = now
        self.expires = 0.0
        self.valuable = False
        self.fast_clean = False
        self.output_route = False
        self.rtype = 0
        self.oif = -1
        self.gw = 0
        self.obsolete = 0
        self.state = LIVE
        self.bucket = -1
        self.rate_tokens = 0
        self.rate_last = 0.0
        self.neigh = None
        self.hh = None

    def __repr__(self) -> str:
        return (f"DstEntry(uid={self.uid}, refcnt={self.refcnt}, state={self.state}, "
                f"lastuse={self.lastuse:.3f})")


class DstFamily:
    """An address family's side of ``dst_ops``: its garbage collector.

    Kernel: include/net/dst.h ``struct dst_ops`` (the ``gc`` hook; IPv4 sets
    it to ``rt_garbage_collect``).  A family subclasses this and overrides
    :meth:`gc`; :meth:`DstOps.dst_alloc` calls it (a C call when compiled).
    """

    def gc(self, now: float, cpu: int) -> float:
        """Make room: return the seconds it took and leave in ``ledger.ok``
        whether the allocation may go ahead."""
        raise NotImplementedError


class DstOps:
    """``dst_ops`` of one address family plus the dst garbage list.

    Parameters
    ----------
    gc_thresh : int
        ``dst_alloc`` calls the family's ``gc`` when ``entries`` exceeds this.
    family : DstFamily or None
        The family whose :meth:`DstFamily.gc` runs (the route cache); ``None``
        for no garbage collector.
    cost : dict
        Seconds per call of ``dst_alloc``, ``dst_destroy``, ``dst_run_gc``,
        ``dst_gc_entry`` (from :func:`routelab.costs.cost_table`).
    ledger : Ledger, optional
        Where :meth:`dst_alloc` leaves its seconds (a new one if not given;
        the route cache shares its own).
    clock : Clock, optional
        The run's clock, on which the ``dst_run_gc`` timer is registered (a
        private one if not given).

    Attributes
    ----------
    entries : int
        Allocated and not yet destroyed (``ops->entries``).
    garbage : list[DstEntry]
        ``dst_garbage_list``.
    gc_timer : Timer
        The ``dst_run_gc`` timer; ``gc_timer_at`` is its deadline (``inf``
        when not armed).
    gc_timer_expires, gc_timer_inc : float
        The backoff state (``dst_gc_timer_expires``/``_inc``).
    """

    def __init__(self, gc_thresh: int, family: DstFamily | None, cost: dict,
                 ledger: Ledger | None = None, clock: Clock | None = None) -> None:
        self.gc_thresh = gc_thresh
        self.family = family
        self.ledger = ledger if ledger is not None else Ledger()
        self.entries = 0
        self.garbage: list[DstEntry] = []
        self.gc_timer = (clock if clock is not None else Clock()).timer("dst_run_gc",
                                                                       self.dst_run_gc)
        self.gc_timer_expires = DST_GC_MAX
        self.gc_timer_inc = DST_GC_MAX
        self._uid = 0
        self._c_alloc = cost["dst_alloc"]
        self._c_destroy = cost["dst_destroy"]
        self._c_run = cost["dst_run_gc"]
        self._c_entry = cost["dst_gc_entry"]
        self._slot_gc = self.ledger.slot("dst_run_gc")
        self.on_destroy = HOOKS["dst_destroy"]
        # neigh_release(n, now) -> seconds, for entries bound to a neighbour
        # (the neighbour table's; set by the run)
        self.neigh_release = None
        # statistics
        self.allocated = 0
        self.destroyed = 0
        self.alloc_failed = 0
        self.gc_runs = 0
        self.gc_walked = 0
        self.gc_run_log: list[tuple[float, int, int]] = []  # (time, walked, destroyed)

    @cython.locals(t=cython.double, e=DstEntry)
    def dst_alloc(self, now: float, cpu: int) -> DstEntry | None:
        """Allocate an entry, running the family GC first if over threshold.

        Kernel: net/core/dst.c dst_alloc.  Returns a fresh entry (refcnt 0)
        counted in ``entries``, or ``None`` when the GC failed (the caller
        drops the packet); the seconds are left in ``ledger.t``.
        """
        t = self._c_alloc
        if self.family is not None and self.entries > self.gc_thresh:
            t += self.family.gc(now, cpu)
            if not self.ledger.ok:
                self.alloc_failed += 1
                self.ledger.t = t
                return None
        self._uid += 1
        e = DstEntry.__new__(DstEntry)     # (no __init__ call: _reset sets every field)
        e._reset(self._uid, now)
        self.entries += 1
        self.allocated += 1
        self.ledger.t = t
        return e

    @cython.locals(t=cython.double)
    def dst_destroy(self, e: DstEntry, now: float) -> float:
        """Free an entry for good; ``entries`` drops only here.

        Kernel: net/core/dst.c dst_destroy: also drops the entry's reference
        on its neighbour (``neigh_release``, through :attr:`neigh_release`):
        a dst pins its neighbour until destroyed, not merely unhashed.
        """
        if e.refcnt:
            raise AssertionError(f"dst_destroy of a referenced entry {e!r}")
        if e.state == DESTROYED:
            raise AssertionError(f"double destroy of {e!r}")
        e.state = DESTROYED
        self.entries -= 1
        self.destroyed += 1
        t = self._c_destroy
        if e.neigh is not None:
            n = e.neigh
            e.neigh = None
            e.hh = None
            t += self.neigh_release(n, now)
        if self.on_destroy is not None:
            self.on_destroy(self, e)
        return t

    def dst_free(self, e: DstEntry, now: float) -> float:
        """Release the cache's hold on an entry.

        Kernel: include/net/dst.h dst_free, net/core/dst.c __dst_free.
        Unreferenced: destroyed at once.  Referenced: parked on the garbage
        list (``obsolete = 2``) and the GC timer armed at DST_GC_MIN if it had
        backed off.
        """
        if e.obsolete > 1:
            return 0.0
        if e.refcnt == 0:
            return self.dst_destroy(e, now)
        e.obsolete = 2
        e.state = GARBAGE
        self.garbage.append(e)
        if self.gc_timer_inc > DST_GC_INC:
            self.gc_timer_inc = DST_GC_INC
            self.gc_timer_expires = DST_GC_MIN
            self.gc_timer.mod(now + DST_GC_MIN)
        return 0.0

    @cython.locals(e=DstEntry, keep=list, t=cython.double, mark=cython.double)
    def dst_run_gc(self, now: float) -> float:
        """The dst GC timer: destroy garbage entries whose refcnt reached 0.

        Kernel: net/core/dst.c dst_run_gc.  Walks the whole list; the cost
        grows with the number of entries still held by queued packets.
        Returns the seconds, charged to the ``dst_run_gc`` slot (less what
        the neighbours it freed charged to theirs).
        """
        mark = self.ledger.total
        self.gc_runs += 1
        t = self._c_run
        keep = []
        destroyed = 0
        for e in self.garbage:
            if e.refcnt:
                keep.append(e)
            else:
                t += self.dst_destroy(e, now)
                destroyed += 1
        walked = len(self.garbage)
        t += walked * self._c_entry
        self.gc_walked += walked
        self.garbage = keep
        self.gc_run_log.append((now, walked, destroyed))
        self.ledger.charge_rest(self._slot_gc, t, mark)
        if not keep:
            self.gc_timer_inc = DST_GC_MAX
            self.gc_timer.stop()
            return t
        self.gc_timer_expires = min(self.gc_timer_expires + self.gc_timer_inc, DST_GC_MAX)
        self.gc_timer_inc += DST_GC_INC
        self.gc_timer.mod(now + self.gc_timer_expires)
        return t

    @property
    def gc_timer_at(self) -> float:
        """When ``dst_run_gc`` fires next (``inf`` when not armed)."""
        return self.gc_timer.at


def dst_hold(e: DstEntry) -> None:
    """Take a reference.  Kernel: include/net/dst.h dst_hold."""
    e.refcnt += 1


def dst_release_underflow(e: DstEntry) -> int:
    """Raise: a reference was dropped that nobody held (a model bug)."""
    raise AssertionError(f"dst_release below zero: refcnt {e.refcnt} of {e!r}")


if not cython.compiled:
    # Compiled, dst.pxd's C inline of this same body runs instead, inside every
    # compiled caller (no call at all); tests/core/test_dst.py checks that the
    # two behave alike.
    def dst_release(e: DstEntry | None) -> int:
        """Drop a reference (``None``: nothing to drop).

        Kernel: include/net/dst.h dst_release (2.4.24, 2.6.0; a NULL dst is
        ignored there too): the skb's reference to its route goes when the
        skb is freed (``kfree_skb``).  Like the kernel, releasing the last
        reference of an obsolete entry does *not* destroy it; the dst GC
        timer will.  Below zero, 2.4.24 just decrements and 2.6.0 prints
        "BUG: dst underflow" and decrements; the model raises
        (:func:`dst_release_underflow`): an unbalanced release is a bug of
        the model, and every run checks for it.
        """
        if e is None:
            return 0
        if e.refcnt <= 0:
            return dst_release_underflow(e)
        e.refcnt -= 1
        return 0


def dst_set_expires(e: DstEntry, now: float, timeout: float = 0.0) -> None:
    """Make the entry expire ``timeout`` seconds from now, unless it already
    expires sooner.  Kernel: include/net/dst.h dst_set_expires (an expiry
    of 0 becomes 1 jiffy in the kernel: "now" here).  An entry with an expiry
    is "valuable" to ``rt_score`` and goes at the GC pass after it passes."""
    x = now + timeout
    if not e.expires or x < e.expires:
        e.expires = x if x > 0 else 1e-9
    e.valuable = True
