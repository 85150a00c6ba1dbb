"""Fingerprints of a fixed set of runs, for checking that a speed change is exact.

Usage::

    python benchmarks/fingerprint.py save  FILE    # record the fingerprints
    python benchmarks/fingerprint.py check FILE    # re-run and compare

A fingerprint is the summary, every counter, the profile, and a SHA-256 of
each per-packet, CPU-time and cache-sample array of one run.  A speed change
(compiling the loop, a faster data structure) must leave every fingerprint
unchanged, bit for bit; ``check`` lists what differs and exits 1 if anything
does.  Not a test: the runs take a minute or so.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time

import numpy as np

from routelab.scenarios import container, frag, nfs, ping, rcu, worm

CASES = [
    ("ping", ping.run, dict(duration=2.0, background_pps=20000)),
    ("worm 3 hosts", worm.run, dict(duration=3.0, worm_hosts=3)),
    ("worm 2 hosts 2.6.1", worm.run, dict(duration=2.0, worm_hosts=3, kernel="2.6.1")),
    ("worm 2.0", worm.run, dict(duration=2.0, worm_hosts=3, kernel="2.0")),
    ("worm gc_min_interval 0", worm.run, dict(duration=2.0, worm_hosts=3, gc_min_interval=0)),
    ("worm small cache", worm.run, dict(duration=2.0, worm_hosts=3, max_size=512,
                                        gc_thresh=256)),
    ("worm nocache slow uplink", worm.run, dict(duration=3.0, worm_hosts=2,
                                                kernel="2.4.24-nocache", uplink_mbps=6)),
    ("worm stand-in load, ARP timeouts", worm.run, dict(duration=5.0, worm_hosts=3,
                                                        outside_welchia=12)),
    ("worm blaster remote sweep", worm.run, dict(duration=4.0, worm_hosts=3, worm_kind="blaster",
                                                 welchia_sweep="remote")),
    ("rcu 2.6.0", rcu.run, dict(duration=0.5)),
    ("rcu iter", rcu.run, dict(duration=0.5, kernel="2.6.0-rcu-iter")),
    ("rcu bh", rcu.run, dict(duration=0.5, kernel="2.6.0-rcu-bh")),
    ("rcu flow_len 4", rcu.run, dict(duration=1.0, flow_len=4)),
    ("rcu with other tasks", rcu.run, dict(duration=1.5, sleepers=2, other_hogs=1)),
    ("rcu 2.4.24", rcu.run, dict(duration=0.5, kernel="2.4.24")),
    ("frag 2.4.19 loss", frag.run, dict(duration=2.0, loss_pct=1.0, receiver="linux-2.4.19")),
    ("frag 6.x host sender", frag.run, dict(duration=1.0, loss_pct=2.0, receiver="linux-6.x",
                                            sender="host")),
    ("frag solaris", frag.run, dict(duration=2.0, loss_pct=0.5, receiver="solaris", rate=300)),
    ("container", container.run, dict(duration=0.1)),
    ("container host", container.run, dict(duration=0.1, path="host")),
    ("container skip csum", container.run, dict(duration=0.1, cow="skip",
                                                pair_features="LLTX,HW_CSUM,SG,HIGHDMA")),
    ("nfs 2.4.19", nfs.run, dict(file_mb=1.0, duration=20.0)),
    ("nfs 2.4.20 txq 20 loss", nfs.run, dict(file_mb=1.0, duration=20.0, kernel="2.4.20",
                                             txqueuelen=20, loss_pct=0.5)),
    ("nfs server 2.4.19 own transport", nfs.run, dict(file_mb=1.0, duration=20.0,
                                                      server="linux-2.4.19", cwnd="2.4.19",
                                                      rpc_timer="fixed")),
]


def _h(a) -> str:
    a = np.ascontiguousarray(np.asarray(a))
    return hashlib.sha256(str(a.dtype).encode() + a.tobytes()).hexdigest()[:16]


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _h(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x).hex()
    return x


def fingerprint(res) -> dict:
    out = {"summary": _plain(res.summary()), "counters": _plain(res.counters),
           "profile": _plain(res.profile)}
    out["packets"] = {k: _h(v) for k, v in res.packets.items()}
    out["cpu"] = {k: _h(v) for k, v in res.cpu.items() if k != "intervals"}
    out["intervals"] = [[_h(s), _h(d)] for s, d in res.cpu["intervals"]]
    out["cache"] = {k: _h(v) for k, v in res.cache.items()}
    out["extra"] = _plain(res.extra)
    return out


def _name_of(o):   # functions and other objects: by name (an address would differ)
    return getattr(o, "__qualname__", type(o).__name__)


def plain_fingerprint(res) -> dict:
    """:func:`fingerprint` as plain JSON data (what ``save`` writes)."""
    return json.loads(json.dumps(fingerprint(res), default=_name_of))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("save", "check"):
        print(__doc__)
        return 2
    got, times = {}, {}
    for name, fn, kw in CASES:
        t0 = time.perf_counter()
        got[name] = plain_fingerprint(fn(seed=1, **kw))
        times[name] = time.perf_counter() - t0
        print(f"{name:28s} {times[name]:6.2f} s", flush=True)
    print(f"total {sum(times.values()):.1f} s")
    if argv[1] == "save":
        with open(argv[2], "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
        return 0
    with open(argv[2]) as f:
        want = json.load(f)
    bad = 0
    for name in want:
        if got.get(name) != want[name]:
            bad += 1
            a, b = want[name], got.get(name, {})
            diff = [k for k in a if a[k] != b.get(k)]
            print(f"DIFFERS: {name}: {diff}")
    print("all fingerprints identical" if not bad else f"{bad} case(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
