"""The O(1) scheduler driven by the engine's CPUs (routelab.core.softirq.Cpu + core.sched).

Kernel: kernel/sched.c, kernel/softirq.c, kernel/rcupdate.c (2.6.0).
"""

from __future__ import annotations

import numpy as np
import pytest

from routelab import Device, Fib, PacketTrace, Route, Router
from routelab.errors import KnobError
from routelab.scenarios import rcu


def _light_router(**kw):
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)]
    fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)])
    return Router("2.6.0", "p4-xeon-2400x2", devs, fib, ncpus=1, user_task=True, **kw)


def _light_trace(n=2000, duration=1.0, seed=3):
    rng = np.random.default_rng(seed)
    return PacketTrace.build(np.sort(rng.uniform(0, duration, n)), iif=0, length=64,
                             saddr=(10 << 24) + 5, daddr=(130 << 24) + rng.integers(1, 50, n))


def test_bad_task_specs_are_refused_with_the_knob_named():
    with pytest.raises(KnobError, match="tasks"):
        _light_router(tasks=[{"name": "x", "kind": "bogus"}])
    with pytest.raises(KnobError, match="tasks"):
        _light_router(tasks=[{"name": "x", "kind": "ksoftirqd"}])
    with pytest.raises(KnobError, match="tasks"):
        _light_router(tasks=[{"name": "x", "nice": 40}])
    devs = [Device("eth0", "e1000", 0)]
    with pytest.raises(KnobError, match="user_task"):
        Router("2.6.0", "p4-xeon-2400x2", devs, Fib(routes=[Route("0.0.0.0/0", oif=0)]),
               tasks=[{"name": "x"}])
    with pytest.raises(KnobError, match="sleepers"):
        rcu.run(duration=0.1, user_task=False, sleepers=1)


def test_light_load_the_loop_runs_whenever_softirq_does_not():
    res = _light_router().run(_light_trace(), 1.0)
    s = res.summary()
    # the loop is the only runnable task: it runs all the time softirq work does not
    assert s["user_ran_pct"] == pytest.approx(100.0 - s["cpu_busy_pct"], abs=1.0)
    assert s["user_max_delay_s"] < 0.005
    tasks = res.counters["sched"]["tasks"][0]
    loop = next(t for t in tasks if t["name"] == "gettimeofday")
    # every tick was charged to someone; at light load nearly all to the loop, in user mode
    assert loop["ticks"] > 950 and loop["softirq_ticks"] < 0.2 * loop["ticks"]


def test_flood_summary_has_the_scheduler_figures():
    res = rcu.run(seed=1, duration=0.5)
    s = res.summary()
    for key in ("rcu_grace_ms_p95", "sched_switches", "user_ran_pct",
                "worst_wait_ms_gettimeofday", "worst_wait_ms_ksoftirqd"):
        assert key in s, key
    assert s["rcu_grace_ms_p50"] <= s["rcu_grace_ms_p95"] <= s["rcu_grace_ms_max"]
    # softirq work takes nearly everything: the slivers between do_softirq calls
    # last until the next timer interrupt (about half a jiffy), a few per cent
    assert s["user_ran_pct"] < 5.0
    assert s["sched_switches"] > 0
    loop = next(t for t in res.counters["sched"]["tasks"][0] if t["name"] == "gettimeofday")
    # the loop is current most of the time, yet nearly every tick lands in softirq work,
    # and its sleep average is drained: priority 125 (nice 0, no bonus)
    assert loop["softirq_ticks"] > 0.95 * loop["ticks"] and loop["prio"] == 125


def test_interactive_sleepers_keep_the_loop_in_the_expired_array():
    # EXPIRED_STARVING: with sleepers in the active array the expired loop waits far
    # longer than ksoftirqd's 10 ms slice, up to ~1.02 s per runnable task
    base = rcu.run(seed=1, duration=3.0).summary()["user_max_delay_s"]
    res = rcu.run(seed=1, duration=3.0, sleepers=2)
    s = res.summary()
    assert s["user_max_delay_s"] > 2 * base
    assert s["user_max_delay_s"] < 1.02 * 4 + 0.5        # nr_running 4: the starvation bound
    prios = {t["name"]: t["prio"] for t in res.counters["sched"]["tasks"][0]}
    assert min(prios["sleeper0"], prios["sleeper1"]) < 125 == prios["gettimeofday"]


def test_schedule_passes_are_quiescent_states_in_the_engine():
    # vanilla 2.6.0 under the flood: grace periods end only through schedule() and
    # user-mode ticks, so there are at most about as many as there are such events
    res = rcu.run(seed=1, duration=1.0)
    gps = res.counters["rcu"]["grace_periods"]
    sw = res.summary()["sched_switches"]
    ticks = sum(res.counters["sched"]["user_ticks"])
    assert 0 < gps <= sw + ticks


def test_lighten_keeps_the_summary_and_drops_the_packet_columns():
    res = rcu.run(seed=1, duration=0.3)
    before = res.summary()
    assert res.lighten() is res
    assert all(v.size == 0 for v in res.packets.values())
    assert res.summary() == before and res.conservation()
