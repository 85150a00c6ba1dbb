"""Command line: ``python -m routelab <scenario> [--knob VALUE ...] [--seed N] [--json]``.

Flags are generated from each scenario's knob metadata (underscores become
dashes).  A bad value exits with status 2 and one line naming the knob and
its valid range.

Two more commands sit beside the scenarios:

* ``python -m routelab sweep SCENARIO --grid KNOB=V1,V2 [--grid ...] [--seeds N]
  [--knob VALUE ...] [--json | --csv FILE] [--scheduler tcp://HOST:PORT]``
  runs every grid point and seed (:func:`routelab.sweep.sweep`);
* ``python -m routelab replay --pcap FILE [--kernel K] [--cpu C] [--speedup X]``
  pushes a capture's IPv4 packets through the residence router
  (:mod:`routelab.scenarios.replay`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from . import procfs
from .errors import KnobError
from .scenarios import SCENARIOS, get

__all__ = ["main", "build_parser"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _literal(text: str) -> str:
    """Text for argparse's ``help=``, which it %-formats: a knob's own ``%`` stays literal."""
    return str(text).replace("%", "%%")


def _knob_flags(sp: argparse.ArgumentParser, mod) -> None:
    for knob in mod.KNOBS.values():
        default = "derived from the kernel profile / RAM" if knob.default is None \
            else knob.default
        unit = f" [{knob.unit}]" if knob.unit else ""
        sp.add_argument(_flag(knob.name), dest=knob.name, default=None, metavar="VALUE",
                        help=_literal(f"{knob.help}{unit} (default: {default}; "
                                      f"valid: {knob.valid_text()})"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m routelab",
        description="Run a routelab scenario and print its summary.",
        epilog="Use 'python -m routelab SCENARIO --help' for a scenario's knobs.")
    sub = parser.add_subparsers(dest="scenario", metavar="SCENARIO")
    for name in SCENARIOS:
        mod = get(name)
        sp = sub.add_parser(name, help=_literal(mod.TITLE),
                            description=mod.__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        _knob_flags(sp, mod)
        sp.add_argument("--seed", default="1", metavar="N",
                        help="random seed; same knobs + same seed = same result (default: 1)")
        sp.add_argument("--json", action="store_true",
                        help="print one JSON object {scenario, knobs, summary, counters}")
        sp.add_argument("--proc", action="store_true",
                        help="also print rt_cache_stat, netstat -i and the CPU profile")
        if hasattr(mod, "real_main"):
            sp.add_argument("--real", action="store_true",
                            help="run the same experiment on this machine's own kernel "
                                 "(unprivileged user + network namespace) beside the model")
    from . import cli_extra

    cli_extra.add_commands(sub, _knob_flags)
    return parser


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.scenario:
        parser.print_help()
        return 2
    if args.scenario in ("sweep", "replay"):
        from . import cli_extra

        return cli_extra.main(args)
    mod = get(args.scenario)
    knobs = {k: v for k, v in vars(args).items()
             if k in mod.KNOBS and v is not None}
    try:
        seed = int(args.seed)
        if seed < 0:
            raise ValueError
    except ValueError:
        print(f"error: seed={args.seed!r} is not valid: expected a non-negative integer",
              file=sys.stderr)
        return 2
    if getattr(args, "real", False):
        return mod.real_main(seed=seed, as_json=args.json, **knobs)
    try:
        res = mod.run(seed=seed, **knobs)
    except KnobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = res.summary()
    if args.json:
        counters = {k: v for k, v in res.counters.items()}
        print(json.dumps(_jsonable({"scenario": args.scenario, "knobs": res.extra["knobs"],
                                    "seed": seed, "summary": summary,
                                    "counters": counters})))
        return 0
    width = max(len(k) for k in summary)
    print(f"routelab {args.scenario} (seed {seed})")
    for k, v in summary.items():
        print(f"  {k:<{width}}  {v}")
    if args.proc:
        print("\n/proc/net/rt_cache_stat\n" + procfs.rt_cache_stat(res))
        print("\n$ netstat -i\n" + procfs.netstat_i(res))
        if res.counters.get("neigh") is not None:
            print("\n/proc/net/stat/arp_cache\n" + procfs.arp_cache_stat(res))
            print("\n$ ip neigh\n" + procfs.ip_neigh(res))
        print("\nCPU profile\n" + procfs.perf_top(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
