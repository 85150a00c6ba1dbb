"""The run's CPU profile: seconds per kernel function (a ``perf top`` view).

Two sources, one composition (:data:`routelab.costs.COMPOSITION`):

* the per-packet arrays: how many packets passed each fixed stage (receive,
  forward, output, the cache-hit lookup) times that stage's cost;
* the run's ledger: what only the per-packet stages know (the slow path,
  timers, RCU callbacks, the hard IRQ of refused frames).
"""

from __future__ import annotations

import numpy as np

from ..core.dropreason import OUTCOMES
from ..costs import composed

__all__ = ["packet_profile", "compose_profile", "LEDGER_ROWS"]

#: profile rows charged through the run's ledger: slot name -> row label
LEDGER_ROWS = {
    "route_slow": "ip_route_input_slow+dst_alloc+rt_garbage_collect+rt_intern_hash",
    "timers": "timers (rt_check_expire, dst_run_gc, rt_secret_rebuild)",
    "rcu_tasklet": "rcu_process_callbacks",
    "rx_drop_irq": "hard IRQ for packets dropped by netif_rx",
}


def packet_profile(config, has_cache: bool, p: dict, outcome: np.ndarray) -> dict:
    """The part of the profile that follows from one window's per-packet arrays.

    ``p`` holds the array stages' columns, ``outcome`` the offered packets'
    outcomes; returns seconds per kernel function (summed over windows by
    the caller).
    """
    c = config.costs.fn
    proc = outcome != OUTCOMES["drop_rx_missed"]
    proc &= outcome != OUTCOMES["drop_backlog"]
    napi = p["napi"][: outcome.size]
    prof: dict[str, float] = {}
    prof["napi_poll_rx (driver RX)"] = c["napi_poll_rx"] * np.count_nonzero(proc & napi)
    prof["irq_rx (driver RX IRQ)"] = c["irq_rx"] * np.count_nonzero(proc & ~napi)
    prof["netif_rx"] = c["netif_rx"] * np.count_nonzero(proc & ~napi)
    prof["netif_receive_skb"] = c["netif_receive_skb"] * np.count_nonzero(proc)
    prof["ip_rcv"] = c["ip_rcv"] * np.count_nonzero(proc)
    fwd = (outcome == OUTCOMES["forwarded"]) | (outcome == OUTCOMES["drop_qdisc"])
    prof["ip_forward+skb_cow+ip_decrease_ttl"] = float(p["fwd_cost"][: outcome.size][fwd].sum())
    prof["ip_output+dev_queue_xmit+driver TX"] = float(p["out_cost"][: outcome.size][fwd].sum())
    if not has_cache:
        prof["fib_lookup (per packet)"] = float(np.broadcast_to(
            p["route_hit_cost"], outcome.shape)[proc].sum())
    return {k: float(v) for k, v in prof.items()}


def compose_profile(config, prof_packets: dict, ledger: dict, counters: dict) -> dict:
    """Seconds per kernel function over the run (exclusive, approximate),
    largest first.  ``ledger`` is the run's ``Ledger.profile()``."""
    c = config.costs.fn
    prof: dict[str, float] = {}

    def add(name, secs):
        if secs > 0:
            prof[name] = prof.get(name, 0.0) + float(secs)

    for name, secs in prof_packets.items():
        if name != "fib_lookup (per packet)":
            add(name, secs)
    rows = counters.get("rt_cache_stat")
    if rows is not None:
        tot = np.asarray(rows).sum(axis=0)
        add("ip_route_input (hits)", composed(c, "route_hit") * tot[1])
        add("ip_route_input (chain walk)", c["chain_step"] * tot[15])
        add(LEDGER_ROWS["route_slow"], ledger.get("route_slow", 0.0))
    else:
        add("fib_lookup (per packet)", prof_packets.get("fib_lookup (per packet)", 0.0))
    for slot in ("timers", "rcu_tasklet", "rx_drop_irq"):
        add(LEDGER_ROWS[slot], ledger.get(slot, 0.0))
    for slot, secs in ledger.items():
        if slot not in LEDGER_ROWS:
            add(slot, secs)          # a stage's own slot, under its own name
    return dict(sorted(prof.items(), key=lambda kv: -kv[1]))
