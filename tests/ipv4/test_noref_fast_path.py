"""ip_finish_output2_noref's inline common case gives what its general path gives.

The general path (arp_bind_neighbour, neigh_resolve_output, neigh_release) is
replayed here as it was before the inline case was added; runs of kernel 3.6
with each must agree bit for bit, including under a worm that fills and churns
the neighbour table.
"""

import sys
from pathlib import Path

import pytest

from routelab.core.neighbour import NEIGH_DROP
from routelab.ipv4 import arp
from routelab.scenarios import diversity, worm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fingerprint import plain_fingerprint  # noqa: E402


def _general(self, j, dev, nexthop, now):
    lg = self.ledger
    n = self.arp.arp_bind_neighbour(dev, nexthop, now)
    s = lg.t
    if isinstance(n, int):
        lg.t = s
        return NEIGH_DROP
    rc = self.arp.tbl.neigh_resolve_output(n, (self.wno, j), None, now)
    s += lg.t
    s += self.arp.tbl.neigh_release(n, now)
    lg.t = s
    return rc


@pytest.mark.parametrize("fn, knobs", [
    (diversity.run, dict(kernel="3.6", destinations=512, duration=0.2)),
    (worm.run, dict(kernel="3.6", duration=3.0, outside_welchia=12)),
])
def test_inline_case_equals_general_path(monkeypatch, fn, knobs):
    fast = plain_fingerprint(fn(seed=2, **knobs))
    monkeypatch.setattr(arp.RunSink, "ip_finish_output2_noref", _general)
    slow = plain_fingerprint(fn(seed=2, **knobs))
    assert fast == slow
