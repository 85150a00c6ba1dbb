"""Story 1, precomputed: where is the cliff?  Outside scanners x kernel on the K6-200.

Notebook 01's "where is the cliff" section reads the result
(``routelab/data/sweep_story1.json``, through ``routelab.notebook.sweeps``)
instead of running 80 simulations in front of the student.  The set-up is the
notebook's: the three sourced-rate worm hosts inside, 8 simulated seconds, and
a growing number of Welchia scanners outside (``outside_welchia``, the
stand-in load of ``routelab.notebook.story1.STAND_IN``), on four kernels.
Usage (a process pool of one worker per core; about 2 minutes on 2 cores):

    PYTHONPATH=. python benchmarks/sweep_story1.py [--save] [--scheduler tcp://HOST:PORT]
"""

from __future__ import annotations

import sys

from sweep_common import main

GRID = {"outside_welchia": [0, 2, 4, 6, 8, 10, 12, 16, 20, 24],
        "kernel": ["2.0", "2.4.24", "2.6.0", "2.4.24-nocache"]}
FIXED = {"worm_hosts": 3, "cpu": "k6-200", "duration": 8.0}
SEEDS = 2

if __name__ == "__main__":
    sys.exit(main("worm", GRID, SEEDS, FIXED, "sweep_story1.json", sys.argv[1:]))
