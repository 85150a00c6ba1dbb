"""Shared by benchmarks/sweep_story*.py: run a sweep, print it, save it for the notebooks.

``--save`` writes ``routelab/data/<name>``: the :class:`routelab.sweep.SweepTable`
JSON plus how it was made (routelab version, compiled or pure Python, wall
time, workers).  The table itself does not depend on any of those
(``tests/test_sweep.py``); ``tests/test_sweep_data.py`` re-runs a few of its
rows and checks they still come out the same.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "routelab" / "data"


def main(scenario: str, grid: dict, seeds: int, fixed: dict, name: str, argv: list[str]) -> int:
    import routelab
    from routelab import accel

    client = executor = None
    if "--scheduler" in argv:
        from distributed import Client

        client = Client(argv[argv.index("--scheduler") + 1])
        executor = client.get_executor()
    t0 = time.perf_counter()
    table = routelab.sweep(scenario, grid, seeds=seeds, executor=executor, **fixed)
    wall = time.perf_counter() - t0
    if client is not None:
        client.close()
    print(f"{table!r} in {wall:.0f} s wall ({os.cpu_count()} cores)")
    for f in table.failures:
        print("FAILED", f)
    if "--save" in argv:
        out = table.to_dict()
        out["made"] = {"by": f"benchmarks/{Path(__import__('sys').argv[0]).name}",
                       "routelab": routelab.__version__,
                       "compiled": accel.compiled(), "wall_s": round(wall, 1),
                       "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
        (DATA / name).write_text(json.dumps(out, allow_nan=False) + "\n")
        print(f"saved routelab/data/{name} ({(DATA / name).stat().st_size / 1e3:.0f} kB)")
    return 1 if table.failures else 0
