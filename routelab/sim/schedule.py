"""The run's agenda: what happens next, besides the offered packets.

A run is a discrete-event simulation.  Its events are, in time order:

* the **offered packets** of the current window (sorted arrays, read in
  stretches by the dispatcher: they need no queue);
* **born packets**: packets a host or the router makes during the run (a
  ping reply, an ARP reply, an RPC retransmission), kept in a heap by
  arrival time (:meth:`Schedule.born_push`, :meth:`Schedule.born_pop`);
* **deliveries**: a frame reaching a host at the moment its last bit left
  the router's wire (or ``ip_local_deliver`` handed it over), kept in a
  heap by time (:meth:`Schedule.deliver_at`, :meth:`Schedule.delivery_pop`);
* **timers** (:class:`routelab.sim.clock.Clock`, its own heap);
* **state samples** every ``record_every`` seconds (:attr:`rec_next`).

The dispatcher (``routelab.router.Run.dispatch``) takes whichever comes
first; :attr:`nt` is the earliest delivery or sample, so that one compare
per packet (``t >= clock.nt or t >= schedule.nt``) tells it when to stop and
run them.  Ties at one instant: deliveries, then timers, then samples, then
packets (a timer due when a packet arrives fires before the packet is
looked at).

Born packets that arrive after the current window's end are *carried* into
the next window (:attr:`carry`): their fields wait here until that window's
columns exist.  Deliveries are kept by packet index; a delivery still
pending when its window closes is re-keyed to a negative index whose
header the run keeps (``Run.header``), see :meth:`rekey_deliveries`.

Like SimPy's ``Environment.step``: one small loop picks the next event;
nothing here knows what a packet is.
"""

from __future__ import annotations

import heapq
import math

import cython

__all__ = ["Schedule"]

INF = math.inf


class Schedule:
    """Born packets, deliveries and the sample time of one run (see module doc).

    Attributes
    ----------
    nt : float          earliest pending delivery or sample (``inf`` if none)
    dnt : float         earliest pending delivery (``inf`` if none)
    bnt : float         earliest born packet's arrival (``inf`` if none)
    rec_next : float    when the next state sample is due
    carry : list        fields of born packets due in a later window
    delivered : int     deliveries made so far
    """

    def __init__(self, rec_next: float = 0.0) -> None:
        self.born: list = []
        self.dlv: list = []
        self.carry: list = []
        self.seq = 0
        self.delivered = 0
        self.dnt = INF
        self.bnt = INF
        self.rec_next = rec_next
        self.nt = rec_next

    # -- born packets ------------------------------------------------------------
    def born_push(self, t: float, j: int) -> None:
        """Packet ``j`` (already in the window's columns) arrives at ``t``."""
        heapq.heappush(self.born, (t, j))
        if t < self.bnt:
            self.bnt = t

    def born_pop(self) -> int:
        """The earliest born packet's index (removed from the heap)."""
        j = heapq.heappop(self.born)[1]
        self.bnt = self.born[0][0] if self.born else INF
        return j

    # -- deliveries ----------------------------------------------------------------
    @cython.locals(t=cython.double)
    def deliver_at(self, t: float, host, j: int) -> None:
        """``host.deliver(j, t)`` is to happen at ``t``."""
        self.seq += 1
        heapq.heappush(self.dlv, (t, self.seq, host, j))
        if t < self.dnt:
            self.dnt = t
            if t < self.nt:
                self.nt = t

    def delivery_pop(self):
        """Remove the earliest delivery; return ``(t, host, j)``."""
        t, _, host, j = heapq.heappop(self.dlv)
        self.dnt = self.dlv[0][0] if self.dlv else INF
        self.nt = self.dnt if self.dnt < self.rec_next else self.rec_next
        self.delivered += 1
        return t, host, j

    def rekey_deliveries(self, rekey) -> None:
        """Give every pending delivery the index ``rekey(j)`` (window change)."""
        self.dlv = [(t, s, h, rekey(j)) for t, s, h, j in self.dlv]
        heapq.heapify(self.dlv)

    def drop_deliveries(self) -> int:
        """Forget the pending deliveries (the run is over); return how many."""
        n = len(self.dlv)
        self.dlv = []
        self.dnt = INF
        self.nt = self.rec_next
        return n

    # -- samples ----------------------------------------------------------------------
    def set_rec_next(self, t: float) -> None:
        """The next state sample is due at ``t``."""
        self.rec_next = t
        self.nt = self.dnt if self.dnt < t else t
