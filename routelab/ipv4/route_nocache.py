"""Input routing without a route cache, and the reverse-path filter (array stages).

Two kernels in the collection route every packet through the FIB:

* **2.0** (net/ipv4/route.c of 2.0.40): a FIB lookup per packet in one table,
  no policy rules; priced as one ``fib_lookup``.
* **3.6** (New-B/Linux3.6 @ 5fb0555c4), which removed the route cache:
  ``ip_route_input_noref`` -> ``ip_route_input_slow`` does the martian checks,
  ``fib_lookup`` (include/net/ip_fib.h: with no custom rules, the local, main
  and default tables' tries in turn; with custom rules ``__fib_lookup`` walks
  them), ``fib_validate_source`` (net/ipv4/fib_frontend.c: returns at once
  when ``rp_filter`` is off and no route uses a traffic class), and attaches
  the dst cached in the nexthop (``rt_cache_valid`` -> ``skb_dst_set_noref``:
  no allocation).  Its cost is the route code around the lookups, plus per
  table searched and per trie node touched (:class:`~routelab.ipv4.fib_trie.LookupTrace`).

The FIB is static during a run, so all of this is decided for the whole trace
at once, like :meth:`~routelab.ipv4.fib.Fib.fib_lookup`.

Cache misses of the trie walk
-----------------------------
A node the walk touches costs a DRAM miss when it is not in the CPU's cache.
ASSUMED model: the walk's nodes are spread over the trie's bytes
(:attr:`~routelab.ipv4.fib_trie.TrieStats.bytes`) and the part that does not fit
in :attr:`~routelab.hardware.CpuProfile.cache_bytes` is cold, so a node misses
with probability ``max(0, 1 - cache / trie bytes)``.  It overstates the misses
of the top levels (every lookup passes them, so they stay cached) and ignores
what the rest of the forwarding path evicts; both are stated, not fitted.

The reverse-path filter
-----------------------
Kernel: net/ipv4/fib_frontend.c fib_validate_source, __fib_validate_source
(3.6).  With ``rp_filter`` 1 or 2 the source is looked up as a destination:
no route, or a route that is not unicast, rejects the packet; a route out of
the device the packet came in on accepts it; otherwise strict mode (1)
rejects and loose mode (2) looks up once more (restricted to the input device)
and accepts.  A rejected packet is a martian source (``in_martian_src``).
The decision applies to every kernel; its lookups are priced here only for
kernels without a route cache (with a cache, they are part of the slow path's
cost, and a cache hit does not validate again).
"""

from __future__ import annotations

import numpy as np

from .fib import RTN
from .ip_input import MARTIAN_SRC

__all__ = ["apply_rp_filter", "route_input_nocache", "rp_filter_mode", "rp_filter_reject",
           "trie_miss_fraction"]


def rp_filter_mode(kernel, value) -> int:
    """The filter mode a kernel applies: loose mode (2) is a later addition
    (2.6.31, from memory and UNVERIFIED); the 2.x kernels here treat any
    non-zero value as strict (2.4.24 net/ipv4/fib_frontend.c
    fib_validate_source: the flag only says whether to check)."""
    mode = int(value or 0)
    if mode and kernel.fib != "trie":
        return 1
    return mode


def trie_miss_fraction(fib, cpu) -> float:
    """Probability that a trie node a lookup touches is not in the cache."""
    total = fib.trie_bytes
    if total <= 0:
        return 0.0
    return max(0.0, 1.0 - cpu.cache_bytes / total)


def rp_filter_reject(fib, tr, mode: int, trie: bool):
    """Which packets the reverse-path filter drops, and the lookups it made.

    ``trie``: the kernel's FIB is fib_trie (then the walks are counted).
    Returns ``(reject, lookups, tables, nodes)`` (arrays); ``tables`` and
    ``nodes`` are zeros for the hash FIB.
    """
    n = len(tr)
    zeros = np.zeros(n, dtype=np.int64)
    if mode == 0:
        return np.zeros(n, dtype=bool), zeros, zeros, zeros
    if trie:
        rt, oif, _gw, _nr, tables, nodes = fib.fib_lookup_trie(tr.saddr, tr.daddr, tr.tos,
                                                              tr.iif)
    else:
        rt, oif, _gw, _nr = fib.fib_lookup(tr.saddr, tr.daddr, tr.tos, tr.iif)
        tables, nodes = zeros, zeros
    tables = tables.astype(np.int64)
    nodes = nodes.astype(np.int64)
    lookups = np.ones(n, dtype=np.int64)
    bad = rt != RTN["unicast"]                      # no route, or not a unicast one
    other_dev = ~bad & (oif.astype(np.int64) != np.asarray(tr.iif, dtype=np.int64))
    if mode == 1:
        reject = bad | other_dev
    else:
        reject = bad
        # loose mode looks once more, restricted to the input device: the same walk
        lookups = lookups + other_dev
        tables = tables + np.where(other_dev, tables, 0)
        nodes = nodes + np.where(other_dev, nodes, 0)
    return reject, lookups, tables, nodes


def apply_rp_filter(r, tr, martian) -> dict:
    """Run the reverse-path filter of router ``r`` over trace ``tr``.

    Rejected packets become martian sources in ``martian`` (in place, where
    they were not martian already).  Returns the lookups it made per packet
    (``rp_lookups``, and for a trie FIB ``rp_tables``, ``rp_nodes``).
    """
    k = r.kernel
    mode = rp_filter_mode(k, r.sysctl.get("rp_filter", 0))
    reject, lookups, tables, nodes = rp_filter_reject(r.fib, tr, mode, k.fib == "trie")
    if reject.any():
        martian[reject & (martian == 0)] = MARTIAN_SRC
    return {"rp_lookups": lookups, "rp_tables": tables, "rp_nodes": nodes,
            "rp_reject": reject}


def route_input_nocache(r, nrules, tables, nodes, rp: dict, c):
    """Per-packet route cost (seconds) of a kernel without a route cache.

    ``r`` is the Router; ``nrules``/``tables``/``nodes`` the forward lookup's
    rules examined, tables searched and trie nodes touched (``tables`` and
    ``nodes`` None for the hash FIB); ``rp`` what :func:`apply_rp_filter`
    returned; ``c`` the cost table's ``fn``.  Returns ``(cost, node_s)``:
    the cost array and the price of one trie node touched.
    """
    if r.kernel.fib != "trie":
        return c["fib_lookup"] + nrules * c["fib_rule"], 0.0
    node_s = c["fib_trie_node"] + trie_miss_fraction(r.fib, r.cpu) * r.costs.miss_s
    walk = ((tables + rp["rp_tables"]) * c["fib_table_lookup"]
            + (nodes + rp["rp_nodes"]) * node_s)
    return c["ip_route_input_noref"] + nrules * c["fib_rule"] + walk, node_s
