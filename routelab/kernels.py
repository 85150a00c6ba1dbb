"""Kernel profiles: coherent bundles of behaviour and defaults.

The ``kernel`` knob picks one of these.  Each profile says which variant of
each mechanism runs and which sysctl defaults apply, and where that comes
from (tags refer to ``kernel.md``).

=================  ==========================================================
profile            what it is
=================  ==========================================================
``2.0``            2.0's own small route cache (256 buckets keyed on the
                   destination, at most 256 entries, always evicting, never
                   refusing) and ARP table (a soft 256-entry limit):
                   routelab.ipv4.route20, 2.0.40 include/net/route.h,
                   net/ipv4/route.c, net/ipv4/arp.c.  Not the 2.2+ dst
                   cache, GC or neighbour table; ARP resolution itself is not
                   modelled.  Story 1's reference kernel.
``2.4.18``         Route cache with the unkeyed XOR/shift hash, no chain
                   limit on insert, gc_min_interval 5 s, no secret rebuild,
                   rt_score low bits = use count. [K2418]
``2.4.22``         jhash keyed by ``rt_hash_rnd``; insert trims a chain when
                   it is longer than gc_elasticity *or* longer than 1 with a
                   non-valuable candidate (about 2 ordinary entries per
                   bucket); rt_score low bits = use count; gc_min_interval
                   0.5 s. [V2422], sources.md [2.4.x]
``2.4.24``         As 2.4.22 but insert trims only chains of more than
                   gc_elasticity (8) entries, so chains reach 9, and rt_score
                   is age-based (both since 2.4.23) [24] net/ipv4/route.c
                   rt_intern_hash, rt_score.  HZ=100, no RCU (rwlock per
                   bucket: freed entries go straight to dst_free), 2.4's
                   do_softirq (a softirq that re-raises itself wakes
                   ksoftirqd at once) [24] kernel/softirq.c.
``2.4.24-nocache`` 2.4.24 with story 1's hack: rt_intern_hash frees the new
                   entry instead of inserting it, so every packet allocates,
                   uses and frees its own dst, which lands on the dst garbage
                   list while the packet still holds it.
``2.6.0``          2.6-style insert (trim only above gc_elasticity), rt_score
                   low bits = NOT(age), HZ=1000, NAPI drivers, entries freed
                   through RCU with vanilla quiescent states (context switch,
                   tick in user mode, idle), 2.6's do_softirq (up to 10
                   restarts). [260]
``2.6.0-rcu-iter`` 2.6.0 + the earlier rcu-softirq patch: the end of each
                   ``do_softirq`` invocation (all its restarts) is also a
                   quiescent state.  Our reading of "each full pass of the
                   softirq loop"; stated as an interpretation.
``2.6.0-rcu-bh``   2.6.0 + Dipankar Sarma's call_rcu_bh patch (1 Apr 2004):
                   the completion of every softirq handler is a quiescent
                   state for route-cache frees.
``2.6.1``          Same route-cache behaviour as 2.6.0 (story 1's 2.6 box).
``2.6.20``         Story 4's kernel: HZ 250, ip_forward resets ip_summed to
                   CHECKSUM_NONE; route cache as 2.6.0. [V2620]
``2.6.20-fwdcsum`` 2.6.20 with the forward path keeping CHECKSUM_PARTIAL
                   (later skb_forward_csum; version UNVERIFIED).
=================  ==========================================================

Every profile with a route cache also has the neighbour table and ARP
(routelab.core.neighbour, routelab.ipv4.arp; 2.4.24 and 2.6.0 are the same
there [24][260]).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KnobError

__all__ = ["KernelProfile", "KERNELS", "kernel_profile"]


@dataclass(frozen=True, slots=True)
class KernelProfile:
    """Behaviour switches and sysctl defaults of one kernel.

    Attributes
    ----------
    name : str
    route_cache : bool
        The 2.2+ route cache (dst entries, rt_garbage_collect, RCU in 2.6).
        False: 2.0's cache (``cache20``) or none at all (a FIB lookup per
        packet).
    cache_insert : str
        ``"normal"``, or ``"nocache"`` (free the new entry after use).
    hash : str
        ``"jhash"`` (keyed, 2.4.22+) or ``"fold"`` (2.4.18 unkeyed).
    intern : str
        Chain trimming on insert: ``"none"`` (2.4.18), ``"2.4"`` (elasticity
        or >1 non-valuable), ``"2.6"`` (elasticity only).
    score : str
        rt_score low bits: ``"use"`` (2.4) or ``"age"`` (2.6).
    rcu : str
        ``"none"`` (2.4: free at once), ``"vanilla"``, ``"iter"``, ``"bh"``.
    hz : int
        Timer tick rate (jiffy = 1/hz).
    napi : bool
        Whether drivers poll (2.6) or interrupt per packet (2.4).
    gc_min_interval : float
        Default of net.ipv4.route.gc_min_interval, seconds.
    secret_interval : float
        Default of secret_interval (0 = no rt_secret_rebuild timer).
    check_expire_random : bool
        First rt_check_expire firing randomised in [interval, 2 interval).
    source : str
    softirq : str
        ``"2.4"``: do_softirq reruns only softirqs raised for the first time
        during its pass, so a NET_RX that re-raises itself wakes ksoftirqd at
        once [24] kernel/softirq.c; ``"2.6"``: up to MAX_SOFTIRQ_RESTART
        passes [260].
    neighbours : bool
        The 2.2+ neighbour table and ARP are modelled (not for 2.0).
    cache20 : bool
        2.0's route cache and ARP table (:mod:`routelab.ipv4.route20`), in
        place of the 2.2+ ones; False with ``route_cache`` False means no
        route cache at all.
    policy_rules : bool
        ``fib_lookup`` walks the policy rules (``fib_rules.c``, 2.2 and
        later); 2.0 has one table and no rules.  Independent of the route
        cache: a kernel without a cache (3.6) still has rules.
    nexthop_dst : bool
        Without a route cache, each packet attaches the dst cached in its
        nexthop (3.6 ``nh_rth_input``, ``skb_dst_set_noref``): no allocation,
        no GC, no RCU freeing.  2.0 had no dst cache at all either way.
    fib : str
        The FIB's data structure: ``"hash"`` (``fib_hash.c``, the 2.x
        default) or ``"trie"`` (``fib_trie.c``, the only one from 2.6.39).
    rcu_maxbatch : int
        RCU callbacks per tasklet run, 0 = all.  The 2.6.0/2.6.1 profiles run
        every ready callback at once: Sarma's tests compared vanilla 2.6.0 with
        a "throttle-rcu" patch (kernel.md s4), and the limit (maxbatch = 10)
        is what 2.6.11 has.  The ``rcu_maxbatch`` knob overrides it.
    forward_csum : str
        What ip_forward does to ``skb->ip_summed``: ``"none"`` sets
        CHECKSUM_NONE, whatever it was (net/ipv4/ip_forward.c ip_forward,
        2.4.24 and 2.6.0 in MaximeChretien/linux-history, 2.6.20 in
        sagsango/linux-2.6.20; 2.0 not checked); ``"partial"`` keeps
        CHECKSUM_PARTIAL (later kernels' skb_forward_csum; the first version
        is UNVERIFIED, sources.md story 4).  See
        :func:`routelab.ipv4.ip_forward.ip_forward_csum`.
    """

    name: str
    route_cache: bool
    cache_insert: str
    hash: str
    intern: str
    score: str
    rcu: str
    hz: int
    napi: bool
    gc_min_interval: float
    secret_interval: float
    check_expire_random: bool
    source: str
    rcu_maxbatch: int = 0
    softirq: str = "2.6"
    neighbours: bool = True
    cache20: bool = False
    policy_rules: bool = True
    fib: str = "hash"
    forward_csum: str = "none"
    nexthop_dst: bool = False

    def __post_init__(self) -> None:
        if self.cache20 and self.route_cache:
            raise KnobError(f"kernel {self.name} cache20", self.cache20,
                            "False when the kernel has the 2.2+ route cache")
        if self.fib not in ("hash", "trie"):
            raise KnobError(f"kernel {self.name} fib", self.fib, "'hash' or 'trie'")
        if self.forward_csum not in ("none", "partial"):
            raise KnobError("forward_csum", self.forward_csum, "'none' or 'partial'")


KERNELS: dict[str, KernelProfile] = {p.name: p for p in [
    KernelProfile("2.0", False, "normal", "jhash", "none", "use", "none", 100, False,
                  0.5, 0.0, False,
                  "2.0.40 (linux-history): ip_rt_route's 256-entry cache, arp.c's soft "
                  "256-entry table (routelab.ipv4.route20)",
                  softirq="2.4", neighbours=False, policy_rules=False, cache20=True),
    KernelProfile("2.4.18", True, "normal", "fold", "none", "use", "none", 100, False,
                  5.0, 0.0, False, "[K2418] net/ipv4/route.c, net/core/dst.c", softirq="2.4"),
    KernelProfile("2.4.22", True, "normal", "jhash", "2.4", "use", "none", 100, False,
                  0.5, 600.0, True, "[V2422] net/ipv4/route.c (nslu2 2.4.22-xfs tree)",
                  softirq="2.4"),
    KernelProfile("2.4.24", True, "normal", "jhash", "2.6", "age", "none", 100, False,
                  0.5, 600.0, True, "[24] linux-history tag 2.4.24 net/ipv4/route.c",
                  softirq="2.4"),
    KernelProfile("2.4.24-nocache", True, "nocache", "jhash", "2.6", "age", "none", 100,
                  False, 0.5, 600.0, True,
                  "[24] + Wolfgang Walter's rt_intern_hash hack (story 1)", softirq="2.4"),
    KernelProfile("2.6.0", True, "normal", "jhash", "2.6", "age", "vanilla", 1000, True,
                  0.5, 600.0, True, "[260] route cache; vanilla 2.6.0 RCU (kernel.md s4)"),
    KernelProfile("2.6.0-rcu-iter", True, "normal", "jhash", "2.6", "age", "iter", 1000, True,
                  0.5, 600.0, True, "2.6.0 + earlier rcu-softirq patch (stories.md s2)"),
    KernelProfile("2.6.0-rcu-bh", True, "normal", "jhash", "2.6", "age", "bh", 1000, True,
                  0.5, 600.0, True,
                  "2.6.0 + call_rcu_bh patch, LKML <20040331214342.GD4543@in.ibm.com>"),
    KernelProfile("2.6.1", True, "normal", "jhash", "2.6", "age", "vanilla", 1000, True,
                  0.5, 600.0, True, "[261] taken as 2.6.0 for the route cache"),
    # Story 4 (sagsango/linux-2.6.20 @ 7925ece7): kernel/Kconfig.hz defaults to
    # HZ_250; ip_forward sets CHECKSUM_NONE (net/ipv4/ip_forward.c).  The route
    # cache is taken as 2.6.0's (story 4 hits one entry per direction; its GC and
    # RCU are not exercised; 2.6.20's RCU differs and is not modelled).
    # netdev_max_backlog is 1000 in 2.6.20 (net/core/dev.c): the story's
    # scenario passes it as a sysctl, the sysctl table's default being 2.4/2.6.0's.
    KernelProfile("2.6.20", True, "normal", "jhash", "2.6", "age", "vanilla", 250, True,
                  0.5, 600.0, True, "[V2620] ip_forward.c, Kconfig.hz (story 4)"),
    # The same with the later fix of the checksum trap: the forward path keeps
    # CHECKSUM_PARTIAL (skb_forward_csum; first version UNVERIFIED, after 2.6.20).
    KernelProfile("2.6.20-fwdcsum", True, "normal", "jhash", "2.6", "age", "vanilla", 250,
                  True, 0.5, 600.0, True,
                  "2.6.20 + a forward path that keeps CHECKSUM_PARTIAL (later kernels)",
                  forward_csum="partial"),
    # The epilogue (issue 26), New-B/Linux3.6 @ 5fb0555c4: no route cache
    # (net/ipv4/route.c ip_route_input_slow -> fib_lookup in fib_trie.c, the
    # nexthop's cached dst); HZ 250 (kernel/Kconfig.hz default); NAPI drivers;
    # the 2.6 softirq restart rule (kernel/softirq.c __do_softirq, restart 10).
    # Its tree RCU is taken as the model's vanilla batches: with no dst freed per
    # packet there is almost nothing for it to do.  Policy rules: 3.6 walks them
    # only when custom rules exist (include/net/ip_fib.h fib_lookup).
    KernelProfile("3.6", False, "normal", "jhash", "2.6", "age", "vanilla", 250, True,
                  0.5, 0.0, False,
                  "[V36] net/ipv4/route.c, fib_trie.c, include/net/ip_fib.h",
                  fib="trie", nexthop_dst=True),
]}


def kernel_profile(name: str) -> KernelProfile:
    """Return the kernel profile ``name`` or raise KnobError."""
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise KnobError("kernel", name, "one of " + ", ".join(KERNELS)) from None
