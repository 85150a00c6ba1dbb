"""Property tests: invariants of whole runs of the ping scenario under random knobs.

* conservation: every offered packet ends in exactly one outcome;
* reference counts never go negative and no dst is destroyed while held
  (the run drops every dst reference through core/dst.dst_release, which,
  like dst_destroy, raises AssertionError on a violation, compiled or not:
  a clean run is itself the proof, test_a_release_below_zero_raises_during_a_run
  shows that it would fail; we also check the entries after the run);
* the census: dst entries == hashed + waiting for RCU + on the dst garbage
  list, at every state sample the run records;
* determinism: the same knobs and seed give identical results.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routelab import CPUS, KERNELS
from routelab import router as router_mod
from routelab.core import dst as dst_mod
from routelab.core import rcu as rcu_mod
from routelab.core.dst import DESTROYED, GARBAGE, RCU_PENDING
from routelab.scenarios import ping

KNOBS = st.fixed_dictionaries({
    "kernel": st.sampled_from(sorted(KERNELS)),
    "cpu": st.sampled_from(sorted(CPUS)),
    "nic": st.sampled_from(["e100", "e1000", "tg3"]),
    # mostly real load (hypothesis would otherwise favour near-empty runs)
    "background_pps": st.one_of(st.sampled_from([400, 1500, 3000]), st.integers(0, 3000)),
    "duration": st.sampled_from([0.2, 0.5, 1.0, 1.5]),
    "size_mix": st.sampled_from(["large", "imix", "small"]),
    "flows": st.sampled_from([1, 30, 2000]),
    "ram_mb": st.sampled_from([4, 64]),
    # small limits so that GC, goal misses and dst overflow really happen
    "gc_thresh": st.one_of(st.sampled_from([4, 16]), st.integers(1, 64)),
    "max_size": st.one_of(st.sampled_from([16, 64]), st.integers(1, 256)),
    "gc_min_interval": st.sampled_from([0.0, 0.05, 0.5, 5.0]),
    "gc_elasticity": st.integers(1, 8),
    "gc_timeout": st.sampled_from([0.2, 1.0, 300.0]),
    "gc_interval": st.sampled_from([0.1, 0.5, 60.0]),
    "secret_interval": st.sampled_from([0.0, 0.3, 600.0]),
    "txqueuelen": st.integers(0, 20),
    "netdev_max_backlog": st.sampled_from([5, 300]),
    "ping_size": st.sampled_from([84, 3000]),
    "ping_df": st.booleans(),
    "ping_ttl": st.sampled_from([1, 64]),
    "mtu": st.sampled_from([576, 1500]),
})


class Watch:
    """Checks the cache invariants each time the run records a state sample."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.runs: list = []
        self.samples = 0
        orig_init, orig_record = router_mod.Run.__init__, router_mod.Run._record
        watch = self

        def init(run, *a, **kw):
            try:
                orig_init(run, *a, **kw)
            finally:
                watch.runs.append(run)

        def record(run, t):
            orig_record(run, t)
            watch.check_sample(run)

        self.destroyed: list = []

        def destroyed(ops, e):
            # (called after dst_destroy, which raises if e is still referenced)
            watch.destroyed.append(e)

        mp.setattr(router_mod.Run, "__init__", init)
        mp.setattr(router_mod.Run, "_record", record)
        mp.setitem(dst_mod.HOOKS, "dst_destroy", destroyed)

    def check_sample(self, run) -> None:
        self.samples += 1
        cache = run.cache
        if cache is None:
            return
        c = cache.census()
        assert c["entries"] == c["hashed"] + c["rcu"] + c["garbage"], c
        assert c["hashed"] == cache.hashed, (c, cache.hashed)
        d = cache.dst
        assert d.entries == d.allocated - d.destroyed
        rcu = cache.rcu
        queued = sum(len(x) for x in rcu.nxt) + sum(len(x) for x in rcu.cur) \
            + sum(len(x) for x in rcu.done)
        assert rcu.pending == queued
        for chain in cache.table:
            for e in chain:
                assert e.refcnt >= 0 and e.state != DESTROYED
        for e in d.garbage:
            assert e.refcnt >= 0 and e.state == GARBAGE
        for lists in (rcu.nxt, rcu.cur, rcu.done):
            for q in lists:
                for e in q:
                    assert e.refcnt >= 0 and e.state == RCU_PENDING


def _check_result(res, run, destroyed=()) -> None:
    oc = res.outcome_counts()
    assert res.conservation()
    assert sum(oc.values()) == res.offered == int(np.count_nonzero(
        res.packets["t"][: res.offered] >= 0))
    o = res.packets["outcome"]
    t, t0, dep = res.packets["t"], res.packets["t_start"], res.packets["t_depart"]
    fwd = o == 0
    # "forwarded" is the outcome array's zero: prove every such packet really left
    assert np.all(np.isfinite(dep[fwd]))
    assert np.all(dep[fwd] >= t0[fwd]) and np.all(t0[fwd] >= t[fwd])
    cache = run.cache
    if cache is None:
        return
    # after the run every packet has released its dst: no leaked or negative refcounts
    for chain in cache.table:
        for e in chain:
            assert e.refcnt == 0
    for e in cache.dst.garbage:
        assert e.refcnt == 0
    # a reference dropped after the entry was destroyed (use after free) would
    # leave it negative; one taken after destroy would leave it positive
    assert len(destroyed) == cache.dst.destroyed
    for e in destroyed:
        assert e.refcnt == 0 and e.state == DESTROYED
    s = res.summary()
    assert s["entries_end"] == cache.dst.entries
    # every refused allocation dropped exactly one packet (injected echo replies included)
    assert res.outcome_counts(offered_only=False)["drop_dst_overflow"] == cache.dst.alloc_failed


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(KNOBS, st.integers(0, 2**16))
def test_invariants_hold_for_random_knobs(knobs, seed):
    with pytest.MonkeyPatch.context() as mp:
        w = Watch(mp)
        res = ping.run(seed=seed, **knobs)
    assert len(w.runs) == 1 and w.samples > 0
    _check_result(res, w.runs[0], w.destroyed)


def test_the_knob_space_reaches_gc_and_overflow():
    # guard against the property test silently exercising nothing: one fixed
    # point of its space must drive the GC into goal misses and overflow
    with pytest.MonkeyPatch.context() as mp:
        w = Watch(mp)
        res = ping.run(seed=3, kernel="2.6.0", cpu="k6-200", nic="e100", background_pps=2000,
                       duration=0.5, gc_thresh=8, max_size=32, txqueuelen=2)
    s = res.summary()
    assert s["gc_goal_miss"] > 0 and s["gc_dst_overflow"] > 0 and s["drop_dst_overflow"] > 0
    assert s["rcu_pending_max"] > 0 and w.samples >= 50
    _check_result(res, w.runs[0], w.destroyed)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(KNOBS, st.integers(0, 2**16))
def test_same_knobs_and_seed_give_identical_results(knobs, seed):
    a = ping.run(seed=seed, **knobs)
    b = ping.run(seed=seed, **knobs)
    sa, sb = a.summary(), b.summary()
    assert sa.keys() == sb.keys()
    assert all(_same(sa[k], sb[k]) for k in sa), {k: (sa[k], sb[k]) for k in sa
                                                   if not _same(sa[k], sb[k])}
    for name in ("t", "outcome", "t_start", "t_depart", "kind", "tag"):
        assert np.array_equal(a.packets[name], b.packets[name], equal_nan=name != "outcome"
                              and a.packets[name].dtype.kind == "f"), name
    assert a.counters["ip"] == b.counters["ip"]
    if "rt_cache_stat" in a.counters:
        assert a.counters["rt_cache_stat"] == b.counters["rt_cache_stat"]


def test_different_seeds_give_different_traces():
    kw = dict(background_pps=500, duration=0.5)
    a, b = ping.run(seed=1, **kw), ping.run(seed=2, **kw)
    ta, tb = a.packets["t"][: a.offered], b.packets["t"][: b.offered]
    assert ta.shape != tb.shape or not np.array_equal(ta, tb)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_invariants_hold_in_the_worm_scenario(kernel):
    from routelab.scenarios import worm

    with pytest.MonkeyPatch.context() as mp:
        w = Watch(mp)
        res = worm.run(seed=2, kernel=kernel, duration=0.5, ram_mb=64, gc_thresh=32,
                       max_size=128)
    assert w.samples > 0
    _check_result(res, w.runs[0], w.destroyed)


@pytest.mark.parametrize("kernel", ["2.4.24", "2.6.0", "2.6.0-rcu-iter", "2.6.0-rcu-bh"])
def test_invariants_with_receive_work_on_both_cpus(kernel):
    # each NIC interrupts its own CPU, so both CPUs unhash entries and call_rcu
    from routelab import Device, Fib, PacketTrace, Route, Router

    rng = np.random.default_rng(4)
    n = 3000
    iif = rng.integers(0, 2, n)
    inside = (10 << 24) + rng.integers(1, 200, n)
    outside = (130 << 24) + rng.integers(1, 5000, n)
    tr = PacketTrace.build(np.sort(rng.uniform(0, 0.5, n)), iif=iif, length=64,
                           saddr=np.where(iif == 0, inside, outside),
                           daddr=np.where(iif == 0, outside, inside))
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 1)]
    fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)])
    r = Router(kernel, "p4-xeon-2400x2", devs, fib,
               sysctl={"ram_mb": 4, "gc_thresh": 16, "max_size": 128, "gc_min_interval": 0.0})
    queued, freed = {}, {}

    def call_rcu(rcu, cpu, entry, now):
        queued[entry.uid] = now

    def rcu_free(entry, now):
        freed[entry.uid] = now

    with pytest.MonkeyPatch.context() as mp:
        w = Watch(mp)
        mp.setitem(rcu_mod.HOOKS, "call_rcu", call_rcu)
        mp.setitem(rcu_mod.HOOKS, "rcu_free", rcu_free)
        res = r.run(tr, 0.5)
    _check_result(res, w.runs[0], w.destroyed)
    rcu = w.runs[0].cache.rcu
    assert res.summary()["gc_total"] > 0 and freed.keys() <= queued.keys()
    if rcu.mode == "none":
        assert queued == freed                    # 2.4: freed on the spot
        return
    assert rcu.invoked == len(freed) > 0 and rcu.completed == len(rcu.gp_log)
    # the RCU guarantee: a whole grace period lies between call_rcu and the free
    starts = np.array([g[0] for g in rcu.gp_log])
    ends = np.array([g[1] for g in rcu.gp_log])
    for uid, t_free in freed.items():
        covering = (starts >= queued[uid]) & (ends <= t_free)
        assert covering.any(), (uid, queued[uid], t_free)


def test_invariants_hold_while_the_neighbour_table_overflows():
    # 2.4.24 with a small ARP table: dead on-link probes queue skbs (each
    # holding its dst), time out to FAILED, and meet a full table; every dst
    # reference the queues took must be returned and every packet accounted for
    from routelab.scenarios import worm

    with pytest.MonkeyPatch.context() as mp:
        w = Watch(mp)
        res = worm.run(seed=3, kernel="2.4.24", duration=5.0, worm_hosts=3, worm_kind="mixed",
                       outside_welchia=2, neigh_gc_thresh3=256, active_hosts=40)
    run = w.runs[0]
    _check_result(res, run, w.destroyed)
    oc = res.outcome_counts(offered_only=False)
    # (each probe has its own address, so no queue outgrows unres_qlen here;
    # tests/test_neighbour.py covers that limit)
    assert oc["drop_neigh_failed"] > 0 and oc["drop_neigh_overflow"] > 0
    tbl = run.arp.tbl
    c = tbl.census()
    assert c["entries"] == tbl.entries <= 256 + 1   # neigh_alloc refuses only above gc_thresh3
    assert tbl.incomplete() == c["INCOMPLETE"]       # the running count matches a recount
    qlen = tbl.parms.queue_len
    for n in tbl:
        assert n.refcnt >= 1 and not n.dead and len(n.arp_queue) <= qlen


# A run whose TX completion finds a dst nobody holds any more: a host beyond
# eth1 takes the reference of every frame it sees queued (as a bug would).
VIOLATION = r"""
import json
import numpy as np
import routelab.accel as accel
from routelab import Device, Fib, PacketTrace, Route, Router
from routelab.hosts import Host


class Thief(Host):
    kinds = ("background",)

    def deliver(self, j, t):
        for e in self.run.devices[self.dev].txq.dsts():
            if e is not None:
                e.refcnt = 0


fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)])
r = Router("2.4.24", "opteron-2400x2", [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)],
           fib, hosts={1: Thief()})
tr = PacketTrace.build(np.arange(50) / 1000.0, saddr=(10 << 24) + 5, daddr=(130 << 24) + 1,
                       length=200)
try:
    r.run(tr, 0.1)
    err = ""
except AssertionError as exc:
    err = str(exc)
print(json.dumps({"compiled": accel.compiled(), "error": err}))
"""


def _violation(pure: bool) -> dict:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "ROUTELAB_PURE"}
    env["PYTHONPATH"] = str(root)
    if pure:
        env["ROUTELAB_PURE"] = "1"
    p = subprocess.run([sys.executable, "-c", VIOLATION], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_a_release_below_zero_raises_during_a_run(pure):
    from routelab import accel

    if not pure and not accel.compiled():
        pytest.skip("routelab is not compiled here: " + accel.status()["routelab.router"])
    out = _violation(pure)
    assert out["compiled"] is (not pure)
    assert "dst_release below zero" in out["error"]

