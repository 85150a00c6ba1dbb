"""The hall-of-residence network of story 1, written down as explicit assumptions.

Walter's report (stories.md s1) says only that a Linux router connects a
university hall of residence to the internet with 5-20 routes.  Which
addresses exist behind it, which of them answer, and what answers a worm
probe gets are not in any source we have.  :class:`AddressPlan` collects
those unknowns in one place: every number is an ``ASSUMED`` default with its
basis and a range, exposed as a :class:`~routelab.sysctl.Knob` in
:data:`PLAN_KNOBS`, so a notebook can put a slider on each.

The picture (defaults in brackets):

* The residence owns one prefix, ``inside_net`` [10.10.0.0/16, as
  ``routelab.scenarios.worm`` uses].  Live hosts sit in ``student_subnets``
  /24s [8: 10.10.0.0/24 ... 10.10.7.0/24] starting at ``first_subnet`` [0].
  Each is configured on the router's inside interface (device
  ``inside_dev``), the router holding address ``.router_host`` [.254] in
  each, so ``.0`` and ``.255`` of a student subnet are broadcast addresses
  for the router, not destinations it forwards to.
* What the router does with the rest of the prefix is ``unused_space``:
  ``"onlink"`` [default; the single 10.10.0.0/16 device route of the worm
  scenario's FIB]: every address is on-link, so the router ARPs for it and
  nobody answers; ``"unreachable"``: an unreachable route (ip_error sends
  ICMP host-unreachable, rate-limited); ``"default"``: no route, the packet
  follows the default route out.
* Hosts use a /``host_prefix_len`` netmask [24]: a host reaches its own /24
  directly (its own ARP, the router never sees it) and everything else
  through the router, including the other student /24s.
* In a student subnet a share ``live_fraction`` [0.75] of the 253 host
  addresses (.1-.253) has a powered-on host that answers ARP.  Of the live
  hosts, ``firewalled_fraction`` [0.1] drop unsolicited packets silently; of
  the rest, ``windows_fraction`` [0.9] run Windows 2000/XP with TCP port 135
  listening (SYN -> SYN-ACK), the others answer a SYN to 135 with RST.  Every
  non-firewalled live host answers an ICMP echo request.
* Outside, ``outside_reply_fraction`` [0.03] of addresses answer anything;
  of those answering a TCP SYN to 135, ``outside_135_open`` [0.2] send a
  SYN-ACK, the rest RST.
* Reply delays: ``inside_rtt_s`` [0.5 ms] on the residence LAN (including the
  router's ARP exchange for a new neighbour), a lognormal around
  ``outside_rtt_s`` [50 ms] with log-spread ``outside_rtt_sigma`` [0.6]
  outside.

Which addresses are live is a fixed, seeded hash of the address
(``plan_seed``), not a random draw per call: the same address always gives
the same answer, whichever generator or method asks.

Nothing here is kernel behaviour; the router's own reaction (ARP, ICMP
errors, local delivery) is the engine's job.  The methods only say what the
world outside the router is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .core.skbuff import int_to_ip
from .errors import KnobError
from .ipv4.fib import Route, parse_prefix
from .sysctl import Knob
from .traffic import _mix64

__all__ = ["AddressPlan", "PLAN_KNOBS", "REPLY", "REPLY_NAMES", "REPLY_LENGTH",
           "is_unicast", "prefix_mask", "in_prefix"]

# What comes back for a probe (AddressPlan.responds).
REPLY = {"none": 0, "syn_ack": 1, "rst": 2, "echo_reply": 3, "port_unreach": 4}
REPLY_NAMES = {v: k for k, v in REPLY.items()}

# IP total length of each reply [B].
#  syn_ack 48: IP 20 + TCP 20 + options mss,nop,nop,sok (8); the Windows XP
#    SYN+ACK signature of p0f 3.09b (p0f.fp, [tcp:response], label
#    s:win:Windows:XP).  rst 40: bare IP + TCP headers (an RST carries no
#    options).  port_unreach 56: IP 20 + ICMP 8 + the offending IP header 20
#    + its first 8 bytes (RFC 792's minimum; ASSUMED that Windows quotes no
#    more).  echo_reply: the request's own length (an echo reply returns the
#    data it got), so it is not in this table.
REPLY_LENGTH = {"syn_ack": 48, "rst": 40, "port_unreach": 56}

UNUSED_SPACE = ("onlink", "unreachable", "default")

PLAN_KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("inside_net", "10.10.0.0/16", str, unit="prefix",
         help="The residence's address block (ASSUMED 10.10.0.0/16 as in the worm scenario; "
              "/8 to /24)."),
    Knob("student_subnets", 8, int, 1, 65536, "/24s",
         help="Directly connected student /24s on the router's inside interface (ASSUMED 8, "
              "~1500 live hosts at live_fraction 0.75: a large hall of residence).", step=1),
    Knob("first_subnet", 0, int, 0, 65535, "/24 index",
         help="Index (third octet for a /16) of the first student /24 (ASSUMED 0: "
              "subnets numbered from the bottom, contiguously).", step=1),
    Knob("router_host", 254, int, 1, 254, "host number",
         help="The router's address in each student /24 (ASSUMED .254).", step=1),
    Knob("live_fraction", 0.75, float, 0.0, 1.0, "",
         help="Share of a student /24's host addresses with a live host answering ARP "
              "(ASSUMED: one PC per room, most switched on; 0.3-1.0 plausible).", step=0.05),
    Knob("firewalled_fraction", 0.1, float, 0.0, 1.0, "",
         help="Share of live hosts that silently drop unsolicited probes (ASSUMED 0.1: "
              "Windows XP's firewall was off by default before SP2, Aug 2004).", step=0.05),
    Knob("windows_fraction", 0.9, float, 0.0, 1.0, "",
         help="Share of non-firewalled live hosts running Windows 2000/XP with TCP 135 "
              "listening (ASSUMED 0.9: RPC/DCOM listens on 135 by default; student PCs "
              "of 2003-04 mostly Windows).  The rest answer a SYN to 135 with RST.",
         step=0.05),
    Knob("unused_space", "onlink", str, unit="", choices=UNUSED_SPACE,
         help="Router's route for inside addresses outside the student /24s: 'onlink' (one "
              "device route for the whole block, as the worm scenario's FIB), "
              "'unreachable', or 'default' (follows the default route out)."),
    Knob("host_prefix_len", 24, int, 8, 30, "bits",
         help="Netmask of the student hosts (ASSUMED /24 = their subnet): destinations inside "
              "it are reached without the router.", step=1),
    Knob("outside_reply_fraction", 0.03, float, 0.0, 1.0, "",
         help="Share of outside addresses that answer a probe at all (ASSUMED a few %: "
              "most of the 2003-04 address space was unused or filtered).", step=0.01),
    Knob("outside_135_open", 0.2, float, 0.0, 1.0, "",
         help="Of the answering outside addresses, the share that SYN-ACK a SYN to TCP 135 "
              "(ASSUMED 0.2; the rest send RST).", step=0.05),
    Knob("inside_rtt_s", 5e-4, float, 1e-5, 0.1, "s",
         help="Probe-to-reply delay at the router for an inside responder (ASSUMED 0.5 ms: "
              "ARP exchange plus a PC's turnaround on switched 100 Mbit/s).", step=1e-4),
    Knob("outside_rtt_s", 0.05, float, 1e-3, 2.0, "s",
         help="Median probe-to-reply delay for an outside responder (ASSUMED 50 ms: Europe "
              "10-50 ms, North America ~100-150 ms from Germany).", step=0.005),
    Knob("outside_rtt_sigma", 0.6, float, 0.0, 2.0, "",
         help="Log-spread of the outside delay (lognormal; ASSUMED 0.6, i.e. a factor ~1.8 "
              "either way for one sigma).", step=0.1),
    Knob("plan_seed", 0, int, 0, 2**31 - 1, "",
         help="Seed of the address hash that decides which addresses are live.", step=1),
]}


def prefix_mask(plen: int) -> int:
    """Netmask of a prefix length, as an int."""
    return (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF if plen else 0


def in_prefix(addr, net: int, plen: int) -> np.ndarray:
    """Which addresses lie in ``net/plen`` (vectorised)."""
    a = np.asarray(addr, dtype=np.uint32)
    return (a & np.uint32(prefix_mask(plen))) == np.uint32(net)


def is_unicast(addr) -> np.ndarray:
    """Destinations a host can send a probe to: not 0/8, 127/8 or 224/3 (vectorised)."""
    a = np.asarray(addr, dtype=np.uint32) >> np.uint32(24)
    return (a != 0) & (a != 127) & (a < 224)


def _unit_hash(addr: np.ndarray, key: int) -> np.ndarray:
    """A fixed pseudo-random number in [0, 1) per address and ``key``."""
    x = np.asarray(addr, dtype=np.uint32).astype(np.uint64) ^ np.uint64(key)
    return (_mix64(x) >> np.uint64(11)).astype(np.float64) / 2.0**53


@dataclass(frozen=True)
class AddressPlan:
    """The residence network: which addresses exist and what they answer.

    All parameters are the knobs of :data:`PLAN_KNOBS` (see there for the
    ranges and the basis of each default) plus ``inside_dev`` and
    ``outside_dev``, the router's interface indices (0 = eth0 inside,
    1 = eth1 outside, as the worm scenario builds them).
    """

    inside_net: str = PLAN_KNOBS["inside_net"].default
    student_subnets: int = PLAN_KNOBS["student_subnets"].default
    first_subnet: int = PLAN_KNOBS["first_subnet"].default
    router_host: int = PLAN_KNOBS["router_host"].default
    live_fraction: float = PLAN_KNOBS["live_fraction"].default
    firewalled_fraction: float = PLAN_KNOBS["firewalled_fraction"].default
    windows_fraction: float = PLAN_KNOBS["windows_fraction"].default
    unused_space: str = PLAN_KNOBS["unused_space"].default
    host_prefix_len: int = PLAN_KNOBS["host_prefix_len"].default
    outside_reply_fraction: float = PLAN_KNOBS["outside_reply_fraction"].default
    outside_135_open: float = PLAN_KNOBS["outside_135_open"].default
    inside_rtt_s: float = PLAN_KNOBS["inside_rtt_s"].default
    outside_rtt_s: float = PLAN_KNOBS["outside_rtt_s"].default
    outside_rtt_sigma: float = PLAN_KNOBS["outside_rtt_sigma"].default
    plan_seed: int = PLAN_KNOBS["plan_seed"].default
    inside_dev: int = 0
    outside_dev: int = 1
    _net: int = field(init=False, repr=False)
    _plen: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, knob in PLAN_KNOBS.items():
            object.__setattr__(self, name, knob.validate(getattr(self, name)))
        try:
            net, plen = parse_prefix(self.inside_net)
        except KnobError:
            raise KnobError("inside_net", self.inside_net,
                            "an IPv4 prefix such as '10.10.0.0/16'") from None
        if not 8 <= plen <= 24:
            raise KnobError("inside_net", self.inside_net, "a prefix of length /8 to /24")
        rows = 1 << (24 - plen)
        if self.first_subnet + self.student_subnets > rows:
            raise KnobError("student_subnets", self.student_subnets,
                            f"at most {rows - self.first_subnet} /24s after first_subnet="
                            f"{self.first_subnet} in {self.inside_net}")
        if self.inside_dev == self.outside_dev:
            raise KnobError("outside_dev", self.outside_dev, "an index other than inside_dev")
        object.__setattr__(self, "_net", net)
        object.__setattr__(self, "_plen", plen)

    # ------------------------------------------------------------- where things are
    @property
    def net(self) -> int:
        """Network address of ``inside_net`` (int)."""
        return self._net

    @property
    def plen(self) -> int:
        """Prefix length of ``inside_net``."""
        return self._plen

    @property
    def onlink_share(self) -> float:
        """Share of ``inside_net`` the router resolves by ARP, one neighbour per address."""
        if self.unused_space == "onlink":
            return 1.0 - self.student_subnets * 3 / (1 << (32 - self._plen))
        return self.student_subnets * 253 / (1 << (32 - self._plen))

    def inside(self, addr) -> np.ndarray:
        """Addresses in ``inside_net``."""
        return in_prefix(addr, self._net, self._plen)

    def _subnet_and_host(self, addr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = np.asarray(addr, dtype=np.uint32)
        ins = self.inside(a)
        sub = ((a - np.uint32(self._net)) >> np.uint32(8)).astype(np.int64)
        student = ins & (sub >= self.first_subnet) & (sub < self.first_subnet
                                                      + self.student_subnets)
        return student, (a & np.uint32(255)).astype(np.int64), ins

    def student(self, addr) -> np.ndarray:
        """Addresses in one of the student /24s (any host number)."""
        return self._subnet_and_host(addr)[0]

    def router_local(self, addr) -> np.ndarray:
        """The router's own inside addresses (``.router_host`` of each student /24)."""
        student, host, _ = self._subnet_and_host(addr)
        return student & (host == self.router_host)

    def subnet_broadcast(self, addr) -> np.ndarray:
        """``.0`` and ``.255`` of a student /24: broadcast routes of the router, not forwarded."""
        student, host, _ = self._subnet_and_host(addr)
        return student & ((host == 0) | (host == 255))

    def on_link(self, addr) -> np.ndarray:
        """Destinations the router sends to directly on its inside interface.

        Each such destination gets its own neighbour entry and ARP
        resolution (sources.md story 1, "Next hop").  The router's own
        addresses and the student subnets' broadcast addresses are not
        on-link destinations (they are delivered locally).
        """
        student, host, ins = self._subnet_and_host(addr)
        special = student & ((host == 0) | (host == 255) | (host == self.router_host))
        onlink = student & ~special
        if self.unused_space == "onlink":
            onlink |= ins & ~student
        return onlink

    def exists(self, addr) -> np.ndarray:
        """A live host at the address: answers ARP inside, answers probes outside.

        Inside: a student /24 host address (.1-.253 but the router's) whose
        hash falls below ``live_fraction``, or one of the router's own
        addresses.  Outside: hash below ``outside_reply_fraction``.
        """
        a = np.asarray(addr, dtype=np.uint32)
        student, host, ins = self._subnet_and_host(a)
        u = _unit_hash(a, self._key(1))
        hostpart = student & (host >= 1) & (host <= 254) & (host != self.router_host)
        live_in = hostpart & (u < self.live_fraction)
        live_out = ~ins & (u < self.outside_reply_fraction)
        return live_in | live_out | (student & (host == self.router_host))

    def responds(self, addr, proto, port: int = 135) -> np.ndarray:
        """What a probe to each address gets back (int8 codes of :data:`REPLY`).

        ``proto`` is a scalar or an array (1 ICMP echo request, 6 TCP SYN to
        ``port``, 17 UDP datagram to a closed port).  Live inside hosts:
        firewalled ones answer nothing; the others echo, send ICMP
        port-unreachable for UDP, and SYN-ACK a SYN to 135 if they run
        Windows (RST otherwise, and RST for any other port).  Live outside
        addresses: echo, port-unreachable, SYN-ACK with ``outside_135_open``
        for port 135 (RST otherwise).  Dead addresses: nothing.  The
        router's own addresses count as a Linux host without port 135 (RST,
        echo, port-unreachable); the engine delivers those locally.
        """
        a = np.asarray(addr, dtype=np.uint32)
        proto = np.broadcast_to(np.asarray(proto), a.shape)
        live = self.exists(a)
        ins = self.inside(a)
        rl = self.router_local(a)
        fw = ins & ~rl & (_unit_hash(a, self._key(2)) < self.firewalled_fraction)
        open_in = _unit_hash(a, self._key(3)) < self.windows_fraction
        open_out = _unit_hash(a, self._key(4)) < self.outside_135_open
        open135 = (port == 135) & ~rl & np.where(ins, open_in, open_out)
        ok = live & ~fw
        out = np.zeros(a.shape, dtype=np.int8)
        out[ok & (proto == 1)] = REPLY["echo_reply"]
        out[ok & (proto == 17)] = REPLY["port_unreach"]
        tcp = ok & (proto == 6)
        out[tcp & open135] = REPLY["syn_ack"]
        out[tcp & ~open135] = REPLY["rst"]
        return out

    def reaches_router(self, saddr, daddr) -> np.ndarray:
        """Does a packet from ``saddr`` to ``daddr`` arrive at the router?

        From inside: unless the destination is in the sender's own
        /``host_prefix_len`` (the host ARPs for it itself), except the
        router's own addresses, which it always reaches.  From outside:
        when the destination is inside (the router is the way in).
        """
        s = np.asarray(saddr, dtype=np.uint32)
        d = np.asarray(daddr, dtype=np.uint32)
        mask = np.uint32(prefix_mask(self.host_prefix_len))
        from_in = self.inside(s)
        same_net = (s & mask) == (d & mask)
        return np.where(from_in, ~same_net | self.router_local(d), self.inside(d))

    def rtt(self, rng: np.random.Generator, addr) -> np.ndarray:
        """Probe-to-reply delay at the router for each responder address [s]."""
        a = np.asarray(addr, dtype=np.uint32)
        out = rng.lognormal(np.log(self.outside_rtt_s), self.outside_rtt_sigma, a.shape)
        return np.where(self.inside(a), self.inside_rtt_s, out)

    # ------------------------------------------------------------- hosts and routes
    def live_hosts(self) -> np.ndarray:
        """All live host addresses in the student subnets, ascending (router excluded)."""
        base = self._net + (self.first_subnet << 8)
        cand = (np.uint64(base) + np.arange(self.student_subnets * 256, dtype=np.uint64))
        cand = cand.astype(np.uint32)
        return cand[self.exists(cand) & ~self.router_local(cand)]

    def infected(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` distinct live hosts drawn at random (the worm-infected PCs), ascending."""
        hosts = self.live_hosts()
        if not 0 <= int(n) <= hosts.size:
            raise KnobError("worm_hosts", n, f"an integer in [0, {hosts.size}] (live hosts "
                            "in this address plan)")
        return np.sort(rng.choice(hosts, size=int(n), replace=False)).astype(np.uint32)

    def local_addrs(self) -> list[str]:
        """The router's own inside addresses, for ``Fib(local_addrs=...)``."""
        base = self._net + (self.first_subnet << 8) + self.router_host
        return [int_to_ip(base + (i << 8)) for i in range(self.student_subnets)]

    def fib_routes(self) -> list[Route]:
        """The inside part of the router's FIB implied by the plan.

        One device route per student /24, the broadcast (.0, .255) entries
        of each in the local table, and the ``unused_space`` route for the
        rest of ``inside_net``.  The caller adds the outside routes.
        """
        routes = []
        for i in range(self.student_subnets):
            base = self._net + ((self.first_subnet + i) << 8)
            routes.append(Route(f"{int_to_ip(base)}/24", oif=self.inside_dev))
            for b in (base, base + 255):
                routes.append(Route(f"{int_to_ip(b)}/32", oif=self.inside_dev,
                                    rtype="broadcast", table=255))
        if self.unused_space == "onlink":
            routes.append(Route(self.inside_net, oif=self.inside_dev))
        elif self.unused_space == "unreachable":
            routes.append(Route(self.inside_net, oif=self.inside_dev, rtype="unreachable"))
        return routes

    def _key(self, stream: int) -> int:
        mixed = _mix64(np.array([self.plan_seed * 8 + stream], dtype=np.uint64))
        return int(mixed[0])
