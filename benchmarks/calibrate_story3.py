"""Story 3 calibration: fit rpciod's mean wake latency on the unpatched case.

The only case stories.md marks "calibrate" is Trond's unpatched 2.4.19
client: ~2 MB/s (best trial ~2.5).  The set-up quantity fitted is
``rpciod_wake_us`` (the mean scheduling latency of rpciod after a
write-space wake-up: not given by the report); everything else is the
scenario's default.  Usage:

    PYTHONPATH=. python benchmarks/calibrate_story3.py [file_mb] [wake_us ...]

prints one line per (wake, seed) and the mean over seeds 1-5, as JSON lines
into benchmarks/results/calibrate_story3.jsonl when --save is given.
"""

from __future__ import annotations

import json
import sys
import time

from routelab.scenarios import nfs


def main(argv: list[str]) -> int:
    save = "--save" in argv
    args = [a for a in argv if a != "--save"]
    file_mb = float(args[0]) if args else 32.0
    wakes = [float(a) for a in args[1:]] or [100.0, 125.0, 150.0, 175.0, 200.0]
    out = []
    for w in wakes:
        vals = []
        for seed in range(1, 6):
            t0 = time.perf_counter()
            s = nfs.run(seed=seed, file_mb=file_mb, rpciod_wake_us=w).summary()
            row = {"wake_us": w, "seed": seed, "file_mb": file_mb,
                   "run_s": round(time.perf_counter() - t0, 2),
                   **{k: s[k] for k in nfs.SUMMARY_KEYS}}
            vals.append(s["write_MBps"])
            out.append(row)
            print(json.dumps(row), flush=True)
        print(f"wake {w:6.1f} us: write_MBps mean {sum(vals) / len(vals):.3f} "
              f"min {min(vals):.3f} max {max(vals):.3f}", flush=True)
    if save:
        with open("benchmarks/results/calibrate_story3.jsonl", "a") as fh:
            for row in out:
                fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
