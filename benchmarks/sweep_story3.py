"""Story 3: the predictions across the set-up ranges the sources leave open.

With the fitted wake latency frozen (135 us), each set-up quantity is moved
over its documented range, one at a time, for the calibration case, the fix
(force-wmalloc) and 2.4.20 (seed 1; 16 MiB).  Usage:
    PYTHONPATH=. python benchmarks/sweep_story3.py [file_mb] [--save]
"""

from __future__ import annotations

import json
import sys

from routelab.scenarios import nfs

RANGES = {
    "commit_us": [0.0, 20000.0, 50000.0],
    "server_us": [200.0, 500.0, 2000.0],
    "cpu": ["piii-1000", "celeron-1200", "duron-900"],
    "txqueuelen": [100, 1000],
}
CASES = {"2.4.19": {}, "force-wmalloc": {"frag_alloc": "force-wmalloc"},
         "2.4.20": {"kernel": "2.4.20"}}


def main(argv):
    save = "--save" in argv
    args = [a for a in argv if a != "--save"]
    file_mb = float(args[0]) if args else 16.0
    rows = []
    for knob, vals in RANGES.items():
        for v in vals:
            for case, kn in CASES.items():
                s = nfs.run(seed=1, file_mb=file_mb, **{knob: v}, **kn).summary()
                row = {"knob": knob, "value": v, "case": case, "write_MBps": s["write_MBps"],
                       "rpc_timeouts": s["rpc_timeouts"], "rpc_resends": s["rpc_resends"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if save:
        with open("benchmarks/results/sweep_story3.jsonl", "w") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
