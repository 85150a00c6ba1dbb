"""Story 1: the ping's delay against the CPU's busy fraction, and the
non-preemptible units of work, as data (issue 24, item 4).

Usage::

    PYTHONPATH=. python benchmarks/delay_busy_story1.py

Writes ``benchmarks/results/delay_busy_story1.json``: for the frozen set-up
(``bands_story1.FROZEN``) at 0, 1, 2 and 3 outside scanners and for the old
default table (gc_thresh3 1024) over the old load sweep, each run's
:func:`routelab.scenarios.story1_study.delay_vs_busy` (every ping with the busy
fraction of the second before it, and RTT percentiles per 10 % busy band),
its steady-state figures and :func:`~routelab.scenarios.story1_study.unit_sizes`.
Seed 1; at the sourced load 120 s measured from 60 s, at the stand-in loads
60 s from 30 s (``bands_story1``); ~10 runs of a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

from bands_story1 import DURATION, DURATION_SOURCED, FROZEN, T0, T0_SOURCED

from routelab.scenarios import story1_study as st
from routelab.scenarios import worm

OUT = Path(__file__).resolve().parent / "results" / "delay_busy_story1.json"
RUNS = [("frozen", dict(FROZEN, outside_welchia=n)) for n in (0, 1, 2, 3)] + [
    ("gc_thresh3=1024", dict(FROZEN, **st.thresholds(1024), outside_welchia=n))
    for n in (0, 4, 8, 10, 12)]


def main() -> dict:
    out = []
    for name, kw in RUNS:
        dur, t0 = (DURATION_SOURCED, T0_SOURCED) if kw["outside_welchia"] == 0 else (DURATION, T0)
        res = worm.run(seed=1, duration=dur, **kw)
        d = st.delay_vs_busy(res, window_s=1.0, t0=t0 - 1.0)
        out.append({"setup": name, "outside_welchia": kw["outside_welchia"], "duration_s": dur,
                    "t0_s": t0, "steady": st.steady(res, t0), "units": st.unit_sizes(res),
                    "longest_busy": st.work_units(res, 3), **d})
        print(name, kw["outside_welchia"], out[-1]["steady"], flush=True)
    return {"seed": 1, "runs": out}


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(main()) + "\n")
    print(f"wrote {OUT}")
