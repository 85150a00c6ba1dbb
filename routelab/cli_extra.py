"""The two commands beside the scenarios: ``sweep`` and ``replay`` (``routelab.cli``).

``python -m routelab sweep worm --grid worm_hosts=0,1,2,3 --grid cpu=k6-200,duron-900
--seeds 3 --duration 5 --json`` runs a knob grid (:func:`routelab.sweep.sweep`);
``--scheduler tcp://HOST:PORT`` sends the runs to a running Dask scheduler.

``python -m routelab replay --pcap FILE --kernel 2.4.24 --cpu k6-200 --speedup 2``
replays a capture through the residence router (:mod:`routelab.replay`).

Bad input (a grid knob or value, a pcap that cannot be read, a scheduler that
does not answer) exits with status 2 and one line; a sweep with failed runs
prints one line per failure on stderr and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import KnobError, RoutelabError
from .scenarios import SCENARIOS, get

__all__ = ["add_commands", "main"]

# printed by a sweep without --json when --keys is not given (the ones the scenario has)
DEFAULT_KEYS = ("cpu_busy_pct", "ping_rtt_ms_p50", "ping_loss_pct", "dropped_packets")


def add_commands(sub, knob_flags) -> None:
    """Add ``sweep SCENARIO ...`` and ``replay ...`` to the CLI's sub-parsers."""
    sw = sub.add_parser("sweep", help="run a scenario over a grid of knob values and seeds",
                        description="Run SCENARIO at every combination of the --grid values, "
                                    "once per seed; print one row per run.")
    ssub = sw.add_subparsers(dest="sweep_scenario", metavar="SCENARIO")
    for name in SCENARIOS:
        mod = get(name)
        sp = ssub.add_parser(name, help=mod.TITLE.replace("%", "%%"),
                             description=f"Sweep {name}: --grid KNOB=V1,V2,... (repeat for "
                                         "more knobs); any other knob flag fixes that knob "
                                         "for every run.")
        sp.add_argument("--grid", action="append", default=[], metavar="KNOB=V1,V2,...",
                        help="a knob and its values (LO:HI[:STEP] for an integer range); "
                             "repeat for more knobs")
        sp.add_argument("--seeds", default="1", metavar="N|S1,S2,...",
                        help="N: seeds 1..N; or a comma-separated list (default: 1)")
        sp.add_argument("--json", action="store_true",
                        help="print the whole table as one JSON object "
                             "{scenario, grid, seeds, fixed, columns, rows}")
        sp.add_argument("--csv", metavar="FILE", help="also write the table as CSV to FILE")
        sp.add_argument("--keys", metavar="K1,K2",
                        help="summary keys to print without --json (default: "
                             + ", ".join(DEFAULT_KEYS) + ", where the scenario has them)")
        sp.add_argument("--workers", type=int, default=None, metavar="N",
                        help="process-pool size (default: one per core)")
        sp.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                        help="run on a Dask cluster: the address of its scheduler "
                             "(every worker needs routelab installed)")
        sp.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it goes to stderr, and only to a terminal)")
        knob_flags(sp, mod)

    rp = sub.add_parser("replay", help="replay a pcap's IPv4 packets through the residence "
                                       "router (story 1's set-up)",
                        description="Replay a capture (pcap or pcapng) through story 1's "
                                    "residence router; see routelab/replay.py.")
    rp.add_argument("--pcap", required=True, metavar="FILE", help="the capture to replay")
    rp.add_argument("--kernel", default="2.4.24", metavar="K",
                    help="kernel profile (default: 2.4.24)")
    rp.add_argument("--cpu", default="k6-200", metavar="C", help="CPU profile (default: k6-200)")
    rp.add_argument("--speedup", default="1", metavar="X",
                    help="play the capture X times faster (default: 1)")
    rp.add_argument("--inside", default=None, metavar="NET/LEN[,NET/LEN]",
                    help="the capture's own inside networks, mapped onto the residence's "
                         "hosts (default: the RFC 1918 private ranges)")
    rp.add_argument("--seed", default="1", metavar="N", help="random seed (default: 1)")
    rp.add_argument("--json", action="store_true", help="print one JSON object")


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _seeds(text: str):
    try:
        parts = [int(p) for p in str(text).split(",")]
    except ValueError:
        raise KnobError("seeds", text, "N (seeds 1..N) or a comma-separated list of "
                        "non-negative integers") from None
    return parts[0] if len(parts) == 1 and "," not in str(text) else parts


def _executor(args):
    if args.scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise RoutelabError("--scheduler needs dask.distributed "
                                "(pip install -r requirements.txt)") from None
        try:
            client = Client(args.scheduler, timeout="10s")
        except Exception as exc:
            raise RoutelabError(f"cannot reach the Dask scheduler at {args.scheduler}: "
                                f"{type(exc).__name__}: {exc}") from None
        return client, client.get_executor()
    if args.workers is not None:
        if args.workers < 1:
            raise KnobError("workers", args.workers, "an integer >= 1")
        import concurrent.futures as cf
        import multiprocessing

        return None, cf.ProcessPoolExecutor(args.workers,
                                            mp_context=multiprocessing.get_context("spawn"))
    return None, None


def _sweep_main(args) -> int:
    from .sweep import parse_grid_arg, sweep

    name = args.sweep_scenario
    if not name:
        return _fail("sweep needs a scenario: python -m routelab sweep SCENARIO --grid "
                     "KNOB=V1,V2 (one of " + ", ".join(SCENARIOS) + ")")
    mod = get(name)
    fixed = {k: v for k, v in vars(args).items() if k in mod.KNOBS and v is not None}
    client = executor = None
    try:
        if not args.grid:
            raise KnobError("--grid", None, "at least one KNOB=V1,V2,... (e.g. worm_hosts=0,1,2)")
        grid = {}
        for text in args.grid:
            knob, values = parse_grid_arg(text)
            if knob in grid:
                raise KnobError("--grid", text, f"each knob once ({knob} is given twice)")
            grid[knob] = values
        seeds = _seeds(args.seeds)
        client, executor = _executor(args)
        table = sweep(name, grid, seeds=seeds, executor=executor,
                      progress=not args.no_progress, **fixed)
    except (KnobError, RoutelabError) as exc:
        return _fail(str(exc))
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
        if client is not None:
            client.close()
    if args.csv:
        table.to_csv(args.csv)
    if args.json:
        print(table.to_json())
    else:
        keys = args.keys.split(",") if args.keys else \
            [k for k in DEFAULT_KEYS if k in table.columns]
        bad = [k for k in keys if k not in table.columns]
        if bad:
            return _fail(str(KnobError("keys", bad[0], "summary keys: "
                                       + ", ".join(table.summary_keys))))
        cols = [*table.knobs, "seed", *keys]
        cells = [[str(r.get(c)) for c in cols] for r in table.rows]
        width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        print(f"routelab sweep {name}: {len(table)} runs")
        print("  ".join(c.rjust(w) for c, w in zip(cols, width, strict=True)))
        for row in cells:
            print("  ".join(v.rjust(w) for v, w in zip(row, width, strict=True)))
    for f in table.failures:
        point = ", ".join(f"{k}={f[k]!r}" for k in table.knobs)
        print(f"failed: {point}, seed={f['seed']}: {f['error']}", file=sys.stderr)
    return 1 if table.failures else 0


def _replay_main(args) -> int:
    from . import replay
    from .cli import _jsonable

    try:
        try:
            speedup = float(args.speedup)
        except ValueError:
            raise KnobError("speedup", args.speedup, "a number in "
                            f"[{replay.SPEEDUP_RANGE[0]:g}, {replay.SPEEDUP_RANGE[1]:g}]") from None
        try:
            seed = int(args.seed)
        except ValueError:
            raise KnobError("seed", args.seed, "a non-negative integer") from None
        inside = args.inside.split(",") if args.inside else None
        res = replay.run(args.pcap, kernel=args.kernel, cpu=args.cpu, speedup=speedup,
                         inside=inside, seed=seed)
    except (KnobError, RoutelabError) as exc:
        return _fail(str(exc))
    summary = res.summary()
    if args.json:
        print(json.dumps(_jsonable({"scenario": "replay", "knobs": res.extra["knobs"],
                                    "seed": seed, "summary": summary,
                                    "pcap": res.extra["pcap"]})))
        return 0
    info = res.extra["pcap"]
    print(f"routelab replay {args.pcap}: {info['ipv4_packets']} IPv4 packets of "
          f"{info['frames']} frames ({info['skipped_total']} skipped), "
          f"{info['span_s']:.3f} s captured, played in {res.extra['knobs']['duration']:.3f} s")
    width = max(len(k) for k in summary)
    for k, v in summary.items():
        print(f"  {k:<{width}}  {v}")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.scenario == "sweep":
        return _sweep_main(args)
    return _replay_main(args)
