"""Tests for routelab.core.rcu: grace periods, quiescent states per mode, batching."""

from __future__ import annotations

import pytest

from routelab.core.dst import RCU_PENDING, DstEntry
from routelab.core.rcu import QS_KINDS, Rcu

COST = {"rcu_callback": 1e-6, "rcu_tasklet": 1e-5}
ALL_KINDS = ("idle", "user_tick", "ctxsw", "softirq_loop", "softirq_handler")


def make(mode="vanilla", ncpus=2, maxbatch=10):
    freed = []

    def free(e, now):
        freed.append((e.uid, now))
        return 2e-6

    return Rcu(mode, ncpus, maxbatch, free, COST), freed


def entries(n, start=1):
    return [DstEntry(start + i, 0.0) for i in range(n)]


def test_unknown_mode_rejected():
    with pytest.raises(ValueError):
        make("classic")


def test_mode_none_frees_at_once():
    rcu, freed = make("none")
    (e,) = entries(1)
    assert rcu.call_rcu(0, e, 1.5) == pytest.approx(2e-6)   # the free's own cost
    assert freed == [(1, 1.5)] and rcu.pending == 0 and not rcu.gp_active


def test_grace_period_waits_for_every_cpu():
    rcu, freed = make("vanilla", ncpus=2)
    (e,) = entries(1)
    rcu.call_rcu(0, e, 0.0)
    assert e.state == RCU_PENDING and rcu.pending == 1 and rcu.gp_active
    rcu.quiescent(0, 0.001, "ctxsw")
    # CPU 1 stays in softirq: it reports only events that are not quiescent in vanilla
    for k in range(1, 500):
        rcu.quiescent(1, k * 0.001, "softirq_handler")
        rcu.quiescent(1, k * 0.001, "softirq_loop")
    assert rcu.gp_active and not rcu.has_done(0) and rcu.pending == 1
    assert rcu.rcu_tasklet(0, 0.6) == 0.0 and freed == []
    rcu.quiescent(1, 0.7, "user_tick")
    assert not rcu.gp_active and rcu.has_done(0)
    assert rcu.grace_periods() == pytest.approx([0.7])
    rcu.rcu_tasklet(0, 0.8)
    assert freed == [(1, 0.8)] and rcu.pending == 0 and rcu.invoked == 1


def test_quiescent_state_before_grace_period_does_not_count():
    rcu, _ = make("vanilla", ncpus=1)
    (e,) = entries(1)
    rcu.quiescent(0, 0.5, "idle")          # no grace period yet: ignored
    rcu.call_rcu(0, e, 1.0)
    rcu.quiescent(0, 0.9, "idle")          # stamped before the grace period began
    assert rcu.gp_active
    rcu.quiescent(0, 1.0, "idle")
    assert not rcu.gp_active and rcu.has_done(0)


@pytest.mark.parametrize("mode", ["vanilla", "iter", "bh"])
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_which_kinds_are_quiescent(mode, kind):
    expected = {
        "vanilla": {"idle", "user_tick", "ctxsw"},
        "iter": {"idle", "user_tick", "ctxsw", "softirq_loop"},
        "bh": {"idle", "user_tick", "ctxsw", "softirq_loop", "softirq_handler"},
    }[mode]
    assert QS_KINDS[mode] == frozenset(expected)
    rcu, _ = make(mode, ncpus=1)
    rcu.call_rcu(0, entries(1)[0], 0.0)
    rcu.quiescent(0, 0.01, kind)
    assert (not rcu.gp_active) == (kind in expected)


def test_callbacks_queued_during_a_grace_period_wait_for_the_next():
    rcu, _ = make("vanilla", ncpus=1)
    a, b = entries(2)
    rcu.call_rcu(0, a, 0.0)
    rcu.call_rcu(0, b, 0.5)                 # joins nxt: the running GP may predate b's unhash
    rcu.quiescent(0, 1.0, "idle")
    assert list(rcu.done[0]) == [a] and rcu.gp_active        # a new GP started for b
    rcu.quiescent(0, 2.0, "idle")
    assert list(rcu.done[0]) == [a, b]
    assert rcu.grace_periods() == pytest.approx([1.0, 1.0])


def test_other_cpus_callback_does_not_ride_an_older_grace_period():
    # CPU 1 passes its quiescent state, *then* queues a callback while CPU 0's
    # grace period is still running.  That grace period began before the entry
    # was unhashed, so it cannot cover it: the entry needs the next one (classic
    # RCU gives a new batch the number curbatch + 1).
    rcu, _ = make("vanilla", ncpus=2)
    a, b = entries(2)
    rcu.call_rcu(0, a, 0.0)
    rcu.quiescent(1, 1.0, "idle")
    rcu.call_rcu(1, b, 2.0)
    rcu.quiescent(0, 3.0, "idle")           # ends the first grace period
    assert list(rcu.done[0]) == [a]
    assert not rcu.has_done(1) and rcu.gp_active
    rcu.quiescent(0, 4.0, "idle")
    rcu.quiescent(1, 4.5, "idle")
    assert list(rcu.done[1]) == [b]
    assert rcu.pending == 2


def test_tasklet_runs_at_most_maxbatch():
    rcu, freed = make("vanilla", ncpus=1, maxbatch=10)
    for e in entries(25):
        rcu.call_rcu(0, e, 0.0)
    rcu.quiescent(0, 0.1, "idle")
    rcu.quiescent(0, 0.2, "idle")           # 24 of them were in nxt: second GP
    assert len(rcu.done[0]) == 25 and rcu.pending == 25
    runs = []
    while rcu.has_done(0):
        before = len(freed)
        t = rcu.rcu_tasklet(0, 1.0)
        n = len(freed) - before
        runs.append((n, rcu.pending))
        assert t == pytest.approx(COST["rcu_tasklet"] + n * (COST["rcu_callback"] + 2e-6))
    assert runs == [(10, 15), (10, 5), (5, 0)]
    assert [u for u, _ in freed] == list(range(1, 26))    # FIFO order


def test_maxbatch_zero_means_unlimited():
    rcu, freed = make("bh", ncpus=1, maxbatch=0)
    for e in entries(40):
        rcu.call_rcu(0, e, 0.0)
    rcu.quiescent(0, 0.1, "softirq_handler")
    rcu.quiescent(0, 0.2, "softirq_handler")
    rcu.rcu_tasklet(0, 0.3)
    assert len(freed) == 40 and rcu.pending == 0


def test_pending_counts_every_stage():
    rcu, _ = make("vanilla", ncpus=2)
    es = entries(5)
    for i, e in enumerate(es):
        rcu.call_rcu(i % 2, e, 0.1 * i)
    assert rcu.pending == 5
    for t in (1.0, 2.0, 3.0):
        rcu.quiescent(0, t, "ctxsw")
        rcu.quiescent(1, t, "ctxsw")
    assert rcu.pending == 5 and sum(len(d) for d in rcu.done) == 5
    rcu.rcu_tasklet(0, 4.0)
    assert rcu.pending == 5 - len(es[0::2])
    rcu.rcu_tasklet(1, 4.0)
    assert rcu.pending == 0


def test_next_grace_period_never_starts_before_a_queued_call():
    # The router does not process CPUs in time order: a quiescent state stamped
    # t=3 may be reported after another CPU's call_rcu at t=5.  The grace period
    # that covers the t=5 callback must not start before t=5.
    rcu, _ = make("vanilla", ncpus=2)
    a, b = entries(2)
    rcu.call_rcu(0, a, 0.0)
    rcu.call_rcu(1, b, 5.0)
    rcu.quiescent(1, 2.0, "idle")
    rcu.quiescent(0, 3.0, "idle")           # ends the first grace period (a)
    assert list(rcu.done[0]) == [a] and rcu.gp_active and rcu.gp_start == 5.0
    rcu.quiescent(0, 4.0, "idle")
    rcu.quiescent(1, 4.5, "idle")           # both before b was queued: ignored
    assert rcu.gp_active and not rcu.has_done(1)
    rcu.quiescent(0, 6.0, "idle")
    rcu.quiescent(1, 6.0, "idle")
    assert list(rcu.done[1]) == [b] and rcu.gp_log[-1] == (5.0, 6.0)


def test_hooks_see_every_call_and_free(monkeypatch):
    from routelab.core import rcu as rcu_mod

    log = []
    monkeypatch.setitem(rcu_mod.HOOKS, "call_rcu",
                        lambda r, cpu, e, now: log.append(("call", e.uid)))
    monkeypatch.setitem(rcu_mod.HOOKS, "rcu_free", lambda e, now: log.append(("free", e.uid)))
    rcu, freed = make("bh", ncpus=1)
    (e,) = entries(1)
    rcu.call_rcu(0, e, 0.0)
    rcu.quiescent(0, 0.001, "softirq_handler")
    rcu.rcu_tasklet(0, 0.002)
    assert log == [("call", 1), ("free", 1)] and freed == [(1, 0.002)]
