"""Story 2, precomputed: where is the cliff?  Flood rate x kernel on the dual Xeon.

Notebook 02's "where is the cliff" section reads the result
(``routelab/data/sweep_story2.json``, through ``routelab.notebook.sweeps``):
the route-cache DoS of the rcu scenario (pktgen into both ports of the dual
P4 Xeon, a gettimeofday loop on each CPU), 2 simulated seconds per run -- long
enough for the grace periods to settle, far shorter than the notebook's
35-second floods, so the dst-cache overflows that dominate those appear here
only as a few hundred at the highest rates -- at nine rates per port on four
kernels: 2.6.0, the two rcu-softirq patches and 2.6.1.  Usage (about 2 minutes on 2 cores):

    PYTHONPATH=. python benchmarks/sweep_story2.py [--save] [--scheduler tcp://HOST:PORT]
"""

from __future__ import annotations

import sys

from sweep_common import main

GRID = {"pps_per_port": [100_000, 125_000, 150_000, 175_000, 200_000, 225_000, 250_000,
                         275_000, 300_000],
        "kernel": ["2.6.0", "2.6.0-rcu-iter", "2.6.0-rcu-bh", "2.6.1"]}
FIXED = {"duration": 2.0}
SEEDS = 2

if __name__ == "__main__":
    sys.exit(main("rcu", GRID, SEEDS, FIXED, "sweep_story2.json", sys.argv[1:]))
