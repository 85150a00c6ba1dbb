"""Notebook 02 (RCU grace periods under a softirq flood): report, tables, figures, explorer.

The reported figures (:data:`REPORT`) are Robert Olsson's, from the
linux-kernel thread "route cache DoS testing and softirqs" (March-April 2004,
with Dipankar Sarma), as summarised in the project brief (stories.md s2,
kernel.md s4).  The model's figures come from
:func:`routelab.scenarios.rcu.run`.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from ..core.sched import effective_prio
from ..result import Result
from ..scenarios import rcu
from .plots import (
    CACHE_SERIES,
    OKABE_ITO,
    BlitRenderer,
    LiveFigure,
    fit_title,
    new_figure,
    nice_ceiling,
)
from .widgets import Explorer, control_for

__all__ = [
    "REPORT",
    "REPORT_S",
    "bands_table",
    "load_bands",
    "VARIANTS",
    "RcuFigure",
    "compare_variants",
    "grace_period_figure",
    "model_vs_report",
    "pending_figure",
    "reported_netstat_i",
    "reported_rt_cache_stat",
    "rcu_explorer",
    "rcu_readout",
    "run_with_progress",
    "sleepers_table",
    "runqueue_figure",
    "stall_overlap",
    "stalls_figure",
    "tasks_figure",
    "tasks_table",
    "variants_table",
]

#: Olsson's unpatched 2.6.0 run (per input port / output port / CPU), rounded as reported.
REPORT = {
    "rx_ok": 5.4e6, "rx_drp": 8.8e6, "rx_ovr": 4.6e6, "tx_ok": 5.4e6,   # per port
    "entries": 13_500, "in_hit": 4.6e6, "in_slow_tot": 0.82e6, "gc_total": 0.78e6,
    "gc_goal_miss": 1_970, "gc_dst_overflow": 1_970, "in_hlist_search": 8.5e6,  # per CPU
    "user_max_delay_s": 7.5, "grace_ms_max": 300.0,
}

#: Length of Olsson's run: 10 M packets per port from pktgen at 283 kpps
#: (RX-OK + RX-OVR = 10.0 M; see docs/calibration-story2.md).
REPORT_S = 35.3

#: The kernels compared in the notebook, with a short label each.
VARIANTS = {
    "2.6.0": "vanilla 2.6.0",
    "2.6.0-rcu-iter": "earlier rcu-softirq patch",
    "2.6.0-rcu-bh": "call_rcu_bh patch",
    "2.4.24": "2.4.24 (no RCU)",
}

_COLORS = {"2.6.0": OKABE_ITO["vermillion"], "2.6.0-rcu-iter": OKABE_ITO["orange"],
           "2.6.0-rcu-bh": OKABE_ITO["blue"], "2.4.24": OKABE_ITO["bluish_green"]}
_STYLES = {"2.6.0": "-", "2.6.0-rcu-iter": "--", "2.6.0-rcu-bh": "-.", "2.4.24": ":"}


# -- the report in the kernel's own formats -------------------------------------------------

def _hex(x) -> str:
    return "????????" if x is None else f"{int(round(x)):08x}"


def reported_rt_cache_stat() -> str:
    """Olsson's rt_cache_stat rows, rebuilt in the kernel's format from the rounded figures.

    Fields the report does not give are ``????????``; ``in_slow_mc`` and the
    output-path fields were certainly zero (no multicast, no locally
    generated traffic) and are shown as such.
    """
    r = REPORT
    fields = [r["entries"], r["in_hit"], r["in_slow_tot"], 0, None, None, None, None,
              0, 0, 0, r["gc_total"], None, r["gc_goal_miss"], r["gc_dst_overflow"],
              r["in_hlist_search"], 0]
    row = " ".join(_hex(x) for x in fields)
    return f"{row}\n{row}"


def reported_netstat_i() -> str:
    """Olsson's per-interface counters in ``netstat -i`` layout (unknown fields as ``?``)."""
    r = REPORT
    m = lambda x: f"{x / 1e6:.1f}M"  # noqa: E731 - a local formatter
    head = "Iface   MTU   RX-OK RX-ERR RX-DRP RX-OVR   TX-OK TX-ERR TX-DRP TX-OVR"
    rows = [head]
    for name, rx in (("eth0", True), ("eth1", False), ("eth2", True), ("eth3", False)):
        if rx:
            rows.append(f"{name:<5} 1500 {m(r['rx_ok']):>7} {'?':>6} {m(r['rx_drp']):>6} "
                        f"{m(r['rx_ovr']):>6} {'?':>7} {'?':>6} {'?':>6} {'?':>6}")
        else:
            rows.append(f"{name:<5} 1500 {'?':>7} {'?':>6} {'?':>6} {'?':>6} "
                        f"{m(r['tx_ok']):>7} {'?':>6} {'?':>6} {'?':>6}")
    return "\n".join(rows)


def model_vs_report(res: Result) -> str:
    """The calibration figures side by side: per port and per CPU, model vs report."""
    s = res.summary()
    ncpu = max(1, res.config.ncpus)
    ports = 2
    rows = [
        ("RX-OK per input port", s["rx_ok"] / ports, REPORT["rx_ok"]),
        ("RX-DRP per input port", s["rx_drop"] / ports, REPORT["rx_drp"]),
        ("RX-OVR per input port", s["rx_ovr"] / ports, REPORT["rx_ovr"]),
        ("TX-OK per output port", s["tx_ok"] / ports, REPORT["tx_ok"]),
        ("entries (after the flood)", s.get("entries_after_flood", s["entries_end"]),
         REPORT["entries"]),
        ("in_hit per CPU", s["in_hit"] / ncpu, REPORT["in_hit"]),
        ("in_slow_tot per CPU", s["in_slow_tot"] / ncpu, REPORT["in_slow_tot"]),
        ("gc_total per CPU", s["gc_total"] / ncpu, REPORT["gc_total"]),
        ("gc_goal_miss per CPU", s["gc_goal_miss"] / ncpu, REPORT["gc_goal_miss"]),
        ("gc_dst_overflow per CPU", s["gc_dst_overflow"] / ncpu, REPORT["gc_dst_overflow"]),
        ("in_hlist_search per CPU", s["in_hlist_search"] / ncpu, REPORT["in_hlist_search"]),
        ("worst gettimeofday delay [s]", s["user_max_delay_s"], REPORT["user_max_delay_s"]),
        ("longest grace period [ms]", s["rcu_grace_ms_max"], REPORT["grace_ms_max"]),
    ]
    w = max(len(r[0]) for r in rows)
    out = [f"{'counter':<{w}} {'model':>12} {'reported':>12} {'model/report':>13}",
           "-" * (w + 40)]
    for name, model, rep in rows:
        ratio = f"{model / rep:.2f}" if rep else "-"
        out.append(f"{name:<{w}} {model:>12,.0f} {rep:>12,.0f} {ratio:>13}"
                   if model >= 100 or rep >= 100 else
                   f"{name:<{w}} {model:>12.2f} {rep:>12.2f} {ratio:>13}")
    if abs(res.duration - REPORT_S) > 0.05 * REPORT_S:
        out.append(f"(the model ran {res.duration:g} s; the report covers about {REPORT_S:g} s)")
    return "\n".join(out)


# -- comparing the RCU variants -----------------------------------------------------------

def compare_variants(kernels=tuple(VARIANTS), *, duration: float = 10.0, seed: int = 1,
                     progress=None, light: bool = False, **knobs) -> dict[str, Result]:
    """Run the rcu scenario once per kernel; returns ``{kernel: Result}``
    (``light``: without their per-packet columns, see ``Result.lighten``)."""
    out = {}
    n = len(kernels)
    for i, k in enumerate(kernels):
        cb = None
        if progress is not None:
            def cb(f, i=i):
                progress((i + f) / n)
        out[k] = rcu.run(seed=seed, kernel=k, duration=duration, progress=cb, **knobs)
        if light:
            out[k].lighten()
    return out


def variants_table(results: dict[str, Result]) -> str:
    """Overflows, throughput, grace periods, pending entries and user delay per kernel."""
    head = (f"{'kernel':<16} {'overflows':>10} {'throughput':>11} {'GP p50':>8} {'GP max':>8} "
            f"{'pending max':>12} {'user delay':>11}")
    out = [head, "-" * len(head)]
    for k, res in results.items():
        s = res.summary()
        p50 = s["rcu_grace_ms_p50"]
        mx = s["rcu_grace_ms_max"]
        gp = (f"{p50:>6.1f}ms {mx:>6.1f}ms" if np.isfinite(p50) else f"{'-':>8} {'-':>8}")
        out.append(f"{k:<16} {s['gc_dst_overflow']:>10,} {s['throughput_kpps']:>7.0f} kpps "
                   f"{gp} {s['rcu_pending_max']:>12,} {s['user_max_delay_s'] * 1e3:>8.0f} ms")
    out.append("(overflows = dst cache overflows, all CPUs; throughput = packets forwarded per "
               "second, both ports; GP = RCU grace period)")
    return "\n".join(out)


def grace_period_figure(results: dict[str, Result]):
    """Distribution of grace-period lengths per kernel; returns ``(fig, alt)``."""
    fig, ax = new_figure(1, 1, size=(7.0, 3.2))
    parts = []
    for k, res in results.items():
        gp = np.sort(np.asarray(res.extra.get("grace_periods_s", []))) * 1e3
        if gp.size == 0:
            parts.append(f"{VARIANTS.get(k, k)}: no grace periods")
            continue
        y = np.arange(1, gp.size + 1) / gp.size
        ax.step(gp, y, where="post", color=_COLORS.get(k), linestyle=_STYLES.get(k, "-"),
                label=f"{VARIANTS.get(k, k)} ({gp.size:,} GPs)")
        parts.append(f"{VARIANTS.get(k, k)}: median {np.median(gp):.1f} ms, "
                     f"longest {gp.max():.0f} ms")
    ax.set_xscale("log")
    ax.set_xlabel("grace-period length [ms] (log scale)")
    ax.set_ylabel("fraction of grace periods\nthis short or shorter")
    ax.set_title("How long RCU grace periods last under the flood")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize=8)
    alt = ("Cumulative distribution of RCU grace-period lengths, one line per kernel. "
           + "; ".join(parts) + ".")
    return fig, alt


def pending_figure(results: dict[str, Result]):
    """Entries waiting for RCU over time per kernel, with max_size; returns ``(fig, alt)``."""
    fig, ax = new_figure(1, 1, size=(7.0, 3.2))
    parts = []
    ms = None
    for k, res in results.items():
        t, p = res.cache["t"], res.cache["rcu_pending"]
        ax.plot(t, p, color=_COLORS.get(k), linestyle=_STYLES.get(k, "-"),
                label=VARIANTS.get(k, k))
        ms = res.counters.get("dst", {}).get("max_size", ms)
        parts.append(f"{VARIANTS.get(k, k)} peaks at {int(p.max()) if p.size else 0:,}")
    if ms:
        ax.axhline(ms, color=OKABE_ITO["black"], linewidth=0.8, linestyle="-",
                   label=f"max_size ({ms:,})")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("entries waiting for RCU")
    ax.set_title("Freed route-cache entries still waiting for their grace period")
    ax.legend(loc="upper left", fontsize=8, ncols=2)
    ax.set_ylim(0, nice_ceiling(max(ms or 1, 1) * 1.15))
    alt = ("Entries waiting for an RCU grace period over time, one line per kernel; "
           + "; ".join(parts) + (f"; max_size is {ms:,}." if ms else "."))
    return fig, alt


# -- the scheduler's view ---------------------------------------------------------------------

def tasks_table(res: Result) -> str:
    """Per CPU and task: nice, seconds it was the current task, timer ticks charged
    to it (and how many of them landed in softirq work on top of it), its longest
    wait while runnable, its priority at the end; and the loop's worst delay."""
    head = (f"{'CPU':<4} {'task':<14} {'nice':>4} {'current':>9} {'ticks':>7} {'in softirq':>11} "
            f"{'worst wait':>11} {'prio':>5}")
    out = [head, "-" * len(head)]
    sched = res.counters.get("sched", {})
    for c, tasks in enumerate(sched.get("tasks", [])):
        for t in tasks:
            out.append(f"{c:<4} {t['name']:<14} {t['nice']:>4} {t['run_s']:>7.2f} s "
                       f"{t['ticks']:>7,} {t['softirq_ticks']:>11,} "
                       f"{t['worst_wait_s'] * 1e3:>8.0f} ms {t['prio']:>5}")
    gaps = sched.get("loop_gap_s", [])
    if gaps:
        out.append("worst gettimeofday delay per CPU (time between two of the loop's runs in "
                   "user mode): " + ", ".join(f"{g * 1e3:.0f} ms" for g in gaps))
    out.append("(current = the task's time as the current task, softirq work on top of it "
               "included; prio 100-139, lower is better)")
    return "\n".join(out)


def sleepers_table(results: dict[int, Result]) -> str:
    """Worst loop delay, overflows and grace periods against the number of
    mostly-sleeping tasks on every CPU (``{sleepers: Result}``)."""
    head = (f"{'sleepers':>8} {'loop worst delay':>17} {'ksoftirqd (top)':>16} "
            f"{'overflows':>10} {'GP max':>8}")
    out = [head, "-" * len(head)]
    for n, res in results.items():
        s = res.summary()
        out.append(f"{n:>8} {s['user_max_delay_s']:>15.2f} s {s['cpu_ksoftirqd_pct']:>14.1f} % "
                   f"{s['gc_dst_overflow']:>10,} {s['rcu_grace_ms_max']:>6.0f}ms")
    out.append("(sleepers = tasks on every CPU that need 1 ms of CPU and then sleep 100 ms, "
               "like a shell or sshd; overflows = all CPUs)")
    return "\n".join(out)


def tasks_figure(res: Result, cpu: int = 0):
    """Each task's dynamic priority over time on one CPU, and the gettimeofday
    loop's runs in user mode; returns ``(fig, alt)``."""
    tasks = res.counters.get("sched", {}).get("tasks", [])
    if not tasks:
        raise ValueError("tasks_figure needs a run with user_task=True")
    fig, ax = new_figure(1, 1, size=(7.0, 3.4))
    colors = [OKABE_ITO[k] for k in ("vermillion", "blue", "orange", "bluish_green",
                                      "reddish_purple", "sky_blue", "yellow", "black")]
    styles = ["-", "--", "-.", ":"]
    parts = []
    for i, t in enumerate(tasks[cpu]):
        pts = t["prio_samples"]
        xs = [0.0] + [x for x, _ in pts] + [res.duration]
        first = pts[0][1] if pts else t["prio"]
        # prio_samples holds the changes; before the first one a task has the prio
        # of the sleep average it started with (none, for the run's tasks)
        start = effective_prio(120 + t["nice"], 0)
        ys = [start if pts else first] + [y for _, y in pts] + [t["prio"]]
        ax.step(xs, ys, where="post", color=colors[i % len(colors)],
                linestyle=styles[i % len(styles)], label=f"{t['name']} (nice {t['nice']})")
        parts.append(f"{t['name']} ends at prio {t['prio']}, worst wait "
                     f"{t['worst_wait_s'] * 1e3:.0f} ms")
    ax.set_ylim(140, 99)
    ax.set_xlim(0, res.duration)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("dynamic priority\n(lower is better)")
    ax.set_title(f"CPU {cpu}: who the O(1) scheduler favours under the flood")
    ax.legend(loc="upper left", fontsize=8, ncols=3)     # (priorities 100-112 stay unused)
    alt = (f"Dynamic priority of each task on CPU {cpu} over {res.duration:g} s of flood: "
           + "; ".join(parts) + ".")
    return fig, alt


def stalls_figure(results: dict):
    """Per run and CPU, every stretch of at least 50 ms in which the gettimeofday
    loop did not run (``{label: Result}``); returns ``(fig, alt)``.

    The plot area has the same width, margins and time axis as
    :class:`RcuFigure` (8.6 in, plot from 10 % to 76 %, the run's labels in a
    legend on the right), so the two figures line up when one is shown
    above the other.
    """
    rows = []
    for label, res in results.items():
        for c, st in enumerate(res.extra.get("loop_stalls", [])):
            rows.append((label, c, np.asarray(st).reshape(-1, 2), res.duration))
    if not rows:
        raise ValueError("stalls_figure needs runs made with user_task=True")
    fig, ax = new_figure(1, 1, size=(8.6, 0.42 * len(rows) + 1.4), layout=None)
    fig.subplots_adjust(left=0.10, right=0.76, bottom=0.9 / (0.42 * len(rows) + 1.4),
                        top=1 - 0.45 / (0.42 * len(rows) + 1.4))
    colors = [OKABE_ITO["vermillion"], OKABE_ITO["blue"], OKABE_ITO["orange"],
              OKABE_ITO["bluish_green"], OKABE_ITO["reddish_purple"], OKABE_ITO["sky_blue"]]
    labels = list(dict.fromkeys(r[0] for r in rows))
    parts, seen = [], set()
    for i, (label, c, st, _dur) in enumerate(rows):
        y = len(rows) - 1 - i
        col = colors[labels.index(label) % len(colors)]
        if st.size:
            ax.broken_barh([tuple(r) for r in st], (y - 0.35, 0.7), facecolors=col,
                           edgecolor="white", linewidth=0.6,
                           label=label if label not in seen else None)
            seen.add(label)
            parts.append(f"{label}, CPU {c}: {len(st)} stalls, longest "
                         f"{st[:, 1].max() * 1e3:,.0f} ms")
        else:
            parts.append(f"{label}, CPU {c}: none")
    ax.set_yticks(range(len(rows)), [f"CPU {r[1]}" for r in rows][::-1], fontsize=8)
    ax.set_xlim(0, max(r[3] for r in rows))
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("time [s]")
    ax.set_title("The gettimeofday loop's stalls (50 ms or longer)")
    if seen:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    alt = ("Timeline of the gettimeofday loop's stalls of at least 50 ms, one row per run and "
           "CPU: " + "; ".join(parts) + ".")
    return fig, alt


def stall_overlap(res: Result, *, stall_s: float = 0.1, gp_s: float = 0.1) -> dict:
    """How the loop's long stalls line up with long grace periods and with overflows.

    A stall of at least ``stall_s`` "meets" a long grace period if it overlaps
    one of at least ``gp_s`` (a grace period spans ``[end - length, end]``),
    and "meets" the full cache if it overlaps a cache sample at ``max_size``.
    Returns counts, and the share of the run's time spent in long grace
    periods (the overlap to expect by chance).
    """
    stalls = [np.asarray(st).reshape(-1, 2) for st in res.extra.get("loop_stalls", [])]
    st = np.concatenate(stalls) if stalls else np.zeros((0, 2))
    st = st[st[:, 1] >= stall_s]
    ends = np.asarray(res.extra.get("grace_period_ends_s", []), dtype=float)
    gp = np.asarray(res.extra.get("grace_periods_s", []), dtype=float)
    keep = gp >= gp_s
    lo, hi = ends[keep] - gp[keep], ends[keep]
    t = np.asarray(res.cache["t"], dtype=float)
    full_t = t[np.asarray(res.cache["entries"]) >= res.counters["dst"]["max_size"]]
    meet_gp = sum(bool(np.any((lo < a + d) & (hi > a))) for a, d in st)
    meet_full = sum(bool(np.any((full_t >= a) & (full_t <= a + d))) for a, d in st)
    union = 0.0                      # time covered by long grace periods
    last = -np.inf
    for x0, x1 in sorted(zip(lo, hi, strict=True)):
        x0 = max(x0, last)
        if x1 > x0:
            union += x1 - x0
            last = x1
    return {"stalls": int(len(st)), "meet_gp": int(meet_gp), "meet_full": int(meet_full),
            "gp_share": union / res.duration if res.duration else 0.0,
            "stall_s": stall_s, "gp_s": gp_s}


def runqueue_figure():
    """A small schematic of one CPU's O(1) runqueue; returns ``(fig, alt)``.

    Two priority arrays, *active* and *expired*; a task whose timeslice runs
    out moves to the expired array (an interactive one goes back to the
    active array); when the active array is empty the two swap.  Kernel:
    kernel/sched.c schedule, scheduler_tick (2.6.0).
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = new_figure(1, 1, size=(7.0, 2.8), layout=None)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02, top=0.90)
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.1, 4)
    ax.axis("off")
    ax.set_title("One CPU's runqueue in 2.6's O(1) scheduler")
    for x, name in ((0.3, "active array"), (5.7, "expired array")):
        ax.add_patch(FancyBboxPatch((x, 0.4), 4.0, 2.6, boxstyle="round,pad=0.05",
                                    facecolor="#f4f4f4", edgecolor=OKABE_ITO["black"]))
        ax.text(x + 2.0, 0.55, name, ha="center", fontsize=10, weight="bold")
    chips = [(0.6, 2.1, "sleeper (interactive)", OKABE_ITO["bluish_green"]),
             (0.6, 1.05, "ksoftirqd (nice 19, 10 ms slice)", OKABE_ITO["orange"]),
             (6.0, 1.55, "gettimeofday loop (102 ms slice)", OKABE_ITO["sky_blue"])]
    for x, y, label, col in chips:
        ax.add_patch(FancyBboxPatch((x, y), 3.4, 0.62, boxstyle="round,pad=0.04",
                                    facecolor=col, edgecolor="none"))
        ax.text(x + 1.7, y + 0.31, label, ha="center", va="center", fontsize=8)
    ax.add_patch(FancyArrowPatch((4.05, 1.3), (5.95, 1.8), arrowstyle="-|>", mutation_scale=12,
                                 connectionstyle="arc3,rad=0.25", color="black"))
    ax.text(5.0, 2.1, "slice used up", ha="center", fontsize=8)
    ax.add_patch(FancyArrowPatch((3.9, 2.75), (1.1, 2.75), arrowstyle="-|>", mutation_scale=12,
                                 connectionstyle="arc3,rad=0.45", color="black"))
    ax.text(2.5, 3.55, "slice used up, but interactive: back to active", ha="center",
            fontsize=8)
    ax.text(5.0, 0.0, "active array empty (or EXPIRED_STARVING) → the two arrays swap",
            ha="center", fontsize=8.5)
    alt = ("Schematic of one CPU's runqueue in the 2.6 O(1) scheduler: two boxes, the active "
           "array holding a sleeper (interactive) and ksoftirqd (nice 19, 10 ms slice), the "
           "expired array holding the gettimeofday loop (102 ms slice). An arrow from the "
           "active to the expired array reads 'slice used up'; a curved arrow inside the "
           "active array reads 'slice used up, but interactive: back to active'. A line "
           "below: when the active array is empty (or EXPIRED_STARVING), the two arrays swap.")
    return fig, alt


# -- the explorer ---------------------------------------------------------------------------

class RcuFigure(LiveFigure):
    """Two panels: dst entries and RCU-pending entries over time; grace periods as they end."""

    def __init__(self, duration: float = 2.0, size: tuple[float, float] = (8.6, 4.6)) -> None:
        fig, (a, b) = new_figure(2, 1, size=size, layout=None,
                                 gridspec_kw=dict(left=0.10, right=0.76, bottom=0.11, top=0.80,
                                                  hspace=0.5))
        self.fig, self.ax_e, self.ax_g = fig, a, b
        a.set_title("dst entries (counted against max_size)")
        a.set_ylabel("entries")
        (self.entries,) = a.plot([], [], **CACHE_SERIES["entries"])
        (self.pending,) = a.plot([], [], **CACHE_SERIES["rcu"])
        (self.hashed,) = a.plot([], [], **CACHE_SERIES["hashed"])
        self.maxsize = a.axhline(0, color=OKABE_ITO["black"], linewidth=1.0,
                                 linestyle=(0, (6, 2)), label="max_size")
        a.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        a.set_xlabel("time [s]")
        b.set_title("RCU grace periods (each dot: one grace period, at its end)")
        b.set_ylabel("length [ms]")
        b.set_xlabel("time [s]")
        (self.gps,) = b.plot([], [], "o", color=OKABE_ITO["blue"], markersize=2.5,
                             linestyle="none", label="grace period")
        b.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        for ax in (a, b):
            ax.set_xlim(0, duration)
        self.title = fig.suptitle(" ")
        self._alt = ""
        self._blit = BlitRenderer(fig, [self.entries, self.pending, self.hashed, self.maxsize,
                                        self.gps, self.title])

    def update(self, res: Result) -> None:
        t = res.cache["t"]
        self.entries.set_data(t, res.cache["entries"])
        self.pending.set_data(t, res.cache["rcu_pending"])
        self.hashed.set_data(t, res.cache["hashed"])
        ms = res.counters.get("dst", {}).get("max_size", 0)
        self.maxsize.set_ydata([ms, ms])
        # stable limits (max_size sets the scale), so the explorer's cached
        # background can be reused from one slider move to the next
        top = max(float(res.cache["entries"].max()) if t.size else 1.0, ms)
        self.ax_e.set_ylim(0, nice_ceiling(top * 1.15))
        ends = np.asarray(res.extra.get("grace_period_ends_s", []))
        gp = np.asarray(res.extra.get("grace_periods_s", [])) * 1e3
        if ends.size != gp.size:
            ends = np.full(gp.size, np.nan)
        self.gps.set_data(ends, gp)
        self.ax_g.set_ylim(0, max(200.0, nice_ceiling(float(gp.max()) * 1.1 if gp.size else 1.0)))
        for ax in (self.ax_e, self.ax_g):
            ax.set_xlim(0, res.duration)
        k = res.extra["knobs"]
        fit_title(self.title, f"{k['kernel']}: {k['pps_per_port']:,.0f} pps per port, "
                              f"{k['flows']:,} flows x {k['flow_len']} packets, "
                              f"gc_min_interval {k['gc_min_interval']:g} s"
                              + (f", max_size {k['max_size']:,}" if k.get("max_size") != 32_768
                                 else "")
                              + (f", {k['sleepers']} sleepers/CPU" if k.get("sleepers")
                                 else ""))
        s = res.summary()
        self._alt = (f"{self.title.get_text().replace(chr(10), ' ')}. Top: dst entries peak at "
                     f"{s['route_cache_entries_max']:,} (max_size {ms:,}); up to "
                     f"{s['rcu_pending_max']:,} wait for RCU. Bottom: {gp.size:,} grace periods, "
                     + (f"median {np.median(gp):.1f} ms, longest {gp.max():.0f} ms."
                        if gp.size else "none ended."))

    def _limit_axes(self) -> list:
        return [self.ax_e, self.ax_g]


def rcu_readout(res: Result) -> str:
    """The explorer's one-line readout (HTML)."""
    s = res.summary()
    k = res.extra["knobs"]
    gp = (f"GP p50 {s['rcu_grace_ms_p50']:.0f} ms, max {s['rcu_grace_ms_max']:.0f} ms"
          if np.isfinite(s["rcu_grace_ms_p50"]) else "no grace period ended")
    return (f"<b>{html.escape(k['kernel'])}</b>, {k['pps_per_port']:,.0f} pps/port, "
            f"{k['flows']:,} flows x {k['flow_len']}, gc_min_interval {k['gc_min_interval']:g} s, "
            f"max_size {k['max_size']:,}, "
            + (f"{k['sleepers']} sleepers/CPU, " if k.get("sleepers") else "")
            + f"{res.duration:g} s | forwarded <b>{s['throughput_kpps']:.0f} kpps"
            f"</b> | dst overflows <b>{s['gc_dst_overflow']:,}</b> | {gp} | pending max "
            f"{s['rcu_pending_max']:,} | user task starved up to "
            f"<b>{s['user_max_delay_s'] * 1e3:.0f} ms</b>")


def rcu_explorer(*, duration: float = 0.6, seed: int = 1, dpi: int = 100, **start) -> Explorer:
    """Notebook 02's explorer: the flood with its main knobs, re-simulated per move.

    Controls: offered rate per port, flows, flow length, ``gc_min_interval``,
    ``max_size`` (the RAM rule's 32,768 by default; 262,144 is what Olsson once
    said /proc showed), kernel (RCU variant), mostly-sleeping other tasks per
    CPU, and the simulated window.  It starts at a 0.6-s window with flows
    of 8 packets (``start`` may name other values): a little more churn than
    Olsson's 10, so the cache overflows within the window and every control
    changes the numbers at once (``gc_min_interval`` between 0 and the rest;
    1 and 2 s differ only in windows of several seconds); a move costs about
    0.2-0.3 s of CPU (``benchmarks/bench_sliders.py``; wall time grows with
    the machine's load).
    """
    start.setdefault("flow_len", 8)
    K = rcu.KNOBS
    controls = [
        control_for(K["pps_per_port"], description="offered per port", min=10_000.0,
                    max=600_000.0, step=10_000.0, value=start.get("pps_per_port")),
        control_for(K["flows"], description="flows", min=1, max=131_072, step=1024,
                    value=start.get("flows")),
        control_for(K["flow_len"], description="flow length", min=1, max=100,
                    value=start.get("flow_len")),
        control_for(K["gc_min_interval"], description="gc_min_interval", min=0.0, max=2.0,
                    step=0.1, value=start.get("gc_min_interval", 0.5)),
        control_for(K["max_size"], description="max_size", min=4096, max=262_144, step=4096,
                    value=start.get("max_size", 32_768)),
        control_for(K["kernel"], description="kernel / RCU",
                    options=[(v, k) for k, v in VARIANTS.items()], value=start.get("kernel")),
        control_for(K["sleepers"], description="other tasks (sleepers)", max=6,
                    value=start.get("sleepers")),
        control_for(K["duration"], description="window", min=0.1, max=3.0, step=0.05,
                    value=duration),
    ]
    fig = RcuFigure(duration=duration)

    def update(**values) -> tuple[str, str]:
        res = rcu.run(seed=seed, **values)
        fig.update(res)
        return rcu_readout(res), fig.alt

    return Explorer(controls, update, fig.fig, dpi=dpi, render=lambda: fig.render_png(dpi),
                    title="Explorer: a route-cache DoS against RCU")


def run_with_progress(description: str = "simulating", **knobs) -> Result:
    """:func:`routelab.scenarios.rcu.run` with a progress bar shown in the notebook.

    Mark the calling cell ``# NBVAL_IGNORE_OUTPUT`` (the bar is a widget)
    and print the numbers in the next cell.
    """
    import ipywidgets as W
    from IPython.display import display

    bar = W.FloatProgress(value=0.0, min=0.0, max=1.0, description=description,
                          bar_style="info", layout=W.Layout(width="420px"))
    label = W.HTML("")
    display(W.HBox([bar, label]))

    def progress(f: float) -> None:
        bar.value = min(max(float(f), 0.0), 1.0)
        label.value = f"{100 * bar.value:.0f} %"

    res = rcu.run(progress=progress, **knobs)
    bar.value, bar.bar_style = 1.0, "success"
    label.value = "done"
    return res


# -- the calibration's prediction bands (docs/calibration-story2.md) -----------------------

BANDS_JSON = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bands_story2.json"

_BAND_FIGURES = (("overflows_per_s", "overflows/s", "{:,.0f}"),
                 ("throughput_kpps", "kpps", "{:,.0f}"),
                 ("user_max_delay_s", "loop delay s", "{:.2f}"),
                 ("rcu_grace_ms_max", "GP max ms", "{:,.0f}"))


def load_bands(path: Path | str | None = None) -> dict:
    """The stored results of ``benchmarks/bands_story2.py`` (about ten minutes of runs).

    ``predictions[name]["figures"][figure]`` holds ``band`` (the predicted
    range), ``delta_band`` (predicted minus vanilla, run by run) and
    ``direction`` ("down", "up", "none", "down/none", "up/none", "undecided").
    """
    with open(path or BANDS_JSON, encoding="utf-8") as f:
        return json.load(f)


def bands_table(bands: dict) -> str:
    """Each prediction's change against vanilla 2.6.0, as a range over the bands' runs."""
    head = f"{'kernel':<32} {'figure':<13} {'change against vanilla':>26}  direction"
    out = [head, "-" * (len(head) + 4)]
    for name, p in bands["predictions"].items():
        for key, label, fmt in _BAND_FIGURES:
            fig = p["figures"].get(key)
            if not fig:
                continue
            lo, hi = fig["delta_band"]
            rng = f"{fmt.format(lo)} to {fmt.format(hi)}"
            out.append(f"{name:<32} {label:<13} {rng:>26}  {fig['direction']}")
    m = bands.get("meta", {})
    out.append(f"({m.get('duration_s', 8):g}-s runs: seeds "
               f"{'-'.join(str(x) for x in m.get('seeds_calibration', [1, 5])[::4])} at the "
               f"calibration, and each end of every set-up range at seed 1)")
    return "\n".join(out)
