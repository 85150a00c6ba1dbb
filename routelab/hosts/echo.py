"""The far end of a ping: a host that answers ICMP echo requests, and the
pinging host that notes when replies come back.

Kernel: net/ipv4/icmp.c icmp_echo (the far end's stack answers a request
with a reply of the same length).  Modelled from the outside: what matters
to the router is when the reply arrives, not how the far end made it.
"""

from __future__ import annotations

import math

from ..core.skbuff import KIND
from . import Host

__all__ = ["EchoHost", "Pinger", "PingLog"]


class PingLog:
    """When each echo request (by sequence number) was sent and came back.

    ``rtt[tag] = [sent, back]`` in seconds (NaN: not known / lost).  The
    router's own echo replies (a ping to the router) are logged here too.
    """

    def __init__(self) -> None:
        self.rtt: dict = {}

    def request(self, tag: int, sent: float) -> None:
        self.rtt.setdefault(tag, [sent, math.nan])

    def reply(self, tag: int, back: float) -> None:
        self.rtt.setdefault(tag, [math.nan, math.nan])[1] = back

    def answered(self, tag: int, sent: float, back: float) -> None:
        self.rtt[tag] = [sent, back]


class EchoHost(Host):
    """Beyond a device: answers every echo request the router sends it.

    Parameters
    ----------
    delay_s : float
        From the request's last bit leaving the router to the reply's
        arriving back (the far end's turnaround and the wires beyond).

    The reply is the request with source and destination swapped, kind
    ``ping_reply``, TTL 64, not cloned; it arrives on the device the host
    sits beyond.
    """

    kinds = ("ping_request",)

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        if not (isinstance(delay_s, (int, float)) and math.isfinite(delay_s) and delay_s >= 0):
            from ..errors import KnobError
            raise KnobError("delay_s", delay_s, "a number of seconds >= 0")
        self.delay_s = float(delay_s)

    def deliver(self, j: int, t: float) -> None:
        run = self.run
        f = run.header(j)
        f["saddr"], f["daddr"] = f["daddr"], f["saddr"]
        f["iif"] = self.dev
        f["kind"] = KIND["ping_reply"]
        f["ttl"] = 64
        f["cloned"] = False
        run.inject(f, t + self.delay_s)
        run.pings.request(int(f["tag"]), run.field(j, "t"))


class Pinger(Host):
    """Beyond a device: the host that sends the pings; notes each reply's
    arrival (the last bit leaving the router towards it)."""

    kinds = ("ping_reply",)

    def deliver(self, j: int, t: float) -> None:
        run = self.run
        run.pings.reply(int(run.field(j, "tag")), t)
