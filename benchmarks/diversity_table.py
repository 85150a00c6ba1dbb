"""Per-packet forwarding cost against destination diversity (issue 26's table).

Runs scenario ``diversity`` for 2.4.24, 2.6.0 and 3.6 on the same CPU over
destinations 1 .. 65,536 and seeds 1-3, and writes the band (min-max over
seeds) of ``cpu_us_per_packet`` and ``route_lookup_us_per_packet`` to
``benchmarks/results/diversity_table.json``, printing a table.

    python benchmarks/diversity_table.py [--cpu opteron-2400x2] [--routes 1000]
"""

from __future__ import annotations

import argparse
import json
import pathlib

from routelab.scenarios import diversity

DESTS = (1, 16, 256, 4096, 16384, 65536)
KERNELS = ("2.4.24", "2.6.0", "3.6")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", default="opteron-2400x2")
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=1.0)
    a = ap.parse_args()
    rows = []
    for k in KERNELS:
        for d in DESTS:
            runs = [diversity.run(kernel=k, destinations=d, cpu=a.cpu, routes=a.routes,
                                  duration=a.duration, seed=s).summary()
                    for s in range(1, a.seeds + 1)]
            row = {"kernel": k, "destinations": d}
            for key in ("cpu_us_per_packet", "route_lookup_us_per_packet", "cache_hit_pct"):
                vals = [r[key] for r in runs if r[key] is not None]
                row[key] = [min(vals), max(vals)] if vals else None
            rows.append(row)
            cpu = row["cpu_us_per_packet"]
            rt = row["route_lookup_us_per_packet"]
            hit = row["cache_hit_pct"]
            print(f"{k:7} {d:6}  cpu {cpu[0]:.3f}-{cpu[1]:.3f} us  route {rt[0]:.3f}-{rt[1]:.3f} us"
                  + (f"  hit {hit[0]:.1f}-{hit[1]:.1f} %" if hit else ""), flush=True)
    out = pathlib.Path(__file__).with_name("results") / "diversity_table.json"
    out.write_text(json.dumps({"cpu": a.cpu, "routes": a.routes, "seeds": a.seeds,
                               "duration_s": a.duration, "pps": 100_000, "rows": rows},
                              indent=1) + "\n")


if __name__ == "__main__":
    main()
