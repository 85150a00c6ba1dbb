"""Notebook 01 (worm scans thrash the route cache): figures, explorer, calibration table.

Everything the notebook shows about story 1 is built here, so the notebook
stays a sequence of short cells and ``benchmarks/bench_sliders.py`` can drive
the very same explorer headlessly.

The reported figures (:data:`REPORT`) are Wolfgang Walter's, from his thread
on linux-net (early 2004) as summarised in the project brief; the model's
figures next to them come from :func:`routelab.scenarios.worm.run`.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from ..ipv4.route import gc_scan_cost
from ..result import Result
from ..scenarios import worm
from .plots import (
    CACHE_SERIES,
    OKABE_ITO,
    BlitRenderer,
    LiveFigure,
    fit_title,
    new_figure,
    nice_ceiling,
    ping_series,
)
from .widgets import Explorer, control_for

__all__ = [
    "REPORT",
    "CalibrationRow",
    "WormFigure",
    "calibration_rows",
    "calibration_table",
    "worm_conditions",
    "worm_explorer",
    "worm_figure",
    "worm_readout",
    "Sweep",
    "scan_sweep",
    "sweep_figure",
    "gc_pass_seconds",
    "gc_passes",
    "knob_trials",
    "trials_table",
    "dst_gc_work",
    "queue_trials",
]

#: What Walter reported (stories.md s1, the figures marked "calibrate").
REPORT = {
    "no_worm": "ping about 1 ms",
    "worm": "ping 100-160 ms; CPU 80-90 %, ~all in ksoftirqd",
    "k20": "ping 1-2 ms",
}

CPU_BIN_S = 0.1   # the CPU panel averages the model's 10 ms bins over 100 ms


# -- the three-panel figure -------------------------------------------------------------

def _rebin(x: np.ndarray, k: int) -> np.ndarray:
    n = (x.size // k) * k
    return x[:n].reshape(-1, k).mean(axis=1) if n else x[:0]


class WormFigure(LiveFigure):
    """Ping RTT, route-cache size and CPU split over time, updated in place.

    Top: every echo request's round-trip time (lost ones as crosses on the
    top edge).  Middle: dst entries (what ``gc_thresh``/``max_size`` are
    compared with), the entries hashed in the cache, those unhashed but
    waiting for an RCU grace period (2.6), and the dst garbage list, with
    ``gc_thresh`` and ``max_size`` as horizontal lines.  Bottom:
    the CPU's time split into softirq, hard IRQ and idle, per 100 ms.
    """

    def __init__(self, duration: float = 10.0, size: tuple[float, float] = (8.6, 6.4)) -> None:
        fig, axes = new_figure(3, 1, size=size, layout=None, sharex=True,
                               gridspec_kw=dict(left=0.09, right=0.74, bottom=0.08, top=0.865,
                                                hspace=0.32))
        self.fig = fig
        self.ax_rtt, self.ax_c, self.ax_cpu = axes
        a = self.ax_rtt
        a.set_title("Ping through the router (every 100 ms)")
        a.set_ylabel("round-trip\ntime [ms]")
        (self.rtt,) = a.plot([], [], "o-", color=OKABE_ITO["blue"], markersize=2.5,
                             linewidth=0.8, label="reply")
        (self.lost,) = a.plot([], [], "x", color=OKABE_ITO["vermillion"], markersize=5,
                              linestyle="none", label="lost", clip_on=False)
        a.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        c = self.ax_c
        c.set_title("Route cache and dst cache")
        c.set_ylabel("entries")
        (self.entries,) = c.plot([], [], **CACHE_SERIES["entries"])
        (self.hashed,) = c.plot([], [], **CACHE_SERIES["hashed"])
        (self.rcu,) = c.plot([], [], **CACHE_SERIES["rcu"])
        (self.garbage,) = c.plot([], [], **CACHE_SERIES["garbage"])
        self.thresh = c.axhline(0, color=OKABE_ITO["black"], linewidth=0.8, linestyle="-.",
                                label="gc_thresh")
        self.maxsize = c.axhline(0, color=OKABE_ITO["vermillion"], linewidth=1.0,
                                 linestyle="-", label="max_size")
        c.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        self.limits = c.text(0.99, 0.93, "", transform=c.transAxes, ha="right", va="top",
                             fontsize=8, color=OKABE_ITO["black"])
        u = self.ax_cpu
        u.set_title("Router CPU (per 100 ms)")
        u.set_ylabel("share of\nCPU time [%]")
        u.set_xlabel("time [s]")
        u.set_ylim(0, 100)
        self._fills: list = []
        self._cpu_labels = [("softirq +\nksoftirqd", OKABE_ITO["orange"]),
                            ("hard IRQ", OKABE_ITO["sky_blue"]),
                            ("idle", "#eeeeee")]
        from matplotlib.patches import Patch
        u.legend(handles=[Patch(color=col, label=lab) for lab, col in self._cpu_labels],
                 loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        u.set_xlim(0, duration)
        # three bands (softirq, hard IRQ, idle), reshaped on every update
        self._fills = [u.fill_between([0, 1], [0, 0], [0, 0], color=col, linewidth=0)
                       for _, col in self._cpu_labels]
        self.title = fig.suptitle(" ")
        self._alt = ""
        dynamic = [self.rtt, self.lost, self.entries, self.hashed, self.rcu, self.garbage,
                   self.thresh, self.maxsize, self.limits, *self._fills, self.title]
        self._blit = BlitRenderer(fig, dynamic)

    def update(self, res: Result, conditions: str = "") -> None:
        """Redraw from a :func:`routelab.scenarios.worm.run` result."""
        sent, rtt = ping_series(res)
        ok = np.isfinite(rtt)
        self.rtt.set_data(sent[ok], rtt[ok])
        top = float(np.max(rtt[ok])) if ok.any() else 1.0
        ymax = nice_ceiling(top * 1.25)
        self.lost.set_data(sent[~ok], np.full(int((~ok).sum()), ymax))
        self.ax_rtt.set_ylim(0, ymax)
        t = res.cache["t"]
        ent, hsh, gar = res.cache["entries"], res.cache["hashed"], res.cache["garbage"]
        self.entries.set_data(t, ent)
        self.hashed.set_data(t, hsh)
        self.garbage.set_data(t, gar)
        self.rcu.set_data(t, res.cache["rcu_pending"])
        d = res.counters.get("dst", {})
        gt, ms = d.get("gc_thresh", 0), d.get("max_size", 0)
        self.thresh.set_ydata([gt, gt])
        self.maxsize.set_ydata([ms, ms])
        gmi = res.extra.get("knobs", {}).get("gc_min_interval")
        self.limits.set_text(f"gc_thresh {gt:,} · max_size {ms:,} · "
                             + (f"gc_min_interval {gmi:g} s · " if gmi is not None else "")
                             + f"{d.get('buckets', 0):,} buckets")
        peak = max([1.0, *(float(x.max()) for x in (ent, gar) if x.size)])
        # show max_size when it is within reach; otherwise the text gives its value
        self.ax_c.set_ylim(0, nice_ceiling(max(peak, gt) * 1.3 if ms > 4 * max(peak, gt)
                                           else ms * 1.1, floor=10.0))
        k = max(1, int(round(CPU_BIN_S / res.cpu["bin_s"])))
        soft = _rebin(res.cpu["softirq"][0], k) * 100
        irq = _rebin(res.cpu["irq"][0], k) * 100
        width = res.cpu["bin_s"] * k
        x = np.repeat(np.arange(soft.size + 1) * width, 2)[1:-1]
        zero, full = np.zeros_like(x), np.full_like(x, 100.0)
        for coll, (lo, hi) in zip(self._fills, [(zero, np.repeat(soft, 2)),
                                                (np.repeat(soft, 2), np.repeat(soft + irq, 2)),
                                                (np.repeat(soft + irq, 2), full)], strict=True):
            coll.set_verts([np.column_stack([np.concatenate([x, x[::-1]]),
                                             np.concatenate([lo, hi[::-1]])])])
        for a in (self.ax_rtt, self.ax_c, self.ax_cpu):
            a.set_xlim(0, res.duration)
        # long conditions (a shaped uplink) take two lines rather than being clipped
        fit_title(self.title, conditions or worm_conditions(res.extra["knobs"]))
        self._alt = _alt_text(res, sent, rtt, soft, irq, conditions
                              or worm_conditions(res.extra["knobs"]))

    def _limit_axes(self) -> list:
        return [self.ax_rtt, self.ax_c, self.ax_cpu]


def _alt_text(res, sent, rtt, soft, irq, conditions) -> str:
    ok = np.isfinite(rtt)
    if ok.any():
        r = rtt[ok]
        ping = (f"Top: ping RTT median {np.median(r):.1f} ms, max {r.max():.1f} ms, "
                f"{int((~ok).sum())} of {rtt.size} pings lost.")
    else:
        ping = f"Top: every one of the {rtt.size} pings was lost."
    d = res.counters.get("dst", {})
    ent = res.cache["entries"]
    cache = (f"Middle: dst entries peak at {int(ent.max()) if ent.size else 0:,} "
             f"(gc_thresh {d.get('gc_thresh', 0):,}, max_size {d.get('max_size', 0):,}); "
             f"the dst garbage list peaks at "
             f"{int(res.cache['garbage'].max()) if res.cache['garbage'].size else 0:,}.")
    cpu = (f"Bottom: the CPU spends on average {soft.mean():.0f} % in softirq and "
           f"{irq.mean():.0f} % in hard interrupts.") if soft.size else ""
    return f"{conditions}. {ping} {cache} {cpu}"


def worm_conditions(knobs: dict) -> str:
    """A figure title naming the conditions of a worm run."""
    text = (f"{knobs['cpu']}, kernel {knobs['kernel']}: {knobs['worm_hosts']} worm host"
            f"{'s' if knobs['worm_hosts'] != 1 else ''} x {knobs['scan_pps']:,.0f} probes/s, "
            f"{knobs['background_mbps']:g} Mbit/s background")
    if knobs.get("uplink_mbps", 100.0) < 100.0:
        text += f", uplink {knobs['uplink_mbps']:g} Mbit/s (txqueuelen {knobs['txqueuelen']})"
    return text


def worm_figure(res: Result) -> WormFigure:
    """The three-panel figure for one run (for :func:`routelab.notebook.show`)."""
    f = WormFigure(duration=res.duration)
    f.update(res)
    return f


def worm_readout(res: Result) -> str:
    """The explorer's one-line readout (HTML)."""
    s = res.summary()
    k = res.extra["knobs"]
    if np.isfinite(s["ping_rtt_ms_p50"]):
        ping = (f"ping p50 <b>{s['ping_rtt_ms_p50']:.1f} ms</b>, "
                f"p95 {s['ping_rtt_ms_p95']:.1f} ms, loss {s['ping_loss_pct']:.0f} %")
    else:
        ping = "<b>no ping replies</b>"
    return (f"<b>{html.escape(k['cpu'])}</b>, {html.escape(k['kernel'])}, "
            f"{k['worm_hosts']} x {k['scan_pps']:,.0f} probes/s | {ping} | CPU "
            f"<b>{s['cpu_busy_pct']:.0f} %</b> busy ({s['cpu_softirq_pct']:.0f} % softirq; "
            f"top: ksoftirqd {s['cpu_ksoftirqd_pct']:.0f} %) | "
            f"entries max {s['route_cache_entries_max']:,} (gc_thresh {k['gc_thresh']:,}, "
            f"max_size {k['max_size']:,}) | GC {s['gc_total']:,} calls, "
            f"{s['gc_ignored']:,} skipped (gc_min_interval {k['gc_min_interval']:g} s) | "
            f"overflows {s['gc_dst_overflow']:,} | garbage max {s['dst_garbage_max']:,}")


def worm_explorer(*, duration: float = 1.5, seed: int = 1, dpi: int = 64, **start) -> Explorer:
    """Notebook 01's explorer: the worm scenario with its main knobs.

    Controls: worm hosts, scan rate, CPU, kernel, ``gc_thresh``,
    ``max_size``, ``gc_min_interval``.  Each change re-runs
    :func:`routelab.scenarios.worm.run` for ``duration`` simulated seconds
    and redraws the three panels.  The cache sliders start at the kernel's
    defaults for the scenario's 256 MB (2048 buckets): 2048, 32768, 0.5 s.
    """
    K = worm.KNOBS
    controls = [
        control_for(K["worm_hosts"], description="worm hosts", max=30,
                    value=start.get("worm_hosts")),
        control_for(K["scan_pps"], description="probes/s per host", min=100.0, max=10_000.0,
                    step=100.0, value=start.get("scan_pps")),
        control_for(K["cpu"], description="CPU", value=start.get("cpu")),
        control_for(K["kernel"], description="kernel", value=start.get("kernel")),
        control_for(K["gc_thresh"], description="gc_thresh", min=64, max=16_384, step=64,
                    value=start.get("gc_thresh", 2048)),
        control_for(K["max_size"], description="max_size", min=256, max=65_536, step=256,
                    value=start.get("max_size", 32_768)),
        control_for(K["gc_min_interval"], description="gc_min_interval", min=0.0, max=5.0,
                    step=0.1, value=start.get("gc_min_interval", 0.5)),
    ]
    fig = WormFigure(duration=duration)

    def update(**values) -> tuple[str, str]:
        res = worm.run(seed=seed, duration=duration, **values)
        fig.update(res)
        return worm_readout(res), fig.alt

    return Explorer(controls, update, fig.fig, dpi=dpi, render=lambda: fig.render_png(dpi),
                    title="Explorer: worm scans through a residence router")


# -- calibration: report vs model ---------------------------------------------------------

@dataclass
class CalibrationRow:
    """One calibration case: what was reported and what the model gives."""

    case: str
    knobs: dict
    report: str
    summary: dict

    def model_text(self) -> str:
        s = self.summary
        return (f"ping p50 {s['ping_rtt_ms_p50']:.1f} ms (p95 {s['ping_rtt_ms_p95']:.1f}, "
                f"loss {s['ping_loss_pct']:.0f} %); CPU {s['cpu_busy_pct']:.0f} % busy = "
                f"{s['cpu_softirq_pct']:.0f} % softirq + {s['cpu_irq_pct']:.0f} % IRQ; "
                f"top: ksoftirqd {s['cpu_ksoftirqd_pct']:.0f} %")


CALIBRATION_CASES = [
    ("2.4.24, no worm hosts", dict(worm_hosts=0), REPORT["no_worm"]),
    ("2.4.24, 2 worm hosts", dict(worm_hosts=2), REPORT["worm"]),
    ("2.4.24, 3 worm hosts", dict(worm_hosts=3), REPORT["worm"]),
    ("2.0, 3 worm hosts", dict(worm_hosts=3, kernel="2.0"), REPORT["k20"]),
]


def calibration_rows(duration: float = 10.0, seed: int = 1) -> list[CalibrationRow]:
    """Run the calibration cases of stories.md s1 (K6-200, kernel defaults)."""
    rows = []
    for case, knobs, report in CALIBRATION_CASES:
        res = worm.run(seed=seed, duration=duration, **knobs)
        rows.append(CalibrationRow(case, knobs, report, res.summary()))
    return rows


def calibration_table(rows: list[CalibrationRow]) -> str:
    """Report and model side by side, as plain text."""
    w = max(len(r.case) for r in rows)
    head = "reported (Walter, linux-net 2004)"
    wr = max(len(head), *(len(r.report) for r in rows))
    lines = [f"{'case':<{w}}  {head:<{wr}}  model",
             f"{'-' * w}  {'-' * wr}  {'-' * 5}"]
    for r in rows:
        lines.append(f"{r.case:<{w}}  {r.report:<{wr}}  {r.model_text()}")
    return "\n".join(lines)


# -- experiments the notebook runs --------------------------------------------------------

@dataclass
class Sweep:
    """Ping and CPU against the total probe rate (one run per rate)."""

    hosts: int
    rates: np.ndarray          # probes/s per host
    total_pps: np.ndarray      # probes/s from all hosts
    p50: np.ndarray            # ping RTT median [ms]
    p95: np.ndarray            # ping RTT 95th percentile [ms]
    loss: np.ndarray           # ping loss [%]
    busy: np.ndarray           # CPU busy [%]
    softirq: np.ndarray        # CPU in softirq [%]
    knobs: dict


def scan_sweep(rates, *, hosts: int = 3, duration: float = 5.0, seed: int = 1,
               **knobs) -> Sweep:
    """Run the worm scenario once per scan rate (probes/s per host)."""
    rates = np.asarray(list(rates), dtype=float)
    cols = {k: [] for k in ("p50", "p95", "loss", "busy", "softirq")}
    for r in rates:
        s = worm.run(seed=seed, duration=duration, worm_hosts=hosts, scan_pps=float(r),
                     **knobs).summary()
        cols["p50"].append(s["ping_rtt_ms_p50"])
        cols["p95"].append(s["ping_rtt_ms_p95"])
        cols["loss"].append(s["ping_loss_pct"])
        cols["busy"].append(s["cpu_busy_pct"])
        cols["softirq"].append(s["cpu_softirq_pct"])
    return Sweep(hosts, rates, rates * hosts, *(np.asarray(cols[k]) for k in cols),
                 knobs=dict(knobs))


def sweep_figure(sw: Sweep):
    """Ping RTT and CPU load against the probe rate; returns ``(fig, alt)``."""
    fig, (a, b) = new_figure(1, 2, size=(8.6, 3.2))
    a.plot(sw.total_pps, sw.p50, "o-", color=OKABE_ITO["blue"], label="median")
    a.plot(sw.total_pps, sw.p95, "s--", color=OKABE_ITO["orange"], label="95th percentile")
    a.set_xlabel("probes per second, all worm hosts")
    a.set_ylabel("ping round-trip time [ms]")
    a.set_title("Ping through the router")
    a.legend(loc="upper left")
    b.plot(sw.total_pps, sw.busy, "o-", color=OKABE_ITO["vermillion"], label="busy (all)")
    b.plot(sw.total_pps, sw.softirq, "^--", color=OKABE_ITO["orange"], label="softirq")
    b.set_ylim(0, 105)
    b.set_xlabel("probes per second, all worm hosts")
    b.set_ylabel("CPU time [%]")
    b.set_title("Router CPU")
    b.legend(loc="upper left")
    k = sw.knobs
    fig.suptitle(f"{k.get('cpu', 'k6-200')}, kernel {k.get('kernel', '2.4.24')}: "
                 f"{sw.hosts} worm hosts, scan rate swept")
    knee = int(np.argmax(sw.busy >= 99.0)) if (sw.busy >= 99.0).any() else None
    alt = (f"Two panels against the total probe rate from {sw.total_pps.min():,.0f} to "
           f"{sw.total_pps.max():,.0f} probes/s. Left: the median ping stays near "
           f"{sw.p50[0]:.1f} ms")
    if knee is not None:
        alt += (f" until about {sw.total_pps[knee]:,.0f} probes/s, then jumps to "
                f"{sw.p50[knee:].max():.0f} ms. Right: CPU load grows in a straight line "
                f"and reaches 100 % at the same rate.")
    else:
        alt += (f" up to {sw.p50.max():.1f} ms. Right: CPU load grows in a straight line up "
                f"to {sw.busy.max():.0f} %.")
    alt += (f" The softirq share peaks at {sw.softirq.max():.0f} % and is "
            f"{sw.softirq[-1]:.0f} % at the highest rate.")
    return fig, alt


def gc_pass_seconds(res: Result) -> list[float]:
    """CPU seconds of each GC pass that really ran (entry cost plus the walk, without frees)."""
    cost = res.config.costs.fn
    return [cost["rt_garbage_collect"] + gc_scan_cost(cost, b, e)
            for (_t, _cpu, _what, b, e, _freed) in res.extra.get("gc_log", [])]


def gc_passes(res: Result) -> str:
    """The GC passes that really ran (not skipped): when, how far they walked, what they freed."""
    log = res.extra.get("gc_log", [])
    if not log:
        return "no GC pass ran (every call was skipped, or the cache never passed gc_thresh)"
    lines = [f"{'time [s]':>9} {'outcome':>8} {'buckets':>8} {'entries':>8} {'freed':>6} "
             f"{'CPU [ms]':>9}"]
    for (t, _cpu, what, b, e, freed), secs in zip(log[:12], gc_pass_seconds(res), strict=False):
        lines.append(f"{t:9.3f} {what:>8} {b:8d} {e:8d} {freed:6d} {secs * 1e3:9.2f}")
    if len(log) > 12:
        lines.append(f"... {len(log) - 12} more passes")
    return "\n".join(lines)


def knob_trials(trials: list[tuple[str, dict]], *, duration: float = 10.0,
                seed: int = 1) -> list[tuple[str, dict]]:
    """Run the worm scenario for each ``(label, knobs)``; return ``(label, summary)`` pairs."""
    return [(label, worm.run(seed=seed, duration=duration, **kn).summary())
            for label, kn in trials]


def trials_table(rows: list[tuple[str, dict]]) -> str:
    """Key numbers of :func:`knob_trials` as a text table."""
    w = max(len(lb) for lb, _ in rows)
    head = (f"{'setting':<{w}} {'ping p50':>9} {'p95':>7} {'loss':>5} {'CPU':>5} "
            f"{'entries':>8} {'GC runs':>8} {'overflow':>9} {'garbage':>8}")
    out = [head, "-" * len(head)]
    for lb, s in rows:
        p50 = f"{s['ping_rtt_ms_p50']:.1f}" if np.isfinite(s["ping_rtt_ms_p50"]) else "-"
        p95 = f"{s['ping_rtt_ms_p95']:.1f}" if np.isfinite(s["ping_rtt_ms_p95"]) else "-"
        out.append(f"{lb:<{w}} {p50:>9} {p95:>7} {s['ping_loss_pct']:>4.0f}% "
                   f"{s['cpu_busy_pct']:>4.0f}% {s['route_cache_entries_max']:>8,} "
                   f"{s['gc_total'] - s['gc_ignored']:>8,} {s['gc_dst_overflow']:>9,} "
                   f"{s['dst_garbage_max']:>8,}")
    out.append("(ping in ms; CPU = busy share; GC runs = calls not skipped by gc_min_interval)")
    return "\n".join(out)


def dst_gc_work(res: Result) -> dict:
    """What ``dst_run_gc`` did in a run: runs, garbage-list entries examined, CPU seconds."""
    log = res.extra.get("dst_gc_log", [])
    c = res.config.costs.fn
    walked = sum(w for _, w, _ in log)
    return {"runs": len(log), "walked": walked,
            "cpu_s": sum(c["dst_run_gc"] + w * c["dst_gc_entry"] for _, w, _ in log),
            "garbage_max": res.summary()["dst_garbage_max"]}


def queue_trials(queues, *, uplink_mbps: float = 6.0, worm_hosts: int = 1,
                 kernel: str = "2.4.24-nocache", duration: float = 10.0, seed: int = 1) -> str:
    """The no-cache kernel behind a slow uplink, for several qdisc lengths: a text table."""
    head = (f"{'txqueuelen':>10} {'garbage max':>12} {'dst_run_gc runs':>16} "
            f"{'entries walked/s':>17} {'dst GC CPU':>11} {'ping p50':>9}")
    out = [head, "-" * len(head)]
    for q in queues:
        res = worm.run(kernel=kernel, worm_hosts=worm_hosts, uplink_mbps=uplink_mbps,
                       txqueuelen=int(q), duration=duration, seed=seed)
        w = dst_gc_work(res)
        p50 = res.summary()["ping_rtt_ms_p50"]
        out.append(f"{q:>10,} {w['garbage_max']:>12,} {w['runs']:>16,} "
                   f"{w['walked'] / duration:>17,.0f} {100 * w['cpu_s'] / duration:>10.2f}% "
                   f"{p50:>8.0f} ms")
    out.append(f"({kernel}, {worm_hosts} worm host, uplink {uplink_mbps:g} Mbit/s; "
               "CPU as a share of the K6's time)")
    return "\n".join(out)
