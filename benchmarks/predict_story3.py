"""Story 3 predictions, run after the set-up was frozen (rpciod_wake_us = 135).

Each variant over seeds 1-5 at ``file_mb`` (default 16 MiB: the 120 MiB run
is the same steady state, longer).  Usage:
    PYTHONPATH=. python benchmarks/predict_story3.py [file_mb] [--save]
"""

from __future__ import annotations

import json
import sys
import time

from routelab.scenarios import nfs

VARIANTS = {
    "2.4.19 (calibration)": {},
    "force-wmalloc": {"frag_alloc": "force-wmalloc"},
    "2.4.20": {"kernel": "2.4.20", "cwnd": "aimd", "rpc_timer": "rtt"},
    "2.4.19 own transport": {"cwnd": "2.4.19", "rpc_timer": "fixed"},
    "server linux-2.4.19": {"server": "linux-2.4.19"},
    "server linux-2.4.22": {"server": "linux-2.4.22"},
}


def main(argv):
    save = "--save" in argv
    args = [a for a in argv if a != "--save"]
    file_mb = float(args[0]) if args else 16.0
    rows = []
    for name, kn in VARIANTS.items():
        vals = []
        for seed in range(1, 6):
            t0 = time.perf_counter()
            s = nfs.run(seed=seed, file_mb=file_mb, **kn).summary()
            row = {"variant": name, "seed": seed, "file_mb": file_mb,
                   "run_s": round(time.perf_counter() - t0, 2),
                   **{k: s[k] for k in nfs.SUMMARY_KEYS}}
            rows.append(row)
            vals.append(s["write_MBps"])
            print(json.dumps(row), flush=True)
        print(f"{name:24s} write_MBps mean {sum(vals) / 5:.3f} min {min(vals):.3f} "
              f"max {max(vals):.3f}", flush=True)
    if save:
        with open("benchmarks/results/predict_story3.jsonl", "w") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
