"""Scenario ``frag``: IP reassembly on its own, per receiver (story 3).

A sender sends ``datagram_bytes`` UDP datagrams at ``rate`` per second for
``duration`` through a link that loses ``loss_pct`` of its frames into a
receiver, which reassembles them; the run goes on until every reassembly
queue has completed or expired (``duration`` + ``ipfrag_time`` + the timers'
lateness + 1 s).  One
lost fragment costs its whole datagram, and what the receiver holds of it
(an *orphan*) costs memory until it expires or is evicted -- and a memory
limit can then cost datagrams that lost nothing.

How it sits in the engine (docs/design.md seams): the receiver is the
machine the engine runs, a :class:`~routelab.router.Router` with one device
(``eth0``); the fragments reach it through ``ip_rcv`` and
``ip_local_deliver``, which hands protocol 17 to a local
:class:`~routelab.hosts.frag.FragReceiver` running an
:class:`~routelab.ipv4.ip_fragment.IpDefrag` of the chosen receiver kind
(``ip_expire`` on the run's clock, its CPU work charged to the machine).
The sender is a :class:`~routelab.hosts.frag.FragSender` beyond eth0 with a
:class:`~routelab.hosts.nic.HostNic` whose wire loses frames.

Receivers (routelab.ipv4.ip_fragment.RECEIVERS): ``linux-2.4.19`` (256/192
KB, 30 s, the bucket-sweep evictor), ``linux-2.4.22`` (the same with an LRU
evictor), ``solaris`` (1,000,000 B, 60 s, oldest queues pruned), and
``linux-6.x`` (4 MiB, 30 s, every fragment refused while over the limit).
The engine's receive path is a Linux one for every receiver (``2.4.24`` for
the 2.4 and Solaris receivers, ``2.6.0`` for 6.x): only the reassembly
differs, which is what this scenario is about.

``python -m routelab frag --real`` runs the same experiment on this
machine's own kernel in an unprivileged user + network namespace and prints
it beside the ``linux-6.x`` model (:mod:`routelab.scenarios.frag_real`).
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import KIND, PacketTrace, ip_to_int
from ..errors import KnobError
from ..hosts.frag import UDP_HLEN, FragReceiver, FragSender
from ..ipv4.fib import Fib, Route
from ..ipv4.ip_fragment import IP_MAX_PACKET, IP_MIN_IHL, RECEIVERS, RECEIVERS_ORDER, IpDefrag
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from .common import run_scenario

NAME = "frag"
TITLE = "Reassembly under loss: orphans, memory limits, evictors (story 3)"

#: Largest UDP payload of one IPv4 datagram: 65,535 - 20 (IP) - 8 (UDP).
MAX_DATAGRAM_BYTES = IP_MAX_PACKET - IP_MIN_IHL - UDP_HLEN

#: The engine's kernel profile for each receiver's receive path (only
#: reassembly is the receiver's own; see the module doc).
ENGINE_KERNEL = {"linux-2.4.19": "2.4.24", "linux-2.4.22": "2.4.24", "solaris": "2.4.24",
                 "linux-6.x": "2.6.0"}

KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("receiver", "linux-2.4.19", str, choices=RECEIVERS_ORDER,
         help="Whose reassembly: linux-2.4.19 (bucket-sweep evictor), linux-2.4.22 (LRU), "
              "solaris (prune oldest), linux-6.x (refuse above the limit)."),
    Knob("datagram_bytes", 32768, int, 1, 1 << 20, "bytes",
         "UDP data per datagram (at most 65,507: 65,535 minus IP and UDP headers).",
         step=1024),
    Knob("rate", 100.0, float, 0.1, 20000.0, "datagrams/s", "Datagrams sent per second.",
         step=10),
    Knob("duration", 10.0, float, 0.1, 3600.0, "s", "Seconds of sending.", step=1),
    Knob("loss_pct", 1.0, float, 0.0, 100.0, "%",
         "Frames lost on the link, each independently.", step=0.1),
    Knob("ipfrag_high_thresh", None, int, 0, 1 << 40, "bytes",
         "Reassembly memory limit (Solaris: ip_reass_queue_bytes); default: the receiver's "
         "(262144, 262144, 1000000, 4194304).", procname="net.ipv4.ipfrag_high_thresh"),
    Knob("ipfrag_low_thresh", None, int, 0, 1 << 40, "bytes",
         "What the 2.4 evictors free down to (unused by solaris and linux-6.x); default: "
         "the receiver's (196608; 6.x 3145728).", procname="net.ipv4.ipfrag_low_thresh"),
    Knob("ipfrag_time", None, float, 0.01, 3600.0, "s",
         "Reassembly timeout from a queue's first fragment; default: the receiver's "
         "(30 s; solaris 60 s).", procname="net.ipv4.ipfrag_time"),
    Knob("frag_truesize", None, int, 64, 1 << 20, "bytes",
         "Memory one received frame costs the receiver (skb truesize: the driver's); "
         "default: the receiver's assumed value (1712 for 2.4, 2048 solaris, 2944 6.x)."),
    Knob("order", "ascending", str, choices=("ascending", "descending"),
         help="Fragment order on the wire: ascending (ip_fragment) or descending (2.4's "
              "ip_build_xmit_slow, highest offset first)."),
    Knob("link_mbps", 1000.0, float, 1.0, 100000.0, "Mbit/s",
         "The sender's link (ASSUMED fast enough for the rate: its queue must not drop).",
         step=100),
    Knob("sender", "trace", str, choices=("trace", "host"),
         help="How the sender's frames enter the run: 'host' -- a FragSender host injects "
              "each through its HostNic as the run goes (the engine's seam); 'trace' -- the "
              "same frames, worked out ahead by the same sender, offered as the trace "
              "(an open-loop sender: identical frames and times, several times faster)."),
    Knob("cpu", "celeron-1200", str,
         choices=("k6-200", "duron-900", "celeron-1200", "p4-xeon-2400x2", "xeon-2800",
                  "opteron-2400x2"),
         help="The receiver's CPU profile (routelab.hardware)."),
]}

SENDER, RECEIVER_ADDR = "10.0.0.1", "10.0.0.2"
#: What the summary reports, in order.
SUMMARY_KEYS = ("sent", "delivered", "delivered_fraction", "reasm_reqds", "reasm_oks",
                "reasm_fails", "reasm_timeouts", "frag_mem_max")


def resolve_receiver(values: dict) -> dict:
    """The receiver's limits with the defaults filled in; refuses impossible ones."""
    rules = RECEIVERS[values["receiver"]]
    high = rules.high if values["ipfrag_high_thresh"] is None else values["ipfrag_high_thresh"]
    low = min(rules.low, high) if values["ipfrag_low_thresh"] is None \
        else values["ipfrag_low_thresh"]
    if low > high:
        raise KnobError("ipfrag_low_thresh", low,
                        f"at most ipfrag_high_thresh ({high}): low cannot be above high")
    t = rules.time if values["ipfrag_time"] is None else values["ipfrag_time"]
    ts = rules.rx_truesize if values["frag_truesize"] is None else values["frag_truesize"]
    if values["datagram_bytes"] > MAX_DATAGRAM_BYTES:
        raise KnobError("datagram_bytes", values["datagram_bytes"],
                        f"at most {MAX_DATAGRAM_BYTES} (65,535 B IP datagram minus 20 B IP "
                        "and 8 B UDP header)")
    count = int(round(values["rate"] * values["duration"]))
    if count < 1:
        raise KnobError("duration", values["duration"],
                        f"long enough to send one datagram at rate {values['rate']}/s")
    return {"ipfrag_high_thresh": high, "ipfrag_low_thresh": low, "ipfrag_time": float(t),
            "frag_truesize": ts, "count": count}


def build(values: dict, seed: int, rx_truesize=None, rx_qsize=None, rx_hz=None,
          rx_jiffies0: int = 0) -> tuple[Router, PacketTrace]:
    """Router (the receiver) and its offered trace for resolved knob values
    (``duration``: the seconds of sending).  ``rx_truesize`` (a callable of
    the frame's IP length) and ``rx_qsize`` replace the receiver's assumed
    truesize and queue size, ``rx_hz`` its tick rate and ``rx_jiffies0`` the
    jiffies at time 0 (the ``--real`` comparison passes measured ones)."""
    lim = resolve_receiver(values)
    ts = lim["frag_truesize"] if rx_truesize is None else rx_truesize
    defrag = IpDefrag(values["receiver"], lim["ipfrag_high_thresh"], lim["ipfrag_low_thresh"],
                      lim["ipfrag_time"], truesize=ts, qsize=rx_qsize, jiffies0=rx_jiffies0,
                      hz=rx_hz)
    speed = values["link_mbps"] * 1e6
    sender = sender_of(values, seed)
    nic = "e1000"
    devices = [Device("eth0", nic, 0, speed_bps=speed)]
    fib = Fib(routes=[Route("10.0.0.0/24", oif=0)], local_addrs=[RECEIVER_ADDR])
    router = Router(ENGINE_KERNEL[values["receiver"]], values["cpu"], devices, fib, seed=seed,
                    hosts={0: sender}, local_hosts={17: FragReceiver(defrag)},
                    arp_static=[(0, SENDER)])
    n = 0
    cols: dict = {}
    if values["sender"] == "trace":
        cols, _ = sender.frames()
        n = len(cols["t"])
    else:
        cols = {"t": np.zeros(0)}
    tr = PacketTrace.build(cols.pop("t"), iif=np.zeros(n, np.int16),
                           saddr=np.full(n, ip_to_int(SENDER), np.uint32),
                           daddr=np.full(n, ip_to_int(RECEIVER_ADDR), np.uint32),
                           proto=np.full(n, 17, np.uint8),
                           kind=np.full(n, KIND["udp"], np.uint8), **cols)
    return router, tr


def summarize(res: Result) -> dict:
    """The scenario's figures from a finished run's counters."""
    h = res.counters["hosts"]
    rx, tx = h["local/17"], h["eth0"]
    sent = tx["datagrams_sent"]
    return {
        "sent": sent,
        "delivered": rx["delivered"],
        "delivered_fraction": rx["delivered"] / sent if sent else 0.0,
        "reasm_reqds": rx["ReasmReqds"],
        "reasm_oks": rx["ReasmOKs"],
        "reasm_fails": rx["ReasmFails"],
        "reasm_timeouts": rx["ReasmTimeout"],
        "frag_mem_max": rx["mem_max"],
    }


def sender_of(values: dict, seed: int) -> FragSender:
    """The sender for resolved knob values."""
    lim = resolve_receiver(values)
    return FragSender(ip_to_int(SENDER), ip_to_int(RECEIVER_ADDR), values["datagram_bytes"],
                      values["rate"], lim["count"], 1500, values["link_mbps"] * 1e6,
                      values["loss_pct"], seed, values["order"])


def run(seed: int = 1, *, rx_truesize=None, rx_qsize=None, rx_hz=None, rx_jiffies0: int = 0,
        **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters (``rx_truesize``,
    ``rx_qsize``: see :func:`build`).  The run lasts ``duration`` +
    ``ipfrag_time`` + the timers' lateness (the 6.x timer wheel: up to 2 s at
    30 s) + 1 s, so that every queue has completed or expired."""
    from .common import resolve
    values = resolve(KNOBS, knobs)
    lim = resolve_receiver(values)
    probe = IpDefrag(values["receiver"], lim["ipfrag_high_thresh"], lim["ipfrag_low_thresh"],
                     lim["ipfrag_time"], hz=rx_hz)
    total = values["duration"] + lim["ipfrag_time"] + probe.max_timer_delay() + 1.0
    spec = dict(KNOBS)
    spec["duration"] = Knob("duration", total, float, 0.0, 1e7, "s", "run length")

    def build_send(v, s):
        return build(dict(v, duration=values["duration"]), s, rx_truesize, rx_qsize, rx_hz,
                     rx_jiffies0)

    res = run_scenario(NAME, spec, build_send, dict(values, duration=total), seed, 1500,
                       summary=summarize)
    res.extra["knobs"] = dict(values, **{k: lim[k] for k in ("ipfrag_high_thresh",
                                                             "ipfrag_low_thresh",
                                                             "ipfrag_time", "frag_truesize")})
    res.extra["run_s"] = total
    return res


def real_main(seed: int = 1, as_json: bool = False, **knobs) -> int:
    """``python -m routelab frag --real`` (see :mod:`routelab.scenarios.frag_real`)."""
    from . import frag_real
    return frag_real.main(seed, as_json, **knobs)
