"""Story 4 speed: a default ``container`` run (target <= 5 s) and explorer-sized
runs (target <= 0.5 s median), per variant; results to benchmarks/results/.

    PYTHONPATH=. python benchmarks/bench_container.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from routelab import accel
from routelab.scenarios import container as c

VARIANTS = [
    ("host", dict(path="host")),
    ("container", dict(path="container")),
    ("cow=skip", dict(path="container", cow="skip")),
    ("features+fwdcsum", dict(path="container", pair_features="LLTX,HW_CSUM,SG,HIGHDMA",
                              kernel="2.6.20-fwdcsum")),
]
EXPLORER_S = 0.1


def timed(kw, repeat):
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        c.run(**kw)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rows = []
    for name, kw in VARIANTS:
        full = timed(kw, a.repeat)
        small = timed(dict(kw, duration=EXPLORER_S), a.repeat)
        rows.append({"variant": name, "default_run_s": round(full, 3),
                     f"explorer_{EXPLORER_S}s_run_s": round(small, 3)})
        print(f"{name:<18} default ({c.KNOBS['duration'].default} s simulated) {full:6.2f} s   "
              f"explorer ({EXPLORER_S} s simulated) {small:5.2f} s")
    res = {"compiled": accel.compiled(),
           "python": platform.python_version(), "rows": rows}
    out = Path(__file__).parent / "results" / "bench_container.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
