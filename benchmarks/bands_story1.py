"""Story 1: the frozen set-up, its stand-in load, and every prediction as a band.

Usage::

    PYTHONPATH=. python benchmarks/bands_story1.py [--quick]

Writes ``benchmarks/results/bands_story1.json`` (issue 24, "predictions with
bands").  What it does, in order:

1. **Calibration at the sourced rates.**  The frozen set-up
   (:data:`FROZEN`: ``gc_thresh3`` 4096 with 2048 / 512, the board's L2 not
   caching the slab, every other knob at its default) and each set-up knob
   moved over its documented range (:data:`routelab.scenarios.story1_study.SETUP_RANGES`),
   3 infected hosts, no outside scanners: CPU and ping in the steady state
   (after the neighbour table filled; ``fill_s``).
2. **The stand-in load, re-fitted per set-up member.**  The smallest number
   of outside Welchia scanners (``outside_welchia``, 0-12) that gives the
   report's collapse -- a steady median ping of at least 100 ms -- for the
   frozen set-up and for each member of the set-up band.
3. **Bands.**  Each frozen prediction (:data:`PREDICTIONS`) against its
   baseline, at that member's stand-in load: over seeds 1-5 of the frozen
   set-up, and over each set-up member (seed 1).  A prediction's verdict in
   one run is "helps" (median ping down by more than 10 %, or loss down by
   more than 5 points), "hurts" (the reverse) or "same"; a band whose runs
   include both "helps" and "hurts" is **undecided**.

Each run is ``DURATION`` s of simulated time, measured over ``t >= T0``
(the table fills in ~25 s at 4096 and the sourced load, faster at the
stand-in load; ``calibrate`` reports the fill times).  About 150 runs of
~1 s each: a few minutes on a shared core.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from routelab.scenarios import story1_study as st
from routelab.scenarios import worm

DURATION, T0 = 60.0, 30.0
SEEDS = (1, 2, 3, 4, 5)
#: the frozen set-up (docs/calibration-story1.md, "Calibration at the sourced rates")
FROZEN: dict = {**st.thresholds(4096), "board_cache": "dram", "worm_hosts": 3}
#: the frozen predictions of story 1 (notebook 01): each a change of knobs
PREDICTIONS: dict[str, dict] = {
    "small cache (max_size 512, gc_thresh 256)": {"max_size": 512, "gc_thresh": 256},
    "gc_min_interval 0": {"gc_min_interval": 0.0},
    "Duron 900": {"cpu": "duron-900"},
    "2.6.1": {"kernel": "2.6.1"},
    "no route cache (2.4.24-nocache)": {"kernel": "2.4.24-nocache"},
    "kernel 2.0": {"kernel": "2.0"},
}
OUT = Path(__file__).resolve().parent / "results" / "bands_story1.json"


def measure(seed: int = 1, logged: bool = False, **knobs) -> dict:
    """One run's steady-state figures (and its table fill time if ``logged``)."""
    kw = dict(FROZEN, duration=DURATION, **knobs)
    if logged:
        res = st.run_logged(seed=seed, **kw)
        fill = st.fill_time(res)
        out = st.steady(res, max(T0, fill + 5.0) if math.isfinite(fill) else T0)
        out["fill_s"] = round(fill, 2) if math.isfinite(fill) else None
    else:
        out = st.steady(worm.run(seed=seed, **kw), T0)
    return out


def members() -> list[tuple[str, dict]]:
    """The set-up band: the frozen set-up, then each knob moved over its range."""
    out = [("frozen", {})]
    for knob, values in st.SETUP_RANGES.items():
        for v in values:
            if knob == "neigh_gc_thresh3":
                if v != FROZEN["neigh_gc_thresh3"]:
                    out.append((f"{knob}={v}", st.thresholds(v)))
            elif v != FROZEN.get(knob, worm.KNOBS[knob].default):
                out.append((f"{knob}={v}", {knob: v}))
    return out


def stand_in(setup: dict, seed: int = 1, top: int = 12) -> tuple[int | None, dict]:
    """Smallest ``outside_welchia`` whose steady median ping is >= 100 ms."""
    m = {}
    for n in range(0, top + 1):
        m = measure(seed, **setup, outside_welchia=n)
        if m["ping_p50_ms"] == m["ping_p50_ms"] and m["ping_p50_ms"] >= 100.0:
            return n, m
    return None, m


def verdict(base: dict, pred: dict) -> str:
    """'helps', 'hurts' or 'same' for one prediction run against its baseline."""
    b, p = base["ping_p50_ms"], pred["ping_p50_ms"]
    dl = pred["ping_loss_pct"] - base["ping_loss_pct"]
    nan_b, nan_p = b != b, p != p
    if nan_p and not nan_b:
        return "hurts"
    if nan_b and not nan_p:
        return "helps"
    if dl > 5.0 or (not nan_b and p > 1.1 * b and dl >= -5.0):
        return "hurts"
    if dl < -5.0 or (not nan_b and p < b / 1.1):
        return "helps"
    return "same"


def band_answer(verdicts: list[str]) -> str:
    s = set(verdicts)
    if {"helps", "hurts"} <= s:
        return "undecided"
    if len(s) == 1:
        return verdicts[0]
    return "/".join(sorted(s))


def main(quick: bool = False) -> dict:
    t_start = time.time()
    seeds = SEEDS[:2] if quick else SEEDS
    result: dict = {"frozen": FROZEN, "duration_s": DURATION, "t0_s": T0,
                    "setup_ranges": {k: list(v) for k, v in st.SETUP_RANGES.items()},
                    "predictions": PREDICTIONS}
    # 1. calibration at the sourced rates
    cal = {}
    for name, setup in members():
        cal[name] = measure(1, logged=True, **setup)
        print(f"sourced {name:28s} {cal[name]}", flush=True)
    result["sourced"] = cal
    result["sourced_seeds"] = {s: measure(s, **{}) for s in seeds}
    # 2. the stand-in load per member
    fits = {}
    for name, setup in members():
        n, m = stand_in(setup)
        fits[name] = {"outside_welchia": n, **m}
        print(f"stand-in {name:28s} n={n} {m}", flush=True)
    result["stand_in"] = fits
    # 3. bands
    bands = {}
    for pname, pk in PREDICTIONS.items():
        runs = []
        n0 = fits["frozen"]["outside_welchia"]
        for s in seeds:
            b = measure(s, outside_welchia=n0)
            p = measure(s, outside_welchia=n0, **pk)
            runs.append({"member": "frozen", "seed": s, "outside_welchia": n0, "base": b,
                         "pred": p, "verdict": verdict(b, p)})
        for name, setup in members()[1:]:
            n = fits[name]["outside_welchia"]
            if n is None:
                continue
            b = measure(1, **setup, outside_welchia=n)
            p = measure(1, **setup, outside_welchia=n, **pk)
            runs.append({"member": name, "seed": 1, "outside_welchia": n, "base": b,
                         "pred": p, "verdict": verdict(b, p)})
        # the same prediction at the sourced load (frozen set-up, seeds)
        sourced = []
        for s in seeds:
            b = measure(s)
            p = measure(s, **pk)
            sourced.append({"seed": s, "base": b, "pred": p, "verdict": verdict(b, p)})
        ans = band_answer([r["verdict"] for r in runs])
        bands[pname] = {"answer_at_stand_in": ans, "runs": runs, "sourced": sourced,
                        "answer_at_sourced": band_answer([r["verdict"] for r in sourced])}
        print(f"band {pname:42s} stand-in: {ans:10s} sourced: "
              f"{bands[pname]['answer_at_sourced']}", flush=True)
    result["bands"] = bands
    result["wall_s"] = round(time.time() - t_start, 1)
    return result


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    res = main(quick)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1, default=float) + "\n")
    print(f"wrote {OUT} in {res['wall_s']} s")
