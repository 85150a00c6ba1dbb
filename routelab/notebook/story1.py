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
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.skbuff import KIND
from ..result import Result
from ..result.profile import LEDGER_ROWS
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
    "sweep_table",
    "gc_pass_seconds",
    "gc_seconds",
    "gc_passes",
    "knob_trials",
    "trials_table",
    "dst_gc_work",
    "queue_trials",
    "ArpWalk",
    "FATES",
    "cpu_busy_per_cpu",
    "arp_walkthrough",
    "arp_walk_figure",
    "arp_walk_table",
    "probe_rate",
    "STAND_IN",
    "calibration_gap",
    "load_bands",
    "thresh3_table",
    "knob_bands_table",
]

#: What Walter reported (stories.md s1, the figures marked "calibrate").
REPORT = {
    "no_worm": "ping about 1 ms",
    "worm": "ping 100-160 ms; CPU 80-90 %, ~all in ksoftirqd",
    "k20": "ping 1-2 ms",
}

CPU_BIN_S = 0.1   # the CPU panel averages the model's 10 ms bins over 100 ms

#: The load at which the model's router looks like Walter's (about 100 ms pings,
#: CPU saturated in ksoftirqd): the three sourced-rate worm hosts plus a dozen
#: Welchia scanners outside sweeping the residence's block.  NOT a calibration:
#: the report has no outside scanning rate (docs/calibration-story1.md).
STAND_IN = {"outside_welchia": 12}


def probe_rate(res: Result) -> float:
    """Worm probes per second the run offered (inside and outside scanners)."""
    kind = res.packets["kind"][: res.offered]
    return float(np.count_nonzero(kind == KIND["worm"])) / res.duration


# -- the three-panel figure -------------------------------------------------------------

def _rebin(x: np.ndarray, k: int) -> np.ndarray:
    n = (x.size // k) * k
    return x[:n].reshape(-1, k).mean(axis=1) if n else x[:0]


class WormFigure(LiveFigure):
    """Ping RTT, route-cache size and CPU split over time, updated in place.

    Top: every echo request's round-trip time (lost ones as crosses on the
    top edge).  Second: dst entries (what ``gc_thresh``/``max_size`` are
    compared with), the entries hashed in the cache, those unhashed but
    waiting for an RCU grace period (2.6), and the dst garbage list, with
    ``gc_thresh`` and ``max_size`` as horizontal lines.  Third: the
    neighbour (ARP) table's entries and those still INCOMPLETE, with
    ``gc_thresh3``.  Bottom: the CPU's time split into softirq, hard IRQ
    and idle, per 100 ms.
    """

    def __init__(self, duration: float = 10.0, size: tuple[float, float] = (8.6, 8.0)) -> None:
        fig, axes = new_figure(4, 1, size=size, layout=None, sharex=True,
                               gridspec_kw=dict(left=0.09, right=0.74, bottom=0.065, top=0.89,
                                                hspace=0.36))
        self.fig = fig
        self.ax_rtt, self.ax_c, self.ax_n, self.ax_cpu = axes
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
                                 linestyle="-", label="max_size\n(when in range)")
        c.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        self.limits = c.text(0.99, 0.93, "", transform=c.transAxes, ha="right", va="top",
                             fontsize=8, color=OKABE_ITO["black"])
        n = self.ax_n
        n.set_title("Neighbour (ARP) table")
        n.set_ylabel("entries")
        (self.neigh,) = n.plot([], [], color=OKABE_ITO["blue"], linewidth=1.4,
                               label="neighbours")
        (self.incomplete,) = n.plot([], [], color=OKABE_ITO["reddish_purple"], linewidth=1.0,
                                    linestyle="--", label="INCOMPLETE")
        self.thresh3 = n.axhline(0, color=OKABE_ITO["black"], linewidth=0.8, linestyle="-.",
                                 label="gc_thresh3")
        n.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        self.neigh_text = n.text(0.99, 0.93, "", transform=n.transAxes, ha="right", va="top",
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
                   self.thresh, self.maxsize, self.limits, self.neigh, self.incomplete,
                   self.thresh3, self.neigh_text, *self._fills, self.title]
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
        self.ax_cpu.set_xlim(0, res.duration)      # shared by all four panels
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
        ne, ni = res.cache["neigh_entries"], res.cache["neigh_incomplete"]
        self.neigh.set_data(t, ne)
        self.incomplete.set_data(t, ni)
        nc = res.counters.get("neigh", {})
        kn = res.extra.get("knobs", {})
        th3 = kn.get("neigh_gc_thresh3") or 1024
        if nc:
            self.thresh3.set_ydata([th3, th3])
            self.neigh_text.set_text(f"forced GC walks {nc.get('forced_gc_runs', 0):,} · "
                                     f"table full {nc.get('table_overflows', 0):,} · "
                                     f"ARP requests {nc.get('arp_req_bcast', 0):,}")
            self.ax_n.set_ylim(0, nice_ceiling(max(th3, float(ne.max()) if ne.size else 0)
                                               * 1.15, floor=10.0))
        else:
            self.thresh3.set_ydata([0, 0])
            self.neigh_text.set_text("no neighbour table in this kernel's model")
            self.ax_n.set_ylim(0, 10)
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
        for a in (self.ax_rtt, self.ax_c, self.ax_n, self.ax_cpu):
            a.set_xlim(0, res.duration)
        # long conditions (a shaped uplink) take two lines rather than being clipped
        fit_title(self.title, conditions or worm_conditions(res.extra["knobs"]))
        self._alt = _alt_text(res, sent, rtt, soft, irq, conditions
                              or worm_conditions(res.extra["knobs"]))

    def _limit_axes(self) -> list:
        return [self.ax_rtt, self.ax_c, self.ax_n, self.ax_cpu]


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
    ne = res.cache["neigh_entries"]
    nc = res.counters.get("neigh", {})
    if nc:
        neigh = (f"Third: the neighbour table peaks at {int(ne.max()) if ne.size else 0:,} "
                 f"entries, with {nc.get('forced_gc_runs', 0):,} forced GC walks and "
                 f"{nc.get('table_overflows', 0):,} packets dropped because it was full.")
    else:
        neigh = "Third: this kernel's model has no neighbour table."
    cpu = (f"Bottom: the CPU spends on average {soft.mean():.0f} % in softirq and "
           f"{irq.mean():.0f} % in hard interrupts.") if soft.size else ""
    return f"{conditions}. {ping} {cache} {neigh} {cpu}"


def worm_conditions(knobs: dict) -> str:
    """A figure title naming the conditions of a worm run."""
    text = (f"{knobs['cpu']}, kernel {knobs['kernel']}: {_worms_text(knobs)}, "
            f"{knobs['background_mbps']:g} Mbit/s background")
    if knobs.get("uplink_mbps", 100.0) < 100.0:
        text += f", uplink {knobs['uplink_mbps']:g} Mbit/s (txqueuelen {knobs['txqueuelen']})"
    return text


def _worms_text(k: dict) -> str:
    h, kind = k["worm_hosts"], k["worm_kind"]
    if h and kind == "mixed":      # alternately, Welchia first (worm.py)
        w, b = (h + 1) // 2, h // 2
        text = (f"{w} Welchia + {b} Blaster worm hosts" if b else
                f"{w} Welchia worm host{'s' if w != 1 else ''}")
    else:
        name = kind.capitalize()
        text = f"{h} {name} worm host{'s' if h != 1 else ''}" if h else "no worm hosts"
    if h and kind != "blaster" and k.get("welchia_pps", 140.0) != 140.0:
        text += f" (Welchia at {k['welchia_pps']:g}/s)"
    if k.get("outside_welchia"):
        text += f" + {k['outside_welchia']} outside"
    return text


def worm_figure(res: Result) -> WormFigure:
    """The three-panel figure for one run (for :func:`routelab.notebook.show`)."""
    f = WormFigure(duration=res.duration)
    f.update(res)
    return f


def worm_readout(res: Result) -> str:
    """The explorer's one-line readout (HTML).

    The ping median is the median *of the replies* (with most pings lost it
    rests on a few survivors); on a multi-CPU profile the CPU figure is given
    per CPU, since one CPU can be saturated while the average looks half idle.
    """
    s = res.summary()
    k = res.extra["knobs"]
    if np.isfinite(s["ping_rtt_ms_p50"]):
        ping = (f"ping p50 of the replies <b>{s['ping_rtt_ms_p50']:.1f} ms</b>, "
                f"p95 {s['ping_rtt_ms_p95']:.1f} ms, loss <b>{s['ping_loss_pct']:.0f} %</b>")
    else:
        ping = "<b>no ping replies</b>"
    nc = res.counters.get("neigh", {})
    neigh = (f"neighbours max {s.get('neigh_entries_max', 0):,}, forced GC "
             f"{nc.get('forced_gc_runs', 0):,}, table full {nc.get('table_overflows', 0):,} | "
             if nc else "")
    per_cpu = cpu_busy_per_cpu(res)
    if per_cpu.size > 1:
        cpu = ("CPUs <b>" + " / ".join(f"{b:.0f} %" for b in per_cpu) + "</b> busy "
               f"(per CPU, {per_cpu.size} CPUs; softirq {s['cpu_softirq_pct']:.0f} % on average; "
               f"top: ksoftirqd {s['cpu_ksoftirqd_pct']:.0f} %)")
    else:
        cpu = (f"CPU <b>{s['cpu_busy_pct']:.0f} %</b> busy ({s['cpu_softirq_pct']:.0f} % "
               f"softirq; top: ksoftirqd {s['cpu_ksoftirqd_pct']:.0f} %)")
    small = (" – below gc_thresh: as in the kernel, dst_alloc looks at max_size only once the "
             "entries pass gc_thresh, so the cache still grows to gc_thresh"
             if k["max_size"] < k["gc_thresh"] else "")
    return (f"<b>{html.escape(k['cpu'])}</b>, {html.escape(k['kernel'])}, "
            f"{html.escape(_worms_text(k))}: {probe_rate(res):,.0f} probes/s reach the router | "
            f"{ping} | {cpu} | "
            f"entries max {s['route_cache_entries_max']:,} (gc_thresh {k['gc_thresh']:,}, "
            f"max_size {k['max_size']:,}{small}) | {neigh}GC {s['gc_total']:,} calls, "
            f"{s['gc_ignored']:,} skipped (gc_min_interval {k['gc_min_interval']:g} s) | "
            f"overflows {s['gc_dst_overflow']:,} | garbage max {s['dst_garbage_max']:,}")


def cpu_busy_per_cpu(res: Result) -> np.ndarray:
    """Busy share of each CPU over the run [%]: softirq and hard-IRQ work."""
    c = res.cpu
    if "softirq" not in c or np.ndim(c["softirq"]) != 2:
        return np.asarray([res.summary()["cpu_busy_pct"]])
    busy = np.asarray(c["softirq"], dtype=float) + np.asarray(c["irq"], dtype=float)
    return 100.0 * busy.mean(axis=1)


def worm_explorer(*, duration: float = 6.0, seed: int = 1, dpi: int = 100, **start) -> Explorer:
    """Notebook 01's explorer: the worm scenario with its main knobs.

    Controls: worm hosts and kind, Welchia's rate, scanners outside, what the
    router does with the unused part of the residence's /16, CPU, kernel,
    ``gc_thresh``, ``max_size``, ``gc_min_interval`` and the window.  Each
    change re-runs :func:`routelab.scenarios.worm.run` for the window's
    simulated seconds (``duration`` = 6 s by default: long enough for
    unanswered ARP to time out, 3 s, and the neighbour table to fill; up to
    12 s for slower effects such as the no-cache kernel's garbage list) and
    redraws the four panels.  The cache sliders start at
    the kernel's defaults for the scenario's 128 MB (1024 buckets): 1024,
    16384, 0.5 s.
    """
    K = worm.KNOBS
    controls = [
        control_for(K["worm_hosts"], description="worm hosts", max=30,
                    value=start.get("worm_hosts")),
        control_for(K["worm_kind"], description="worm", value=start.get("worm_kind")),
        control_for(K["welchia_pps"], description="Welchia echoes/s", min=10.0, max=1000.0,
                    step=10.0, value=start.get("welchia_pps")),
        control_for(K["outside_welchia"], description="scanners outside", max=50,
                    value=start.get("outside_welchia")),
        control_for(K["unused_space"], description="unused /16 space",
                    value=start.get("unused_space")),
        control_for(K["cpu"], description="CPU", value=start.get("cpu")),
        control_for(K["kernel"], description="kernel", value=start.get("kernel")),
        control_for(K["gc_thresh"], description="gc_thresh", min=64, max=16_384, step=64,
                    value=start.get("gc_thresh", 1024)),
        control_for(K["max_size"], description="max_size", min=256, max=65_536, step=256,
                    value=start.get("max_size", 16_384)),
        control_for(K["gc_min_interval"], description="gc_min_interval", min=0.0, max=5.0,
                    step=0.1, value=start.get("gc_min_interval", 0.5)),
        # (a shorter window than 3 s only for tests that want a quick run)
        control_for(K["duration"], description="window", min=min(3.0, duration),
                    max=max(12.0, duration), step=1.0, value=duration),
    ]
    fig = WormFigure(duration=duration)

    def update(**values) -> tuple[str, str]:
        res = worm.run(seed=seed, **values)
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


def calibration_rows(duration: float = 20.0, seed: int = 1) -> list[CalibrationRow]:
    """Run the calibration cases of stories.md s1 (K6-200, kernel defaults,
    the worms at their sourced rates)."""
    rows = []
    for case, knobs, report in CALIBRATION_CASES:
        res = worm.run(seed=seed, duration=duration, **knobs)
        s = dict(res.summary())
        s["probes_per_s"] = probe_rate(res)
        rows.append(CalibrationRow(case, knobs, report, s))
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


def calibration_gap(rows: list[CalibrationRow], *, reported_busy_pct: float = 85.0) -> dict:
    """By how much the model falls short in the three-host case.

    Returns the model's CPU share and probe rate with and without the worm
    hosts, the CPU time the model charges per probe, the time per probe the
    report implies (the extra CPU Walter saw, ``reported_busy_pct`` minus the
    model's worm-free load, divided by the same probe rate), and their ratio.
    """
    base = next(r for r in rows if r.knobs.get("worm_hosts") == 0).summary
    three = next(r for r in rows if r.knobs.get("worm_hosts") == 3
                 and r.knobs.get("kernel", "2.4.24") == "2.4.24").summary
    rate = three["probes_per_s"]
    model_ms = (three["cpu_busy_pct"] - base["cpu_busy_pct"]) / 100 / rate * 1e3
    needed_ms = (reported_busy_pct - base["cpu_busy_pct"]) / 100 / rate * 1e3
    return {"probes_per_s": rate, "busy_pct": three["cpu_busy_pct"],
            "base_busy_pct": base["cpu_busy_pct"], "model_ms_per_probe": model_ms,
            "needed_ms_per_probe": needed_ms, "factor": needed_ms / model_ms,
            "ping_ms": three["ping_rtt_ms_p50"]}


# -- experiments the notebook runs --------------------------------------------------------

@dataclass
class Sweep:
    """Ping and CPU against the measured probe rate (one run per knob value)."""

    knob: str                  # the knob swept
    values: np.ndarray         # its values
    total_pps: np.ndarray      # worm probes per second the runs offered (all scanners)
    p50: np.ndarray            # ping RTT median [ms]
    p95: np.ndarray            # ping RTT 95th percentile [ms]
    loss: np.ndarray           # ping loss [%]
    busy: np.ndarray           # CPU busy [%]
    softirq: np.ndarray        # CPU in softirq [%]
    ksoftirqd: np.ndarray      # CPU time with ksoftirqd current [%]
    knobs: dict

    @property
    def rates(self) -> np.ndarray:
        """Alias of :attr:`total_pps`."""
        return self.total_pps


def scan_sweep(values, *, knob: str = "outside_welchia", duration: float = 8.0, seed: int = 1,
               **knobs) -> Sweep:
    """Run the worm scenario once per value of ``knob`` (by default the number
    of Welchia scanners outside), the other knobs fixed; x is the probe rate
    each run really offered."""
    values = np.asarray(list(values))
    cols = {k: [] for k in ("total_pps", "p50", "p95", "loss", "busy", "softirq", "ksoftirqd")}
    for v in values:
        res = worm.run(seed=seed, duration=duration, **{**knobs, knob: v.item()})
        s = res.summary()
        cols["total_pps"].append(probe_rate(res))
        cols["p50"].append(s["ping_rtt_ms_p50"])
        cols["p95"].append(s["ping_rtt_ms_p95"])
        cols["loss"].append(s["ping_loss_pct"])
        cols["busy"].append(s["cpu_busy_pct"])
        cols["softirq"].append(s["cpu_softirq_pct"])
        cols["ksoftirqd"].append(s["cpu_ksoftirqd_pct"])
    return Sweep(knob, values, *(np.asarray(cols[k], dtype=float) for k in cols),
                 knobs=dict(knobs))


def sweep_table(sw: Sweep) -> str:
    """The numbers behind :func:`sweep_figure`, one row per run."""
    head = (f"{sw.knob:>16} {'probes/s':>9} {'ping p50':>9} {'p95':>7} {'loss':>5} "
            f"{'CPU':>5} {'ksoftirqd':>9}")
    out = [head, "-" * len(head)]
    for i in range(len(sw.values)):
        out.append(f"{sw.values[i]:>16g} {sw.total_pps[i]:>9,.0f} {sw.p50[i]:>9.1f} "
                   f"{sw.p95[i]:>7.1f} {sw.loss[i]:>4.0f}% {sw.busy[i]:>4.0f}% "
                   f"{sw.ksoftirqd[i]:>8.0f}%")
    out.append("(ping in ms; CPU = busy share; ksoftirqd = share with ksoftirqd current)")
    return "\n".join(out)


def sweep_figure(sw: Sweep, *, sourced_pps: float | None = None):
    """Ping RTT and CPU load against the probe rate; returns ``(fig, alt)``.

    The reported ranges (ping 100-160 ms, CPU 80-90 %) are shaded; a dotted
    line marks ``sourced_pps``, the probe rate of the worm hosts at their
    sourced rates, if given.
    """
    fig, (a, b) = new_figure(1, 2, size=(8.6, 3.4))
    x = sw.total_pps
    a.axhspan(100, 160, color=OKABE_ITO["yellow"], alpha=0.35, linewidth=0,
              label="reported 100-160 ms")
    a.plot(x, sw.p50, "o-", color=OKABE_ITO["blue"], label="median")
    a.plot(x, sw.p95, "s--", color=OKABE_ITO["orange"], label="95th percentile")
    a.set_yscale("log")
    a.set_ylim(0.5, 400)
    a.set_xlabel("worm probes per second (all scanners)")
    a.set_ylabel("ping round-trip time [ms]")
    a.set_title("Ping through the router")
    b.axhspan(80, 90, color=OKABE_ITO["yellow"], alpha=0.35, linewidth=0,
              label="reported 80-90 %")
    b.plot(x, sw.busy, "o-", color=OKABE_ITO["vermillion"], label="busy (all)")
    b.plot(x, sw.ksoftirqd, "^--", color=OKABE_ITO["orange"], label="ksoftirqd (as top)")
    b.set_ylim(0, 105)
    b.set_xlabel("worm probes per second (all scanners)")
    b.set_ylabel("CPU time [%]")
    b.set_title("Router CPU")
    for ax in (a, b):
        if sourced_pps is not None:
            ax.axvline(sourced_pps, color=OKABE_ITO["black"], linestyle=":", linewidth=1.0,
                       label="3 hosts, sourced rates")
        ax.legend(loc="upper left", fontsize=7.5)
    k = sw.knobs
    fig.suptitle(f"{k.get('cpu', 'k6-200')}, kernel {k.get('kernel', '2.4.24')}: "
                 f"{k.get('worm_hosts', 3)} worm hosts, {sw.knob} swept "
                 f"({sw.values.min():g}-{sw.values.max():g})")
    knee = int(np.argmax(sw.p50 > 5.0)) if (sw.p50 > 5.0).any() else None
    flat = sw.p50[:knee] if knee else sw.p50[:1]
    lo, hi = float(np.min(flat)), float(np.max(flat))
    stays = f"near {lo:.1f} ms" if hi - lo < 0.15 else f"between {lo:.1f} and {hi:.1f} ms"
    alt = (f"Two panels against the worm probe rate, {x.min():,.0f} to {x.max():,.0f} probes "
           f"per second. Left, on a logarithmic axis: the median ping stays {stays}")
    if knee is not None:
        alt += (f" up to about {x[knee - 1] if knee else x[0]:,.0f} probes/s, then jumps to "
                f"{sw.p50[knee]:.0f} ms at {x[knee]:,.0f} probes/s, where the CPU is "
                f"{sw.busy[knee]:.0f} % busy.")
    else:
        alt += f", and never passes {sw.p50.max():.1f} ms."
    alt += (f" Right: CPU load grows with the probe rate from {sw.busy[0]:.0f} % to "
            f"{sw.busy.max():.0f} %; ksoftirqd's share stays near zero until the CPU "
            f"saturates and reaches {sw.ksoftirqd.max():.0f} %. The reported ranges are "
            f"shaded.")
    if sourced_pps is not None:
        alt += (f" A dotted line marks the three worm hosts at their sourced rates, "
                f"{sourced_pps:,.0f} probes/s.")
    return fig, alt


def gc_pass_seconds(res: Result) -> list[float]:
    """CPU seconds of each GC pass that really ran, as the model charged it
    (entry cost, the walk and the frees: the last field of ``gc_log``)."""
    return [row[6] for row in res.extra.get("gc_log", [])]


def gc_seconds(res: Result) -> float:
    """CPU seconds of every ``rt_garbage_collect`` call of the run (the passes
    that ran and the calls ``gc_min_interval`` cut short): its profile row."""
    return res.profile.get(LEDGER_ROWS["rt_garbage_collect"], 0.0)


def gc_passes(res: Result) -> str:
    """The GC passes that really ran (not skipped): when, how far they walked, what they freed."""
    log = res.extra.get("gc_log", [])
    if not log:
        return "no GC pass ran (every call was skipped, or the cache never passed gc_thresh)"
    lines = [f"{'time [s]':>9} {'outcome':>8} {'buckets':>8} {'entries':>8} {'freed':>6} "
             f"{'CPU [ms]':>9}"]
    for t, _cpu, what, b, e, freed, secs in log[:12]:
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
    """What ``dst_run_gc`` did in a run: runs, garbage-list entries examined, CPU
    seconds (its profile row: the walks and the entries it destroyed)."""
    log = res.extra.get("dst_gc_log", [])
    walked = sum(w for _, w, _ in log)
    return {"runs": len(log), "walked": walked,
            "cpu_s": res.profile.get(LEDGER_ROWS["dst_run_gc"], 0.0),
            "garbage_max": res.summary()["dst_garbage_max"]}


def queue_trials(queues, *, uplink_mbps: float = 3.0, worm_hosts: int = 1,
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


# -- one packet to an on-link address nobody has: the neighbour layer step by step ----------

#: What happened to a probe, for students (the model's outcome codes are in dropreason.py).
FATES = {
    "drop_arp_queue": "pushed out of the full queue",
    "drop_neigh_failed": "dropped with an ICMP host unreachable when the entry failed",
    "drop_neigh_overflow": "dropped: neighbour table full",
    "held_neigh": "still queued when the run ended",
    "tx": "sent",
}


@dataclass
class ArpWalk:
    """What the router did with a few probes to one dead on-link address.

    ``events`` are the neighbour table's log entries for that address
    (``(time, event, state, info)``; see ``Router(trace_neighbours=True)``),
    ``outcomes`` the fate of each probe, in arrival order.
    """

    addr: str
    src: str
    arrivals: list[float]
    events: list[tuple[float, str, str, object]]
    outcomes: list[str]
    neigh: dict
    icmp_unreach: int
    queue_len: int
    retrans_time: float
    mcast_solicit: int
    ucast_solicit: int

    @property
    def fates(self) -> list[str]:
        """The fate of each probe in plain words (``outcomes`` holds the model's codes)."""
        return [FATES.get(o, o) for o in self.outcomes]

    def times(self, event: str) -> list[float]:
        """When ``event`` happened (seconds)."""
        return [t for t, e, _s, _i in self.events if e == event]

    def queue_series(self) -> tuple[np.ndarray, np.ndarray]:
        """Step series of the number of this neighbour's queued packets."""
        t, q, n = [0.0], [0], 0
        for when, ev, _s, info in self.events:
            if ev == "queued":
                n = int(info)
            elif ev == "queue drop":
                n -= 1
            elif ev == "failed":
                n = 0
            else:
                continue
            if when - t[-1] < 1e-3:          # same instant (a drop and its replacement)
                q[-1] = n
            else:
                t.append(when)
                q.append(n)
        return np.asarray(t), np.asarray(q)


def arp_walkthrough(arrivals=(0.0, 0.4, 0.8, 1.2), *, addr: str = "10.10.200.9",
                    src: str = "10.10.3.17", kernel: str = "2.4.24", duration: float = 6.0,
                    seed: int = 1, **knobs) -> ArpWalk:
    """Send a few 92-byte worm echoes to one on-link address where no host
    lives, through the worm scenario's router (no other worms, no background
    traffic), with the neighbour table's log on."""
    from ..core.skbuff import PacketTrace, int_to_ip, ip_to_int
    from ..errors import KnobError
    from ..result import OUTCOME_NAMES
    from ..scenarios.common import resolve

    values = resolve(worm.KNOBS, dict(knobs, worm_hosts=0, background_mbps=0.0,
                                      kernel=kernel, duration=duration))
    plan = worm.plan_of(values)
    a = np.array([ip_to_int(addr)], dtype=np.uint32)
    if not (plan.on_link(a)[0] and not plan.exists(a)[0]):
        raise KnobError("addr", addr, "an on-link address of the residence where no host lives")
    arrivals = sorted(float(x) for x in arrivals)
    if not arrivals or arrivals[0] < 0 or arrivals[-1] >= duration - 3.5:
        raise KnobError("arrivals", arrivals, f"times in [0, {duration - 3.5:g}) s")
    router, trace = worm.build(values, seed)
    router.trace_neighbours = True
    probes = PacketTrace.build(np.asarray(arrivals), iif=0, saddr=ip_to_int(src),
                               daddr=int(a[0]), proto=1, length=92, kind=KIND["worm"])
    res = router.run(PacketTrace.concat([trace, probes]), duration)
    key = int(a[0])
    events = [(t, e, st, info) for (t, e, k, st, info) in res.extra.get("neigh_log", [])
              if k == key]
    kind = res.packets["kind"][: res.offered]
    oc = res.packets["outcome"][: res.offered][kind == KIND["worm"]]
    p = router.sysctl
    return ArpWalk(addr=int_to_ip(key), src=src, arrivals=arrivals, events=events,
                   outcomes=[OUTCOME_NAMES[int(o)] for o in oc],
                   neigh=dict(res.counters.get("neigh", {})),
                   icmp_unreach=sum(1 for e in events if e[1] == "host unreachable"),
                   queue_len=int(p["neigh_unres_qlen"]),
                   retrans_time=float(p["neigh_retrans_time"]),
                   mcast_solicit=int(p["neigh_mcast_solicit"]),
                   ucast_solicit=int(p["neigh_ucast_solicit"]))


_WALK_WORDS = {
    "created": "neighbour entry created (NONE)",
    "solicit": "ARP request broadcast",
    "queued": "packet queued",
    "queue drop": "oldest queued packet dropped",
    "failed": "no reply: FAILED",
    "host unreachable": "ICMP host unreachable to the sender",
    "icmp rate-limited": "ICMP suppressed by the rate limit",
    "route expires": "route-cache entry marked expired",
    "resolved": "reply: resolved",
    "destroyed": "neighbour entry freed",
}


def arp_walk_table(w: ArpWalk) -> str:
    """The walk's events as a text table (time, event, neighbour state, detail)."""
    lines = [f"{'time [s]':>8}  {'event':<40} {'state':<11} detail",
             f"{'-' * 8}  {'-' * 40} {'-' * 11} {'-' * 20}"]
    for t, ev, st, info in w.events:
        detail = ""
        if ev == "queued":
            detail = f"{info} waiting (limit {w.queue_len})"
        elif ev == "solicit":
            # (probes counts from ucast_solicit: the first broadcast is number ucast + 1)
            detail = f"request {int(info) - w.ucast_solicit} of {w.mcast_solicit}"
        elif ev == "failed":
            detail = f"{info} packets still queued"
        elif ev == "created":
            detail = f"table now {info} entries"
        lines.append(f"{t:8.3f}  {_WALK_WORDS.get(ev, ev):<40} {st:<11} {detail}")
    return "\n".join(lines)


def arp_walk_figure(w: ArpWalk):
    """A timeline of the walk; returns ``(fig, alt)``."""
    fig, (a, q) = new_figure(2, 1, size=(8.6, 4.4), sharex=True, layout=None,
                             gridspec_kw=dict(height_ratios=[2.2, 1.0]))
    lanes = {"probes": 3, "arp": 2, "state": 1, "icmp": 0}
    failed = (w.times("failed") or [math.nan])[0]
    created = (w.times("created") or [w.arrivals[0]])[0]
    end = max(failed + 1.5, w.arrivals[-1] + 1.0)
    a.broken_barh([(created, failed - created)], (lanes["state"] - 0.3, 0.6),
                  color=OKABE_ITO["sky_blue"])
    a.broken_barh([(failed, end - failed)], (lanes["state"] - 0.3, 0.6),
                  color=OKABE_ITO["vermillion"], alpha=0.6)
    a.text(created + 0.05, lanes["state"], "INCOMPLETE", va="center", fontsize=8)
    a.text(failed + 0.05, lanes["state"], "FAILED", va="center", fontsize=8)
    drops = w.times("queue drop")
    dropped = w.arrivals[: len(drops)]
    kept = w.arrivals[len(drops):]
    y_kept, y_drop = lanes["probes"] - 0.15, lanes["probes"] + 0.25
    a.plot(kept, [y_kept] * len(kept), "v", color=OKABE_ITO["blue"], markersize=8,
           linestyle="none", label="probe queued until FAILED")
    for t0 in kept:
        a.plot([t0, failed], [y_kept] * 2, color=OKABE_ITO["blue"], linewidth=0.6, alpha=0.5)
    for t0, t1 in zip(dropped, drops, strict=True):
        a.plot([t0, t1], [y_drop] * 2, color=OKABE_ITO["orange"], linewidth=1.2)
        a.plot([t1], [y_drop], "x", color=OKABE_ITO["orange"], markersize=9, mew=2)
    a.plot(dropped, [y_drop] * len(dropped), "v", color=OKABE_ITO["orange"],
           markersize=8, linestyle="none", label="probe pushed out of the queue (x)")
    sol = w.times("solicit")
    a.vlines(sol, lanes["arp"] - 0.3, lanes["arp"] + 0.3, color=OKABE_ITO["black"],
             linewidth=2.0, label="ARP request (broadcast)")
    ic = w.times("host unreachable")
    a.plot(ic, [lanes["icmp"]] * len(ic), "D", color=OKABE_ITO["reddish_purple"],
           markersize=6, linestyle="none", label="ICMP host unreachable")
    if ic:
        a.text(ic[-1] + 0.08, lanes["icmp"], f"x {len(ic)}, route entry marked expired",
               va="center", fontsize=8)
    a.set_yticks(list(lanes.values()),
                 ["worm probes", "ARP requests", "neighbour state", "ICMP to sender"])
    a.set_ylim(-0.7, 3.7)
    a.set_title(f"A worm probes {w.addr}, an on-link address where no host lives")
    a.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    t, n = w.queue_series()
    t = np.append(t, end)
    n = np.append(n, n[-1])
    q.step(t, n, where="post", color=OKABE_ITO["blue"], linewidth=1.4)
    q.axhline(w.queue_len, color=OKABE_ITO["black"], linestyle="-.", linewidth=0.8)
    q.text(end, w.queue_len, " unres_qlen", va="center", fontsize=8)
    q.set_ylim(0, w.queue_len + 1)
    q.set_ylabel("packets\nqueued")
    q.set_xlabel("time since the first probe [s]")
    q.set_title("Packets waiting in the neighbour's queue (each holds its route-cache entry)")
    q.set_xlim(-0.1, end)
    fig.subplots_adjust(left=0.16, right=0.70, hspace=0.45, top=0.92, bottom=0.12)
    n_sol, n_ic = len(sol), len(ic)
    alt = (f"Timeline of {len(w.arrivals)} worm probes to {w.addr}, arriving at "
           f"{', '.join(f'{x:g}' for x in w.arrivals)} s. The router creates a neighbour "
           f"entry at once and broadcasts {n_sol} ARP requests, at "
           f"{', '.join(f'{x:.1f}' for x in sol)} s. The entry stays INCOMPLETE until "
           f"{failed:.1f} s, then turns FAILED. Meanwhile the probes wait in its queue; "
           f"{len(drops)} of them {'is' if len(drops) == 1 else 'are'} pushed out when "
           f"the queue already holds {w.queue_len}. At {failed:.1f} s the router sends "
           f"{n_ic} ICMP host-unreachable messages, one per packet still queued, and marks "
           f"the route-cache entry expired. Bottom: the queue length steps up to "
           f"{int(n.max())} and falls to 0 at {failed:.1f} s.")
    return fig, alt


# -- the calibration's bands (docs/calibration-story1.md, benchmarks/bands_story1.py) ------

BANDS_JSON = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bands_story1.json"


def load_bands(path: Path | str | None = None) -> dict:
    """The stored results of ``benchmarks/bands_story1.py`` (run over minutes, not here).

    Keys: ``frozen`` (the calibration's set-up), ``sourced`` and ``stand_in``
    (steady-state figures per set-up member), ``bands`` (each prediction's
    runs over seeds and set-up ranges, with a verdict per run and
    ``answer_at_stand_in``).
    """
    with open(path or BANDS_JSON, encoding="utf-8") as f:
        return json.load(f)


def thresh3_table(bands: dict) -> str:
    """Sourced load and stand-in per neighbour-table limit (``gc_thresh3``), from the bands."""
    src, std = bands["sourced"], bands["stand_in"]
    names = [k for k in src if k.startswith("neigh_gc_thresh3=")]
    names.sort(key=lambda k: int(k.split("=")[1]))
    head = (f"{'gc_thresh3':>10} {'fills in':>9} {'CPU':>5} {'ping p50':>9} | "
            f"{'scanners to saturate':>20} {'ping p50':>9} {'loss':>5}")
    out = [head, "-" * len(head)]
    frozen_t3 = bands["frozen"].get("neigh_gc_thresh3")
    rows = [(int(k.split("=")[1]), k) for k in names] + [(frozen_t3, "frozen")]
    for t3, k in sorted(rows):
        a, b = src[k], std.get(k, {})
        label = f"{t3:,}" + (" *" if k == "frozen" else "")
        out.append(f"{label:>10} {a.get('fill_s', float('nan')):>8.0f}s {a['busy_pct']:>4.0f}% "
                   f"{a['ping_p50_ms']:>9.1f} | {b.get('outside_welchia', 0):>20} "
                   f"{b.get('ping_p50_ms', float('nan')):>9.0f} {b.get('ping_loss_pct', 0):>4.0f}%")
    out.append(f"(3 worm hosts at their sourced rates, steady state after "
               f"{bands.get('t0_sourced_s', 60):g} s; stand-in: the fewest outside scanners "
               f"that saturate the K6; ping in ms; * the calibration's frozen set-up, "
               f"gc_thresh3 {frozen_t3:,})")
    return "\n".join(out)


def knob_bands_table(bands: dict) -> str:
    """Each prediction's verdicts over the bands' runs, and the answer they add up to."""
    from collections import Counter

    head = f"{'setting':<44} {'answer':<11} runs"
    out = [head, "-" * (len(head) + 24)]
    for name, b in bands["bands"].items():
        c = Counter(r["verdict"] for r in b["runs"])
        runs = ", ".join(f"{v} {n}" for v, n in c.most_common())
        out.append(f"{name:<44} {b['answer_at_stand_in']:<11} {runs}")
    out.append("(verdicts against the same set-up without the change, each at its own "
               "stand-in load; seeds 1-5 at the frozen set-up and each set-up range's ends)")
    return "\n".join(out)
