"""Notebook 03 (fragment flooding from a UDP sender): tables, figures, runs, explorer.

The reported figures (:data:`REPORT`) are Trond Myklebust's, from the
linux-kernel thread "Re: Fragment flooding in 2.4.x/2.5.x" (Trond
Myklebust and Alexey Kuznetsov, 28 June 2002), as summarised in the project
brief (stories.md s3): NFS writes over UDP from a Linux 2.4.19 client to a
Solaris server, wsize 32 KiB, switched 100 Mbit/s, ``iozone -c -e -t1 -s
120m -r128k``: about 2 MB/s, best trial about 2.5 MB/s.

What lives here (the notebook only calls it):

* the fragments of one datagram (:func:`fragment_rows`, :func:`fragment_table`)
  and their round trip through a receiver's reassembly (:func:`round_trip`);
* the send buffer as a budget of truesizes: :func:`sendbuf_gauge` drives
  :class:`routelab.ipv4.udp.UdpSocket` (its own ``wmem_alloc`` accounting)
  with a sender that sleeps on EAGAIN and is woken at half the buffer, in
  front of a 100 Mbit/s link whose TX completions run ``sock_wfree``;
* the receiver's memory (:func:`reassembly_trace`: the ``frag`` scenario's
  sender and frames replayed through the same :class:`IpDefrag` the scenario
  uses, with its memory sampled) and the loss law (:func:`loss_sweep`);
* the ``--real`` comparison (:func:`real_or_stored`);
* the NFS sections (:func:`nfs_*`, built on ``routelab.scenarios.nfs``) and
  the explorer (:func:`nfs_explorer`).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

import numpy as np

from ..hosts.nfs import WRITE_CALL_HDR
from ..ipv4.ip_fragment import (
    IP_MIN_IHL,
    RECEIVERS_ORDER,
    IpDatagram,
    IpDefrag,
    IpFragment,
    fragment_plan,
    ip_fragment,
)
from ..ipv4.udp import UDP_HLEN, SendStatus, UdpSocket, truesize_2419
from .plots import OKABE_ITO, BlitRenderer, LiveFigure, fit_title, new_figure, nice_ceiling
from .widgets import Explorer, control_for

__all__ = [
    "NFS_WRITE_OVERHEAD",
    "RECEIVER_LABELS",
    "REPORT",
    "Gauge",
    "ReasmTrace",
    "fragment_rows",
    "fragment_table",
    "gauge_figure",
    "gauge_summary",
    "loss_figure",
    "loss_sweep",
    "loss_table",
    "memory_figure",
    "real_or_stored",
    "reassembly_trace",
    "receivers_table",
    "round_trip",
    "sendbuf_gauge",
    "survive_fraction",
    "woken_retry_room",
    "NfsFigure",
    "nfs_band",
    "nfs_explorer",
    "nfs_readout",
    "nfs_run",
    "nfs_table",
    "pick_rpc",
    "real_table",
    "retry_room",
    "rpc_attempts",
    "rpc_table",
    "rpc_timeline_figure",
]

#: Trond's figures (stories.md s3, "calibrate"): the unpatched 2.4.19 client.
REPORT = {"write_MBps": 2.0, "best_MBps": 2.5}

#: The RPC header, credential and WRITE3args of one NFSv3 WRITE beside its
#: 32 KiB of data: the ``nfs`` scenario's ASSUMED 164 B
#: (``routelab.hosts.nfs.WRITE_CALL_HDR``; sources.md estimates ~136 B, and
#: either gives 23 fragments).
NFS_WRITE_OVERHEAD = WRITE_CALL_HDR

RECEIVER_LABELS = {"linux-2.4.19": "Linux 2.4.19 (bucket sweep)",
                   "linux-2.4.22": "Linux 2.4.22 (LRU)",
                   "solaris": "Solaris (prune oldest)",
                   "linux-6.x": "Linux 6.x (refuse above limit)"}
_RCV_COLORS = {"linux-2.4.19": OKABE_ITO["vermillion"], "linux-2.4.22": OKABE_ITO["orange"],
               "solaris": OKABE_ITO["blue"], "linux-6.x": OKABE_ITO["bluish_green"]}
_RCV_STYLES = {"linux-2.4.19": "-", "linux-2.4.22": "--", "solaris": "-.", "linux-6.x": ":"}


# -- 1. one datagram, its fragments, and back ------------------------------------------------

def fragment_rows(udp_bytes: int = 32768, mtu: int = 1500, order: str = "descending") -> list:
    """The fragments of one UDP datagram of ``udp_bytes`` data, in send order.

    Rows ``(k, offset, payload, mf, wire, truesize)``: ``k`` the send position,
    ``offset`` in bytes, ``payload`` IP payload bytes, ``mf`` the more-fragments
    bit, ``wire`` the IP bytes on the wire, ``truesize`` what the sender's skb
    costs its socket (2.4.19's, :func:`routelab.ipv4.udp.truesize_2419`).
    ``order="descending"`` is 2.4's ``ip_build_xmit_slow`` (highest offset first).

    Kernel: net/ipv4/ip_output.c ip_build_xmit_slow (2.4.19), via
    :func:`routelab.ipv4.ip_fragment.fragment_plan`.
    """
    plan = fragment_plan(udp_bytes + UDP_HLEN, mtu)
    sizes = plan.payload_sizes()
    rows, off = [], 0
    for i, size in enumerate(sizes):
        rows.append((off, size, i < len(sizes) - 1))
        off += size
    if order == "descending":
        rows.reverse()
    return [(k, o, s, mf, IP_MIN_IHL + s, truesize_2419(IP_MIN_IHL + s))
            for k, (o, s, mf) in enumerate(rows)]


def fragment_table(udp_bytes: int = 32768, mtu: int = 1500, order: str = "descending",
                   show: int = 4) -> str:
    """The send-order table of :func:`fragment_rows` (first and last ``show`` rows)."""
    rows = fragment_rows(udp_bytes, mtu, order)
    head = (f"{'sent':>4} {'offset [B]':>10} {'payload [B]':>11} {'MF':>3} {'on wire [B]':>11} "
            f"{'truesize [B]':>12}")
    out = [head, "-" * len(head)]
    for i, (k, o, s, mf, w, ts) in enumerate(rows):
        if show and show <= i < len(rows) - show:
            if i == show:
                out.append(f"{'...':>4} ({len(rows) - 2 * show} more full fragments)")
            continue
        out.append(f"{k + 1:>4} {o:>10,} {s:>11,} {int(mf):>3} {w:>11,} {ts:>12,}")
    total_ts = sum(r[5] for r in rows)
    out.append(f"{len(rows)} fragments for {udp_bytes:,} B of UDP data + {UDP_HLEN} B UDP "
               f"header; {sum(r[4] for r in rows):,} B of IP on the wire; "
               f"{total_ts:,} B of truesize charged to the socket")
    return "\n".join(out)


def round_trip(udp_bytes: int = 32768, mtu: int = 1500, receiver: str = "linux-2.4.19",
               seed: int = 1, drop: int | None = None) -> dict:
    """Cut a datagram of random bytes (2.4's order), hand the fragments to a
    receiver's ``ip_defrag`` and compare what comes out.

    ``drop``: the send position of one fragment lost on the way (``None``:
    none).  Returns the fragments' count, whether the rebuilt payload equals
    the original, and the receiver's counters and memory afterwards.
    """
    rng = np.random.default_rng(seed)
    payload = rng.integers(0, 256, udp_bytes + UDP_HLEN, dtype=np.uint8).tobytes()
    dgram = IpDatagram(0x1234, 0x0A000001, 0x0A000002, 17, payload)
    frags = ip_fragment(dgram, mtu, order="descending")
    d = IpDefrag(receiver, truesize="receiver")
    out = None
    for k, f in enumerate(frags):
        if k == drop:
            continue
        got = d.ip_defrag(f, 0.001 * k)
        if got is not None:
            out = got
    s = d.stats()
    return {"fragments": len(frags), "rebuilt": out is not None,
            "identical": out is not None and out.payload == payload,
            "ReasmReqds": s["ReasmReqds"], "ReasmOKs": s["ReasmOKs"],
            "queues": s["queues"], "mem": s["mem"]}


# -- 2. the send buffer: a budget of truesizes ------------------------------------------------

@dataclass
class Gauge:
    """What :func:`sendbuf_gauge` recorded: ``wmem_alloc`` over time and the sends."""

    sndbuf: int
    policy: str
    t: np.ndarray                     #: seconds
    wmem: np.ndarray                  #: bytes charged after each change
    sends: list = field(default_factory=list)   #: (t, datagram, attempt, frags queued, status)
    delivered: int = 0                #: datagrams whose every fragment left
    incomplete: int = 0               #: datagrams cut short (fragments on the wire, no head)
    frags_wire: int = 0
    frags_wasted: int = 0
    duration: float = 0.0


def sendbuf_gauge(datagrams: int = 6, *, sndbuf: int = 65535, policy: str = "2.4.19",
                  udp_bytes: int = 32768 + NFS_WRITE_OVERHEAD, link_mbps: float = 100.0,
                  build_s: float = 150e-6, mtu: int = 1500, until_s: float = 0.025) -> Gauge:
    """A non-blocking UDP sender with ``datagrams`` to send, in front of one link.

    The sender calls :meth:`UdpSocket.sendmsg` for the next datagram as soon
    as the previous one was queued whole.  On EAGAIN it sleeps until
    ``sk->write_space`` finds the socket writeable (``wmem_alloc`` at most half
    of ``sndbuf``, :attr:`UdpSocket.writeable`), then rebuilds and resends the
    *whole* datagram ``build_s`` later (the wake-up plus copying and
    checksumming 32 KiB again; ASSUMED ~0.15 ms on a ~1 GHz PC of 2002, the
    range sources.md estimates), as sunrpc does.  The link sends the queued
    fragments one after the other (100 Mbit/s Ethernet framing,
    :func:`routelab.costs.wire_bytes`); each TX completion runs
    :meth:`UdpSocket.sock_wfree`.

    ``policy`` is udp.py's ``alloc_policy``: ``"2.4.19"`` the unfixed sender
    (every fragment through ``sock_alloc_send_skb``), ``"2.4.20"`` the fix
    (only the first fragment built checks ``sndbuf``).  Truesizes are
    2.4.19's (:func:`routelab.ipv4.udp.truesize_2419`), as in the NFS client.

    The run stops when everything is sent or at ``until_s`` seconds (a
    sender whose woken retry never fits would otherwise go on for ever).

    Simplified: no RPC, no qdisc limit, no receiver; only the socket's budget.
    """
    from ..costs import wire_bytes

    sock = UdpSocket(sndbuf=sndbuf, nonblocking=True, alloc_policy=policy, mtu=mtu,
                     truesize=truesize_2419)
    bps = link_mbps * 1e6
    queue: list = []            # skbs waiting for the link, FIFO
    t_link = 0.0                # when the link finishes its current frame
    busy = None                 # the skb on the wire
    now = 0.0
    ts, ws = [0.0], [0]
    sends = []
    k, attempt, asleep, wake_at = 0, 0, False, 0.0
    partial_ids: dict[int, int] = {}
    g = Gauge(sndbuf, policy, np.zeros(0), np.zeros(0))

    def try_send(t):
        nonlocal k, attempt, asleep
        while k < datagrams:
            res = sock.sendmsg(udp_bytes, t)
            queue.extend(res.skbs)
            ts.append(t)
            ws.append(sock.wmem_alloc)
            sends.append((t, k, attempt, len(res.skbs), str(res.status)))
            if res.status is SendStatus.OK:
                g.delivered += 1
                g.frags_wire += len(res.skbs)
                k, attempt = k + 1, 0
                continue
            if res.skbs:
                g.incomplete += 1
                g.frags_wire += len(res.skbs)
                g.frags_wasted += len(res.skbs)
                partial_ids[res.datagram_id] = len(res.skbs)
            attempt += 1
            asleep = True
            return

    try_send(0.0)
    retry_at = None
    while busy is not None or queue or k < datagrams:
        if busy is None and queue:
            busy = queue.pop(0)
            t_link = max(t_link, now) + float(wire_bytes(busy.size)) * 8.0 / bps
        nxt = min(t_link if busy is not None else float("inf"),
                  retry_at if retry_at is not None else float("inf"))
        if nxt == float("inf") or nxt > until_s:
            break
        now = nxt
        if busy is not None and t_link <= now:
            writeable = sock.sock_wfree(busy)
            busy = None
            ts.append(now)
            ws.append(sock.wmem_alloc)
            if asleep and writeable and retry_at is None:
                wake_at = now
                retry_at = now + build_s
        if retry_at is not None and retry_at <= now:
            retry_at = None
            asleep = False
            try_send(now)
    del wake_at
    g.t, g.wmem, g.sends = np.asarray(ts), np.asarray(ws), sends
    g.duration = now if k >= datagrams else until_s
    g.t, g.wmem = np.append(g.t, g.duration), np.append(g.wmem, g.wmem[-1])
    return g


def _n(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def gauge_summary(g: Gauge) -> str:
    """One line per send attempt, and the totals."""
    out = [f"{'t [ms]':>7} {'datagram':>8} {'attempt':>7} {'queued':>6}  result"]
    for t, k, a, n, st in g.sends:
        out.append(f"{t * 1e3:>7.2f} {k + 1:>8} {a + 1:>7} {n:>6}  {st}")
    out.append(f"{_n(g.delivered, 'datagram')} sent whole, {g.incomplete} cut short; "
               f"{g.frags_wasted} of {g.frags_wire} fragments on the wire belong to cut-short "
               f"datagrams; {g.duration * 1e3:.1f} ms")
    return "\n".join(out)


def gauge_figure(gauges: dict[str, Gauge]):
    """``wmem_alloc`` over time, one panel per gauge, with sndbuf and the wake
    line; an x on every EAGAIN.  Returns ``(fig, alt)``."""
    n = len(gauges)
    fig, axes = new_figure(n, 1, size=(7.2, 2.3 * n + 0.4), sharex=True)
    axes = np.atleast_1d(axes)
    parts = []
    tmax = max(g.duration for g in gauges.values()) * 1e3
    for ax, (label, g) in zip(axes, gauges.items(), strict=True):
        ax.step(g.t * 1e3, g.wmem / 1024, where="post", color=OKABE_ITO["blue"],
                linewidth=1.2, label="wmem_alloc")
        ax.axhline(g.sndbuf / 1024, color=OKABE_ITO["black"], linewidth=1.0,
                   label=f"sndbuf ({g.sndbuf:,} B)")
        ax.axhline(g.sndbuf / 2048, color=OKABE_ITO["orange"], linewidth=1.0,
                   linestyle="--", label="wake-up line (sndbuf / 2)")
        fails = [(t, n_) for t, _k, _a, n_, st in g.sends if st != "OK"]
        # An EAGAIN after some fragments left cuts a datagram short; one before the
        # first fragment (the fix's only kind) leaves nothing on the wire.
        for cut, marker, text in ((True, "x", "EAGAIN, datagram cut short"),
                                  (False, "o", "EAGAIN before the first fragment (nothing sent)")):
            ft = np.array([f[0] for f in fails if (f[1] > 0) is cut]) * 1e3
            if ft.size:
                fw = np.interp(ft, g.t * 1e3, g.wmem / 1024)
                ax.plot(ft, fw, marker, color=OKABE_ITO["vermillion"], markersize=7,
                        markerfacecolor="none", linestyle="none", label=text)
        early = sum(1 for f in fails if f[1] == 0)
        ax.set_ylim(0, nice_ceiling(max(g.sndbuf, float(g.wmem.max())) / 1024 * 1.25))
        ax.set_ylabel("charged [KiB]")
        ax.set_title(label)
        ax.legend(loc="upper right", fontsize=7, ncols=2)
        ax.set_xlim(0, tmax)
        refused = f", {_n(early, 'EAGAIN')} before the first fragment (nothing sent)" \
            if early else ""
        parts.append(f"{label}: {_n(g.delivered, 'datagram')} sent whole, "
                     f"{_n(g.incomplete, 'attempt')} cut short{refused}, peak "
                     f"{g.wmem.max():,} B charged against sndbuf {g.sndbuf:,} B")
    axes[-1].set_xlabel("time [ms]")
    alt = ("Socket send-buffer gauge (bytes charged, wmem_alloc) over time while a sender "
           "pushes 32 KiB datagrams into a 100 Mbit/s link; " + "; ".join(parts) + ".")
    return fig, alt


def woken_retry_room(sndbuf: int = 65535, udp_bytes: int = 32768 + NFS_WRITE_OVERHEAD,
                     policy: str = "2.4.19", mtu: int = 1500) -> dict:
    """How many fragments a retry woken at exactly ``sndbuf / 2`` can allocate
    if nothing drains while it builds (``udp.py``'s own accounting)."""
    sock = UdpSocket(sndbuf=sndbuf, nonblocking=True, alloc_policy=policy, mtu=mtu,
                     truesize=truesize_2419)
    sock.wmem_alloc = sndbuf // 2
    res = sock.sendmsg(udp_bytes, 0.0)
    rows = fragment_rows(udp_bytes, mtu)
    return {"fits": len(res.skbs), "n": res.n_frags, "status": str(res.status),
            "start": sndbuf // 2, "full_ts": rows[1][5], "last_ts": rows[0][5],
            "sndbuf": sndbuf}


# -- 3. the receiver's memory ----------------------------------------------------------------

@dataclass
class ReasmTrace:
    """Reassembly memory over time at one receiver (see :func:`reassembly_trace`)."""

    receiver: str
    high: int
    t: np.ndarray
    mem: np.ndarray
    queues: np.ndarray
    stats: dict
    sent: int
    delivered: int


def reassembly_trace(receiver: str = "linux-2.4.19", *, loss_pct: float = 1.0,
                     rate: float = 100.0, duration: float = 10.0, datagram_bytes: int = 32768,
                     seed: int = 1, run_out: bool = True, **limits) -> ReasmTrace:
    """The ``frag`` scenario's frames replayed through its receiver's
    :class:`IpDefrag`, with the memory sampled after every fragment.

    The frames (times, IDs, which ones the wire lost) are the scenario's own
    (``routelab.scenarios.frag.sender_of(...).frames()``) and the reassembler
    is built the way the scenario builds it, so the counters are the
    scenario's (a test checks it); only the engine's receive path and CPU are
    left out.  ``run_out``: afterwards let every queue expire.
    """
    from ..scenarios.common import resolve
    from ..scenarios.frag import KNOBS, resolve_receiver, sender_of

    values = resolve(KNOBS, dict(receiver=receiver, loss_pct=loss_pct, rate=rate,
                                 duration=duration, datagram_bytes=datagram_bytes, **limits))
    lim = resolve_receiver(values)
    sender = sender_of(values, seed)
    cols, _ = sender.frames()
    d = IpDefrag(receiver, lim["ipfrag_high_thresh"], lim["ipfrag_low_thresh"],
                 lim["ipfrag_time"], truesize=lim["frag_truesize"])
    n = len(cols["t"])
    t_s = cols["t"].tolist()
    ids = cols["frag_id"].tolist()
    offs = (cols["frag_off"].astype(np.int64) * 8).tolist()
    mfs = cols["mf"].tolist()
    sizes = (cols["length"].astype(np.int64) - IP_MIN_IHL).tolist()
    tags = cols["tag"].tolist()
    tt, mm, qq = [0.0], [0], [0]
    delivered = 0
    sa, da = 0x0A000001, 0x0A000002
    for i in range(n):
        got = d.ip_defrag(IpFragment(ids[i], sa, da, 17, offs[i], mfs[i], b"", size=sizes[i],
                                     tag=tags[i]), t_s[i])
        if got is not None and not got.mixed:
            delivered += 1
        tt.append(t_s[i])
        mm.append(d.mem)
        qq.append(d.queue_count)
    if run_out:
        while d.queue_count:
            when = d.next_deadline
            if not np.isfinite(when):
                break
            d.expire(when)
            tt.append(when)
            mm.append(d.mem)
            qq.append(d.queue_count)
    return ReasmTrace(receiver, lim["ipfrag_high_thresh"], np.asarray(tt), np.asarray(mm),
                      np.asarray(qq), d.stats(), sender.count, delivered)


def receivers_table(traces: dict[str, ReasmTrace]) -> str:
    """Delivered, orphans expired or evicted/refused, and peak memory per receiver."""
    head = (f"{'receiver':<32} {'limit [B]':>10} {'delivered':>10} {'ReasmFails':>10} "
            f"{'ReasmTimeout':>12} {'peak mem [B]':>12}")
    out = [head, "-" * len(head)]
    for r, tr in traces.items():
        s = tr.stats
        out.append(f"{RECEIVER_LABELS.get(r, r):<32} {tr.high:>10,} "
                   f"{tr.delivered:>5} /{tr.sent:<4} {s['ReasmFails']:>10,} "
                   f"{s['ReasmTimeout']:>12,} {s['mem_max']:>12,}")
    out.append("(delivered = datagrams rebuilt whole, of those sent; ReasmFails counts as each "
               "receiver counts it: 2.4/Solaris per queue killed or expired, 6.x also per "
               "fragment refused)")
    return "\n".join(out)


def memory_figure(traces: dict[str, ReasmTrace], until: float | None = None):
    """Reassembly memory over time, one panel per receiver, with its limit.
    Returns ``(fig, alt)``."""
    n = len(traces)
    rows = (n + 1) // 2
    fig, axes = new_figure(rows, 2, size=(8.0, 2.5 * rows + 0.5), sharex=True)
    axes = np.atleast_1d(axes).ravel()
    parts = []
    for ax, (r, tr) in zip(axes, traces.items(), strict=False):
        ax.step(tr.t, tr.mem / 1024, where="post", color=_RCV_COLORS.get(r), linewidth=1.1,
                label="in use")
        ax.axhline(tr.high / 1024, color=OKABE_ITO["black"], linewidth=0.9, linestyle="--",
                   label=f"limit {tr.high / 1024:,.0f} KiB")
        ax.set_ylim(0, nice_ceiling(tr.high / 1024 * 1.3))
        ax.set_title(RECEIVER_LABELS.get(r, r))
        ax.set_ylabel("memory [KiB]")
        ax.legend(loc="upper right", fontsize=7)
        if until:
            ax.set_xlim(0, until)
        full = tr.t[tr.mem >= 0.9 * tr.high]
        when = f"reaches 90 % of its limit at {full[0]:.1f} s" if full.size else \
            "never comes near its limit"
        parts.append(f"{RECEIVER_LABELS.get(r, r)}: {when}, delivers {tr.delivered} of "
                     f"{tr.sent}")
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[max(0, n - 2):n]:
        ax.set_xlabel("time [s]")
    alt = ("Reassembly memory in use over time at four receivers fed the same 32 KiB "
           "datagrams with the same lost frames, each with its memory limit as a dashed line; "
           + "; ".join(parts) + ".")
    return fig, alt


# -- 4. one lost fragment costs the datagram ----------------------------------------------

def survive_fraction(loss_pct: float, n: int = 23) -> float:
    """(1 - p)^n: the chance that all ``n`` fragments of a datagram arrive."""
    return (1.0 - loss_pct / 100.0) ** n


def loss_sweep(losses=(0.0, 0.5, 1.0, 2.0, 4.0), receivers=RECEIVERS_ORDER, *,
               rate: float = 100.0, duration: float = 10.0, seed: int = 1) -> dict:
    """Delivered fraction per receiver and loss (``{receiver: array}``), plus
    ``"unlimited"``: the same frames with no memory limit (the wire alone)."""
    out: dict = {"losses": np.asarray(losses, dtype=float)}
    for r in (*receivers, "unlimited"):
        fr = []
        for p in losses:
            if r == "unlimited":
                tr = reassembly_trace("linux-6.x", loss_pct=p, rate=rate, duration=duration,
                                      seed=seed, run_out=False, ipfrag_high_thresh=1 << 40)
            else:
                tr = reassembly_trace(r, loss_pct=p, rate=rate, duration=duration, seed=seed,
                                      run_out=False)
            fr.append(tr.delivered / tr.sent)
        out[r] = np.asarray(fr)
    return out


def loss_table(sweep: dict) -> str:
    """The sweep as text: the law, the wire alone, and each receiver."""
    losses = sweep["losses"]
    cols = ["law (1-p)^23", "unlimited", *[r for r in RECEIVERS_ORDER if r in sweep]]
    head = f"{'loss %':>6} " + " ".join(f"{c:>13}" for c in cols)
    out = [head, "-" * len(head)]
    for i, p in enumerate(losses):
        vals = [survive_fraction(p)] + [sweep[c][i] for c in cols[1:]]
        out.append(f"{p:>6.1f} " + " ".join(f"{v:>13.3f}" for v in vals))
    out.append("(fraction of 32 KiB datagrams delivered whole; 100 datagrams/s for 10 s; "
               "'unlimited' = the same frames into a receiver with no memory limit)")
    return "\n".join(out)


def loss_figure(sweep: dict):
    """Delivered fraction against loss: the law, the wire alone and each receiver.
    Returns ``(fig, alt)``."""
    fig, ax = new_figure(1, 1, size=(7.0, 3.6))
    losses = sweep["losses"]
    p = np.linspace(0, float(losses.max()), 200)
    ax.plot(p, survive_fraction(p), color=OKABE_ITO["black"], linewidth=1.0,
            label="law (1 - p)^23")
    ax.plot(losses, sweep["unlimited"], "o", color=OKABE_ITO["black"], markerfacecolor="none",
            label="model, no memory limit")
    parts = []
    for r in RECEIVERS_ORDER:
        if r in sweep:
            ax.plot(losses, sweep[r], marker="s", markersize=4, color=_RCV_COLORS[r],
                    linestyle=_RCV_STYLES[r], label=RECEIVER_LABELS[r])
            i = int(np.argmin(np.abs(losses - 1.0)))
            parts.append(f"{RECEIVER_LABELS[r]} {sweep[r][i]:.0%} at {losses[i]:g} %")
    ax.set_xlabel("frame loss on the link [%]")
    ax.set_ylabel("datagrams delivered whole\n[fraction]")
    ax.set_ylim(0, 1.05)
    ax.set_title("One lost fragment costs the datagram; a full memory costs more")
    ax.legend(fontsize=7, loc="upper right")
    alt = ("Fraction of 32 KiB datagrams delivered against frame loss from 0 to "
           f"{losses.max():g} %: the (1-p)^23 law and the model without a memory limit fall "
           "together; with their limits, " + "; ".join(parts) + ".")
    return fig, alt


# -- 5. your own kernel ------------------------------------------------------------------------

def real_or_stored(live: bool = True, **knobs) -> dict:
    """A ``frag --real`` comparison: live on this machine where it can run
    (``live`` and :func:`routelab.scenarios.frag_real.why_not` is None), else the
    stored CI result (``routelab/data/frag_real.json``, its first run).  The
    returned dict has ``source`` ("live" or "stored"), ``why`` (the reason a
    live run was not made) and the comparison (``uname_r``, ``real``, ``model``)."""
    from ..scenarios import frag_real

    why = frag_real.why_not() if live else "not asked for a live run"
    if why is None:
        try:
            cmp = frag_real.compare(**knobs)
            return {"source": "live", "why": "", **cmp}
        except (RuntimeError, OSError) as exc:       # the namespace refused after all
            why = str(exc)
    doc = json.loads(frag_real.STORED.read_text(encoding="utf-8"))
    run = doc["runs"][0]
    return {"source": "stored", "why": why, "made": doc.get("made", "?"), **run}


def real_table(cmp: dict) -> str:
    """The comparison as text, saying where the real column comes from."""
    from ..scenarios import frag_real

    where = ("measured just now on this machine" if cmp["source"] == "live" else
             f"stored result of CI's run ({cmp.get('made', '?')})")
    k = cmp["knobs"]
    head = (f"real = kernel {cmp['uname_r']}, {where}\n"
            f"{k['rate']:g} datagrams/s for {k['duration']:g} s, {k['loss_pct']:g} % loss, "
            f"seed {cmp['seed']}")
    return head + "\n" + frag_real.format_table(cmp).split("\n", 2)[2]


# -- 6. NFS over UDP: one RPC on a timeline -------------------------------------------------

def nfs_run(**knobs):
    """:func:`routelab.scenarios.nfs.run` with a trace (``trace=True``)."""
    from ..scenarios import nfs

    return nfs.run(**{"trace": True, **knobs})


def _events(res) -> dict:
    tr = res.nfs_trace
    e = tr["events"]
    names = list(tr["event_names"])
    return {"t": e["t_s"], "xid": e["xid"], "attempt": e["attempt"],
            "event": np.asarray([names[int(c)] for c in e["event"]]),
            "off": e["frag_offset"], "idx": e["frag_index"]}


def pick_rpc(res, min_failed: int = 2) -> int:
    """The xid of the first WRITE cut short by EAGAIN at least ``min_failed``
    times which later went out whole (the timeline's example)."""
    ev = _events(res)
    eag = ev["xid"][ev["event"] == "eagain"]
    xids, counts = np.unique(eag, return_counts=True)
    replied = set(ev["xid"][ev["event"] == "reply"].tolist())
    for x, c in zip(xids.tolist(), counts.tolist(), strict=True):
        if c >= min_failed and x in replied:
            return int(x)
    if xids.size:
        return int(xids[0])
    raise ValueError("no RPC of this run was cut short by EAGAIN")


def rpc_attempts(res, xid: int) -> list[dict]:
    """Per attempt of one RPC: when it started, the fragments it put on the
    wire (send position, offset, time), how it ended, and the server's verdict."""
    ev = _events(res)
    m = ev["xid"] == xid
    srv = res.nfs_trace["server"]
    verdict = {int(a): (str(o), int(n)) for x, a, n, o in
               zip(srv["xid"].tolist(), srv["attempt"].tolist(),
                   srv["fragments_arrived"].tolist(), srv["outcome"].tolist(), strict=True)
               if x == xid}
    out = []
    for a in np.unique(ev["attempt"][m]).tolist():
        sel = m & (ev["attempt"] == a)
        kinds = ev["event"][sel]
        tx = sel & (ev["event"] == "frag_tx")
        ends = [k for k in kinds.tolist() if k in ("eagain", "reply", "timeout")]
        out.append({"attempt": int(a), "t0": float(ev["t"][sel].min()),
                    "frag_t": ev["t"][tx], "frag_off": ev["off"][tx], "frag_idx": ev["idx"][tx],
                    "end": ends[0] if ends else "sent whole",
                    "t_end": float(ev["t"][sel].max()),
                    "server": verdict.get(int(a), ("not seen", 0))})
    return out


def rpc_table(res, xid: int) -> str:
    """One line per attempt of RPC ``xid``."""
    rows = rpc_attempts(res, xid)
    t0 = rows[0]["t0"]
    head = (f"{'attempt':>7} {'start [ms]':>10} {'fragments out':>13} {'lowest offset':>13}  "
            f"{'sender saw':<11} server")
    out = [f"WRITE xid {xid}", head, "-" * (len(head) + 12)]
    for r in rows:
        n = r["frag_off"].size
        low = f"{int(r['frag_off'].min()):,}" if n else "-"
        end = {"eagain": "EAGAIN", "reply": "reply", "timeout": "timeout"}.get(r["end"],
                                                                               r["end"])
        out.append(f"{r['attempt']:>7} {(r['t0'] - t0) * 1e3:>10.2f} {n:>10} /23 {low:>13}  "
                   f"{end:<11} {r['server'][0]} ({r['server'][1]} fragments arrived)")
    return "\n".join(out)


def rpc_timeline_figure(res, xid: int):
    """One RPC's fragments on a timeline (offset against time, one marker per
    attempt) above the send-buffer gauge of the same stretch.  Returns
    ``(fig, alt)``."""
    rows = rpc_attempts(res, xid)
    t0 = rows[0]["t0"]
    t1 = max(r["t_end"] for r in rows) + 0.5e-3
    fig, (a, b) = new_figure(2, 1, size=(7.4, 5.2), sharex=True,
                             gridspec_kw=dict(height_ratios=(1.5, 1.0)))
    marks = ["x", "o", "s", "^", "v", "D", "P", "*"]
    colors = [OKABE_ITO[k] for k in ("vermillion", "orange", "reddish_purple", "sky_blue",
                                      "yellow", "black")]
    parts = []
    for i, r in enumerate(rows):
        ok = r["server"][0] == "completed"
        col = OKABE_ITO["bluish_green"] if ok else colors[i % len(colors)]
        a.plot((r["frag_t"] - t0) * 1e3, r["frag_off"] / 1024, marks[i % len(marks)],
               color=col, markersize=4, linestyle="none",
               markerfacecolor="none" if not ok else col,
               label=f"attempt {r['attempt']}: {r['frag_off'].size} of 23 out"
                     + (" (rebuilt)" if ok else " (never rebuilt)"))
        parts.append(f"attempt {r['attempt']} puts {r['frag_off'].size} of 23 fragments on the "
                     f"wire, " + ("the server rebuilds it" if ok else
                                  "none at offset 0, so the server can never rebuild it"))
    a.axhline(0, color=OKABE_ITO["black"], linewidth=0.8)
    a.set_ylabel("fragment offset [KiB]")
    a.set_ylim(-1.5, 34)
    a.set_title(f"One 32 KiB WRITE (xid {xid}): which fragments leave, attempt by attempt")
    a.legend(fontsize=7, loc="upper right", ncols=1)
    g = res.nfs_trace["gauge"]
    sel = (g["t_s"] >= t0 - 1e-3) & (g["t_s"] <= t1)
    b.step((g["t_s"][sel] - t0) * 1e3, g["wmem_alloc"][sel] / 1024, where="post",
           color=OKABE_ITO["blue"], linewidth=1.1, label="wmem_alloc")
    sb = int(g["sndbuf"][0]) if g["sndbuf"].size else 65535
    b.axhline(sb / 1024, color=OKABE_ITO["black"], linewidth=1.0, label="sndbuf")
    b.axhline(sb / 2048, color=OKABE_ITO["orange"], linewidth=1.0, linestyle="--",
              label="wake-up line")
    b.set_ylim(0, nice_ceiling(sb / 1024 * 1.25))
    b.set_ylabel("send buffer\ncharged [KiB]")
    b.set_xlabel("time since the WRITE's first attempt [ms]")
    b.set_xlim(-0.5, (t1 - t0) * 1e3)
    b.legend(fontsize=7, loc="upper right", ncols=3)
    alt = (f"Top: fragment offsets against time for each attempt of WRITE {xid}; "
           + "; ".join(parts) + ". Bottom: the socket's send-buffer charge over the same "
           f"{(t1 - t0) * 1e3:.0f} ms, against sndbuf {sb:,} B and the wake-up line at half.")
    return fig, alt


def retry_room(res) -> dict:
    """Fragments a *woken* retry got out before EAGAIN, over a whole run:
    ``{"counts": array, "whole": n retries that went out whole, "tried": n woken
    retries, "gap_ms": median time from one attempt's start to its retry's}``."""
    ev = _events(res)
    rs = ev["event"] == "resend"      # (logged with the attempt that failed)
    resend = {(int(x), int(a) + 1) for x, a in zip(ev["xid"][rs].tolist(),
                                                   ev["attempt"][rs].tolist(), strict=True)}
    eag = ev["event"] == "eagain"
    counts = [int(i) for x, a, i in zip(ev["xid"][eag].tolist(), ev["attempt"][eag].tolist(),
                                        ev["idx"][eag].tolist(), strict=True)
              if (x, a) in resend]
    tx = ev["event"] == "frag_tx"
    failed = {(int(x), int(a)) for x, a in zip(ev["xid"][eag].tolist(),
                                               ev["attempt"][eag].tolist(), strict=True)}
    sent = {(int(x), int(a)) for x, a in zip(ev["xid"][tx].tolist(), ev["attempt"][tx].tolist(),
                                             strict=True)}
    whole = len((resend & sent) - failed)
    start: dict = {}                  # (xid, attempt) -> when its first event was logged
    for x, a, t in zip(ev["xid"].tolist(), ev["attempt"].tolist(), ev["t"].tolist(),
                       strict=True):
        start.setdefault((int(x), int(a)), t)
    gaps = [start[(x, a)] - start[(x, a - 1)] for x, a in resend
            if (x, a) in start and (x, a - 1) in start]
    return {"counts": np.asarray(counts, dtype=int), "whole": whole, "tried": len(resend),
            "gap_ms": float(np.median(gaps)) * 1e3 if gaps else float("nan")}


# -- 7. model next to the report, the fix ------------------------------------------------

def nfs_band(seeds=(1, 2, 3), **knobs) -> dict:
    """``write_MBps`` over seeds: ``{"runs": [summary...], "mean", "min", "max"}``."""
    from ..scenarios import nfs

    runs = [nfs.run(seed=s, **knobs).summary() for s in seeds]
    w = np.array([r["write_MBps"] for r in runs])
    return {"runs": runs, "mean": float(w.mean()), "min": float(w.min()),
            "max": float(w.max()), "seeds": tuple(seeds), "knobs": knobs}


def nfs_table(runs: dict) -> str:
    """Summary keys side by side for labelled runs (``{label: summary}``)."""
    keys = ("write_MBps", "elapsed_s", "rpcs", "rpc_resends", "rpc_timeouts",
            "datagrams_incomplete", "fragments_sent", "fragments_wasted", "reasm_oks",
            "reasm_fails", "link_util_pct", "client_cpu_pct")
    w = max(len(k) for k in keys)
    labels = list(runs)
    cw = max(12, *(len(lab) for lab in labels))
    out = [f"{'':<{w}} " + " ".join(f"{lab:>{cw}}" for lab in labels)]
    for k in keys:
        vals = []
        for lab in labels:
            v = runs[lab][k]
            vals.append(f"{v:>{cw},.2f}" if isinstance(v, float) else f"{v:>{cw},}")
        out.append(f"{k:<{w}} " + " ".join(vals))
    return "\n".join(out)


# -- 8. the explorer ------------------------------------------------------------------------

class NfsFigure(LiveFigure):
    """Two panels: the send-buffer gauge over the run's first ``window_ms``,
    and the data the server has acknowledged over time."""

    def __init__(self, window_ms: float = 40.0, size: tuple[float, float] = (8.4, 4.6)) -> None:
        fig, (a, b) = new_figure(2, 1, size=size, layout=None,
                                 gridspec_kw=dict(left=0.10, right=0.97, bottom=0.11,
                                                  top=0.78, hspace=0.62))
        self.fig, self.ax_g, self.ax_w, self.window_ms = fig, a, b, window_ms
        a.set_title(f"Send buffer, first {window_ms:g} ms")
        a.set_xlabel("time [ms]")
        a.set_ylabel("charged [KiB]")
        (self.gauge,) = a.plot([], [], color=OKABE_ITO["blue"], linewidth=1.0,
                               drawstyle="steps-post", label="wmem_alloc")
        self.sndbuf = a.axhline(64, color=OKABE_ITO["black"], linewidth=1.0, label="sndbuf")
        self.wake = a.axhline(32, color=OKABE_ITO["orange"], linewidth=1.0, linestyle="--",
                              label="wake-up line")
        (self.eagain,) = a.plot([], [], "x", color=OKABE_ITO["vermillion"], markersize=5,
                                linestyle="none", label="EAGAIN")
        a.legend(loc="upper right", fontsize=7, ncols=4)
        a.set_xlim(0, window_ms)
        b.set_title("File data the server has acknowledged")
        b.set_xlabel("time [s]")
        b.set_ylabel("written [MB]")
        (self.acked,) = b.plot([], [], color=OKABE_ITO["bluish_green"], linewidth=1.4,
                               drawstyle="steps-post", label="model")
        (self.report,) = b.plot([], [], color=OKABE_ITO["black"], linewidth=0.9,
                                linestyle=":", label="2 MB/s (the report, unpatched)")
        b.legend(loc="upper left", fontsize=7)
        self.title = fig.suptitle(" ")
        self._alt = ""
        self._blit = BlitRenderer(fig, [self.gauge, self.sndbuf, self.wake, self.eagain,
                                        self.acked, self.report, self.title])

    def update(self, res) -> None:
        tr = res.nfs_trace
        g = tr["gauge"]
        w = self.window_ms / 1e3
        sel = g["t_s"] <= w
        self.gauge.set_data(g["t_s"][sel] * 1e3, g["wmem_alloc"][sel] / 1024)
        k = res.extra["knobs"]
        sb = k["sndbuf"]
        self.sndbuf.set_ydata([sb / 1024] * 2)
        self.wake.set_ydata([sb / 2048] * 2)
        top = max(sb, int(g["wmem_alloc"][sel].max()) if sel.any() else 0)
        self.ax_g.set_ylim(0, nice_ceiling(top / 1024 * 1.3))
        ev = _events(res)
        e = (ev["event"] == "eagain") & (ev["t"] <= w)
        et = ev["t"][e]
        self.eagain.set_data(et * 1e3, np.interp(et, g["t_s"], g["wmem_alloc"]) / 1024
                             if g["t_s"].size else et)
        rep = ev["event"] == "reply"
        rt = np.sort(ev["t"][rep])
        s = res.summary()
        per = k["wsize"] / 1e6
        self.acked.set_data(np.r_[0.0, rt], np.r_[0.0, np.arange(1, rt.size + 1) * per])
        end = max(s["elapsed_s"], float(rt[-1]) if rt.size else 0.0, 1e-3)
        self.report.set_data([0, end], [0, REPORT["write_MBps"] * end])
        self.ax_w.set_xlim(0, nice_ceiling(end, floor=0.1))
        total = k["file_mb"] * (1 << 20) / 1e6
        self.ax_w.set_ylim(0, nice_ceiling(max(rt.size * per, total) * 1.15, floor=0.1))
        fit_title(self.title, f"client {k['kernel']} ({k['frag_alloc']}), sndbuf {sb:,} B, "
                              f"wsize {k['wsize']:,}, server {k['server']}, cwnd {k['cwnd']}, "
                              f"timer {k['rpc_timer']}, loss {k['loss_pct']:g} %")
        self._alt = (f"{self.title.get_text()}. Top: the send buffer in the first "
                     f"{self.window_ms:g} ms, {int(e.sum())} EAGAINs, peak "
                     f"{top:,} B against sndbuf {sb:,} B. Bottom: {rt.size} replies; "
                     f"{s['write_MBps']:.2f} MB/s over {s['elapsed_s']:.2f} s, against the "
                     "report's 2 MB/s line (the unpatched client).")

    def _limit_axes(self) -> list:
        return [self.ax_g, self.ax_w]


def nfs_readout(res) -> str:
    """The explorer's one-line readout (HTML)."""
    s = res.summary()
    k = res.extra["knobs"]
    wasted = s["fragments_wasted"] / max(s["fragments_sent"], 1)
    limit = float(k.get("duration", float("inf")))
    if s["elapsed_s"] >= limit - 1e-9:
        ev = _events(res)
        # WRITE replies only: a COMMIT is one small unfragmented datagram, every
        # WRITE (wsize >= 4 KiB) puts fragments beyond offset 0 on the wire.
        writes = np.unique(ev["xid"][(ev["event"] == "frag_tx") & (ev["off"] > 0)])
        replied = np.unique(ev["xid"][ev["event"] == "reply"])
        total = k["file_mb"] * 1.048576
        acked = min(np.intersect1d(writes, replied).size * k["wsize"] / 1e6, total)
        rate = (f"<b>not written in {limit:g} s</b>: {acked:.2f} of "
                f"{total:.2f} MB acknowledged")
    else:
        rate = (f"write <b>{s['write_MBps']:.2f} MB/s</b> (Trond's unpatched client: "
                f"~{REPORT['write_MBps']:g})")
    setting = (f"<b>{html.escape(str(k['kernel']))}</b> {html.escape(str(k['frag_alloc']))}, "
               f"sndbuf {k['sndbuf']:,} B, wsize {k['wsize']:,}, server "
               f"{html.escape(str(k['server']))}, cwnd {html.escape(str(k['cwnd']))}, timer "
               f"{html.escape(str(k['rpc_timer']))}, loss {k['loss_pct']:g} %")
    return (f"{setting} | {rate} | "
            f"resends after EAGAIN {s['rpc_resends']:,}, RPC timeouts {s['rpc_timeouts']:,} | "
            f"datagrams cut short {s['datagrams_incomplete']:,} | fragments wasted "
            f"<b>{wasted:.0%}</b> of {s['fragments_sent']:,} | link {s['link_util_pct']:.0f} % "
            f"busy, client CPU {s['client_cpu_pct']:.0f} %")


def nfs_explorer(*, file_mb: float = 2.0, seed: int = 1, dpi: int = 64, limit_s: float = 3.0,
                 **start) -> Explorer:
    """Notebook 03's explorer: the NFS write with its main knobs, re-simulated per move.

    Controls: frame loss, ``sndbuf``, ``wsize``, ``frag_alloc``, the server's
    reassembly, sunrpc's congestion window and retransmit timer.  Each move
    writes a ``file_mb`` file (2 MiB: a move takes ~0.1-0.4 s here,
    ``benchmarks/bench_sliders.py``) with the 2.4.19 client and redraws the
    send-buffer gauge and the acknowledged data.  A run stops after
    ``limit_s`` simulated seconds (a ``sndbuf`` below one datagram never gets a
    WRITE through with the unfixed sender); the readout then says so.
    """
    from ..scenarios import nfs

    K = nfs.KNOBS
    controls = [
        control_for(K["loss_pct"], description="frame loss", min=0.0, max=5.0, step=0.1,
                    value=start.get("loss_pct")),
        # 4,095 + k x 4,096: the default 65,535 stays on the slider's grid (k = 15), and
        # the top, 1,069,055, is just above 2.4.20's 1,068,160.
        control_for(K["sndbuf"], description="sndbuf", min=4095, max=4095 + 260 * 4096,
                    step=4096, value=start.get("sndbuf", 65535)),
        control_for(K["wsize"], description="wsize", min=4096, max=32768, step=4096,
                    value=start.get("wsize")),
        control_for(K["frag_alloc"], description="fragment allocation",
                    options=list(nfs.FRAG_ALLOC),
                    value=start.get("frag_alloc", "sock-alloc-send-skb")),
        control_for(K["server"], description="server", value=start.get("server")),
        control_for(K["cwnd"], description="congestion window", value=start.get("cwnd")),
        control_for(K["rpc_timer"], description="RPC timer", value=start.get("rpc_timer")),
    ]
    fig = NfsFigure()

    def update(**values) -> tuple[str, str]:
        res = nfs.run(seed=seed, file_mb=file_mb, trace=True, duration=limit_s, **values)
        fig.update(res)
        return nfs_readout(res), fig.alt

    return Explorer(controls, update, fig.fig, dpi=dpi, render=lambda: fig.render_png(dpi),
                    title="Explorer: NFS writes over UDP from a 2.4.19 client")

