"""Linux 2.0's route cache and ARP table (the ``2.0`` kernel profile).

Kernel 2.0 did have a route cache, much smaller and simpler than the 2.2/2.4
one (MaximeChretien/linux-history, tag 2.0.40):

* include/net/route.h: ``RT_HASH_DIVISOR`` 256 buckets, at most
  ``RT_CACHE_SIZE_MAX`` 256 entries, idle lifetime ``RT_CACHE_TIMEOUT``
  300 s.  The bucket is a fold of the destination address alone
  (``ip_rt_hash_code``: add the high half, then the high byte, keep 8 bits;
  XORed with the ``local`` flag, 0 for a forwarded packet).  ``ip_rt_route``
  walks that chain for an entry with the destination; on a miss
  ``ip_rt_slow_route`` (net/ipv4/route.c) looks the FIB up, builds an entry
  and adds it with ``rt_cache_add``.
* net/ipv4/route.c ``rt_cache_add``: binds the entry's hardware header
  through the ARP table (for a gateway route, through the cached route to
  the gateway); if the cache holds 256 entries or more it first runs
  ``rt_garbage_collect_1``; it puts the new entry at the head of its chain,
  then walks the rest of the chain and frees older entries for the same
  destination and idle ones past 300 s.
* ``rt_garbage_collect_1``: passes over all 256 buckets; in each it frees
  the first entry whose last use is more than ``expire * (refcnt + 1)``
  ago, starting at ``expire`` = 150 s and halving it after every pass until
  the cache is below 256.  Since ``expire`` reaches 0, every entry
  qualifies in the end: the cache always evicts and never refuses an entry,
  in use or not (unlike 2.4's ``dst cache overflow``).
* net/ipv4/arp.c: one ``arp_table`` entry per next-hop address in 16
  buckets (``ARP_TABLE_SIZE``), a *soft* limit ``ARP_MAXSIZE`` 256:
  ``arp_alloc_entry`` runs ``arp_force_expire`` when the table holds 256 or
  more and then allocates anyway.  ``arp_force_expire`` walks every bucket,
  freeing entries no cached route uses (``arp_count_hhs``) and idle longer
  than ``arp_timeout`` (60 s) until the table is below 256; if it freed none
  it frees the least recently used entry nobody uses.  If every entry is in
  use, the table just grows.

The model (:class:`Cache20`) runs this for the offered packets in arrival
order, window by window, and gives each packet the cost of its lookup: a hit
pays its chain steps; a miss pays the walk, the FIB lookup, the allocation,
the insertion and its chain clean-up, any GC pass (per bucket and per entry
examined, per entry freed) and, for a new next hop, the ARP table's lookup,
its allocation and any ``arp_force_expire`` walk.

Simplified (each stated): lookups happen at the packet's arrival time, not
when the CPU gets to it (the cache's state depends only on the order and the
ages of lookups, which queueing barely moves); a packet holds no reference
(``refcnt`` 0) when GC looks; ARP resolution itself (requests, replies,
queued packets, failures) is not modelled for 2.0, only the table's entries
and their cost -- an entry is made for every new next hop and lives until
``arp_force_expire`` frees it (2.0's expiry timers and its dead-host handling
are left out); ``ip_rt_check_expire`` (from the ARP timer, every 60 s) is not
modelled -- rt_cache_add's clean-up and the GC do the evicting here.  Costs
reuse the 2.4 model's per-function constants as stand-ins (``chain_step``,
``fib_lookup``, ``dst_alloc``, ``rt_intern_hash``, ``gc_bucket``,
``gc_entry``, ``dst_destroy``, ``neigh_chain_step``, ``neigh_alloc``):
ASSUMED, 2.0's functions being at least as simple.  The walks' steps are
``chain_step_20``, ``gc_entry_20`` and ``neigh_chain_step_20``
(:data:`routelab.costs.WALK_FIELDS`): those cycles, with the cache lines read
from 2.0's own ``struct rtable`` and ``struct arp_table`` -- one line per step
on story 1's boards, where 2.4's larger structures take two.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Cache20", "ip_rt_hash_code", "RT_HASH_DIVISOR", "RT_CACHE_SIZE_MAX",
           "ARP_MAXSIZE", "ARP_TABLE_SIZE"]

RT_HASH_DIVISOR = 256          # include/net/route.h (2.0.40)
RT_CACHE_SIZE_MAX = 256
RT_CACHE_TIMEOUT = 300.0       # HZ*300
ARP_MAXSIZE = 256              # net/ipv4/arp.c (2.0.40, without CONFIG_ARPD)
ARP_TABLE_SIZE = 16
ARP_TIMEOUT = 60.0             # sysctl_arp_timeout = 60*HZ
_HZ = 100                      # 2.0 on i386


def ip_rt_hash_code(addr: int) -> int:
    """2.0's bucket of a destination (include/net/route.h ip_rt_hash_code):
    ``addr`` is the address as the kernel holds it (network byte order read
    as a host integer on i386, so the first octet is the low byte)."""
    tmp = (addr + (addr >> 16)) & 0xFFFFFFFF
    return (tmp + (tmp >> 8)) & 0xFF


def _wire(addr: int) -> int:
    """The model's host-order address as i386 holds it (bytes swapped)."""
    return int.from_bytes(int(addr).to_bytes(4, "big"), "little")


class Cache20:
    """2.0's route cache and ARP table across one run (see the module text).

    Parameters
    ----------
    cost : dict
        Seconds per kernel function (the run's ``CostTable.fn``).

    Attributes
    ----------
    buckets : list of lists of [daddr, lastuse, nexthop]
    size : int                   cached routes
    arp : dict                   next hop -> [last_used, users]
    counters : dict              hits, misses, gc_runs, gc_passes, gc_walked,
                                 gc_freed, cleaned, size_max, arp_allocs,
                                 arp_force_expire, arp_walked, arp_freed,
                                 arp_entries_max
    """

    def __init__(self, cost: dict) -> None:
        self.buckets: list[list[list]] = [[] for _ in range(RT_HASH_DIVISOR)]
        self.size = 0
        self.arp: dict[int, list] = {}
        self.counters = dict.fromkeys(
            ("hits", "misses", "gc_runs", "gc_passes", "gc_walked", "gc_freed", "cleaned",
             "size_max", "arp_allocs", "arp_force_expire", "arp_walked", "arp_freed",
             "arp_entries_max"), 0)
        c = cost
        # (a cost dict without the 2.0 walks -- a test's -- uses the 2.4 names)
        self._step = c.get("chain_step_20", c["chain_step"])
        self._miss = c["fib_lookup"] + c["dst_alloc"] + c["rt_intern_hash"]
        self._gc_bucket = c["gc_bucket"]
        self._gc_entry = c.get("gc_entry_20", c["gc_entry"])
        self._free = c["dst_destroy"]
        self._arp_step = c.get("neigh_chain_step_20", c["neigh_chain_step"])
        self._arp_alloc = c["neigh_alloc"]

    # -- the route cache -------------------------------------------------------------
    def _release(self, nexthop: int) -> None:
        a = self.arp.get(nexthop)
        if a is not None:
            a[1] -= 1

    def _gc(self, now: float) -> float:
        """rt_garbage_collect_1: passes with a halving ``expire`` until below 256."""
        k = self.counters
        k["gc_runs"] += 1
        w = 0.0
        expire_j = int(RT_CACHE_TIMEOUT * _HZ) >> 1     # (unsigned jiffies: reaches 0)
        while True:
            expire = expire_j / _HZ
            k["gc_passes"] += 1
            w += RT_HASH_DIVISOR * self._gc_bucket
            for chain in self.buckets:
                for i, e in enumerate(chain):
                    k["gc_walked"] += 1
                    w += self._gc_entry
                    if e[1] + expire <= now:       # (refcnt 0: expire * 1)
                        del chain[i]
                        self.size -= 1
                        self._release(e[2])
                        k["gc_freed"] += 1
                        w += self._free
                        break
            if self.size < RT_CACHE_SIZE_MAX:
                return w
            expire_j >>= 1

    def lookup(self, daddr: int, nexthop: int, now: float) -> float:
        """ip_rt_route for a forwarded packet to ``daddr`` (next hop
        ``nexthop``) at ``now``: returns the seconds it costs."""
        k = self.counters
        chain = self.buckets[ip_rt_hash_code(_wire(daddr))]
        for i, e in enumerate(chain):
            if e[0] == daddr:
                e[1] = now
                k["hits"] += 1
                return (i + 1) * self._step
        # ip_rt_slow_route: the FIB, a new entry, rt_cache_add
        k["misses"] += 1
        w = max(len(chain), 1) * self._step + self._miss
        w += self._arp_bind(nexthop, now)
        if self.size >= RT_CACHE_SIZE_MAX:
            w += self._gc(now)
        chain.insert(0, [daddr, now, nexthop])
        self.size += 1
        # the clean-up walk behind the new head: same destination or idle > 300 s
        i = 1
        while i < len(chain):
            e = chain[i]
            w += self._step
            if e[0] == daddr or e[1] + RT_CACHE_TIMEOUT < now:
                del chain[i]
                self.size -= 1
                self._release(e[2])
                k["cleaned"] += 1
                w += self._free
                continue
            i += 1
        if self.size > k["size_max"]:
            k["size_max"] = self.size
        return w

    # -- the ARP table ---------------------------------------------------------------
    def _arp_bind(self, nexthop: int, now: float) -> float:
        """header_cache_bind -> the next hop's ARP entry (found or made)."""
        k = self.counters
        # (a lookup walks one of 16 chains: about a sixteenth of the table)
        w = max(1, len(self.arp) // ARP_TABLE_SIZE) * self._arp_step
        a = self.arp.get(nexthop)
        if a is not None:
            a[0] = now
            a[1] += 1
            return w
        if len(self.arp) >= ARP_MAXSIZE:
            w += self._arp_force_expire(now)
        k["arp_allocs"] += 1
        w += self._arp_alloc
        self.arp[nexthop] = [now, 1]
        if len(self.arp) > k["arp_entries_max"]:
            k["arp_entries_max"] = len(self.arp)
        return w

    def _arp_force_expire(self, now: float) -> float:
        """arp_force_expire: free idle unused entries until below the limit,
        else the least recently used unused one; none if all are in use."""
        k = self.counters
        k["arp_force_expire"] += 1
        w = 0.0
        oldest, oldest_t = None, np.inf
        freed = 0
        for hop in list(self.arp):
            k["arp_walked"] += 1
            w += self._arp_step
            used, users = self.arp[hop]
            if users > 0:
                continue
            if now - used > ARP_TIMEOUT:
                del self.arp[hop]
                freed += 1
                w += self._free
                if len(self.arp) < ARP_MAXSIZE:
                    break
                continue
            if used < oldest_t:
                oldest, oldest_t = hop, used
        if not freed and oldest is not None:
            del self.arp[oldest]
            freed = 1
            w += self._free
        k["arp_freed"] += freed
        return w

    # -- a window of packets ---------------------------------------------------------
    def costs(self, t, daddr, nexthop, routed) -> np.ndarray:
        """The lookup cost of each packet of a window (arrival times ``t``),
        0 where ``routed`` is False (not forwarded: the caller charges it)."""
        out = np.zeros(len(t), dtype=np.float64)
        for j in np.flatnonzero(routed).tolist():
            out[j] = self.lookup(int(daddr[j]), int(nexthop[j]), float(t[j]))
        return out

    def census(self) -> dict:
        """Entries now, by table (for tests and the counters)."""
        return {"routes": self.size, "chained": sum(len(c) for c in self.buckets),
                "arp_entries": len(self.arp)}
