"""Speed and memory of story 2's ``rcu`` scenario (issue 5).

Times, each in a fresh subprocess (so peak RSS is the run's own):

* explorer-sized runs (``--short``, default 0.1, 0.25, 0.5 and 1.0 s of
  flood), each repeated ``--repeat`` times, median: the slider latency;
* the full-length calibration run (default kernel, ``--full`` seconds of flood;
  35.3 s = 10 M packets per port, the reading in docs/calibration-story2.md;
  issue 5 asks for <= 60 s on a 2-core machine);
* optionally the same at ``--long`` seconds (50 s is the issue's reading of
  the report, ~28 M offered packets; off by default, it takes minutes).

Prints offered and processed (not missed by the NIC) packets per wall-clock
second and the peak RSS, and writes ``benchmarks/results/rcu.txt``.

Usage::

    .venv/bin/python benchmarks/bench_rcu.py [--full 35.3] [--short 0.1,0.25,0.5,1.0]
                                             [--repeat 3] [--long 50]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from routelab.scenarios import get
knobs = json.loads({knobs!r})
times = []
for _ in range({repeat}):
    t = time.perf_counter()
    res = get("rcu").run(seed=1, **knobs)
    times.append(time.perf_counter() - t)
s = res.summary()
print(json.dumps({{"times": times, "offered": s["offered_packets"],
                  "processed": s["offered_packets"] - s["drop_rx_missed"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def measure(knobs: dict, repeat: int = 1) -> dict:
    code = CHILD.format(root=str(ROOT), knobs=json.dumps(knobs), repeat=repeat)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["median_s"] = statistics.median(r["times"])
    r["offered_per_s"] = r["offered"] / r["median_s"]
    r["processed_per_s"] = r["processed"] / r["median_s"]
    return r


def line(name: str, knobs: dict, r: dict) -> str:
    return (f"{name:<22} {json.dumps(knobs):<20} {r['median_s']:8.2f} s  "
            f"offered {r['offered']:>11,}  processed {r['processed']:>11,}  "
            f"{r['offered_per_s'] / 1e3:7.0f} k offered/s  "
            f"{r['processed_per_s'] / 1e3:6.0f} k processed/s  peak RSS {r['rss_mb']:6.0f} MB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", type=float, default=35.3)
    ap.add_argument("--long", type=float, default=0.0, help="0: skip the long run")
    ap.add_argument("--short", default="0.1,0.25,0.5,1.0",
                    help="comma-separated durations of the explorer-sized runs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rcu.txt"))
    args = ap.parse_args()
    runs = [(f"explorer ({float(d):g} s)", {"duration": float(d)}, args.repeat)
            for d in args.short.split(",") if d.strip()]
    runs.append(("calibration (full)", {"duration": args.full}, 1))
    if args.long > 0:
        runs.append((f"issue reading ({args.long:g} s)", {"duration": args.long}, 1))
    lines = [f"# bench_rcu.py  {time.strftime('%Y-%m-%d %H:%M')}  "
             f"python {platform.python_version()}  cpus {os.cpu_count()}  "
             f"load {os.getloadavg()[0]:.2f}"]
    for name, knobs, repeat in runs:
        r = measure(knobs, repeat)
        lines.append(line(name, knobs, r))
        print(lines[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
