"""Store ``frag --real`` comparisons in routelab/data/frag_real.json.

Notebook 03 shows this stored result where a live run cannot be made
(hosted notebooks without user namespaces).  Usage:

    PYTHONPATH=. python scripts/frag_real_store.py
"""

from __future__ import annotations

import json
import platform
import time

from routelab.scenarios import frag_real

#: (knobs) of the stored comparisons: the default timeout (30 s) with the
#: cliff, and shorter ones over loss and rate
CASES = [
    dict(duration=10.0, rate=100.0, loss_pct=1.0),
    dict(duration=6.0, rate=200.0, loss_pct=0.0, ipfrag_time=5),
    dict(duration=6.0, rate=200.0, loss_pct=0.5, ipfrag_time=5),
    dict(duration=6.0, rate=200.0, loss_pct=2.0, ipfrag_time=5),
    dict(duration=6.0, rate=400.0, loss_pct=2.0, ipfrag_time=5),
    dict(duration=6.0, rate=100.0, loss_pct=5.0, ipfrag_time=5),
    dict(duration=6.0, rate=50.0, loss_pct=1.0, ipfrag_time=5),
]


def main() -> None:
    reason = frag_real.why_not()
    if reason:
        raise SystemExit(f"cannot run here: {reason}")
    runs = []
    for kn in CASES:
        t = time.time()
        c = frag_real.compare(seed=1, **kn)
        c["given"] = kn
        c["wall_s"] = round(time.time() - t, 1)
        runs.append(c)
        print(frag_real.format_table(c), flush=True)
    out = {"uname_r": runs[0]["uname_r"], "machine": platform.machine(),
           "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs}
    frag_real.STORED.parent.mkdir(exist_ok=True)
    frag_real.STORED.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", frag_real.STORED)


if __name__ == "__main__":
    main()
