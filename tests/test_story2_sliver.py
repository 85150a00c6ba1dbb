"""Story 2, issue 24 items 5a/5b: how a sliver of user time ends, whether its tick is a user
tick, and where the tasks run (routelab/core/softirq.py, core/sched.py, scenarios/rcu.py)."""

from __future__ import annotations

import pytest

from routelab import KnobError
from routelab.core.dev import SoftnetData
from routelab.core.rcu import QS_KINDS, Rcu
from routelab.core.sched import LOOP_NAME, Task, loop_runqueue
from routelab.core.softirq import INTERRUPTS, Cpu, interrupts, next_tick
from routelab.scenarios import rcu
from routelab.sim.ledger import Ledger


def _cpu(num: int, share: float = 0.25, loop_cpus=None, mode: str = "vanilla", **irq):
    r = Rcu(mode, 2, 0, lambda e, now: 0.0, {"rcu_callback": 0.0, "rcu_tasklet": 0.0})
    tasks = [dict(name=LOOP_NAME, kind="cpu", user_share=share, cpus_allowed=loop_cpus)]
    with interrupts(**irq):
        c = Cpu(num, 1000, 300, 0.0, loop_runqueue(num, 2, tasks), r, SoftnetData(num, 300),
                [], Ledger())
    return c, r


def _starts(n: int = 1000):
    # (sliver starts spread over the jiffy, well apart so the scheduler state moves on)
    return [k * 2e-3 + ((k * 0.381966) % 1.0) * 1e-3 for k in range(n)]


def test_a_sliver_ends_at_the_next_lapic_tick_or_cpu0s_irq0():
    c1, _ = _cpu(1, irq0_phase_s=0.3e-3)
    c0, _ = _cpu(0, irq0_phase_s=0.3e-3)
    assert c1.irq0_phase == -1.0 and c0.irq0_phase == pytest.approx(0.3e-3)
    for s in _starts(300):
        assert c1.sliver(s) == pytest.approx(next_tick(s, 1000))
        irq0 = next_tick(s - 0.3e-3, 1000) + 0.3e-3
        assert c0.sliver(s) == pytest.approx(min(next_tick(s, 1000), irq0))
    # IRQ0 ends about the phase's share of CPU0's slivers, and is no tick
    assert 0.2 < c0.irq0_ends / c0.slivers < 0.4
    assert c0.user_ticks + c0.sys_ticks + c0.irq0_ends == c0.slivers
    assert c1.irq0_ends == 0 and c1.user_ticks + c1.sys_ticks == c1.slivers


def test_an_unmasked_tx_interrupt_ends_slivers_first():
    c, _ = _cpu(1, tx_irq_s=65.5e-6)
    for s in _starts(200):
        assert c.sliver(s) == pytest.approx(min(s + 65.5e-6, next_tick(s, 1000)))
    assert c.user_ticks + c.sys_ticks < 0.15 * c.slivers    # a tick seldom comes first


@pytest.mark.parametrize("share", (0.0, 0.25, 1.0))
def test_the_tasks_user_share_decides_user_ticks(share):
    c, r = _cpu(1, share=share)
    for s in _starts(2000):
        c.sliver(s)
    ticks = c.user_ticks + c.sys_ticks
    assert ticks == c.slivers
    assert c.user_ticks / ticks == pytest.approx(share, abs=0.03)
    # vanilla: only the user ticks are quiescent states
    assert r.qsctr[1] == c.user_ticks


def test_a_tick_in_a_system_call_is_quiescent_for_call_rcu_bh_only():
    assert "system_tick" in QS_KINDS["bh"] and "system_tick" not in QS_KINDS["vanilla"]
    assert "ctxsw" not in QS_KINDS["bh"]       # schedule() bumps only the classic counter
    c, r = _cpu(1, share=0.0, mode="bh")
    for s in _starts(50):
        c.sliver(s)
    assert c.sys_ticks == 50 and r.qsctr[1] == 50
    c, r = _cpu(1, share=0.0, mode="vanilla")
    for s in _starts(50):
        c.sliver(s)
    assert r.qsctr[1] == 0


def test_a_cpu_without_the_loop_passes_idle_ticks():
    c, r = _cpu(1, share=0.0, loop_cpus=(0,))
    assert c.loop is None and c.rq.curr is c.rq.idle
    for s in _starts(40):
        c.sliver(s)
    assert c.user_ticks == 40 and r.qsctr[1] == 40      # idle outside softirq: quiescent


def test_interrupts_settings_are_validated_and_restored():
    before = dict(INTERRUPTS)
    with pytest.raises(ValueError, match="irq0_phase_s"):
        interrupts(irq0_phase_s=2e-3)
    with pytest.raises(ValueError, match="tx_irq_s"):
        interrupts(tx_irq_s=0.0)
    with interrupts(irq0_phase_s=None, tx_irq_s=1e-4):
        assert INTERRUPTS == {"irq0_phase_s": None, "tx_irq_s": 1e-4}
    assert INTERRUPTS == before
    rcu.run(seed=1, duration=0.1, irq0_phase_ms=0.9, tx_irq_us=30.0)
    assert INTERRUPTS == before                 # a run leaves the defaults as they were


def test_task_placement_and_share_are_validated():
    with pytest.raises(ValueError, match="user_share"):
        Task("x", user_share=1.5)
    with pytest.raises(ValueError, match="cpus_allowed"):
        Task("x", cpus_allowed=())
    rq = loop_runqueue(1, 2, [dict(name="hog", kind="cpu", cpus_allowed=(0,))])
    assert [p.name for p in rq.tasks] == ["ksoftirqd/1", LOOP_NAME]
    for bad in (dict(loops="cpu1", cpus=1), dict(loops="cpu2"), dict(others_on="cpu1", cpus=1),
                dict(user_tick_share=1.5), dict(irq0_phase_ms=1.0), dict(tx_irq_us=-1.0)):
        with pytest.raises(KnobError) as ei:
            rcu.run(seed=1, duration=0.1, **bad)
        assert next(k for k in bad if k != "cpus") in str(ei.value)


def test_one_pinned_loop_leaves_the_other_cpu_to_ksoftirqd():
    res = rcu.run(seed=1, duration=0.4, loops="cpu0")
    s = res.summary()
    names = [[t["name"] for t in cpu] for cpu in res.counters["sched"]["tasks"]]
    assert LOOP_NAME in names[0] and LOOP_NAME not in names[1]
    # CPU1's passes come from ksoftirqd, CPU0's mostly from irq_exit on top of the loop
    assert s["passes_ksoftirqd"][1] > 10 * s["passes_irq_exit"][1]
    assert s["passes_irq_exit"][0] > 3 * s["passes_ksoftirqd"][0]
    assert res.counters["sched"]["loop_gap_s"][1] == 0.0


def test_sleepers_can_be_pinned_to_one_cpu():
    res = rcu.run(seed=1, duration=0.3, sleepers=2, others_on="cpu0")
    names = [[t["name"] for t in cpu] for cpu in res.counters["sched"]["tasks"]]
    assert sum(n.startswith("sleeper") for n in names[0]) == 2
    assert not any(n.startswith("sleeper") for n in names[1])
