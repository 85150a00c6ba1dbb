"""The run's state samples: the route cache, dst cache, RCU and neighbour
table every ``record_every`` seconds (``Result.cache``), as a ``/proc``
reader polling ``rt_cache_stat`` and ``ip -s neigh`` would see them."""

from __future__ import annotations

__all__ = ["SAMPLES", "Samples"]

#: the sampled quantities (``Result.cache`` columns besides ``t``)
SAMPLES = ("entries", "hashed", "garbage", "rcu_pending", "expire", "equilibrium", "rover",
           "neigh_entries", "neigh_incomplete")


class Samples:
    """Lists of samples, one per quantity, appended by :meth:`record`."""

    def __init__(self) -> None:
        self.rec = {k: [] for k in ("t",) + SAMPLES}

    def record(self, t: float, cache, arp) -> None:
        """One sample at ``t`` of ``cache`` (a RouteCache or None) and ``arp``
        (an Arp or None); what does not exist reads 0."""
        rec = self.rec
        rec["t"].append(t)
        if cache is None:
            for k in ("entries", "hashed", "garbage", "rcu_pending", "expire", "equilibrium",
                      "rover"):
                rec[k].append(0)
        else:
            rec["entries"].append(cache.dst.entries)
            rec["hashed"].append(cache.hashed)
            rec["garbage"].append(len(cache.dst.garbage))
            rec["rcu_pending"].append(cache.rcu.pending)
            rec["expire"].append(cache.expire / cache.hz)
            rec["equilibrium"].append(cache.equilibrium)
            rec["rover"].append(cache.rover)
        if arp is not None:
            rec["neigh_entries"].append(arp.tbl.entries)
            rec["neigh_incomplete"].append(arp.tbl.incomplete())
        else:
            rec["neigh_entries"].append(0)
            rec["neigh_incomplete"].append(0)
