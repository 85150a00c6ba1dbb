"""Story 1's calibration study: steady state, set-up sweeps, delay against busy, bands.

Issue 24.  Functions the calibration page (docs/calibration-story1.md), the
scripts ``benchmarks/calibrate_story1.py`` and ``benchmarks/bands_story1.py``
and notebook 01 use on runs of the ``worm`` scenario:

* :func:`fill_time` -- when the neighbour table first reached ``gc_thresh3``
  (the first refused allocation), from the table's event log;
* :func:`steady` -- one run measured after its table filled: CPU busy
  fraction, ping percentiles and loss over the steady windows;
* :func:`delay_vs_busy` -- every ping's delay against the CPU's busy fraction
  in the window before it was sent (the data behind "100-160 ms at 80-90 %");
* :func:`work_units` -- the largest single non-preemptible stretches of CPU
  work in a run (the model's intervals of back-to-back work);
* :data:`SETUP_RANGES` -- the set-up knobs with their documented ranges, the
  sources the calibration page cites.

Everything here reads :class:`routelab.result.Result` fields; nothing is fitted
inside these functions.
"""

from __future__ import annotations

import math

import numpy as np

from ..result import Result
from . import worm

__all__ = ["SETUP_RANGES", "thresholds", "run_logged", "fill_time", "steady",
           "delay_vs_busy", "work_units", "unit_sizes"]

#: The set-up descriptions story 1's calibration may move, each with its
#: documented range (docs/calibration-story1.md, "Set-up ranges"):
#:
#: * ``neigh_gc_thresh3`` 1024-4096: 1024 is 2.4.24's own default (net/ipv4/arp.c
#:   arp_tbl) and what the period's documentation leaves in place -- 2.4.24's
#:   Documentation/filesystems/proc.txt and LARTC list the neigh directory
#:   but give gc_thresh1/2/3 no value or advice, Red Hat's sysctl.conf of
#:   2002 (initscripts) sets none; Bieringer's Linux IPv6 HOWTO says only
#:   "increase" (for the IPv6 table).  4096 is the first figure of an advice
#:   to raise it found (a later web FAQ: "mandatory" for a gateway); the
#:   residence's ~1,500 live hosts exceed 1024, which the overflow message
#:   would have told the admin.  gc_thresh2 and gc_thresh1 move with it at
#:   the defaults' ratios (1/2 and 1/8; ASSUMED).
#: * ``board_cache``: both boards of the period (routelab.hardware.BOARDS).
#: * ``ram_mb`` 64-256, ``active_hosts`` 100-1000: as before (worm.KNOBS).
SETUP_RANGES: dict[str, tuple] = {
    "neigh_gc_thresh3": (1024, 2048, 3072, 4096),
    "board_cache": ("dram", "l2"),
    "ram_mb": (64, 128, 256),
    "active_hosts": (100, 300, 1000),
}


def thresholds(t3: int) -> dict:
    """gc_thresh1/2/3 for a given gc_thresh3, at the 2.4.24 defaults' ratios
    (128 : 512 : 1024)."""
    return {"neigh_gc_thresh1": max(1, t3 // 8), "neigh_gc_thresh2": max(1, t3 // 2),
            "neigh_gc_thresh3": int(t3)}


def run_logged(seed: int = 1, **knobs) -> Result:
    """:func:`routelab.scenarios.worm.run` with the neighbour table's event log
    kept (``Result.extra["neigh_log"]``), for :func:`fill_time`."""
    from ..errors import KnobError
    from .common import fill_derived, resolve

    values = resolve(worm.KNOBS, knobs)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise KnobError("seed", seed, "a non-negative integer")
    router, trace = worm.build(values, int(seed))
    router.trace_neighbours = True
    res = router.run(trace, values["duration"])
    res.extra["scenario"] = worm.NAME
    res.extra["knobs"] = fill_derived(values, router)
    res.extra["seed"] = int(seed)
    res.extra["rtt_offset_s"] = 2 * (84 + 38) * 8 / router.devices[0].speed
    return res


def fill_time(res: Result) -> float:
    """Seconds until the neighbour table first refused an allocation (it held
    ``gc_thresh3 + 1`` entries): from then on every new neighbour pays a full
    forced-GC walk.  ``inf`` if it never filled; needs :func:`run_logged`."""
    log = res.extra.get("neigh_log")
    if log is None:
        raise ValueError("fill_time needs a run with the neighbour log (run_logged)")
    for t, event, *_ in log:
        if event == "table full":
            return float(t)
    return math.inf


def _busy(res: Result) -> tuple[np.ndarray, np.ndarray, float]:
    """Bin start times, busy fraction per bin (softirq + hard irq, CPU 0), bin width."""
    t = np.asarray(res.cpu["t"], dtype=float)
    soft = np.asarray(res.cpu["softirq"])[0]
    irq = np.asarray(res.cpu.get("irq", np.zeros_like(res.cpu["softirq"])))[0]
    return t, soft + irq, float(res.cpu["bin_s"])


def steady(res: Result, t0: float) -> dict:
    """CPU and ping figures of ``res`` over ``t >= t0`` (the steady state)."""
    t, busy, _ = _busy(res)
    m = t >= t0
    sent, rtt = res.ping_rtt_ms()
    pm = sent >= t0
    r = rtt[pm]
    ok = r[np.isfinite(r)]
    out = {"t0_s": round(float(t0), 2), "busy_pct": round(100.0 * float(busy[m].mean()), 2)
           if m.any() else float("nan"),
           "pings": int(pm.sum()),
           "ping_loss_pct": round(100.0 * (1 - ok.size / r.size), 2) if r.size else float("nan")}
    for q in (50, 95):
        out[f"ping_p{q}_ms"] = round(float(np.percentile(ok, q)), 3) if ok.size else float("nan")
    out["ping_max_ms"] = round(float(ok.max()), 3) if ok.size else float("nan")
    return out


def delay_vs_busy(res: Result, window_s: float = 1.0, t0: float = 0.0) -> dict:
    """Each ping's round trip against the CPU's busy fraction over the
    ``window_s`` before it was sent, for pings sent at ``t >= t0 + window_s``.

    Returns lists ``sent_s``, ``busy`` (0-1), ``rtt_ms`` (NaN = lost), and a
    table ``by_busy`` of RTT percentiles per 10 % busy band -- the model's
    answer to "how long is a ping delayed at a given CPU load".
    """
    t, busy, bin_s = _busy(res)
    sent, rtt = res.ping_rtt_ms()
    keep = sent >= t0 + window_s
    sent, rtt = sent[keep], rtt[keep]
    c = np.concatenate([[0.0], np.cumsum(busy)])
    hi = np.clip(np.searchsorted(t, sent, side="right"), 0, busy.size)
    lo = np.clip(np.searchsorted(t, sent - window_s, side="right"), 0, busy.size)
    b = np.where(hi > lo, (c[hi] - c[lo]) / np.maximum(hi - lo, 1), np.nan)
    rows = []
    for k in range(10):
        m = (b >= k / 10) & (b < (k + 1) / 10 if k < 9 else b <= 1.0 + 1e-9)
        r = rtt[m]
        ok = r[np.isfinite(r)]
        rows.append({"busy_lo": k / 10, "busy_hi": (k + 1) / 10, "pings": int(m.sum()),
                     "loss_pct": round(100.0 * (1 - ok.size / r.size), 2) if r.size else None,
                     **{f"p{q}_ms": round(float(np.percentile(ok, q)), 3) if ok.size else None
                        for q in (50, 90, 99)}})
    return {"window_s": window_s, "sent_s": sent.round(4).tolist(),
            "busy": np.round(b, 4).tolist(),
            "rtt_ms": [None if not math.isfinite(x) else round(float(x), 3) for x in rtt],
            "by_busy": rows}


def work_units(res: Result, top: int = 5) -> dict:
    """The longest stretches of uninterrupted CPU work in ``res`` (CPU 0): the
    model's busy intervals, each a run of back-to-back work items without
    idle time between them.  Returns their lengths (ms) and start times (s),
    and the share of the busy time in stretches longer than 10 ms."""
    starts, lens = res.cpu["intervals"][0]
    starts, lens = np.asarray(starts), np.asarray(lens)
    if lens.size == 0:
        return {"longest_ms": [], "at_s": [], "share_over_10ms": 0.0}
    order = np.argsort(lens)[::-1][:top]
    return {"longest_ms": np.round(lens[order] * 1e3, 3).tolist(),
            "at_s": np.round(starts[order], 3).tolist(),
            "share_over_10ms": round(float(lens[lens > 0.01].sum() / lens.sum()), 4)}


def unit_sizes(res: Result) -> list[dict]:
    """Every non-preemptible unit of work on story 1's path, its largest size
    in this run's set-up (ms), and how the model runs it.

    Softirq and timer work runs to completion on a UP 2.4.24 kernel (only
    hard interrupts interrupt it); the model serves it FIFO, each unit one
    charge (routelab.core.softirq), and puts the hard-IRQ time in the same
    FIFO -- a frame's interrupt that the kernel would take in the middle of a
    walk is served after it (the same total, a different order).
    """
    from ..costs import cost_table
    from ..hardware import cpu_profile, nic_profile

    k = res.extra["knobs"]
    c = cost_table(cpu_profile(k["cpu"]), {"board_cache": k.get("board_cache", "dram")}).fn
    t3 = k["neigh_gc_thresh3"]
    walk = c["neigh_forced_gc"] + 32 * c["neigh_gc_bucket"] + (t3 + 1) * c["neigh_gc_entry"]
    ring = nic_profile("e100").rx_ring
    irq = ring * (c["irq_rx"] + c["netif_rx"])
    gcl = res.extra.get("gc_log", [])
    gc_max = max((row[6] for row in gcl), default=0.0)
    entries = res.counters.get("dst", {}).get("entries", 0) if isinstance(
        res.counters.get("dst"), dict) else 0
    buckets = k.get("rt_buckets") or 1024
    flush = entries * (c["rt_free"] + c["dst_destroy"]) + buckets * c["gc_bucket"]
    periodic = c["neigh_periodic_timer"] + 32 * c["neigh_gc_bucket"] + t3 * c["neigh_gc_entry"]
    return [
        {"unit": "neigh_forced_gc walk (from neigh_alloc, in NET_RX softirq; "
                 "write_lock_bh per bucket)", "largest_ms": round(walk * 1e3, 3),
         "model": "one charge inside the packet's service (core/neighbour.py)"},
        {"unit": "net_rx_action run (300 packets or jiffies - start > 1)",
         "largest_ms": round(20.0 + walk * 1e3, 3),
         "model": "one run: budget and time limit checked between packets (core/softirq.py); "
                  "2 jiffies + the packet that crossed the limit"},
        {"unit": "e100 hard interrupt draining the full RX ring", "largest_ms": round(irq * 1e3, 3),
         "model": "charged per frame into the same FIFO, not as one batch: the frames' "
                  "interrupts are not coalesced while the CPU is busy"},
        {"unit": "rt_garbage_collect pass (from rt_intern_hash / dst_alloc)",
         "largest_ms": round(gc_max * 1e3, 3),
         "model": "one charge inside the packet's service (ipv4/route.py)"},
        {"unit": "rt_run_flush (rt_secret_rebuild timer every secret_interval)",
         "largest_ms": round(flush * 1e3, 3),
         "model": "one timer charge; estimated here for the run's final cache size "
                  f"({entries} entries)"},
        {"unit": "neigh_periodic_timer walk (every gc_interval, 30 s)",
         "largest_ms": round(periodic * 1e3, 3), "model": "one timer charge"},
    ]
