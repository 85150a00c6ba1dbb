"""The outcome of a run: per-packet arrays, time series, counters, summary.

Every packet ends in exactly one outcome (the kernel's ``goto drop`` has a
reason); :meth:`Result.conservation` checks that offered = sum of outcomes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# every outcome a packet can have: one table, in routelab.core.dropreason
from ..core.dropreason import OUTCOME_NAMES, OUTCOMES
from ..core.skbuff import KIND
from .bins import bin_index, busy_in_bins, hardirq_in_bins
from .profile import compose_profile

__all__ = ["OUTCOMES", "OUTCOME_NAMES", "Result", "RunConfig", "DeviceInfo", "busy_in_bins",
           "bin_index", "hardirq_in_bins"]


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the result keeps of one interface (a snapshot of its Device)."""

    name: str
    nic: str
    cpu: int
    mtu: int
    speed: float
    napi: bool          # the driver polls and the kernel has NAPI
    profile: object     # the NicProfile
    tx_irq: bool        # a TX-done interrupt per frame (no NAPI, not a pair device)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What a run was: the router's configuration, as plain data (no live objects).

    Attributes
    ----------
    kernel : KernelProfile
    cpu : CpuProfile
    ncpus : int
    devices : tuple of DeviceInfo
    sysctl : dict           resolved sysctl values
    costs : CostTable       seconds per kernel function on this CPU
    user_task : bool
    seed : int
    """

    kernel: object
    cpu: object
    ncpus: int
    devices: tuple
    sysctl: dict
    costs: object
    user_task: bool
    seed: int


@dataclass
class Result:
    """Everything a run produced, as data.

    Attributes
    ----------
    config : RunConfig
        The router the run used.
    packets : dict of numpy arrays
        ``t``, ``dev``, ``kind``, ``tag``, ``outcome``, ``t_start`` (the
        CPU began processing), ``t_depart`` (last bit left the output link;
        NaN if it never did) -- one element per packet (packets born during
        the run included, after each window's offered ones).
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
        ``rt_cache_stat`` (rows per CPU), ``dst``, ``rcu``, ``sched``.
    profile : dict
        Seconds per kernel function (a ``perf top``-like view).
    ping : dict
        ``seq``, ``sent``, ``back`` arrays of the echo requests seen.
    extra : dict
        Logs (grace periods, GC passes) and what the scenario adds: its
        ``scenario``, ``knobs``, ``seed`` and ``scenario_summary`` (numbers
        merged into :meth:`summary`).
    """

    config: RunConfig
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
    def assemble(cls, config: RunConfig, duration: float, acc, n0: int, counters: dict,
                 ivlogs: list, bin_s: float, rec: dict, ledger_profile: dict, ping_rtt: dict,
                 cache) -> "Result":
        """Build the result from a run's accumulator (``result.accumulate``),
        counters, busy-interval logs, samples and ledger profile; ``n0`` is the
        number of offered packets, ``cache`` the run's RouteCache (or None:
        its logs are copied, the object is not kept)."""
        packets = acc.packets()
        nb = max(1, int(math.ceil(duration / bin_s)))
        edges = np.arange(nb + 1) * bin_s
        intervals = [lg.arrays() for lg in ivlogs]     # (starts, durations) per CPU
        soft = np.vstack([busy_in_bins(s_, d_, edges) / bin_s for s_, d_ in intervals])
        busy = np.clip(soft, 0.0, 1.0)
        irq = np.minimum(acc.irq / bin_s, busy)
        soft = busy - irq
        other = 1.0 - busy
        cpu = {"t": edges[:-1], "bin_s": bin_s, "softirq": soft, "irq": irq,
               "user": other if config.user_task else np.zeros_like(soft),
               "idle": np.zeros_like(soft) if config.user_task else other,
               "intervals": intervals}
        rec_arrays = {k: np.asarray(v) for k, v in rec.items()}
        if cache is not None:        # (its counters: result.counters.Counters.collect)
            gp = cache.rcu.grace_periods()
            ends = (np.asarray(cache.rcu.gp_log)[:, 1] if cache.rcu.gp_log else np.zeros(0))
            extra = {"grace_periods_s": gp, "grace_period_ends_s": ends,
                     "gc_log": list(cache.gc_log),
                     "dst_gc_log": list(cache.dst.gc_run_log)}
        else:
            extra = {"grace_periods_s": np.zeros(0), "grace_period_ends_s": np.zeros(0),
                     "gc_log": [], "dst_gc_log": []}
        profile = compose_profile(config, acc.prof, ledger_profile, counters)
        # every echo request offered counts as sent, whatever became of it
        # (dropped requests are losses, not absences)
        req = (packets["kind"][:n0] == KIND["ping_request"]) & (packets["tag"][:n0] >= 0)
        seqs = packets["tag"][:n0][req].astype(np.int64)
        sent = packets["t"][:n0][req] if "t" in packets else np.zeros(int(req.sum()))
        back = np.array([ping_rtt.get(int(q), (0.0, np.nan))[1] for q in seqs],
                        dtype=np.float64)
        ping = {"seq": seqs, "sent": sent, "back": back}
        return cls(config, duration, n0, packets, cpu, rec_arrays, counters, profile, ping,
                   extra)

    # -- checks ---------------------------------------------------------------
    def lighten(self) -> "Result":
        """Drop the per-packet columns (about 8 bytes per packet: 160 MB for the
        35-second flood) and keep only what the summary, the counters, the
        samples and the figures read.  For notebooks that keep many long runs
        alive; afterwards ``packets`` is empty and ``outcome_counts`` answers
        from a copy made here.  Returns the result itself."""
        self._oc = {True: self.outcome_counts(True), False: self.outcome_counts(False)}
        self.packets = {k: np.empty(0, dtype=v.dtype) for k, v in self.packets.items()}
        return self

    def outcome_counts(self, offered_only: bool = True) -> dict:
        """Packets per outcome name."""
        cached = getattr(self, "_oc", None)
        if cached is not None:
            return dict(cached[bool(offered_only)])
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
        }
        # packets born in the run (hosts' replies and sends, a socket's segments):
        # the keys above count the offered trace only, so a run driven by hosts
        # (story 3's NFS client, story 4's TCP) says what it carried here
        ob = self.outcome_counts(False)
        born = sum(ob.values()) - self.offered
        s.update({
            "born_packets": born,
            "born_forwarded_packets": ob["forwarded"] - oc["forwarded"],
            "born_local_packets": ob["local"] - oc["local"],
            "born_dropped_packets": born - (ob["forwarded"] - oc["forwarded"])
                                    - (ob["local"] - oc["local"]),
            "cpu_softirq_pct": round(100.0 * float(soft.mean()), 2),
            "cpu_softirq_pct_max_cpu": round(100.0 * float(soft.mean(axis=1).max()), 2),
            "cpu_irq_pct": round(100.0 * float(irq.mean()), 2),
            "cpu_busy_pct": round(100.0 * float((soft + irq).mean()), 2),
        })
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
        if self.config.user_task:
            s["user_max_delay_s"] = round(self.user_max_delay(), 6)
            if sched is not None and "loop_user_s" in sched and self.duration > 0:
                # the loop's own time in user mode, and the scheduler's switches
                s["user_ran_pct"] = round(100.0 * sum(sched["loop_user_s"])
                                          / (len(sched["loop_user_s"]) * self.duration), 3)
                s["sched_switches"] = int(sum(self.counters["softnet"]["ctxsw"]))
                worst: dict = {}
                for tasks in sched.get("tasks", []):
                    for t in tasks:
                        name = t["name"].split("/")[0]
                        worst[name] = max(worst.get(name, 0.0), t["worst_wait_s"])
                for name, w in worst.items():
                    s[f"worst_wait_ms_{name}"] = round(w * 1e3, 1)
        rows = self.counters.get("rt_cache_stat")
        if rows is not None:
            tot = np.asarray(rows).sum(axis=0)
            from ..ipv4.route import STAT_FIELDS
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
        neigh = self.counters.get("neigh")
        if neigh is not None:
            ne = self.cache.get("neigh_entries")
            s["neigh_entries_max"] = int(ne.max()) if ne is not None and ne.size else 0
            s["neigh_incomplete_max"] = int(self.cache["neigh_incomplete"].max()) \
                if self.cache["neigh_incomplete"].size else 0
            s["neigh_forced_gc"] = int(neigh["forced_gc_runs"])
            s["neigh_table_overflow"] = int(neigh["table_overflows"])
            s["arp_requests"] = int(neigh["arp_req_bcast"] + neigh["arp_req_ucast"])
            s["arp_queue_drops"] = int(neigh["unres_discards"])
            s["icmp_host_unreach"] = int(self.counters["icmp"].get("HostUnreachs", 0))
        s.update(self.extra.get("scenario_summary", {}))   # the scenario's own figures
        return s


    def user_max_delay(self) -> float:
        """The gettimeofday loop's worst delay: the longest time between two
        of its stretches in user mode, on any CPU (softirq work on top of it,
        ksoftirqd and other tasks all keep it from running).

        Without the scheduler's record (a run made without a user task), the
        longest stretch any CPU spent in softirq work without a break.
        """
        gaps = self.counters.get("sched", {}).get("loop_gap_s")
        if gaps:
            return float(max(gaps))
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
