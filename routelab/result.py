"""The outcome of a run: per-packet arrays, time series, counters, summary.

Every packet ends in exactly one outcome (the kernel's ``goto drop`` has a
reason); :meth:`Result.conservation` checks that offered = sum of outcomes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OUTCOMES", "OUTCOME_NAMES", "Result", "busy_in_bins"]

# every outcome a packet can have: one table, in routelab.core.dropreason
from .core.dropreason import OUTCOME_NAMES, OUTCOMES  # noqa: E402


def _farr(values: list) -> np.ndarray:
    """A list of Python floats as a float64 array (fast path via the array module)."""
    from array import array

    return np.frombuffer(array("d", values), dtype=np.float64).copy()


def bin_index(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The bin of each time: the last ``i`` with ``edges[i] <= t``, clipped to
    ``[0, nb - 1]`` -- ``searchsorted(edges, t, side="right") - 1``, exactly.

    ``edges`` are uniform (``arange(nb + 1) * bin_s``), so a division finds
    the bin to within one; one comparison each way against the edges makes it
    exact.  This replaces a binary search per time (8 steps for 250 bins).
    Other edges, and times that are NaN, infinite or negative, get the binary
    search itself.
    """
    nb = edges.size - 1
    t = np.asarray(t, dtype=np.float64)
    step = edges[1] - edges[0] if nb >= 1 else 0.0
    uniform = step > 0 and edges[0] == 0.0 and np.array_equal(edges, np.arange(nb + 1) * step)
    if not (uniform and t.size and np.isfinite(t).all() and t.min() >= 0.0):
        return np.clip(np.searchsorted(edges, t, side="right") - 1, 0, max(nb - 1, 0))
    ext = np.append(edges, np.inf)          # (edges[nb + 1]: never <= t)
    b = np.minimum((t / step).astype(np.int64), nb)
    b -= ext[b] > t                         # one too far (edges[0] = 0 <= t)
    b += ext[b + 1] <= t                    # one short
    return np.minimum(b, nb - 1)


def hardirq_in_bins(r, p: dict, packets: dict, n0: int, edges) -> np.ndarray:
    """Hard-IRQ seconds per CPU and bin, split out of the CPU's busy time.

    On drivers without NAPI (2.4's e100) every received frame costs a hard
    interrupt (``irq_rx`` + ``netif_rx``; a frame the backlog refuses also its
    ``kfree_skb``) and every transmitted frame a TX-done interrupt
    (``tx_irq``).  The kernel accounts that time to hard-IRQ context, not to
    softirq or ``ksoftirqd``, so ``top`` of the period showed it apart.

    Simplified: the router's CPU is one FIFO server, so this time is placed
    at the packet's service start (where the loop charged it), not at the
    arrival instant; injected echo replies (beyond the offered trace) are
    not counted.  NAPI receive is treated as interrupt-free.
    """
    c = r.costs.fn
    ncpu = r.ncpus
    out = np.zeros((ncpu, edges.size - 1))
    napi = np.asarray(p.get("napi", np.ones(n0, dtype=bool)), dtype=bool)[:n0]
    if napi.all():
        return out
    o = packets["outcome"][:n0]
    t = packets["t_start"][:n0]
    dev_cpu = np.array([d.cpu for d in r.devices], dtype=np.int64)
    dev = packets["dev"][:n0].astype(np.int64)
    out_napi = np.array([bool(d.profile.napi and r.kernel.napi) for d in r.devices])
    missed = o == OUTCOMES["drop_rx_missed"]
    w = np.where(napi | missed, 0.0, c["irq_rx"] + c["netif_rx"])
    w = w + np.where(~napi & (o == OUTCOMES["drop_backlog"]), c["kfree_skb"], 0.0)
    oif = np.asarray(p["oif"])[:n0].astype(np.int64)
    sent = (o == OUTCOMES["forwarded"]) & (oif >= 0)
    nfrag = np.asarray(p.get("nfrag", np.ones(n0)))[:n0]
    tx = sent & ~out_napi[np.maximum(oif, 0)]
    w = w + np.where(tx, nfrag * c["tx_irq"], 0.0)
    cpu_of = dev_cpu[dev]
    nb = edges.size - 1
    b = bin_index(edges, t)
    # (bincount adds the weights in order, as np.add.at would; the packets with
    # no hard-IRQ time add +0.0, which leaves every sum as it is)
    out += np.bincount(cpu_of * nb + b, weights=w, minlength=ncpu * nb).reshape(ncpu, nb)
    return out


def busy_in_bins(starts, durs, edges) -> np.ndarray:
    """Busy seconds inside each bin of ``edges`` for sorted, disjoint intervals."""
    s = np.asarray(starts, dtype=np.float64)
    d = np.asarray(durs, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    if s.size == 0:
        return np.zeros(edges.size - 1)
    order = np.argsort(s, kind="stable")
    s, d = s[order], d[order]
    cum = np.concatenate([[0.0], np.cumsum(d)])
    idx = np.searchsorted(s, edges, side="right")          # intervals starting before x
    last = np.maximum(idx - 1, 0)
    partial = np.where(idx > 0, np.minimum(edges - s[last], d[last]), 0.0)
    before = np.where(idx > 0, cum[idx - 1], 0.0)
    b = before + np.maximum(partial, 0.0)
    return np.diff(b)


@dataclass
class Result:
    """Everything a run produced.

    Attributes
    ----------
    packets : dict of numpy arrays
        ``t``, ``dev``, ``kind``, ``tag``, ``outcome``, ``t_start`` (the
        CPU began processing), ``t_depart`` (last bit left the output link;
        NaN if it never did) -- one element per packet (injected echo
        replies included, after the offered ones).
    offered : int
        Packets in the offered trace (``packets`` may hold more).
    cpu : dict
        ``t`` (bin starts), ``softirq``, ``user``, ``idle``: fractions per
        CPU and bin, shape (ncpus, nbins).
    cache : dict
        Samples of ``entries``, ``hashed``, ``garbage``, ``rcu_pending``,
        ``expire`` [s], ``equilibrium``, ``rover`` over time.
    counters : dict
        ``dev`` (per-device stats), ``ip`` (MIB), ``icmp``, ``softnet``,
        ``rt_cache_stat`` (rows per CPU), ``dst``, ``rcu``.
    profile : dict
        Seconds per kernel function (a ``perf top``-like view).
    ping : dict
        ``seq``, ``sent``, ``back`` arrays of the echo requests seen.
    """

    router: object
    duration: float
    offered: int
    packets: dict
    cpu: dict
    cache: dict
    counters: dict
    profile: dict
    ping: dict
    extra: dict = field(default_factory=dict)

    # -- construction -------------------------------------------------------
    @classmethod
    def assemble(cls, run, acc, n0, stats, mib, icmp, softnet_dropped, softnet_throttled,
                 time_squeeze, ivlog, bin_s, rec, prof_loop, ping_rtt, ctxsw,
                 ksoftirqd_wakeups) -> "Result":
        """Build the result from the loop's accumulator (``router._Accumulator``)
        and counters; ``n0`` is the number of offered packets."""
        r = run.r
        duration = run.duration
        packets = acc.packets()
        nb = max(1, int(math.ceil(duration / bin_s)))
        edges = np.arange(nb + 1) * bin_s
        intervals = [lg.arrays() for lg in ivlog]     # (starts, durations) per CPU
        soft = np.vstack([busy_in_bins(s_, d_, edges) / bin_s for s_, d_ in intervals])
        busy = np.clip(soft, 0.0, 1.0)
        irq = np.minimum(acc.irq / bin_s, busy)
        soft = busy - irq
        other = 1.0 - busy
        cpu = {"t": edges[:-1], "bin_s": bin_s, "softirq": soft, "irq": irq,
               "user": other if r.user_task else np.zeros_like(soft),
               "idle": np.zeros_like(soft) if r.user_task else other,
               "intervals": intervals}
        cache = {k: np.asarray(v) for k, v in rec.items()}
        cc = run.cache
        counters = {
            "dev": {"names": [d.name for d in r.devices], **{k: list(v) for k, v in stats.items()}},
            "ip": dict(mib), "icmp": dict(icmp),
            "softnet": {"dropped": list(softnet_dropped), "throttled": list(softnet_throttled),
                        "time_squeeze": list(time_squeeze), "ctxsw": list(ctxsw),
                        "ksoftirqd_wakeups": list(ksoftirqd_wakeups)},
        }
        if cc is not None:
            counters["rt_cache_stat"] = cc.stat_rows()
            counters["dst"] = {"entries": cc.dst.entries, "allocated": cc.dst.allocated,
                               "destroyed": cc.dst.destroyed, "garbage": len(cc.dst.garbage),
                               "gc_runs": cc.dst.gc_runs, "gc_walked": cc.dst.gc_walked,
                               "alloc_failed": cc.dst.alloc_failed,
                               "buckets": cc.buckets, "gc_thresh": cc.dst.gc_thresh,
                               "max_size": cc.max_size, "flushes": cc.flushes}
            gp = cc.rcu.grace_periods()
            counters["rcu"] = {"mode": cc.rcu.mode, "pending": cc.rcu.pending,
                               "invoked": cc.rcu.invoked, "grace_periods": int(gp.size)}
            ends = (np.asarray(cc.rcu.gp_log)[:, 1] if cc.rcu.gp_log else np.zeros(0))
            extra = {"grace_periods_s": gp, "grace_period_ends_s": ends,
                     "gc_log": list(cc.gc_log),
                     "dst_gc_log": list(cc.dst.gc_run_log)}
        else:
            extra = {"grace_periods_s": np.zeros(0), "grace_period_ends_s": np.zeros(0),
                     "gc_log": [], "dst_gc_log": []}
        profile = _profile(run, acc.prof, prof_loop, counters)
        # every echo request offered counts as sent, whatever became of it
        # (dropped requests are losses, not absences)
        req = (packets["kind"][:n0] == 2) & (packets["tag"][:n0] >= 0)
        seqs = packets["tag"][:n0][req].astype(np.int64)
        sent = packets["t"][:n0][req] if "t" in packets else np.zeros(int(req.sum()))
        back = np.array([ping_rtt.get(int(q), (0.0, np.nan))[1] for q in seqs],
                        dtype=np.float64)
        ping = {"seq": seqs, "sent": sent, "back": back}
        return cls(r, duration, n0, packets, cpu, cache, counters, profile, ping, extra)

    # -- checks ---------------------------------------------------------------
    def outcome_counts(self, offered_only: bool = True) -> dict:
        """Packets per outcome name."""
        o = self.packets["outcome"][: self.offered] if offered_only else self.packets["outcome"]
        counts = np.bincount(o.astype(np.int64), minlength=len(OUTCOMES))
        return {name: int(counts[code]) for name, code in OUTCOMES.items()}

    def conservation(self) -> bool:
        """offered == forwarded + local + every drop reason (offered packets)."""
        return sum(self.outcome_counts().values()) == self.offered

    # -- summary ----------------------------------------------------------------
    def summary(self) -> dict:
        """A flat dict of named numbers."""
        oc = self.outcome_counts()
        soft = self.cpu["softirq"]
        irq = self.cpu.get("irq", np.zeros_like(soft))
        s = {
            "offered_packets": self.offered,
            "forwarded_packets": oc["forwarded"],
            "local_packets": oc["local"],
            "dropped_packets": self.offered - oc["forwarded"] - oc["local"],
            "cpu_softirq_pct": round(100.0 * float(soft.mean()), 2),
            "cpu_softirq_pct_max_cpu": round(100.0 * float(soft.mean(axis=1).max()), 2),
            "cpu_irq_pct": round(100.0 * float(irq.mean()), 2),
            "cpu_busy_pct": round(100.0 * float((soft + irq).mean()), 2),
        }
        sched = self.counters.get("sched")
        if sched is not None and "ksoftirqd_s" in sched and self.duration > 0:
            # the share of time ksoftirqd was the current task: what top shows on
            # its line (hard IRQs that interrupt it are charged to it too)
            s["cpu_ksoftirqd_pct"] = round(
                100.0 * sum(sched["ksoftirqd_s"]) / (len(sched["ksoftirqd_s"]) * self.duration), 2)
        for name, v in oc.items():
            if name.startswith("drop_"):
                s[name] = v
        s.update(self.ping_summary())
        if getattr(self.router, "user_task", False):
            s["user_max_delay_s"] = round(self.user_max_delay(), 6)
        rows = self.counters.get("rt_cache_stat")
        if rows is not None:
            tot = np.asarray(rows).sum(axis=0)
            from .ipv4.route import STAT_FIELDS
            for i, f in enumerate(STAT_FIELDS):
                if i:
                    s[f] = int(tot[i])
            s["route_cache_entries_max"] = int(self.cache["entries"].max()) \
                if self.cache["entries"].size else 0
            s["entries_end"] = int(self.counters["dst"]["entries"])
            s["dst_garbage_max"] = int(self.cache["garbage"].max()) \
                if self.cache["garbage"].size else 0
            s["rcu_pending_max"] = int(self.cache["rcu_pending"].max()) \
                if self.cache["rcu_pending"].size else 0
        else:
            for f in ("route_cache_entries_max", "gc_total", "gc_ignored", "gc_goal_miss",
                      "gc_dst_overflow", "dst_garbage_max", "rcu_pending_max", "entries_end"):
                s[f] = 0
        for extra_summary in self.extra.get("summary_extra", ()):
            s.update(extra_summary(self))   # scenario-specific figures (e.g. netstat -i sums)
        return s


    def user_max_delay(self) -> float:
        """Longest stretch any CPU spent in softirq work without a break.

        With a CPU-bound user task on every CPU (the gettimeofday loop of
        story 2) this is the longest time the task got no CPU at all.
        """
        worst = 0.0
        for s, d in self.cpu["intervals"]:
            if s.size:
                ends = s + d
                # merge intervals that touch (gaps shorter than a nanosecond)
                brk = np.flatnonzero(s[1:] - ends[:-1] > 1e-9)
                first = np.concatenate([[0], brk + 1])
                last = np.concatenate([brk, [s.size - 1]])
                worst = max(worst, float((ends[last] - s[first]).max()))
        return worst

    def ping_rtt_ms(self) -> tuple[np.ndarray, np.ndarray]:
        """(send time [s], RTT [ms]) of every echo request; NaN RTT = lost."""
        sent, back = self.ping["sent"], self.ping["back"]
        rtt = (back - sent + self.extra.get("rtt_offset_s", 0.0)) * 1e3
        return sent, rtt

    def ping_summary(self) -> dict:
        """p50/p95/max RTT (ms) and loss (%) of the pings, if any were sent."""
        sent, rtt = self.ping_rtt_ms()
        if sent.size == 0:
            return {}
        ok = rtt[np.isfinite(rtt)]
        out = {"ping_loss_pct": round(100.0 * (1 - ok.size / sent.size), 2)}
        if ok.size:
            out.update(ping_rtt_ms_p50=round(float(np.percentile(ok, 50)), 3),
                       ping_rtt_ms_p95=round(float(np.percentile(ok, 95)), 3),
                       ping_rtt_ms_max=round(float(ok.max()), 3))
        else:
            out.update(ping_rtt_ms_p50=float("nan"), ping_rtt_ms_p95=float("nan"),
                       ping_rtt_ms_max=float("nan"))
        return out


def profile_packets(run, p, outcome) -> dict:
    """The part of the profile that follows from per-packet arrays (one window).

    ``p`` holds the array stages' columns, ``outcome`` the offered packets'
    outcomes; returns seconds per kernel function (summed over windows by
    the caller).
    """
    r = run.r
    c = r.costs.fn
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
    if run.cache is None:
        prof["fib_lookup (per packet)"] = float(np.broadcast_to(
            p["route_hit_cost"], outcome.shape)[proc].sum())
    return {k: float(v) for k, v in prof.items()}


def _profile(run, prof_packets, prof_loop, counters) -> dict:
    """Seconds per kernel function over the run (exclusive, approximate)."""
    r = run.r
    c = r.costs.fn
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
        add("ip_route_input (hits)", (c["rt_hash"] + c["ip_route_input"]) * tot[1])
        add("ip_route_input (chain walk)", c["chain_step"] * tot[15])
        add("ip_route_input_slow+dst_alloc+rt_garbage_collect+rt_intern_hash",
            prof_loop["route_slow"])
    else:
        add("fib_lookup (per packet)", prof_packets.get("fib_lookup (per packet)", 0.0))
    add("timers (rt_check_expire, dst_run_gc, rt_secret_rebuild)", prof_loop["timers"])
    add("rcu_process_callbacks", prof_loop["rcu_tasklet"])
    add("hard IRQ for packets dropped by netif_rx", prof_loop["rx_drop_irq"])
    return dict(sorted(prof.items(), key=lambda kv: -kv[1]))
