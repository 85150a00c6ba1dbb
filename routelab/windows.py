"""A run's windows: the array stages of each window of offered packets,
its packet columns, what is counted when it closes, the state samples, and
the end of the run (:class:`RunWindows`, a base of
:class:`routelab.router.Run`).

These run once per window or per sample, not per packet, so they are plain
Python even when the dispatcher is compiled; they are here, not in
``router.py``, so that the dispatcher's file holds the dispatcher.
"""

from __future__ import annotations

import math

import numpy as np

from .core.skbuff import PACKET_SPECS, PacketTrace
from .errors import KnobError
from .hosts import kind_mask
from .prepare import classify, column_data, prepare
from .result import OUTCOMES, Result
from .result.accumulate import Accumulator
from .sim.columns import Packets

__all__ = ["RunWindows"]

O_MISSED = OUTCOMES["drop_rx_missed"]


class RunWindows:
    """The per-window half of a run (mixed into ``Run``)."""

    # -- windows ------------------------------------------------------------------------
    def _edges(self) -> np.ndarray:
        nb = max(1, int(math.ceil(self.duration / self.bin_s)))
        return np.arange(nb + 1) * self.bin_s

    def _stages(self, tr: PacketTrace, offered: bool = False) -> dict:
        """The array stages (``prepare``, ``classify``) of the packets in ``tr``.

        Only the offered packets (``offered``) go through 2.0's route cache
        (routelab.ipv4.route20, whose state the lookups change): packets born
        in the run, priced one header at a time and again for the profile,
        pay a FIB lookup instead (a stated simplification)."""
        p = prepare(self.r, self.cache, tr, self.cache20 if offered else None)
        classify(self.r, p)
        return p

    def _open_window(self, tr: PacketTrace):
        """The array stages of one window's packets, and its Packets columns
        (room for the packets its hosts are expected to bear); born packets
        carried over from the last window arrive first."""
        r = self.r
        self._check_iif(tr)
        p = self._stages(tr, True)
        spare = 0
        for d, h in r.hosts.items():
            spare += int(np.count_nonzero(
                (p["oif"] == d) & ((kind_mask(h.kinds) >> tr.kind.astype(np.int64)) & 1)))
        pk = Packets(column_data(tr, p), PACKET_SPECS, spare + len(self.sch.carry), O_MISSED)
        # the hot columns now live in flat arrays; free the ones nothing reads again
        for name in [c for c in p if c not in ("cls", "oif", "nfrag", "napi", "fwd_cost",
                                                "out_cost", "route_hit_cost")]:
            del p[name]
        self.pk, self.tr = pk, tr
        self.ledger.outcome = pk.outcome
        if self.neigh is not None:
            self.neigh.window(pk, self._wno)
        self._born = {}
        carry, self.sch.carry = self.sch.carry, []
        for f in carry:
            self.inject({k: v for k, v in f.items() if k != "t"}, f["t"])
        self.ledger.born = 0
        return p, pk

    def _close_window(self, tr: PacketTrace, p: dict, pk: Packets, acc: Accumulator) -> None:
        """Count what follows from the outcomes, keep the packets."""
        assert not self.sch.born, "born packets left in a window"
        # deliveries still to come belong to packets of this window: keep
        # their headers, under negative indices (see header())
        if self.sch.dlv:
            self.sch.rekey_deliveries(self.keep_header)
        self.counters.count_window(pk, self.cache is not None, self._fragments(tr, pk))
        acc.add(self.r.config(), self.cache is not None, p, pk, self._born_stages(pk))

    def _fragments(self, tr: PacketTrace, pk: Packets) -> np.ndarray | None:
        """Which of the window's packets (offered, then born) are IP fragments
        (MF set or a non-zero offset); ``None`` if none is."""
        isfrag = (tr.mf != 0) | (tr.frag_off != 0)
        born = [bool(self._born[j]["mf"] or self._born[j]["frag_off"])
                for j in range(pk.n0, pk.n)]
        if not (isfrag.any() or any(born)):
            return None
        return np.concatenate([isfrag, np.array(born, dtype=bool)])

    def _born_stages(self, pk: Packets) -> dict | None:
        """The array stages of the packets born in this window (``None`` if
        none was), for the profile: the same stages :meth:`inject` priced
        them with (they depend on the header only)."""
        n0, n = pk.n0, pk.n
        if n == n0:
            return None
        born = [self._born[j] for j in range(n0, n)]
        # (all at time 0: build sorts by time, and the stages do not read it)
        tr = PacketTrace.build(np.zeros(len(born)),
                               **{name: np.array([f[name] for f in born])
                                  for name in PacketTrace.DTYPES if name != "t"})
        return self._stages(tr)

    def _check_iif(self, tr: PacketTrace) -> None:
        r = self.r
        if len(tr):
            lo, hi = int(tr.iif.min()), int(tr.iif.max())
            if hi >= len(r.devices) or lo < 0:
                raise KnobError("iif", hi if hi >= len(r.devices) else lo,
                                f"a device index in [0, {len(r.devices) - 1}]")

    # -- samples and the end ---------------------------------------------------------
    def _record_until(self, t: float, rec_next: float) -> float:
        """Take every state sample due by ``t``; return when the next one is."""
        while rec_next <= t and rec_next <= self.duration:
            self._record(rec_next)
            rec_next += self.record_every
        return math.inf if rec_next > self.duration else rec_next

    def _record(self, t: float) -> None:
        self.samples.record(t, self.cache, self.arp)

    def _finish(self, acc: Accumulator, n_offered: int) -> Result:
        r = self.r
        if self.cache is not None:
            self.cache.finish_stats(self.counters.lookups)
        # ---- drain: transmit completions after the last arrival; packets still
        # waiting for a resolution stay "held_neigh" and give back their route
        # reference (so that every reference taken during the run is dropped)
        for nd in self.devices:
            nd.txq.drain()
        if self.neigh is not None:
            self.neigh.finish()
        rec_next = self.sch.rec_next
        while rec_next <= self.duration:
            self._record(rec_next)
            rec_next += self.record_every
        self.sch.drop_deliveries()          # (any left are due after the end)
        for c in self.cpus:
            c.finish(self.duration)
        hosts_counters = {}
        for label, h in self._host_labels():
            h.finish(self.duration)
            c = h.counters()
            if c:
                hosts_counters[label] = dict(c)
        cpus = self.cpus
        counters = self.counters.collect(self, hosts_counters)
        ip_neigh = (self.arp.tbl.ip_neigh({i: d.name for i, d in enumerate(r.devices)})
                    if self.arp is not None else "")
        neigh_log = self.arp.tbl.log if self.arp is not None else None
        res = Result.assemble(r.config(), self.duration, acc, n_offered, counters,
                              [c.ivlog for c in cpus], self.bin_s, self.samples.rec,
                              self.ledger.profile(), self.pings.rtt, self.cache)
        # the run's objects refer to one another (the clock's runner, the
        # timers' handlers, hosts): drop the large parts now rather than when
        # the cyclic collector next runs, so the next run reuses their memory
        self.pk = self.tr = self.trace = None
        self._born = {}
        self.ledger.outcome = None
        self.clock.runner = None
        for h in list(r.hosts.values()) + list(r.local_hosts.values()):
            h.run = None
        if self.refused_after_end:
            res.extra["refused_after_end"] = self.refused_after_end
        res.extra["ip_neigh"] = ip_neigh
        if neigh_log is not None:
            res.extra["neigh_log"] = neigh_log
        if r.user_task:
            res.extra["loop_stalls"] = [np.asarray(c.loop_stalls, dtype=float).reshape(-1, 2)
                                        for c in cpus]
        return res
