"""Speed of story 3's ``frag`` scenario (issue 22: 20,000 datagrams in <= 5 s).

Times ``frag.run`` with 20,000 datagrams of 32 KiB (rate 200/s for 100 s,
~455,000 fragments reaching the receiver at 1 % loss) for each receiver,
with the sender's frames offered as the trace (``sender="trace"``, the
default) and, for one receiver, injected by the host through its HostNic
(``sender="host"``); best of ``--repeat`` runs each (this VM's wall time
varies).  Writes ``benchmarks/results/frag.txt``.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_frag.py [--repeat 3] [--datagrams 20000]
                                                           [--no-host]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from routelab import accel
from routelab.scenarios import frag


def best(repeat: int, **kn) -> tuple[float, dict]:
    times, res = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        res = frag.run(seed=1, **kn)
        times.append(time.perf_counter() - t)
    return min(times), {k: res.summary()[k] for k in ("sent", "reasm_reqds", "delivered")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--datagrams", type=int, default=20000)
    ap.add_argument("--no-host", action="store_true", help="skip the sender='host' case")
    a = ap.parse_args()
    rate = 200.0
    dur = a.datagrams / rate
    compiled = all(v == "compiled" for v in accel.status().values())
    lines = [f"bench_frag: {a.datagrams} datagrams of 32768 B, rate {rate:g}/s, 1 % loss; "
             f"{'compiled' if compiled else 'pure Python'}; {platform.node()}",
             f"{'receiver':<14}{'sender':<8}{'best s':>8}{'fragments':>11}{'us/frag':>9}"]
    cases = [(rx, "trace") for rx in frag.RECEIVERS_ORDER]
    if not a.no_host:
        cases.append(("linux-2.4.19", "host"))
    for rx, sender in cases:
        t, s = best(a.repeat, receiver=rx, sender=sender, rate=rate, duration=dur)
        lines.append(f"{rx:<14}{sender:<8}{t:>8.2f}{s['reasm_reqds']:>11}"
                     f"{1e6 * t / s['reasm_reqds']:>9.1f}")
        print(lines[-1], flush=True)
    out = Path(__file__).with_name("results") / "frag.txt"
    out.write_text("\n".join(lines) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
