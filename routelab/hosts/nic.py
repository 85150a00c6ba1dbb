"""A host's own network card: the sending side of a machine beyond a wire.

Kernel: net/core/dev.c dev_queue_xmit and net/sched/sch_generic.c
pfifo_fast as every sender has them (2.4.19, 2.6.20): frames wait in the
qdisc (``txqueuelen`` of them) while the link sends one after another; when
a frame has left, the driver's TX completion frees its skb, which gives a
socket its send-buffer memory back (``sock_wfree``).

A :class:`HostNic` is that for a host beyond one of the router's devices
(an NFS client on the switch, the far end of a TCP connection): the host
hands it frames with :meth:`HostNic.xmit`; each frame is put on the link in
order, reaches the router (``run.inject``) when its last bit has arrived, and
its owner hears ``tx_complete(tag, t)`` at that moment, through one timer of
the run's clock.  The host's own CPU is not the router's: nothing is charged.

Simplified: the wire between the host and the router is the router's port
(full duplex, no propagation delay beyond ``delay_s``); the qdisc drops at
the tail when full, silently (the sender learns nothing but a missing
completion, as a UDP socket without ``IP_RECVERR``).

Optional wire loss (``loss_pct``, seeded by ``rng``): each frame that left
the host is lost on the way with that probability -- it took its wire time
and its owner hears its TX completion, but the router never sees it (a bad
cable, a switch dropping frames).  One uniform draw per frame sent.
"""

from __future__ import annotations

import math
from collections import deque

from ..costs import wire_bytes
from ..errors import KnobError

__all__ = ["HostNic"]


class HostNic:
    """The TX side of a host's NIC (see the module docstring).

    Parameters
    ----------
    speed_bps : float      the link's bit rate
    txqueuelen : int       frames the qdisc holds beyond the one on the wire
    delay_s : float        from the last bit leaving the host to it reaching
                           the router (a switch's store-and-forward, say)

    Attributes
    ----------
    sent, dropped : int    frames put on the wire / refused by a full qdisc
    """

    def __init__(self, speed_bps: float, txqueuelen: int = 100, delay_s: float = 0.0,
                 loss_pct: float = 0.0, rng=None) -> None:
        if not (isinstance(speed_bps, (int, float)) and math.isfinite(speed_bps)
                and speed_bps > 0):
            raise KnobError("speed_bps", speed_bps, "a positive number of bits per second")
        if not (isinstance(txqueuelen, int) and 1 <= txqueuelen <= 1_000_000):
            raise KnobError("txqueuelen", txqueuelen, "an integer in [1, 1000000] frames")
        if not (isinstance(delay_s, (int, float)) and math.isfinite(delay_s) and delay_s >= 0):
            raise KnobError("delay_s", delay_s, "a number of seconds >= 0")
        if not (isinstance(loss_pct, (int, float)) and 0.0 <= loss_pct <= 100.0):
            raise KnobError("loss_pct", loss_pct, "a percentage in [0, 100]")
        if loss_pct > 0 and rng is None:
            raise KnobError("rng", rng, "a numpy Generator when loss_pct > 0 (seeded loss)")
        self.speed_bps = float(speed_bps)
        self.txqueuelen = int(txqueuelen)
        self.delay_s = float(delay_s)
        self.loss = float(loss_pct) / 100.0
        self.rng = rng
        self._draws = None
        self._di = 0
        self.run = None

    def start(self, run, owner=None, name: str = "host nic") -> None:
        """A run begins: an empty queue, a free link; ``owner.tx_complete``
        is told of completions of the frames sent with a tag."""
        self.run = run
        self.owner = owner
        self.link_free = 0.0
        self.queue: deque = deque()        # (departure, tag) of frames not yet completed
        self.sent = 0
        self.dropped = 0
        self.lost = 0
        self.bytes = 0
        self.timer = run.clock.timer(name + " tx completion", self._complete, raw=True)

    def backlog(self, t: float) -> int:
        """Frames queued or on the wire at ``t``."""
        return sum(1 for dep, _ in self.queue if dep > t)

    def xmit(self, fields: dict, t: float, tag: int | None = None) -> float:
        """Queue the frame ``fields`` (an IP packet or fragment: ``inject``'s
        fields, ``length`` its IP length) at ``t``; return when its last bit
        leaves the host, or NaN if the qdisc was full."""
        if self.backlog(t) > self.txqueuelen:
            self.dropped += 1
            return math.nan
        wire = float(wire_bytes(int(fields["length"]))) * 8.0 / self.speed_bps
        dep = (self.link_free if self.link_free > t else t) + wire
        self.link_free = dep
        self.sent += 1
        self.bytes += int(fields["length"])
        if self.loss > 0.0 and self._lost():
            self.lost += 1
        else:
            self.run.inject(fields, dep + self.delay_s)
        self.queue.append((dep, tag))
        if not self.timer.pending():
            self.timer.mod(dep)
        return dep

    def _lost(self) -> bool:
        """One draw of the wire-loss coin (drawn in blocks: same sequence)."""
        if self._draws is None or self._di >= len(self._draws):
            self._draws = self.rng.random(4096).tolist()
            self._di = 0
        u = self._draws[self._di]
        self._di += 1
        return u < self.loss

    def _complete(self, now: float) -> float:
        q = self.queue
        while q and q[0][0] <= now:
            dep, tag = q.popleft()
            if tag is not None and self.owner is not None:
                self.owner.tx_complete(tag, dep)
        if q:
            self.timer.mod(q[0][0])
        return 0.0

    def counters(self) -> dict:
        out = {"tx_packets": self.sent, "tx_dropped": self.dropped, "tx_bytes": self.bytes}
        if self.loss > 0.0:
            out["wire_lost"] = self.lost
        return out
