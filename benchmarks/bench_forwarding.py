"""Forwarding-path speed: the fast loop against an event-driven reference.

Usage::

    python benchmarks/bench_forwarding.py            # 3 timed runs per workload
    python benchmarks/bench_forwarding.py --quick    # 1 timed run, smaller reference subset

Three fixed workloads of exactly 1,000,000 offered packets each, built with
``routelab.traffic`` and pushed through ``Router.run`` (array stages, the
per-packet loop and result assembly -- the whole call):

``mixed``
    Full path, mixed traffic: kernel 2.6.0 (NAPI e1000, RCU) on one 2.4 GHz
    P4 Xeon; 2000 host pairs (IMIX) plus worm probes (a new destination
    each), TTL-expired, martian, bad-header, unreachable, prohibited, local
    (ping) and redirected (out by the input device) packets.
``hit``
    Cache-hit dominated: kernel 2.4.24 on a dual Opteron, e1000, 300 host
    pairs, IMIX, below capacity (~99 % route-cache hits).
``churn``
    Full churn: kernel 2.4.24, Opteron, worm probes only, so every packet
    misses the cache; small ``rhash_entries``/``gc_thresh``/``max_size``
    (1024/1024/2048) so ``dst_alloc`` calls ``rt_garbage_collect`` on every
    miss (a real pass every ``gc_min_interval`` or at ``max_size``).

For each workload the script reports

* fast-loop packets/s: median of 3 runs (1 with ``--quick``), and where
  the time goes (array stages, list columns, the loop, Result assembly);
* the reference (``reference_eventloop.py``, heapq and SimPy schedulers)
  on the *first 100,000 packets* (50,000 with ``--quick``) of the same
  trace, median of as many runs as the fast loop, checked packet by packet
  against the fast loop on that subset (outcome, start of service,
  departure within 1e-9 s, rt_cache_stat);
* the speed ratio fast (1 M run) / reference (subset), and the same ratio
  with the fast loop timed on the subset too;
* peak memory of the 1 M-packet run: the process's ``ru_maxrss`` (imports,
  trace, run and Result; each workload runs in its own process), and the
  tracemalloc peak of a run over the first 50,000 packets scaled x20 (the
  run's memory is linear in packets; tracemalloc slows this loop ~40x, so a
  traced 1 M run takes many minutes -- ``--full-tracemalloc`` does it).

Targets (from the issue): >= 1 M packets/s (``mixed``, ``hit``), >= 300 k
packets/s (``churn``), >= 30x the SimPy/heapq reference, < 500 MB peak.
The reference shares routelab's kernel objects (``RouteCache``, ``DstOps``,
``Rcu``), which are compiled too, so on a cache miss both run the same code:
the ratio measures the event machinery around it and is smallest where the
miss path dominates (``churn``).
The machine's speed is calibrated with a bare Python loop doing one dict
lookup+insert per item (the project's toolchain notes saw ~16 M/s).
Results are printed and written to ``benchmarks/results/forwarding.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

N_PACKETS = 1_000_000
TARGET_PPS = {"mixed": 1_000_000, "hit": 1_000_000, "churn": 300_000}
TARGET_RATIO = 30.0
TARGET_MB = 500.0
TITLES = {"mixed": "full path, mixed (2.6.0 NAPI+RCU, P4 Xeon x1)",
          "hit": "cache-hit dominated (2.4.24, Opteron)",
          "churn": "full churn: every packet misses, GC (2.4.24)"}
ROUTES = dict(inside="10.1.0.0", outside="130.0.0.0")


# --------------------------------------------------------------------------- workloads
def _fib():
    from routelab import Fib, Route

    return Fib(routes=[Route("10.1.0.0/16", oif=0), Route("192.0.2.0/24", oif=1),
                       Route("0.0.0.0/0", oif=1, gateway="192.0.2.254"),
                       Route("198.18.0.0/15", oif=1, rtype="unreachable"),
                       Route("198.20.0.0/16", oif=1, rtype="prohibit")],
               local_addrs=["10.1.255.254", "192.0.2.1"])


def _exactly(tr, n):
    """The first ``n`` packets of a (sorted) trace."""
    if len(tr) < n:
        raise RuntimeError(f"trace has {len(tr)} packets, fewer than {n}")
    return tr.take(np.arange(n))


def build(name: str, n: int = N_PACKETS):
    """Router, trace (exactly ``n`` packets) and duration of a workload."""
    from reference_eventloop import add_oddities

    from routelab import Device, PacketTrace, Router
    from routelab.traffic import addr_block, background, scanners

    rng = np.random.default_rng({"mixed": 11, "hit": 12, "churn": 13}[name])
    inside = addr_block(ROUTES["inside"], 200) + np.uint32(1)
    outside = addr_block(ROUTES["outside"], 5000) + np.uint32(1)
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)]
    if name == "hit":
        pps = 400_000.0
        dur = 1.02 * n / pps
        router = Router("2.4.24", "opteron-2400x2", devs, _fib(), seed=1, neighbours=False)
        tr = background(rng, pps=pps, duration=dur, inside=inside, outside=outside,
                        mix="imix", flows=300)
    elif name == "churn":
        pps = 150_000.0
        dur = 1.02 * n / pps
        router = Router("2.4.24", "opteron-2400x2", devs, _fib(), seed=1, neighbours=False,
                        sysctl=dict(rhash_entries=1024, gc_thresh=1024, max_size=2048))
        hosts = np.uint32(0x0A010000) + np.arange(1, 11, dtype=np.uint32)
        tr = scanners(rng, hosts=hosts, pps=pps / hosts.size, duration=dur)
    elif name == "mixed":
        pps = 200_000.0
        dur = 1.02 * n / pps
        router = Router("2.6.0", "p4-xeon-2400x2", devs, _fib(), ncpus=1, seed=1, neighbours=False,
                        sysctl=dict(rhash_entries=4096))
        bg = background(rng, pps=0.97 * pps, duration=dur, inside=inside, outside=outside,
                        mix="imix", flows=2000)
        add_oddities(rng, bg, inside, dict(
            ttl1=(0.0, 0.02), martian=(0.02, 0.025), bad_csum=(0.025, 0.03), local=(0.5, 0.51),
            unreach=(0.6, 0.61), prohibit=(0.61, 0.615), redirect=(0.8, 0.81)))
        worm = scanners(rng, hosts=np.array([0x0A010005, 0x0A010006], dtype=np.uint32),
                        pps=0.015 * pps, duration=dur)
        tr = PacketTrace.concat([bg, worm])
    else:
        raise ValueError(name)
    tr = _exactly(tr, n)
    return router, tr, float(tr.t[-1]) + 1e-3


# --------------------------------------------------------------------------- measuring
def bare_loop_mps(n: int = 2_000_000) -> float:
    """Machine calibration: M items/s of a loop with one dict lookup+insert each."""
    keys = list(range(1000)) * (n // 1000)
    d: dict = {}
    t0 = time.perf_counter()
    for k in keys:
        if d.get(k) is None:
            d[k] = 1
    return n / (time.perf_counter() - t0) / 1e6


class _Stopwatch:
    """Time the stages of Router.run by wrapping a few private methods (read only)."""

    def __init__(self) -> None:
        import routelab.result as res_mod
        import routelab.router as router_mod
        import routelab.windows as windows_mod

        self.acc: dict[str, float] = {}
        for fn, label in (("prepare", "array stages"), ("classify", "array stages")):
            setattr(windows_mod, fn, self._wrap(getattr(windows_mod, fn), label))
        # the window's set-up beyond the array stages: the packet columns
        run_cls = router_mod.Run
        run_cls._open_window = self._wrap(run_cls._open_window, "window set-up")
        assemble = res_mod.Result.assemble.__func__
        timed = self._wrap(assemble, "Result.assemble")
        res_mod.Result.assemble = classmethod(timed)

    def _wrap(self, f, label):
        acc = self.acc

        def g(*a, **k):
            t0 = time.perf_counter()
            out = f(*a, **k)
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t0
            return out
        return g


TRACE_PREFIX = 50_000


def worker_fast(name: str, runs: int, full_trace: bool) -> dict:
    """Time the fast loop on the full workload; measure its memory (own process)."""
    router, tr, dur = build(name)
    watch = _Stopwatch()
    times, parts = [], []
    res = None
    for _ in range(runs):
        watch.acc.clear()
        t0 = time.perf_counter()
        res = router.run(tr, dur)
        dt = time.perf_counter() - t0
        times.append(dt)
        p = dict(watch.acc)
        # (window set-up includes the array stages: what is left is the columns)
        p["list columns"] = p.pop("window set-up", 0.0) - p.get("array stages", 0.0)
        p["per-packet loop"] = dt - sum(p.values())
        parts.append(p)
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    med = statistics.median(times)
    part = parts[times.index(sorted(times)[len(times) // 2])]
    s = res.summary()
    info = {"offered": res.offered, "outcomes": {k: v for k, v in res.outcome_counts().items()
                                                 if v},
            "in_hit": s.get("in_hit", 0), "in_slow_tot": s.get("in_slow_tot", 0),
            "gc_total": s.get("gc_total", 0), "gc_ignored": s.get("gc_ignored", 0),
            "cpu_softirq_pct_max_cpu": s["cpu_softirq_pct_max_cpu"],
            "simulated_s": dur}
    del res
    # tracemalloc: the whole run (slow), or a prefix scaled up (memory is per packet)
    n_tr = len(tr) if full_trace else TRACE_PREFIX
    sub = tr if full_trace else _exactly(tr, n_tr)
    sub_dur = dur if full_trace else float(sub.t[-1]) + 1e-3
    t0 = time.perf_counter()
    tracemalloc.start()
    router.run(sub, sub_dur)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    traced_s = time.perf_counter() - t0
    scale = len(tr) / n_tr
    import routelab.accel as accel  # (imported by build: what this process ran)
    st = accel.status()
    return {"compiled": all(v == "compiled" for v in st.values()), "accel": st,
            "times_s": times, "median_s": med, "pps": len(tr) / med,
            "breakdown_s": {k: round(v, 4) for k, v in part.items()},
            "tracemalloc_peak_mb": peak / 2**20 * scale, "tracemalloc_packets": n_tr,
            "tracemalloc_scale": scale, "tracemalloc_run_s": traced_s,
            "maxrss_mb": maxrss_mb, "run": info}


def worker_ref(name: str, n_sub: int, runs: int) -> dict:
    """The reference on the first ``n_sub`` packets, checked against the fast loop."""
    from reference_eventloop import reference_run

    router, tr_full, _ = build(name)
    tr = _exactly(tr_full, n_sub)
    del tr_full
    dur = float(tr.t[-1]) + 1e-3
    t0 = time.perf_counter()
    fast = router.run(tr, dur)
    t_fast = time.perf_counter() - t0
    out = {"subset": n_sub, "fast_subset_pps": n_sub / t_fast}
    for sched in ("heapq", "simpy"):
        dts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            ref = reference_run(router, tr, dur, scheduler=sched)
            dts.append(time.perf_counter() - t0)
        dt = statistics.median(dts)
        o = fast.packets["outcome"][:n_sub]
        ts = fast.packets["t_start"][:n_sub]
        td = fast.packets["t_depart"][:n_sub]
        outcome_diff = int(np.count_nonzero(o != ref.outcome))
        start_diff = int(np.count_nonzero(~(np.abs(ts - ref.t_start) <= 1e-9)))
        both_nan = np.isnan(td) & np.isnan(ref.t_depart)
        depart_diff = int(np.count_nonzero(~(both_nan | (np.abs(td - ref.t_depart) <= 1e-9))))
        stat_same = fast.counters.get("rt_cache_stat") == ref.counters.get("rt_cache_stat")
        out[sched] = {"pps": n_sub / dt, "seconds": dt, "runs_s": dts, "events": ref.events,
                      "outcome_diff": outcome_diff, "t_start_diff": start_diff,
                      "t_depart_diff": depart_diff, "rt_cache_stat_same": bool(stat_same),
                      "same": outcome_diff == 0 and start_diff == 0 and depart_diff == 0
                      and bool(stat_same)}
    return out


def _child(mode: str, name: str, *args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, name,
           ",".join(str(a) for a in args)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"worker {mode} {name} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- report
def _fmt_pps(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 timed run, 50 k reference subset")
    ap.add_argument("--full-tracemalloc", action="store_true",
                    help="trace the whole 1 M run (very slow) instead of a 50 k prefix x20")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--workloads", default="mixed,hit,churn")
    ap.add_argument("--out", default=str(HERE / "results" / "forwarding.json"))
    a = ap.parse_args(argv)
    if a.worker:
        mode, name, arg = a.worker
        args = [int(x) for x in arg.split(",")]
        res = worker_fast(name, args[0], bool(args[1])) if mode == "fast" else \
            worker_ref(name, args[0], args[1])
        print(json.dumps(res))
        return 0

    runs = 1 if a.quick else 3
    n_sub = 50_000 if a.quick else 100_000
    t_all = time.perf_counter()
    calib = bare_loop_mps()
    print(f"routelab forwarding benchmark: {N_PACKETS:,} packets per workload, "
          f"{runs} timed run(s), reference on the first {n_sub:,}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"bare dict loop {calib:.1f} M/s (toolchain notes: ~16 M/s)", flush=True)
    results = {}
    for name in a.workloads.split(","):
        t0 = time.perf_counter()
        fast = _child("fast", name, runs, int(a.full_tracemalloc))
        ref = _child("ref", name, n_sub, runs)
        results[name] = {"title": TITLES[name], "fast": fast, "reference": ref,
                         "wall_s": time.perf_counter() - t0}
        print(f"  {name}: done in {results[name]['wall_s']:.0f} s", flush=True)

    # ---- table ----
    hdr = (f"{'workload':8s} {'fast pkt/s':>11s} {'target':>7s} | {'ref heapq':>9s} "
           f"{'ratio':>6s} {'ref SimPy':>9s} {'ratio':>6s} {'same':>5s} | "
           f"{'tracemalloc*':>12s} {'maxrss':>7s}")
    print()
    print(hdr)
    print("-" * len(hdr))
    summary = {}
    for name, r in results.items():
        f, rf = r["fast"], r["reference"]
        rh, rs = rf["heapq"], rf["simpy"]
        ratio_h = f["pps"] / rh["pps"]
        ratio_s = f["pps"] / rs["pps"]
        same = rh["same"] and rs["same"]
        print(f"{name:8s} {_fmt_pps(f['pps']):>11s} {_fmt_pps(TARGET_PPS[name]):>7s} | "
              f"{_fmt_pps(rh['pps']):>9s} {ratio_h:5.1f}x {_fmt_pps(rs['pps']):>9s} "
              f"{ratio_s:5.1f}x {'yes' if same else 'NO':>5s} | "
              f"{f['tracemalloc_peak_mb']:9.0f} MB {f['maxrss_mb']:4.0f} MB"
              + ("" if f["compiled"] else "   INTERPRETED"))
        summary[name] = {"compiled": f["compiled"],
                         "fast_pps": f["pps"], "target_pps": TARGET_PPS[name],
                         "meets_pps": f["pps"] >= TARGET_PPS[name],
                         "ratio_heapq": ratio_h, "ratio_simpy": ratio_s,
                         "ratio_heapq_same_subset": rf["fast_subset_pps"] / rh["pps"],
                         "ratio_simpy_same_subset": rf["fast_subset_pps"] / rs["pps"],
                         "meets_ratio": max(ratio_h, ratio_s) >= TARGET_RATIO,
                         "same_outcomes": same,
                         "peak_mb": max(f["tracemalloc_peak_mb"], f["maxrss_mb"]),
                         "meets_memory": max(f["tracemalloc_peak_mb"],
                                             f["maxrss_mb"]) < TARGET_MB}
    interp = [name for name, r in results.items() if not r["fast"]["compiled"]]
    if interp:
        # (e.g. a compiled module's source was edited while the benchmark ran, or
        # it was never built: routelab.accel then runs every module from source)
        why = next((k, v) for k, v in results[interp[0]]["fast"]["accel"].items()
                   if v != "compiled")
        print(f"WARNING: {', '.join(interp)} ran as pure Python, not compiled ({why}); "
              "rebuild with `make build` and run again")
    some = next(iter(results.values()))["fast"]
    print(f"* tracemalloc peak of the first {some['tracemalloc_packets']:,} packets "
          f"x{some['tracemalloc_scale']:.0f}" if some["tracemalloc_scale"] != 1 else
          "* tracemalloc peak of the whole run")
    print()
    for name, r in results.items():
        f = r["fast"]
        b = f["breakdown_s"]
        tot = f["median_s"]
        parts = ", ".join(f"{k} {v:.2f} s ({100 * v / tot:.0f} %)" for k, v in
                          sorted(b.items(), key=lambda kv: -kv[1]))
        run = f["run"]
        print(f"{name}: {r['title']}; {tot:.2f} s for {run['offered']:,} packets "
              f"({run['simulated_s']:.2f} simulated s): {parts}")
        print(f"    outcomes {run['outcomes']}; cache hits {run['in_hit']:,}, misses "
              f"{run['in_slow_tot']:,}, GC calls {run['gc_total']:,} "
              f"({run['gc_ignored']:,} ignored); busiest CPU {run['cpu_softirq_pct_max_cpu']} %")
        rf = r["reference"]
        for sched in ("heapq", "simpy"):
            x = rf[sched]
            if not x["same"]:
                print(f"    reference ({sched}) DIFFERS on the subset: "
                      f"outcome {x['outcome_diff']}, "
                      f"t_start {x['t_start_diff']}, t_depart {x['t_depart_diff']}, "
                      f"rt_cache_stat same: {x['rt_cache_stat_same']}")
        print(f"    same-subset ratio (fast loop also on the first {rf['subset']:,}): "
              f"heapq {summary[name]['ratio_heapq_same_subset']:.1f}x, "
              f"SimPy {summary[name]['ratio_simpy_same_subset']:.1f}x")
    print()
    print("targets: " + "; ".join(
        f"{n}: pps {'ok' if s['meets_pps'] else 'MISSED'}, ratio "
        f"{'ok' if s['meets_ratio'] else 'MISSED'}, "
        f"memory {'ok' if s['meets_memory'] else 'MISSED'}"
        for n, s in summary.items()))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"packets": N_PACKETS, "runs": runs, "reference_subset": n_sub, "quick": a.quick,
           "machine": {"python": platform.python_version(), "platform": platform.platform(),
                       "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                       "bare_dict_loop_mps": calib},
           "targets": {"pps": TARGET_PPS, "ratio": TARGET_RATIO, "peak_mb": TARGET_MB},
           "summary": summary, "workloads": results,
           "wall_s": time.perf_counter() - t_all}
    out.write_text(json.dumps(doc, indent=1, default=float))
    print(f"wrote {out} ({doc['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
