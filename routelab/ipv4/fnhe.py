"""3.6's per-destination state after the route cache: nexthop exceptions and rt_genid.

Kernel: net/ipv4/route.c (New-B/Linux3.6 @ 5fb0555c4) fnhe_hashfun,
update_or_create_fnhe, fnhe_oldest, find_exception, rt_is_expired,
rt_cache_flush; include/net/ip_fib.h (FNHE_HASH_SIZE 2048, FNHE_RECLAIM_DEPTH 5).

Without a route cache, what used to live in a per-destination cache entry --
a learned path MTU, a gateway an ICMP redirect taught -- is kept as an
*exception* of the nexthop the destination routes through.  Each nexthop gets
a 2,048-bucket hash table on its first exception (``kzalloc`` then, never
before).  A bucket's chain is searched for the destination; a new one is
added at the head, unless the chain already holds more than
``FNHE_RECLAIM_DEPTH`` (5) others: then the entry used longest ago (smallest
``fnhe_stamp``) is taken over, and the route it had cached is freed.  So a
nexthop holds at most 2,048 x 6 exceptions however many destinations an
attacker makes it learn about: the state is bounded by construction, where
the route cache's was bounded only by its GC.

Created from PMTU updates (``__ip_rt_update_pmtu``) and redirects
(``__ip_do_redirect``), consulted by output routes (``__mkroute_output`` ->
``find_exception``); a forwarding router's input path does not look at them.

Invalidation is lazy: ``rt_cache_flush`` only increments the namespace's
``rt_genid``; a cached dst whose ``rt_genid`` differs is expired
(``rt_is_expired``) and replaced the next time it is used.

Simplifications: no RCU (reclaimed entries are reused at once, as the source
does under its spinlock); ``expires`` is kept but not acted on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FNHE_HASH_SIZE", "FNHE_RECLAIM_DEPTH", "fnhe_hashfun", "Fnhe",
           "NexthopExceptions", "RtGenid"]

#: Buckets of a nexthop's exception table (include/net/ip_fib.h, 3.6).
FNHE_HASH_SIZE = 2048
#: A chain with more than this many other entries reclaims instead of growing.
FNHE_RECLAIM_DEPTH = 5


def _be32(addr: int) -> int:
    """The 32-bit word a little-endian CPU reads from a network-order address."""
    return int.from_bytes((addr & 0xFFFFFFFF).to_bytes(4, "big"), "little")


def fnhe_hashfun(daddr: int) -> int:
    """Bucket of destination ``daddr`` (a host-order int), as ``fnhe_hashfun``
    computes it on x86 from the ``__be32`` value: the word folded with itself
    shifted right by 11 and by 22, masked to the table size."""
    h = _be32(daddr)
    h ^= (h >> 11) ^ (h >> 22)
    return h & (FNHE_HASH_SIZE - 1)


@dataclass(slots=True)
class Fnhe:
    """One ``struct fib_nh_exception``."""

    daddr: int
    gw: int = 0
    pmtu: int = 0
    expires: float = 0.0
    stamp: float = 0.0
    #: the output route cached for this destination (``fnhe_rth``), if any
    rth: object | None = None


@dataclass
class NexthopExceptions:
    """A nexthop's exception table (``nh->nh_exceptions``)."""

    buckets: list | None = None           # None until the first exception
    #: exceptions allocated (never freed here: the source frees them only
    #: with the nexthop), reclaims of the oldest, cached routes freed by them
    allocated: int = 0
    reclaimed: int = 0
    routes_freed: int = 0
    #: bucket-chain entries stepped over by updates and finds (a cost count)
    steps: int = 0
    _index: dict = field(default_factory=dict, repr=False)

    @property
    def entries(self) -> int:
        return self.allocated

    @property
    def table_bytes(self) -> int:
        """The bucket array's size once allocated (one pointer per bucket, LP64)."""
        return 8 * FNHE_HASH_SIZE if self.buckets is not None else 0

    def update_or_create(self, daddr: int, now: float, gw: int = 0, pmtu: int = 0,
                         expires: float = 0.0) -> Fnhe:
        """Record a redirect (``gw``) or a path MTU (``pmtu``) for ``daddr``."""
        if self.buckets is None:
            self.buckets = [[] for _ in range(FNHE_HASH_SIZE)]
        chain = self.buckets[fnhe_hashfun(daddr)]
        found = None
        for e in chain:
            self.steps += 1
            if e.daddr == daddr:
                found = e
                break
        if found is not None:
            if gw:
                found.gw = gw
            if pmtu:
                found.pmtu = pmtu
                found.expires = expires
        else:
            if len(chain) > FNHE_RECLAIM_DEPTH:
                found = min(chain, key=lambda e: e.stamp)   # fnhe_oldest: first smallest
                self.reclaimed += 1
                if found.rth is not None:
                    found.rth = None
                    self.routes_freed += 1
            else:
                found = Fnhe(daddr)
                chain.insert(0, found)                      # at the chain's head
                self.allocated += 1
            found.daddr = daddr
            found.gw = gw
            found.pmtu = pmtu
            found.expires = expires
        found.stamp = now
        return found

    def find(self, daddr: int) -> Fnhe | None:
        """``find_exception``: the destination's entry, or None."""
        if self.buckets is None:
            return None
        for e in self.buckets[fnhe_hashfun(daddr)]:
            self.steps += 1
            if e.daddr == daddr:
                return e
        return None

    def max_chain(self) -> int:
        return max((len(c) for c in self.buckets), default=0) if self.buckets else 0


@dataclass
class RtGenid:
    """The namespace's route generation (``net->ipv4.rt_genid``)."""

    genid: int = 0
    flushes: int = 0

    def flush(self) -> None:
        """``rt_cache_flush``: one increment; nothing is walked or freed."""
        self.genid += 1
        self.flushes += 1

    def expired(self, rt_genid: int) -> bool:
        """``rt_is_expired``: a dst made under another generation is stale."""
        return rt_genid != self.genid
