"""One packet's journey through the forwarding path, stage by stage.

:func:`packet_journey` follows a single packet through every stage the
model charges -- NIC receive, ``ip_rcv``, the route lookup, ``ip_forward``,
``ip_output`` (and ``ip_fragment``), the driver and the wire -- and says
what each stage costs on a given CPU.  It is the itemised bill of the same
packet that :class:`routelab.Router` charges as one number: every cost comes
from the model code itself (:func:`routelab.costs.cost_table`,
:func:`routelab.ipv4.ip_forward.ip_forward_plan`,
:func:`routelab.ipv4.ip_output.ip_output_plan`,
:func:`routelab.ipv4.ip_fragment.fragment_plan`, and a real
:class:`routelab.ipv4.route.RouteCache` for the slow path), and the tests
check that the rows add up to what a :class:`Router` charges for that packet.

Kernel: the forwarding path of 2.4.22 / 2.6.11 (net/core/dev.c,
net/ipv4/ip_input.c, route.c, ip_forward.c, ip_output.c; see
``docs/design.md``).

Simplifications (the model's, not this module's):

* The packet arrives at an idle router, so it pays for starting a softirq
  run (``net_rx_action``) on its own; under load that cost is shared by a
  batch of packets.
* TX completion (freeing the skb, releasing the dst) is charged when the
  packet is handed to the driver, not later when the NIC reports it sent.
* A cache hit finds its entry at the head of the hash chain (no chain walk).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from .core.skbuff import KIND, PacketTrace, ip_to_int
from .costs import ETH_OVERHEAD
from .errors import RoutelabError
from .hardware import NICS
from .ipv4.fib import Fib, Route
from .ipv4.ip_forward import FWD_FRAG_NEEDED, FWD_TTL, ip_forward_plan
from .ipv4.ip_fragment import fragment_plan
from .ipv4.ip_input import ip_rcv
from .ipv4.ip_output import ip_output_plan
from .knobs import cpu_knob, kernel_knob
from .prepare import LL_RESERVED, _validate_source_cost
from .router import Device, Router, Run
from .sysctl import Knob, validate_all

__all__ = ["GROUPS", "JOURNEY_KNOBS", "Journey", "JourneyRow", "packet_journey"]

# Where each row belongs in a coarse picture of the path (used by figures).
GROUPS = ("receive", "route", "forward", "output", "wire", "icmp")

JOURNEY_KNOBS: dict[str, Knob] = {k.name: k for k in [
    kernel_knob("2.4.24"),
    cpu_knob("k6-200"),
    Knob("nic", "e100", str, choices=("e100", "e1000", "tg3"),
         help="NIC model of both interfaces."),
    Knob("length", 1500, int, 20, 65535, "bytes", "IP total length of the packet.", step=4),
    Knob("ttl", 64, int, 1, 255, "hops", "TTL of the packet as it reaches the router."),
    Knob("df", False, bool, help="Don't Fragment bit."),
    Knob("mtu", 1500, int, 68, 9000, "bytes", "MTU of the outgoing interface."),
    Knob("cloned", False, bool,
         help="The skb arrives cloned (a TCP segment from a local sender): skb_cow copies it."),
    Knob("cache_hit", True, bool,
         help="The route cache already holds this flow (ignored by kernels without a cache)."),
]}

# Addresses of the two-interface router the packet crosses (eth0 -> eth1).
_SRC, _DST, _GW = "10.1.0.2", "130.0.0.1", "192.0.2.254"


@dataclass(frozen=True, slots=True)
class JourneyRow:
    """One stage of the journey.

    Attributes
    ----------
    stage : str          what happens, in words
    function : str       kernel source file and function ("net/ipv4/ip_input.c ip_rcv")
    cycles : float       CPU cycles on this CPU (0 for the wire and for verdicts)
    microseconds : float time the stage takes (CPU time, or serialisation time on the wire)
    note : str           why it costs what it costs, or what was decided
    kind : str           ``"cpu"``, ``"wire"`` or ``"event"`` (a verdict, no cost of its own)
    group : str          one of :data:`GROUPS`
    """

    stage: str
    function: str
    cycles: float
    microseconds: float
    note: str = ""
    kind: str = "cpu"
    group: str = "receive"


class Journey(list):
    """The rows of :func:`packet_journey` (a list of :class:`JourneyRow`) plus totals.

    Attributes
    ----------
    params : dict       the validated parameters
    outcome : str       ``"forwarded"``, ``"drop_ttl"`` or ``"drop_frag_needed"``
    nfrag : int         frames the packet left as (1 = not fragmented, 0 = not sent)
    hz : float          clock of the CPU, Hz
    """

    def __init__(self, rows, params: dict, outcome: str, nfrag: int, hz: float) -> None:
        super().__init__(rows)
        self.params = params
        self.outcome = outcome
        self.nfrag = nfrag
        self.hz = hz

    # -- totals -----------------------------------------------------------------
    @property
    def cpu_seconds(self) -> float:
        """CPU time the router spends on this packet (what a Router charges)."""
        return sum(r.microseconds for r in self if r.kind == "cpu") * 1e-6

    @property
    def cpu_cycles(self) -> float:
        return sum(r.cycles for r in self if r.kind == "cpu")

    @property
    def wire_seconds(self) -> float:
        """Serialisation time on the output link (or of the ICMP error sent back)."""
        return sum(r.microseconds for r in self if r.kind == "wire") * 1e-6

    @property
    def latency_seconds(self) -> float:
        """Arrival to last bit on the wire, through an otherwise idle router."""
        return self.cpu_seconds + self.wire_seconds

    def by_group(self) -> dict[str, float]:
        """Microseconds per :data:`GROUPS` entry (CPU and wire)."""
        out = dict.fromkeys(GROUPS, 0.0)
        for r in self:
            out[r.group] += r.microseconds
        return out

    # -- text ---------------------------------------------------------------------
    def table(self, notes: bool = True) -> str:
        """A plain-text table: stage, kernel function, cycles, microseconds (and notes)."""
        w0 = max(len("stage"), *(len(r.stage) for r in self))
        w1 = max(len("kernel function"), *(len(r.function) for r in self))
        head = f"{'stage':<{w0}}  {'kernel function':<{w1}}  {'cycles':>8}  {'µs':>8}"
        lines = [head + ("  note" if notes else ""), "-" * (len(head) + (6 if notes else 0))]
        for r in self:
            cyc = f"{r.cycles:8,.0f}" if r.kind == "cpu" else f"{'-':>8}"
            us = f"{r.microseconds:8.2f}" if r.kind != "event" else f"{'-':>8}"
            line = f"{r.stage:<{w0}}  {r.function:<{w1}}  {cyc}  {us}"
            lines.append(line + (f"  {r.note}" if notes and r.note else ""))
        lines.append("-" * (len(head) + (6 if notes else 0)))
        lines.append(f"{'CPU total':<{w0}}  {'':<{w1}}  {self.cpu_cycles:8,.0f}  "
                     f"{self.cpu_seconds * 1e6:8.2f}")
        lines.append(f"{'wire total':<{w0}}  {'':<{w1}}  {'':>8}  {self.wire_seconds * 1e6:8.2f}")
        return "\n".join(lines)

    def summary(self) -> str:
        """One line: outcome, frames, CPU time and cycles, latency."""
        p = self.params
        what = {"forwarded": f"forwarded as {self.nfrag} frame{'s' if self.nfrag > 1 else ''}",
                "drop_ttl": "dropped: TTL expired (ICMP time exceeded sent back)",
                "drop_frag_needed": "dropped: DF set and too big (ICMP frag needed sent back)",
                }[self.outcome]
        return (f"{p['length']}-byte packet, kernel {p['kernel']}, {p['cpu']}: {what}; "
                f"CPU {self.cpu_seconds * 1e6:.1f} µs ({self.cpu_cycles:,.0f} cycles), "
                f"idle-router latency {self.latency_seconds * 1e6:.1f} µs")

    def __repr__(self) -> str:  # a readable echo in notebooks (and what nbval compares)
        return self.table(notes=False)

    def _repr_html_(self) -> str:
        """The table as HTML (notes included; they wrap instead of running off-screen)."""
        esc = html.escape
        head = ("<tr><th style='text-align:left'>stage</th><th style='text-align:left'>kernel "
                "function</th><th>cycles</th><th>µs</th><th style='text-align:left'>note</th></tr>")
        body = []
        for r in self:
            cyc = f"{r.cycles:,.0f}" if r.kind == "cpu" else "–"
            us = f"{r.microseconds:.2f}" if r.kind != "event" else "–"
            body.append(f"<tr><td style='text-align:left'>{esc(r.stage)}</td>"
                        f"<td style='text-align:left'><code>{esc(r.function)}</code></td>"
                        f"<td>{cyc}</td><td>{us}</td>"
                        f"<td style='text-align:left'>{esc(r.note)}</td></tr>")
        body.append(f"<tr><th style='text-align:left'>CPU total</th><td></td>"
                    f"<th>{self.cpu_cycles:,.0f}</th><th>{self.cpu_seconds * 1e6:.2f}</th>"
                    f"<td></td></tr>")
        body.append(f"<tr><th style='text-align:left'>wire total</th><td></td><td></td>"
                    f"<th>{self.wire_seconds * 1e6:.2f}</th><td></td></tr>")
        return (f"<table><caption style='text-align:left'>{esc(self.summary())}</caption>"
                f"<thead>{head}</thead><tbody>{''.join(body)}</tbody></table>")


def journey_router(kernel: str, cpu: str, nic: str, mtu: int) -> Router:
    """The two-interface router the journey (and its tests) use: eth0 -> eth1."""
    devices = [Device("eth0", nic, 0), Device("eth1", nic, 0, mtu=mtu)]
    fib = Fib(routes=[Route("10.1.0.0/16", oif=0), Route("192.0.2.0/24", oif=1),
                      Route("0.0.0.0/0", oif=1, gateway=_GW)],
              local_addrs=["10.1.255.254", "192.0.2.1"])
    # the gateway is resolved (REACHABLE), as on a router that has been up a while
    return Router(kernel, cpu, devices, fib, seed=0, arp_static=[(1, _GW)])


def journey_trace(length: int, ttl: int, df: bool, cloned: bool, t: float = 0.001,
                  n: int = 1, spacing: float = 0.5) -> PacketTrace:
    """``n`` identical packets of one flow, ``spacing`` seconds apart, from eth0."""
    times = t + spacing * np.arange(n)
    return PacketTrace.build(times, iif=0, saddr=ip_to_int(_SRC), daddr=ip_to_int(_DST),
                             length=length, ttl=ttl, df=df, cloned=cloned, proto=17,
                             kind=KIND["background"])


def packet_journey(kernel: str = "2.4.24", cpu: str = "k6-200", nic: str = "e100",
                   length: int = 1500, ttl: int = 64, df: bool = False, mtu: int = 1500,
                   cloned: bool = False, cache_hit: bool = True) -> Journey:
    """Follow one packet through every stage of the model's forwarding path.

    Kernel: the path of net/core/dev.c, net/ipv4/ip_input.c, route.c,
    ip_forward.c and ip_output.c (2.4.22, 2.6.11); rows name the function.

    Parameters
    ----------
    kernel, cpu, nic : str
        Profiles (:data:`routelab.KERNELS`, :data:`routelab.CPUS`; NIC one of
        e100, e1000, tg3).  NAPI receive needs both a NAPI driver and a 2.6
        kernel.
    length : int
        IP total length in bytes.
    ttl : int
        TTL on arrival; ``<= 1`` ends the journey in ``ip_forward`` with an
        ICMP time exceeded.
    df : bool
        Don't Fragment; with ``length > mtu`` the packet is turned back with
        ICMP fragmentation needed.
    mtu : int
        MTU of the output interface; a longer packet is cut by ``ip_fragment``.
    cloned : bool
        The skb arrives cloned, so ``skb_cow`` copies it.
    cache_hit : bool
        The route cache already holds the flow.  ``False`` runs the slow
        path.  Ignored by ``2.0`` (no cache); ``2.4.24-nocache`` never caches,
        so it always takes the slow path.

    Returns
    -------
    Journey
        A list of :class:`JourneyRow` with totals (``cpu_seconds``,
        ``wire_seconds``, ``latency_seconds``) and ``table()``.
    """
    v = validate_all(JOURNEY_KNOBS, dict(kernel=kernel, cpu=cpu, nic=nic, length=length, ttl=ttl,
                                          df=df, mtu=mtu, cloned=cloned, cache_hit=cache_hit),
                     what="packet_journey parameter")
    router = journey_router(v["kernel"], v["cpu"], v["nic"], v["mtu"])
    return _Walk(router, v).run()


class _Walk:
    """Builds the rows of one journey from the model's own array stages."""

    def __init__(self, router: Router, v: dict) -> None:
        self.r = router
        self.v = v
        self.c = router.costs.fn
        self.hz = router.cpu.hz
        self.rows: list[JourneyRow] = []
        self.tr = journey_trace(v["length"], v["ttl"], v["df"], v["cloned"])
        nic = NICS[v["nic"]]
        self.napi = bool(nic.napi and router.kernel.napi)
        self.nic = nic
        self.drv = f"drivers/net/{v['nic']}"

    # -- helpers ------------------------------------------------------------------
    def add(self, stage, function, seconds, note="", group="receive", kind="cpu") -> None:
        cycles = seconds * self.hz if kind == "cpu" else 0.0
        self.rows.append(JourneyRow(stage, function, cycles, seconds * 1e6, note, kind, group))

    def fn(self, name: str) -> float:
        return self.c[name]

    # -- the walk ----------------------------------------------------------------
    def run(self) -> Journey:
        tr, r, v = self.tr, self.r, self.v
        if ip_rcv(tr)[0]:
            raise RoutelabError("the journey packet failed ip_rcv's header checks")
        rtype, oif, gw, nrules = r.fib.fib_lookup(tr.daddr, tr.saddr, tr.tos, tr.iif)
        if not r.kernel.policy_rules:
            nrules = np.zeros_like(nrules)  # as the Router: no rules to walk (2.0)
        mtu = np.array([d.mtu for d in r.devices], dtype=np.int64)
        napi_dev = np.array([d.profile.napi and r.kernel.napi for d in r.devices])
        fw = ip_forward_plan(tr, oif, mtu, self.c, r.costs.copy_s_per_byte, LL_RESERVED)
        out = ip_output_plan(tr.length, oif, mtu, tr.df, self.c, r.costs.copy_s_per_byte,
                             napi_dev[np.maximum(oif, 0)])
        self.receive()
        self.vfib = float(_validate_source_cost(r, tr, rtype, oif, self.c)[0])
        self.route(int(rtype[0]), int(oif[0]), int(gw[0]), int(nrules[0]))
        verdict = int(fw["fwd_verdict"][0])
        self.forward(verdict, bool(fw["cow"][0]), float(fw["fwd_cost"][0]))
        if verdict == FWD_TTL:
            self.icmp("ICMP time exceeded", "TTL was <= 1: the packet is dropped here")
            return self.done("drop_ttl", 0)
        if verdict == FWD_FRAG_NEEDED:
            self.add("DF set and too big", "net/ipv4/ip_output.c ip_fragment", 0.0,
                     f"{v['length']} > MTU {v['mtu']} with DF: FragFails, dropped "
                     "(2.4 tests this in ip_forward)", "forward", "event")
            self.icmp("ICMP fragmentation needed", f"tells the sender to use MTU {v['mtu']}")
            return self.done("drop_frag_needed", 0)
        nfrag = int(out["nfrag"][0])
        self.output(nfrag, float(out["out_cost"][0]), int(out["wire_bytes"][0]))
        return self.done("forwarded", nfrag)

    def done(self, outcome: str, nfrag: int) -> Journey:
        return Journey(self.rows, dict(self.v), outcome, nfrag, self.hz)

    def receive(self) -> None:
        if self.napi:
            self.add("NIC receive (NAPI poll)", f"{self.drv} NAPI poll (dev->poll)",
                     self.fn("napi_poll_rx"),
                     "descriptor, skb allocation, ring refill; no interrupt per packet")
        else:
            self.add("NIC receive (hard IRQ)", f"{self.drv} RX interrupt handler",
                     self.fn("irq_rx"), "one interrupt per packet; allocates the skb")
            self.add("queue on the CPU backlog", "net/core/dev.c netif_rx", self.fn("netif_rx"),
                     "per-CPU backlog (netdev_max_backlog); raises NET_RX_SOFTIRQ")
        self.add("start a softirq run", "net/core/dev.c net_rx_action",
                 self.fn("softirq_entry"), "paid once per run; shared by a batch under load")
        self.add("hand to the protocol", "net/core/dev.c netif_receive_skb",
                 self.fn("netif_receive_skb"), "ETH_P_IP -> ip_rcv")
        self.add("IP header checks", "net/ipv4/ip_input.c ip_rcv", self.fn("ip_rcv"),
                 "version, length, header checksum")

    def route(self, rtype: int, oif: int, gw: int, nrules: int) -> None:
        r, v = self.r, self.v
        if r.kernel.cache20:
            # 2.0's ip_rt_route (routelab.ipv4.route20): a hit at the head of
            # its chain, or a miss on an empty cache
            from .ipv4.route20 import Cache20
            tr = self.tr
            if v["cache_hit"]:
                self.add("route cache lookup", "include/net/route.h ip_rt_route (2.0.40)",
                         self._step20(), "hit: entry at the head of the chain "
                         "(256 buckets on the destination)", "route")
                return
            hop = gw if gw else int(tr.daddr[0])
            total = Cache20(self.c).lookup(int(tr.daddr[0]), hop, 0.0)
            walk = self._step20()
            slow = self.fn("fib_lookup") + self.fn("dst_alloc") + self.fn("rt_intern_hash")
            self.add("route cache lookup", "include/net/route.h ip_rt_route (2.0.40)", walk,
                     "miss: an empty bucket (256 buckets on the destination)", "route")
            self.add("slow route", "net/ipv4/route.c ip_rt_slow_route, rt_cache_add (2.0.40)",
                     slow, "FIB lookup, new entry, insert at the head", "route")
            self.add("ARP entry", "net/ipv4/arp.c arp_alloc_entry (2.0.40)", total - walk - slow,
                     "a new next hop: an entry of the 256 soft-limited table", "route")
            return
        if not r.kernel.route_cache:
            where = ("net/ipv4/fib_trie.c fn_trie_lookup" if r.kernel.fib == "trie"
                     else "net/ipv4/fib_hash.c fn_hash_lookup")
            self.add("route lookup (every packet)", where,
                     self.fn("fib_lookup") + nrules * self.fn("fib_rule"),
                     f"kernel {r.kernel.name}: a FIB lookup per packet, no route cache",
                     "route")
            return
        self.add("hash the flow", "net/ipv4/route.c rt_hash_code", self.fn("rt_hash"),
                 "(daddr, saddr, iif, tos) -> bucket", "route")
        hit = v["cache_hit"] and r.kernel.cache_insert != "nocache"
        self.add("route cache lookup", "net/ipv4/route.c ip_route_input",
                 self.fn("ip_route_input"),
                 "hit: entry at the head of the chain" if hit else "miss: nothing cached",
                 "route")
        if hit:
            return
        # The slow path, run by the model's own stage objects on an empty cache
        # (a run's RouteCache, with the neighbour table the gateway is in).
        cache = Run(r, self.tr, 1.0).cache
        tr = self.tr
        h = int(cache.rt_hash(tr.daddr, tr.saddr, tr.iif, tr.tos)[0])
        key = (int(tr.daddr[0]) << 32) | int(tr.saddr[0])
        ik = (int(tr.iif[0]) << 8) | int(tr.tos[0])
        mark = cache.ledger.total
        e = cache.ip_route_input_slow(0.0, 0, key, ik, h, rtype, oif, gw, nrules, 0, self.vfib)
        secs = cache.ledger.t
        # (below gc_thresh the slow path's own stages charge no slot: what the
        # ledger gained meanwhile is the neighbour layer's, the binding)
        bind = cache.ledger.total - mark
        if e is None:
            raise RoutelabError(f"the journey's slow path failed (outcome {cache.ledger.why})")
        slow = self.fn("ip_route_input_slow")
        fib = self.fn("fib_lookup") + nrules * self.fn("fib_rule")
        alloc = self.fn("dst_alloc")
        self.add("slow path", "net/ipv4/route.c ip_route_input_slow", slow,
                 "martian checks", "route")
        self.add("FIB lookup", "net/ipv4/fib_rules.c fib_lookup", fib,
                 f"policy rules examined: {nrules}", "route")
        self.add("source check", "net/ipv4/fib_frontend.c fib_validate_source", self.vfib,
                 "a reverse FIB lookup to the source", "route")
        self.add("allocate a cache entry", "net/core/dst.c dst_alloc", alloc,
                 "below gc_thresh: no GC", "route")
        note = ("never inserted: freed at once (the 2.4.24-nocache hack)"
                if r.kernel.cache_insert == "nocache" else "insert at the head of the chain")
        self.add("insert into the cache", "net/ipv4/route.c rt_intern_hash",
                 secs - slow - fib - self.vfib - alloc - bind, note, "route")
        if cache.arp is not None:
            self.add("bind the route to its next hop", "net/ipv4/arp.c arp_bind_neighbour",
                     bind, "neigh_lookup finds the gateway's entry (resolved): the route "
                     "holds it until dst_destroy", "route")

    def forward(self, verdict: int, cow: bool, fwd_cost: float) -> None:
        v = self.v
        fwd = self.fn("ip_forward")
        if verdict == FWD_TTL:
            self.add("TTL check", "net/ipv4/ip_forward.c ip_forward", fwd,
                     f"TTL {v['ttl']} <= 1: time exceeded", "forward")
            self._check(fwd, fwd_cost, "ip_forward_plan")
            return
        self.add("forwarding checks", "net/ipv4/ip_forward.c ip_forward", fwd,
                 f"TTL {v['ttl']} > 1", "forward")
        total = fwd
        if cow:
            cc = fwd_cost - fwd - self.fn("ip_decrease_ttl") - self.fn("ip_forward_finish")
            self.add("copy the cloned skb", "include/linux/skbuff.h skb_cow", cc,
                     f"pskb_expand_head copies all {v['length']} bytes", "forward")
            total += cc
        self.add("decrement TTL", "include/net/ip.h ip_decrease_ttl",
                 self.fn("ip_decrease_ttl"),
                 f"TTL {v['ttl']} -> {v['ttl'] - 1}; checksum patched, not recomputed", "forward")
        self.add("finish forwarding", "net/ipv4/ip_forward.c ip_forward_finish",
                 self.fn("ip_forward_finish"), "ForwDatagrams++, dst_output", "forward")
        total += self.fn("ip_decrease_ttl") + self.fn("ip_forward_finish")
        self._check(total, fwd_cost, "ip_forward_plan")

    def output(self, nfrag: int, out_cost: float, wire_bytes: int) -> None:
        v, c = self.v, self.c
        speed = self.r.devices[1].speed
        bit_s = 8.0 / speed if speed > 0 else 0.0
        self.add("IP output", "net/ipv4/ip_output.c ip_output", c["ip_output"],
                 "ip_finish_output; neighbour (hh cache) header", "output")
        total = c["ip_output"]
        if nfrag > 1:
            plan = fragment_plan(v["length"] - 20, v["mtu"])
            sizes = plan.payload_sizes(0)
            copy = self.r.costs.copy_s_per_byte
        else:
            sizes = [v["length"] - 20]
        per_frag = [("queue for the link", "net/core/dev.c dev_queue_xmit", "dev_queue_xmit",
                     "pfifo_fast enqueue, qdisc_restart"),
                    ("driver transmit", f"{self.drv} hard_start_xmit", "hard_start_xmit",
                     "TX descriptor, doorbell")]
        wire_total = 0
        for k, payload in enumerate(sizes):
            tag = f" {k + 1}/{nfrag}" if nfrag > 1 else ""
            if nfrag > 1:
                s = c["ip_fragment"] + payload * copy
                self.add(f"make fragment{tag}", "net/ipv4/ip_output.c ip_fragment", s,
                         f"{payload} payload bytes copied", "output")
                total += s
            for stage, function, name, note in per_frag:
                self.add(stage + tag, function, c[name], note, "output")
                total += c[name]
            frame = 20 + payload + ETH_OVERHEAD if nfrag > 1 else int(wire_bytes)
            wire_total += frame
            self.add("on the wire" + tag, f"{speed / 1e6:g} Mbit/s Ethernet", frame * bit_s,
                     f"{frame} bytes incl. preamble, header, FCS, gap", "wire", "wire")
            if not self.napi:
                self.add("TX-done interrupt" + tag, f"{self.drv} TX interrupt handler",
                         c["tx_irq"], "one per frame without NAPI", "output")
                total += c["tx_irq"]
            self.add("TX completion" + tag, "net/core/skbuff.c kfree_skb, dst_release",
                     c["tx_complete"], "free the skb, drop the route reference", "output")
            total += c["tx_complete"]
        self._check(total, out_cost, "ip_output_plan")
        if wire_total != wire_bytes:
            raise RoutelabError(f"journey wire bytes {wire_total} != ip_output_plan {wire_bytes}")

    def _step20(self) -> float:
        """One step of 2.0's chain walk, as Cache20 prices it (2.0.40's struct rtable)."""
        try:
            return self.c["chain_step_20"]
        except KeyError:            # a cost table without the 2.0 walks: the 2.4 step
            return self.c["chain_step"]

    def icmp(self, what: str, note: str) -> None:
        """The router answers with an ICMP error, as Router charges it."""
        c = self.c
        self.add(f"build {what}", "net/ipv4/icmp.c icmp_send", c["icmp_send"],
                 note + "; output route lookup, rate limit", "icmp")
        for stage, function, name in (("IP output (ICMP)", "net/ipv4/ip_output.c ip_output",
                                       "ip_output"),
                                      ("queue for the link (ICMP)", "net/core/dev.c dev_queue_xmit",
                                       "dev_queue_xmit"),
                                      ("driver transmit (ICMP)", f"{self.drv} hard_start_xmit",
                                       "hard_start_xmit")):
            self.add(stage, function, c[name], "back out of eth0", "icmp")
        self.add("TX completion (ICMP)", "net/core/skbuff.c kfree_skb, dst_release",
                 c["tx_complete"], "the driver frees the error's skb", "icmp")
        speed = self.r.devices[0].speed
        frame = int(np.asarray(_icmp_frame_bytes(self.v["length"])))
        self.add("ICMP on the wire", f"{speed / 1e6:g} Mbit/s Ethernet",
                 frame * 8.0 / speed if speed > 0 else 0.0,
                 f"{frame} bytes back to the sender", "wire", "wire")

    @staticmethod
    def _check(itemised: float, model: float, where: str) -> None:
        if abs(itemised - model) > 1e-12 + 1e-9 * abs(model):
            raise RoutelabError(f"journey out of step with {where}: "
                                f"{itemised!r} s itemised vs {model!r} s in the model")


def _icmp_frame_bytes(orig_len: int):
    """Wire bytes of the ICMP error about a packet of ``orig_len`` bytes (as the
    Router sizes it)."""
    from .costs import wire_bytes
    from .ipv4.icmp import icmp_error_len

    return wire_bytes(icmp_error_len(orig_len))
