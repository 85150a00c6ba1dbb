"""Slider latency of the notebooks' explorers, measured headlessly.

For every explorer in ``routelab.notebook.explorers.EXPLORERS`` this builds
the same Explorer object the notebook shows, then moves each control across a
few values, one at a time, the way a student would, and times
``Explorer.update`` -- from the value change to the finished redraw (new
PNG in the Image widget, new readout), matplotlib Agg.  The browser's own
work (sending the PNG, painting it) is not included.

Usage::

    .venv/bin/python benchmarks/bench_sliders.py [--repeat N] [--out PATH]

Prints a table (median and p95 seconds per control) and writes
``benchmarks/results/sliders.json``.  Targets (median per control): 0.25 s for
notebook 00's explorer and notebook 02's RCU primer; 0.5 s for notebook 01's
explorer (issue 4), notebook 02's flood explorer (issue 5), notebook 03's NFS
explorer (issue 22), notebook 04's container explorer (issue 23) and notebook
05's diversity explorer (issue 26).  ``--only
NAME`` (repeatable) measures some explorers and updates their entries in the
existing results file.

Two clocks are reported: wall time (what a student waits) and the process's
CPU time for the same update.  On an idle machine they agree; on a shared,
busy one (the load average is recorded too) wall time grows while CPU time
stays close to what an idle machine's wall time would be.  The target
applies to wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from routelab.notebook.explorers import EXPLORERS  # noqa: E402 - after the path insert

TARGET_MEDIAN_S = 0.25
#: Per-explorer targets where an issue sets another one.
TARGETS = {"01-worm-cache-thrash": 0.5, "02-rcu-softirq-latency": 0.5,
           "03-fragment-flooding": 0.5, "04-container-checksums": 0.5,
           "05-route-cache-removed": 0.5}


def target_of(name: str) -> float:
    return TARGETS.get(name, TARGET_MEDIAN_S)

# Values each control is moved through (by knob name).  Controls not listed
# here are swept over a few points of their own range.
SWEEPS = {
    "ping_size": [84, 1500, 4000, 9000, 576],
    "ping_ttl": [1, 32, 255, 64],
    "mtu": [576, 9000, 1500],
    "background_pps": [0.0, 2000.0, 6000.0, 10000.0, 1000.0],
    "ping_df": [True, False],
    # notebook 01: moves a student makes from the defaults
    "worm_hosts": [0, 1, 2, 5, 3],
    "welchia_pps": [50.0, 300.0, 1000.0, 140.0],
    "outside_welchia": [0, 6, 12, 30, 0],
    "gc_thresh": [256, 1024, 8192, 2048],
    "max_size": [512, 4096, 65536, 32768],
    "gc_min_interval": [0.0, 1.0, 2.0, 0.5],
    # notebook 02's flood explorer
    "pps_per_port": [100_000.0, 200_000.0, 400_000.0, 283_000.0],
    "flows": [1024, 65_536, 32_768],
    "flow_len": [4, 20, 10],
    "duration": [0.25, 0.15],      # a window control's default sweep (s)
    # notebook 03's NFS explorer
    "loss_pct": [0.5, 2.0, 5.0, 0.0],
    "sndbuf": [32768, 131072, 1_068_160, 65535],
    "wsize": [8192, 16384, 32768],
    # notebook 04's container explorer
    "send_size": [4096, 65536, 1024, 16384],
}


#: Per-explorer values where a control of the same name has another range.
EXPLORER_SWEEPS = {
    "01-worm-cache-thrash": {"duration": [10.0, 12.0, 3.0, 6.0]},   # the window (s)
    "02-rcu-softirq-latency": {"duration": [1.0, 2.0, 0.6],          # the window (s)
                               "flow_len": [10, 4, 8]},
}


def sweep_values(name: str, widget, explorer: str = "") -> list:
    if name in EXPLORER_SWEEPS.get(explorer, {}):
        return EXPLORER_SWEEPS[explorer][name]
    if name in SWEEPS:
        return SWEEPS[name]
    if hasattr(widget, "options"):
        opts = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        return opts[1:] + opts[:1]      # every option, ending where it started
    if hasattr(widget, "min"):
        lo, hi = widget.min, widget.max
        return [lo, (lo + hi) / 2, hi, widget.value]
    return [not widget.value, widget.value]


def bench_explorer(name: str, build, repeat: int) -> dict:
    t0 = time.perf_counter()
    explorer = build()
    build_s = time.perf_counter() - t0
    explorer.update(**explorer.values)          # warm caches (figure background, imports)
    rows = {}
    for cname, widget in explorer.controls.items():
        start = widget.value
        times, cpu, errors = [], [], []
        for _ in range(repeat):
            for v in sweep_values(cname, widget, name):
                if v == widget.value:
                    continue
                c0 = time.process_time()
                times.append(explorer.update(**{cname: v}))
                cpu.append(time.process_time() - c0)
                if explorer.last_error:
                    errors.append(f"{cname}={v!r}: {explorer.last_error}")
        explorer.update(**{cname: start})
        rows[cname] = {
            "n": len(times),
            "median_s": round(statistics.median(times), 4),
            "p95_s": round(float(np.percentile(times, 95)), 4),
            "max_s": round(max(times), 4),
            "cpu_median_s": round(statistics.median(cpu), 4),
            "cpu_p95_s": round(float(np.percentile(cpu, 95)), 4),
            "errors": errors,
        }
    all_t = [t for r in rows.values() for t in [r["median_s"]]]
    return {"build_s": round(build_s, 3), "controls": rows,
            "worst_median_s": max(all_t), "target_median_s": target_of(name),
            "meets_target": max(all_t) <= target_of(name)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="passes over each control's values")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sliders.json")
    ap.add_argument("--only", action="append", choices=sorted(EXPLORERS), metavar="NAME",
                    help="measure only this explorer (repeatable); the other entries of the "
                         "results file are kept")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    results = {}
    for name, build in EXPLORERS.items():
        if not args.only or name in args.only:
            results[name] = bench_explorer(name, build, args.repeat)
    load_after = os.getloadavg()

    print(f"slider latency (value change -> finished redraw), target median <= "
          f"{TARGET_MEDIAN_S} s ({', '.join(f'{k} {v} s' for k, v in TARGETS.items())}); "
          f"load average {load_before[0]:.2f} -> {load_after[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'explorer':<22} {'control':<15} {'n':>3} {'median s':>9} {'p95 s':>7} "
          f"{'max s':>7} {'cpu med':>8} {'cpu p95':>8}  ok")
    for name, r in results.items():
        for cname, c in r["controls"].items():
            ok = "yes" if c["median_s"] <= target_of(name) else "NO"
            print(f"{name:<22} {cname:<15} {c['n']:>3} {c['median_s']:>9.3f} {c['p95_s']:>7.3f} "
                  f"{c['max_s']:>7.3f} {c['cpu_median_s']:>8.3f} {c['cpu_p95_s']:>8.3f}  {ok}")
            for e in c["errors"]:
                print(f"    error: {e}")
        print(f"{name:<22} {'(build)':<15} {'':>3} {r['build_s']:>9.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"target_median_s": TARGET_MEDIAN_S, "targets": TARGETS,
           "python": platform.python_version(),
           "machine": platform.machine(), "cpus": os.cpu_count(),
           "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in load_after],
           "repeat": args.repeat, "explorers": results}
    if args.only and args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        merged = dict(old.get("explorers", {}))
        merged.update(results)
        doc["explorers"] = merged
        doc["measured_last"] = sorted(results)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0 if all(r["meets_target"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
