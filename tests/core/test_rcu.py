"""Tests for routelab.core.rcu: the 2.6.0 batch protocol the engine runs.

Kernel: kernel/rcupdate.c (2.6.0).  Each test drives the tasklet by hand, the
way the engine's tick and softirq boundaries do.
"""

from __future__ import annotations

import pytest

from routelab.core.dst import RCU_PENDING, DstEntry
from routelab.core.rcu import QS_KINDS, Rcu

COST = {"rcu_callback": 1e-6, "rcu_tasklet": 1e-5}
FREE = 2e-6
ALL_KINDS = ("idle", "user_tick", "ctxsw", "softirq_loop", "softirq_handler", "system_tick")


def make(mode="vanilla", ncpus=2, maxbatch=0):
    freed = []

    def free(e, now):
        freed.append((e.uid, now))
        return FREE

    return Rcu(mode, ncpus, maxbatch, free, COST), freed


def entries(n, start=1):
    return [DstEntry(start + i, 0.0) for i in range(n)]


def qs_then_tasklet(rcu, cpu, t, kind="idle"):
    """A tick that is a quiescent state, and the tasklet at its irq_exit."""
    rcu.quiescent(cpu, t, kind)
    return rcu.rcu_tasklet(cpu, t)


def test_unknown_mode_rejected():
    with pytest.raises(ValueError):
        make("classic")


def test_mode_none_frees_at_once():
    rcu, freed = make("none")
    (e,) = entries(1)
    assert rcu.call_rcu(0, e, 1.5) == pytest.approx(FREE)   # the free's own cost
    assert freed == [(1, 1.5)] and rcu.pending == 0 and not rcu.gp_active


def test_call_rcu_only_queues():
    rcu, freed = make(ncpus=1)
    (e,) = entries(1)
    assert rcu.call_rcu(0, e, 0.0) == 0.0
    assert e.state == RCU_PENDING and rcu.pending == 1 and rcu.nxt[0] == [e]
    assert not rcu.gp_active and rcu.rcu_pending(0)          # the tick must run the tasklet


def test_a_lone_callback_waits_two_grace_periods():
    # 2.6.0 tags a new batch curbatch + 1 while the grace period it starts is
    # numbered curbatch: even on an idle CPU the callback needs two of them
    rcu, freed = make(ncpus=1)
    (e,) = entries(1)
    rcu.call_rcu(0, e, 0.0)
    rcu.rcu_tasklet(0, 0.001)          # nxt -> cur (batch 2), grace period 1 starts, snapshot
    assert rcu.gp_active and rcu.batch[0] == 2 and rcu.curbatch == 1
    qs_then_tasklet(rcu, 0, 0.002)     # counter changed: grace period 1 ends, 2 starts
    assert rcu.completed == 1 and rcu.gp_active and freed == []
    qs_then_tasklet(rcu, 0, 0.003)     # first run in grace period 2: only the snapshot
    assert rcu.completed == 1
    qs_then_tasklet(rcu, 0, 0.004)     # grace period 2 ends
    assert rcu.completed == 2 and not rcu.gp_active and freed == []
    rcu.rcu_tasklet(0, 0.005)          # curbatch (3) has passed the batch (2): run it
    assert freed == [(1, 0.005)] and rcu.pending == 0 and rcu.invoked == 1
    assert rcu.gp_log == [(0.001, 0.002), (0.002, 0.004)]


def test_grace_period_waits_for_every_cpu():
    rcu, freed = make(ncpus=2)
    (e,) = entries(1)
    rcu.call_rcu(0, e, 0.0)
    rcu.rcu_tasklet(0, 0.001)                    # starts the grace period, CPU 0 snapshots
    rcu.rcu_tasklet(1, 0.001)                    # CPU 1 snapshots
    qs_then_tasklet(rcu, 0, 0.002)               # CPU 0 done
    # CPU 1 stays in softirq: its events are not quiescent in vanilla
    for k in range(3, 500):
        t = k * 0.001
        rcu.quiescent(1, t, "softirq_handler")
        rcu.quiescent(1, t, "softirq_loop")
        rcu.rcu_tasklet(1, t)
    assert rcu.gp_active and rcu.completed == 0 and rcu.mask == [False, True]
    qs_then_tasklet(rcu, 1, 0.6, "user_tick")
    assert rcu.completed == 1 and rcu.grace_periods() == pytest.approx([0.599])


def test_quiescent_state_before_the_snapshot_does_not_count():
    rcu, _ = make(ncpus=1)
    (e,) = entries(1)
    rcu.quiescent(0, 0.5, "idle")       # no grace period yet
    rcu.call_rcu(0, e, 1.0)
    rcu.rcu_tasklet(0, 1.0)             # grace period starts, snapshot at 1.0
    rcu.quiescent(0, 0.9, "idle")       # reported late, but stamped before the snapshot
    rcu.rcu_tasklet(0, 1.1)
    assert rcu.gp_active and rcu.completed == 0
    qs_then_tasklet(rcu, 0, 1.2)
    assert rcu.completed == 1


@pytest.mark.parametrize("mode", ["vanilla", "iter", "bh"])
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_which_kinds_are_quiescent(mode, kind):
    expected = {
        "vanilla": {"idle", "user_tick", "ctxsw"},
        "iter": {"idle", "user_tick", "ctxsw", "softirq_loop"},
        # call_rcu_bh (issue 24, the patch's rules): handler ends, user/idle ticks and any
        # tick outside softirq (one in a system call too); schedule() is not one
        "bh": {"idle", "user_tick", "system_tick", "softirq_handler"},
    }[mode]
    assert QS_KINDS[mode] == frozenset(expected)
    rcu, _ = make(mode, ncpus=1)
    rcu.call_rcu(0, entries(1)[0], 0.0)
    rcu.rcu_tasklet(0, 0.0)
    rcu.quiescent(0, 0.01, kind)
    assert rcu.qsctr[0] == (1 if kind in expected else 0)
    rcu.rcu_tasklet(0, 0.02)
    assert (rcu.completed == 1) == (kind in expected)


def test_callbacks_queued_while_a_batch_waits_stay_on_nxt():
    rcu, freed = make(ncpus=1)
    a, b = entries(2)
    rcu.call_rcu(0, a, 0.0)
    rcu.rcu_tasklet(0, 0.0)                 # a: batch 2
    rcu.call_rcu(0, b, 0.0005)
    qs_then_tasklet(rcu, 0, 0.001)          # grace period 1 ends; cur is still busy
    assert rcu.cur[0] == [a] and rcu.nxt[0] == [b]
    for k in range(2, 5):
        qs_then_tasklet(rcu, 0, k * 0.001)
    # grace period 2 ended at 0.003: a ran at 0.004, b moved up as batch 4
    assert [u for u, _ in freed] == [1] and rcu.cur[0] == [b] and rcu.batch[0] == 4
    for k in range(5, 12):
        qs_then_tasklet(rcu, 0, k * 0.001)
    assert [u for u, _ in freed] == [1, 2] and rcu.pending == 0


def test_tasklet_runs_at_most_maxbatch_callbacks():
    rcu, freed = make(ncpus=1, maxbatch=10)
    for e in entries(25):
        rcu.call_rcu(0, e, 0.0)
    for k in range(4):
        qs_then_tasklet(rcu, 0, k * 0.001)
    assert rcu.completed == 2 and not freed
    runs = []
    t = 0.01
    while rcu.pending:
        before = len(freed)
        w = rcu.rcu_tasklet(0, t)
        n = len(freed) - before
        runs.append((n, rcu.pending))
        assert w == pytest.approx(COST["rcu_tasklet"] + n * (COST["rcu_callback"] + FREE))
        assert rcu.rcu_pending(0) == (rcu.pending > 0)       # leftovers keep it scheduled
        t += 0.001
    assert runs == [(10, 15), (10, 5), (5, 0)]
    assert [u for u, _ in freed] == list(range(1, 26))       # FIFO order


def test_maxbatch_zero_means_unlimited():
    rcu, freed = make("bh", ncpus=1)
    for e in entries(40):
        rcu.call_rcu(0, e, 0.0)
    for k in range(5):
        qs_then_tasklet(rcu, 0, k * 0.001, "softirq_handler")
    assert len(freed) == 40 and rcu.pending == 0


def test_pending_counts_every_stage():
    rcu, _ = make(ncpus=2)
    es = entries(6)
    for i, e in enumerate(es):
        rcu.call_rcu(i % 2, e, 0.0)
    k = 0
    while rcu.pending == 6 and k < 50:
        k += 1
        for c in (0, 1):
            qs_then_tasklet(rcu, c, k * 0.001, "ctxsw")
        queued = sum(len(x) for x in rcu.nxt) + sum(len(x) for x in rcu.cur) \
            + sum(len(x) for x in rcu.done)
        assert queued + rcu.invoked == 6
    assert rcu.invoked > 0


def test_tasklet_at_runs_once_per_tick_and_only_when_pending():
    rcu, _ = make(ncpus=1)
    assert rcu.tasklet_at(0, 0.0005) == 0.0 and rcu.tasklet_runs == 0     # nothing pending
    rcu.call_rcu(0, entries(1)[0], 0.0006)
    assert rcu.tasklet_at(0, 0.0007) > 0 and rcu.tasklet_runs == 1        # tick 0 scheduled it
    assert rcu.tasklet_at(0, 0.0009) == 0.0 and rcu.tasklet_runs == 1     # same jiffy
    assert rcu.tasklet_at(0, 0.0012) > 0 and rcu.tasklet_runs == 2        # tick 1


def test_time_never_runs_backwards_inside_rcu():
    # the engine serves a CPU's softirq run as a block, so another CPU may report
    # an earlier time afterwards: RCU runs it at the latest time it has seen
    rcu, _ = make(ncpus=2)
    a, b = entries(2)
    rcu.call_rcu(0, a, 5.0)
    rcu.rcu_tasklet(0, 5.0)
    rcu.rcu_tasklet(1, 3.0)
    assert rcu.gp_start == 5.0 and rcu.snap_t[1] == 5.0
    for t in (6.0, 7.0, 8.0, 9.0):
        for c in (0, 1):
            qs_then_tasklet(rcu, c, t)
    starts = [s for s, _ in rcu.gp_log]
    assert starts == sorted(starts) and all(e >= s for s, e in rcu.gp_log)


def test_hooks_see_every_call_and_free(monkeypatch):
    from routelab.core import rcu as rcu_mod

    log = []
    monkeypatch.setitem(rcu_mod.HOOKS, "call_rcu",
                        lambda r, cpu, e, now: log.append(("call", e.uid)))
    monkeypatch.setitem(rcu_mod.HOOKS, "rcu_free", lambda e, now: log.append(("free", e.uid)))
    rcu, freed = make("bh", ncpus=1)
    (e,) = entries(1)
    rcu.call_rcu(0, e, 0.0)
    for k in range(6):
        qs_then_tasklet(rcu, 0, k * 0.001, "softirq_handler")
    assert log == [("call", 1), ("free", 1)] and freed == [(1, 0.004)]
