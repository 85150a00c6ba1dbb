"""Wall time of the diversity scenario with 1 M packets (issue 26: at most 5 s on 3.6).

Usage::

    .venv/bin/python benchmarks/bench_diversity.py [--out PATH]

Runs ``diversity`` at 500 kpps for 2 simulated seconds (1,000,000 packets)
on each kernel of the epilogue's comparison, with 65,536 destinations, and
prints wall and CPU seconds (the load average too: on a shared machine wall
time grows while CPU time does not).  Writes
``benchmarks/results/diversity_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from routelab import accel  # noqa: E402
from routelab.scenarios import diversity  # noqa: E402

TARGET_S = 5.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/diversity_speed.json"))
    args = ap.parse_args(argv)
    diversity.run(kernel="3.6", duration=0.1)        # warm imports and the table cache
    load0 = os.getloadavg()[0]
    rows = {}
    for kernel in ("3.6", "2.6.0", "2.4.24"):
        w0, c0 = time.perf_counter(), time.process_time()
        res = diversity.run(kernel=kernel, destinations=65536, pps=500_000.0, duration=2.0)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        rows[kernel] = {"packets": res.offered, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
        print(f"{kernel:8s} {res.offered:,} packets  wall {wall:6.2f} s  cpu {cpu:6.2f} s")
    out = {"target_s_3.6": TARGET_S, "meets_target": rows["3.6"]["wall_s"] <= TARGET_S,
           "compiled": accel.compiled(), "load_average": [round(load0, 2),
                                                          round(os.getloadavg()[0], 2)],
           "runs": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"3.6 target {TARGET_S} s: {'met' if out['meets_target'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
