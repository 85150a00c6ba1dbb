"""Speed of the ``nfs`` scenario (issue 22: the default 120 MiB run <= 10 s;
an explorer move <= 0.5 s median).

Reports wall and CPU (process) time: on a shared machine the CPU time is
the figure to compare with the limits.  Usage:
    PYTHONPATH=. python benchmarks/bench_nfs.py [--quick] [--save]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from routelab.scenarios import nfs


def timed(**kn):
    w, c = time.perf_counter(), time.process_time()
    s = nfs.run(**kn).summary()
    return time.perf_counter() - w, time.process_time() - c, s


def main(argv):
    quick = "--quick" in argv
    out = {}
    if not quick:
        w, c, s = timed()
        out["default_120MiB"] = {"wall_s": round(w, 2), "cpu_s": round(c, 2),
                                 "write_MBps": s["write_MBps"],
                                 "fragments_sent": s["fragments_sent"]}
        print("default 120 MiB:", out["default_120MiB"], flush=True)
    moves = [dict(file_mb=2), dict(file_mb=2, frag_alloc="force-wmalloc"),
             dict(file_mb=2, kernel="2.4.20"), dict(file_mb=2, loss_pct=1.0),
             dict(file_mb=2, sndbuf=131070), dict(file_mb=2, server="linux-2.4.19"),
             dict(file_mb=2, cwnd="2.4.19", rpc_timer="fixed")]
    ws, cs = [], []
    for kn in moves:
        w, c, _ = timed(**kn)
        ws.append(w)
        cs.append(c)
    out["explorer_2MiB"] = {"median_wall_s": round(statistics.median(ws), 3),
                            "median_cpu_s": round(statistics.median(cs), 3),
                            "max_cpu_s": round(max(cs), 3)}
    print("explorer moves (2 MiB):", out["explorer_2MiB"], flush=True)
    if "--save" in argv:
        with open("benchmarks/results/bench_nfs.json", "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
