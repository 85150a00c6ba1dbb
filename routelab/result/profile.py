"""The run's CPU profile: seconds per kernel function (a ``perf top`` view).

Two sources, one composition (:data:`routelab.costs.COMPOSITION`):

* the per-packet arrays: the state-independent part of every packet's
  service (receive, the route lookup, the forward/output/ICMP/local path,
  or the kfree_skb of a dropped packet), as the array stages priced it
  (:func:`routelab.prepare.classify`), split into rows by class and outcome;
* the run's ledger: what only the per-packet stages know (the softirq
  entry, the slow path, the GCs, timers, RCU callbacks, the neighbour layer,
  the hard IRQ of refused frames), each second charged to one slot where it
  was spent.

So the rows add up to the CPU's busy time (tests/test_profile.py).  Counts
from the counters price the rest: the chain walk (entries stepped over) and
the redirects ``ip_rt_send_redirect`` sent.
"""

from __future__ import annotations

import numpy as np

from ..core.dropreason import OUTCOMES
from ..costs import composed
from ..ipv4.fib import RTN
from ..prepare import (
    C_ARP,
    C_FRAGNEED,
    C_FWD,
    C_HDR,
    C_LOCAL,
    C_MARTIAN,
    C_NOROUTE,
    C_REDIR,
    C_TTL,
    local_socket,
)

__all__ = ["packet_profile", "compose_profile", "LEDGER_ROWS", "PACKET_ROWS"]

#: profile rows charged through the run's ledger: slot name -> row label
LEDGER_ROWS = {
    "net_rx_action": "net_rx_action (softirq entry)",
    "route_slow": "ip_route_input_slow+dst_alloc+rt_intern_hash",
    "rt_garbage_collect": "rt_garbage_collect",
    "dst_run_gc": "dst_run_gc",
    "timers": "timers (rt_check_expire, rt_secret_rebuild)",
    "rcu_tasklet": "rcu_process_callbacks",
    "rx_drop_irq": "hard IRQ for packets dropped by netif_rx",
}

#: profile rows priced from the per-packet arrays: key -> row label
PACKET_ROWS = {
    "napi": "napi_poll_rx (driver RX)",
    "irq": "irq_rx (driver RX IRQ)",
    "netif_rx": "netif_rx",
    "netif_receive_skb": "netif_receive_skb",
    "ip_rcv": "ip_rcv",
    "lookup": "rt_hash+ip_route_input (every lookup)",
    "fib": "fib_lookup (per packet)",
    "route20": "ip_rt_route (2.0: cache walk; misses: slow route, rt_cache_add, GC, ARP)",
    "forward": "ip_forward+skb_cow+ip_decrease_ttl",
    "output": "ip_output+dev_queue_xmit+driver TX",
    "icmp": "icmp_send+ip_output+dev_queue_xmit (ICMP errors, redirects)",
    "local": "ip_local_deliver+icmp_rcv+echo reply",
    "local_sock": "ip_local_deliver (to a local socket)",
    "kfree": "kfree_skb (packets dropped after receive)",
}

# outcomes of a packet the route lookup refused: only freed (no path)
_REFUSED = ("drop_martian", "drop_dst_overflow", "drop_neigh_overflow")


def packet_profile(config, has_cache: bool, p: dict, pk: dict) -> dict:
    """The part of the profile that follows from one window's per-packet arrays.

    ``p`` holds the array stages' columns ``napi``, ``fwd_cost``,
    ``out_cost`` and ``route_hit_cost`` of every packet of the window
    (offered and born); ``pk`` its per-packet arrays ``outcome``, ``dev``,
    ``cls`` and ``rtype``.  Returns seconds per row key of
    :data:`PACKET_ROWS` (summed over windows by the caller).
    """
    c = config.costs.fn
    o = pk["outcome"]
    n = o.size
    proc = (o != OUTCOMES["drop_rx_missed"]) & (o != OUTCOMES["drop_backlog"])
    cls = pk["cls"][:n]
    dev = pk["dev"][:n].astype(np.int64)
    pair = np.array([getattr(d.profile, "kind", "") == "pair" for d in config.devices])[dev]
    napi = np.asarray(p["napi"][:n], dtype=bool) & ~pair
    irq = ~napi & ~pair
    prof: dict[str, float] = {}
    # receive (prepare: receive_napi, receive_irq, receive_pair; ARP frames skip ip_rcv)
    prof["napi"] = c["napi_poll_rx"] * np.count_nonzero(proc & napi)
    prof["irq"] = c["irq_rx"] * np.count_nonzero(proc & irq)
    prof["netif_rx"] = c["netif_rx"] * np.count_nonzero(proc & ~napi)
    prof["netif_receive_skb"] = c["netif_receive_skb"] * np.count_nonzero(proc)
    prof["ip_rcv"] = c["ip_rcv"] * np.count_nonzero(proc & (cls != C_ARP))
    # the route lookup, hit or miss (not reached by a bad header, nor by ARP)
    routed = proc & (cls != C_HDR) & (cls != C_ARP)
    hit = np.broadcast_to(np.asarray(p["route_hit_cost"], dtype=np.float64), (n,))
    key = "lookup" if has_cache else "fib"
    if getattr(config.kernel, "cache20", False):
        key = "route20"     # (2.0's ip_rt_route: routelab.ipv4.route20)
    prof[key] = float(hit[routed].sum())
    # the path (classify), or only kfree_skb for a packet the lookup refused
    refused = np.zeros(n, dtype=bool)
    for name in _REFUSED:
        refused |= o == OUTCOMES[name]
    path = proc & ~refused
    fwd = path & ((cls == C_FWD) | (cls == C_REDIR))
    err = path & ((cls == C_TTL) | (cls == C_FRAGNEED))
    prof["forward"] = float(p["fwd_cost"][:n][fwd | err].sum())
    prof["output"] = float(p["out_cost"][:n][fwd].sum())
    unreach = path & (cls == C_NOROUTE) & (pk["rtype"][:n] == RTN["unreachable"])
    prof["icmp"] = composed(c, "icmp_send") * (np.count_nonzero(err) + np.count_nonzero(unreach))
    local = path & (cls == C_LOCAL)
    nsock = 0
    if np.any(local):
        sock = local_socket(pk["kind"][:n]) & local
        nsock = np.count_nonzero(sock)
    if nsock:
        prof["local_sock"] = composed(c, "local_sock") * nsock
        local &= ~sock
    prof["local"] = composed(c, "local") * np.count_nonzero(local)
    freed = proc & (refused | (cls == C_NOROUTE) | (cls == C_MARTIAN) | (cls == C_HDR))
    prof["kfree"] = c["kfree_skb"] * np.count_nonzero(freed)
    return {k: float(v) for k, v in prof.items()}


def compose_profile(config, prof_packets: dict, ledger: dict, counters: dict) -> dict:
    """Seconds per kernel function over the run (exclusive), largest first.
    ``prof_packets`` is the sum of :func:`packet_profile` over the windows,
    ``ledger`` the run's ``Ledger.profile()``."""
    c = config.costs.fn
    prof: dict[str, float] = {}

    def add(name, secs):
        if secs > 0:
            prof[name] = prof.get(name, 0.0) + float(secs)

    for key, secs in prof_packets.items():
        add(PACKET_ROWS[key], secs)
    rows = counters.get("rt_cache_stat")
    if rows is not None:
        tot = np.asarray(rows).sum(axis=0)
        add("ip_route_input (chain walk)", c["chain_step"] * tot[15])
    # ip_rt_send_redirect: one icmp_send per redirect sent (never rate limited there)
    add(PACKET_ROWS["icmp"],
        composed(c, "icmp_send") * counters.get("icmp", {}).get("OutRedirects", 0))
    for slot, secs in ledger.items():
        add(LEDGER_ROWS.get(slot, slot), secs)   # a stage's own slot, under its own name
    return dict(sorted(prof.items(), key=lambda kv: -kv[1]))
