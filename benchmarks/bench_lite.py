"""How much slower the explorers are as pure Python, and the browser's shorter windows.

JupyterLite runs routelab as pure Python in Pyodide (WebAssembly).  This
measures the explorers' slider latency (``bench_sliders.bench_explorer``: each
control moved across a few values, value change -> finished redraw) three ways,
each in a process of its own:

* ``compiled``     -- the compiled per-packet stages, the explorer's own defaults;
* ``pure``         -- ``ROUTELAB_PURE=1`` (the pure-Python sources: a proxy for
                      Pyodide, which is slower still), the same defaults;
* ``pure-lite``    -- ``ROUTELAB_PURE=1`` with ``routelab.lite.EXPLORER_DEFAULTS``.

Usage::

    PYTHONPATH=. python benchmarks/bench_lite.py [--only NAME] [--save]

``--save`` writes ``benchmarks/results/lite_sliders.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "lite_sliders.json"

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import bench_sliders
from routelab import accel
from routelab.lite import EXPLORER_DEFAULTS
from routelab.notebook.explorers import EXPLORERS
name, lite = sys.argv[2], sys.argv[3] == "1"
kw = EXPLORER_DEFAULTS[name] if lite else {}
r = bench_sliders.bench_explorer(name, lambda: EXPLORERS[name](**kw), 1)
# the window control itself (moved to 10-12 s by bench_sliders) is reported apart:
# a student who asks for a long window waits for it; the other moves should not
window = {"duration", "file_mb", "steps"}
moves = {k: c for k, c in r["controls"].items() if k not in window}
errors = [e for c in r["controls"].values() for e in c["errors"]]
if errors:   # a move the explorer refused was not measured: say so, loudly
    sys.exit(f"{name} {kw}: " + "; ".join(errors[:3]))
print(json.dumps({"compiled": accel.compiled(), "kwargs": kw,
                  "worst_median_s": max(c["median_s"] for c in moves.values()),
                  "worst_cpu_median_s": max(c["cpu_median_s"] for c in moves.values()),
                  "worst_p95_s": max(c["p95_s"] for c in moves.values()),
                  "window_control_median_s": {k: c["median_s"] for k, c in r["controls"].items()
                                              if k in window},
                  "medians": {k: c["median_s"] for k, c in moves.items()},
                  "cpu_medians": {k: c["cpu_median_s"] for k, c in moves.items()}}))
"""


def measure(name: str, pure: bool, lite: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ROUTELAB_PURE", None)
    env.pop("MPLBACKEND", None)
    if pure:
        env["ROUTELAB_PURE"] = "1"
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD, str(ROOT), name,
                        "1" if lite else "0"], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench_lite: {name} failed: {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    from routelab.lite import EXPLORER_DEFAULTS

    names = [argv[i + 1] for i, a in enumerate(argv) if a == "--only"] or list(EXPLORER_DEFAULTS)
    out = json.loads(OUT.read_text()) if OUT.exists() and "--save" in argv else {}
    out.setdefault("explorers", {})
    print(f"{'explorer':<24} {'compiled':>9} {'pure':>7} {'x':>5} {'pure-lite':>10}  "
          "(worst control's median move but the window's, s of CPU; load average "
          f"{os.getloadavg()[0]:.1f})")
    for name in names:
        c = measure(name, False, False)
        p = measure(name, True, False)
        lite = measure(name, True, True) if EXPLORER_DEFAULTS[name] else p
        factor = p["worst_cpu_median_s"] / max(c["worst_cpu_median_s"], 1e-9)
        out["explorers"][name] = {"compiled": c, "pure": p, "pure_lite": lite,
                                  "slowdown_cpu": round(factor, 2)}
        print(f"{name:<24} {c['worst_cpu_median_s']:>9.3f} {p['worst_cpu_median_s']:>7.3f} "
              f"{factor:>5.1f} {lite['worst_cpu_median_s']:>10.3f}  {lite['kwargs']} "
              f"(wall: {c['worst_median_s']:.3f}, {p['worst_median_s']:.3f}, "
              f"{lite['worst_median_s']:.3f})", flush=True)
    out["loadavg"] = round(os.getloadavg()[0], 2)
    out["cpus"] = os.cpu_count()
    if "--save" in argv:
        OUT.write_text(json.dumps(out, indent=1) + "\n")
        print(f"saved {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
