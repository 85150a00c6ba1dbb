"""Tests for routelab.core.rcu26: RCU batches as kernel/rcupdate.c (v2.6.0) runs them.

The toy driver below plays the kernel's order of events per CPU and jiffy: maybe a
context switch (a quiescent state from schedule()), then the timer tick (which calls
rcu_check_callbacks only if rcu_pending), then the tasklet at that tick's irq_exit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.core.rcu26 import RCU_QSCTR_INVALID, Rcu26
from routelab.core.sched import Runqueue, Task


def warm(r):
    """Move every counter off 0 (RCU_QSCTR_INVALID), as on any machine that has run."""
    for cpu in range(r.ncpus):
        r.note_context_switch(cpu)
        if r.rcu_bh is not None:
            r.local_bh_enable(cpu)


def drive(r, start, stop, qs=lambda cpu, j: False, kind=lambda cpu, j: {"user": False},
          log=None):
    for j in range(start, stop):
        t = j / 1000
        for cpu in range(r.ncpus):
            if qs(cpu, j):
                r.note_context_switch(cpu)
            r.tick(cpu, **kind(cpu, j))
            if r.tasklet_pending(cpu):
                n = r.rcu_process_callbacks(cpu, t)
                if log is not None and n:
                    log.append((j, cpu, n))


def every(period, phase=(0, 0)):
    return lambda cpu, j: (j - phase[cpu]) % period == 0


def test_validation():
    with pytest.raises(ValueError, match="mode"):
        Rcu26(2, mode="classic")
    with pytest.raises(ValueError, match="maxbatch"):
        Rcu26(2, maxbatch=-1)
    with pytest.raises(ValueError, match="call_rcu_bh"):
        Rcu26(2).call_rcu_bh(0, print)


def test_initial_control_block():
    r = Rcu26(2)
    c = r.rcu.ctrl
    assert (c.curbatch, c.maxbatch, c.rcu_cpu_mask) == (1, 1, set())
    assert not r.rcu_pending(0) and r.rcu.data[0].last_qsctr == RCU_QSCTR_INVALID


def test_rcu_pending_conditions():
    r = Rcu26(2)
    warm(r)
    r.call_rcu(0, print)
    assert r.rcu_pending(0) and not r.rcu_pending(1)      # curlist empty, nxtlist not
    r.tick(0, False)
    r.rcu_process_callbacks(0)
    assert r.rcu.data[0].batch == 2 and r.rcu.ctrl.rcu_cpu_mask == {0, 1}
    assert r.rcu_pending(1)                               # awaited by the grace period
    assert r.qs_pending(1)


def test_call_rcu_only_appends_and_the_tick_only_schedules_the_tasklet():
    r = Rcu26(1)
    r.call_rcu(0, print, now=0.5)
    assert len(r.rcu.data[0].nxtlist) == 1 and not r.tasklet_pending(0)
    r.tick(0, False)
    assert r.tasklet_pending(0) and len(r.rcu.data[0].nxtlist) == 1


def test_idle_system_callback_waits_two_grace_periods():
    r = Rcu26(2)
    warm(r)
    out = []
    r.call_rcu(0, out.append, "a", now=0.0)
    drive(r, 1, 300, qs=every(10, (0, 5)))
    assert out == ["a"]
    # tagged curbatch + 1 = 2 while the grace period it started is numbered 1
    assert [b for b, _, _ in r.rcu.ctrl.gp_log] == [1, 2]
    assert r.rcu.ctrl.curbatch == 3
    end_gp2 = r.rcu.ctrl.gp_log[1][2]
    assert r.max_latency >= end_gp2


def test_callback_queued_mid_batch_waits_for_that_batch_plus_its_own():
    r = Rcu26(2)
    warm(r)
    out = []
    r.call_rcu(1, out.append, "a", now=0.0)
    drive(r, 1, 4, qs=every(20, (0, 10)))                # grace period 1 is running
    assert r.rcu.ctrl.rcu_cpu_mask and r.rcu.ctrl.curbatch == 1
    r.call_rcu(0, out.append, "b", now=0.004)
    drive(r, 4, 5, qs=every(20, (0, 10)))
    assert r.rcu.data[0].batch == 2                       # waits for batch 1 and batch 2
    log = []
    drive(r, 5, 400, qs=every(20, (0, 10)), log=log)
    assert sorted(out) == ["a", "b"]
    ends = {b: e for b, _, e in r.rcu.ctrl.gp_log}
    assert set(ends) == {1, 2}                            # no third grace period needed
    b_run = next(j for j, cpu, _ in log if cpu == 0) / 1000
    assert b_run >= ends[2] > ends[1]


def test_callback_behind_a_busy_curlist_of_its_own_cpu_stays_on_nxtlist():
    r = Rcu26(2)
    warm(r)
    out = []
    r.call_rcu(0, out.append, "a", now=0.0)
    drive(r, 1, 3, qs=every(20, (0, 10)))
    r.call_rcu(0, out.append, "b", now=0.003)
    drive(r, 3, 25, qs=every(20, (0, 10)))
    d = r.rcu.data[0]
    assert [x[1] for x in d.curlist] == ["a"] and [x[1] for x in d.nxtlist] == ["b"]
    drive(r, 25, 600, qs=every(20, (0, 10)))
    assert out == ["a", "b"]
    # "a": batches 1 and 2; "b" moved to curlist only after that, tagged 4: batches 3, 4
    assert [b for b, _, _ in r.rcu.ctrl.gp_log] == [1, 2, 3, 4]


def test_first_snapshot_of_a_zero_counter_does_not_count():
    r = Rcu26(1)
    r.call_rcu(0, print)
    r.tick(0, False)
    r.rcu_process_callbacks(0)
    assert r.rcu.data[0].last_qsctr == RCU_QSCTR_INVALID  # recorded 0 == "invalid"


def test_a_cpu_that_is_never_quiescent_blocks_every_grace_period():
    r = Rcu26(2)
    warm(r)
    out = []
    for k in range(50):
        r.call_rcu(0, out.append, k, now=k / 1000)
    # CPU 1 spends every tick in softirq and never schedules
    drive(r, 1, 10_000, qs=lambda cpu, j: cpu == 0 and j % 5 == 0,
          kind=lambda cpu, j: {"user": cpu == 0 and j % 2 == 0, "in_softirq": cpu == 1})
    assert out == [] and r.rcu.ctrl.gp_log == [] and r.rcu.ctrl.rcu_cpu_mask == {1}


@pytest.mark.parametrize("kind, qs", [
    ({"user": True}, True),
    ({"user": False, "idle": True}, True),
    ({"user": False, "idle": True, "in_softirq": True}, False),
    ({"user": False, "idle": True, "in_hardirq": True}, False),
    ({"user": False}, False),                           # a system call
    ({"user": False, "in_softirq": True}, False),
])
def test_which_ticks_are_quiescent_in_vanilla(kind, qs):
    r = Rcu26(1)
    before = r.rcu.data[0].qsctr
    r.rcu_check_callbacks(0, **kind)
    assert (r.rcu.data[0].qsctr == before + 1) is qs
    assert r.tasklet_pending(0)


def _one_gp(mode, kind, bh=False, handler=False, ms=2000):
    r = Rcu26(2, mode=mode)
    warm(r)
    out = []
    (r.call_rcu_bh if bh else r.call_rcu)(0, out.append, 1)

    def k(cpu, j):
        if handler and cpu == 1:
            r.softirq_handler_done(1)
        return kind if cpu == 1 else {"user": True}
    drive(r, 1, ms, kind=k)
    return out


def test_softirq_and_syscall_ticks_never_end_a_grace_period_in_vanilla():
    assert _one_gp("vanilla", {"user": False, "in_softirq": True}) == []
    assert _one_gp("vanilla", {"user": False}) == []


def test_bh_flavour_counts_ticks_outside_softirq_and_handler_ends():
    assert _one_gp("bh", {"user": False}, bh=True) == [1]
    assert _one_gp("bh", {"user": False, "in_softirq": True}, bh=True) == []
    assert _one_gp("bh", {"user": False, "in_softirq": True}, bh=True, handler=True) == [1]
    # the classic flavour is unchanged in bh mode
    assert _one_gp("bh", {"user": False}, bh=False) == []


def test_local_bh_enable_counts_only_when_leaving_the_outermost_section():
    r = Rcu26(1, mode="bh")
    r.local_bh_enable(0, outermost=False)
    assert r.rcu_bh.data[0].qsctr == 0
    r.local_bh_enable(0)
    assert r.rcu_bh.data[0].qsctr == 1 and r.rcu.data[0].qsctr == 0


def _toy_latency(q, gap, n=40):
    """Two CPUs, each quiescent every ``q`` ms (half a period apart); ``n`` callbacks,
    one every ``gap`` ms on alternating CPUs."""
    r = Rcu26(2)
    warm(r)
    for j in range(1, n * gap + 12 * q):
        t = j / 1000
        if j % gap == 0 and j < n * gap:
            r.call_rcu((j // gap) % 2, lambda a: None, now=t)
        for cpu in range(2):
            if (j - cpu * q // 2) % q == 0:
                r.note_context_switch(cpu)
            r.tick(cpu, False)
            if r.tasklet_pending(cpu):
                r.rcu_process_callbacks(cpu, t)
    assert r.waiting() == 0 and r.invoked == n - 1
    return r


@pytest.mark.parametrize("q", [10, 30, 100])
def test_grace_period_latency_in_a_two_cpu_toy(q):
    # a grace period: snapshot at a tick, the next QS (at most q later), a tick
    sparse = _toy_latency(q, gap=5 * q)
    gp = [e - s for _, s, e in sparse.rcu.ctrl.gp_log]
    assert max(gp) <= (q + 2) / 1000
    # an isolated callback waits two grace periods: ~1-2 QS intervals plus ticks
    mean = sparse.sum_latency / sparse.invoked
    assert 1.5 * q / 1000 <= mean and sparse.max_latency <= (2 * q + 3) / 1000
    # callbacks arriving all the time (the DoS): most also wait on nxtlist behind their
    # CPU's busy curlist, so latency reaches 3-4 grace periods
    dense = _toy_latency(q, gap=1)
    mean = dense.sum_latency / dense.invoked
    assert 2.5 * q / 1000 <= mean and dense.max_latency <= (4 * q + 4) / 1000


def test_maxbatch_limits_callbacks_per_run_and_reschedules():
    r = Rcu26(1, maxbatch=4)
    warm(r)
    out = []
    for k in range(10):
        r.call_rcu(0, out.append, k)
    runs = []
    for j in range(1, 60):
        r.note_context_switch(0)
        r.tick(0, False)
        while r.tasklet_pending(0):
            n = r.rcu_process_callbacks(0, j / 1000)
            runs.append(n)
            if n == 0:
                break
    assert [n for n in runs if n] == [4, 4, 2] and out == list(range(10))


def test_vanilla_runs_the_whole_done_list_at_once():
    r = Rcu26(1)
    warm(r)
    out = []
    for k in range(30_000):
        r.call_rcu(0, out.append, k)
    log = []
    drive(r, 1, 50, qs=lambda cpu, j: True, log=log)
    assert log and log[0][2] == 30_000 and len(log) == 1


def test_runqueue_schedule_feeds_rcu():
    r = Rcu26(1)
    rq = Runqueue(rcu=r)
    hog = Task("hog")
    rq.add(hog)
    out = []
    r.call_rcu(0, out.append, "x")
    for j in range(0, 300):
        rq.scheduler_tick(j / 1000, in_softirq=True)        # never a QS by itself
        if r.tasklet_pending(0):
            r.rcu_process_callbacks(0, j / 1000)
        if rq.need_resched or j == 0:
            rq.schedule(j / 1000)
    # only schedule() (slice end every 102 ms, plus the first pick) gave quiescent states
    assert r.rcu.data[0].qsctr == rq.qsctr == 3
    assert out == ["x"]


@settings(max_examples=60, deadline=None)
@given(ncpus=st.integers(1, 3), mode=st.sampled_from(["vanilla", "bh"]),
       maxbatch=st.sampled_from([0, 1, 3]),
       events=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7)), max_size=400))
def test_property_callbacks_run_once_after_every_cpu_passed_a_qs(ncpus, mode, maxbatch,
                                                                 events):
    r = Rcu26(ncpus, mode=mode, maxbatch=maxbatch)
    ran = []

    def flavour_ctr(bh):
        f = r.rcu_bh if bh else r.rcu
        return [d.qsctr for d in f.data]

    def cb(arg):
        uid, bh, snap = arg
        now = flavour_ctr(bh)
        assert all(n > s for n, s in zip(now, snap, strict=True)), "ran before a QS"
        ran.append(uid)

    uid = 0
    for cpu, ev in events:
        cpu %= ncpus
        if ev == 0:
            bh = mode == "bh" and uid % 2 == 1
            (r.call_rcu_bh if bh else r.call_rcu)(cpu, cb, (uid, bh, flavour_ctr(bh)))
            uid += 1
        elif ev == 1:
            r.note_context_switch(cpu)
        elif ev == 2:
            r.tick(cpu, True)
        elif ev == 3:
            r.tick(cpu, False, idle=True)
        elif ev == 4:
            r.tick(cpu, False, in_softirq=True)
        elif ev == 5:
            r.softirq_handler_done(cpu)
            r.local_bh_enable(cpu)
        else:
            if r.tasklet_pending(cpu):
                r.rcu_process_callbacks(cpu)
    # then let every CPU be quiescent until everything is done
    for _ in range(20 + 4 * uid):
        for cpu in range(ncpus):
            r.note_context_switch(cpu)
            r.tick(cpu, True)
            if r.tasklet_pending(cpu):
                r.rcu_process_callbacks(cpu)
    assert sorted(ran) == list(range(uid))                 # each exactly once
    assert r.waiting() == 0


# -- pairing with the engine's RCU (routelab.core.rcu) ----------------------------------
#
# core/rcu.Rcu is what a run uses; this module is the same 2.6.0 protocol written
# event by event.  Driven by the same events in time order, the two must agree on
# every grace period (start, end) and on when each callback runs.  Per jiffy and CPU
# the driver plays: call_rcu's, a context switch, the end of a softirq handler run
# (in the engine: "softirq_handler", and "softirq_loop" as the run ends the call),
# then the tick (user, idle, softirq or a BH-disabled system call) and, if the tick
# scheduled it, the tasklet at the tick's irq_exit.
#
# Since issue 24 (item 6, the patch's rules) the engine's single bh flavour counts
# what rcu26's rcu_bh flavour counts: handler ends and ticks outside softirq (a tick
# in a system call with BH enabled is the engine's "system_tick"), not schedule().  So bh is paired
# on every stream, context switches included.  (The engine's "iter" mode has no
# counterpart here.)

TICKS = ("user", "idle", "softirq", "kernel", "syscall")   # kernel: BH disabled
STEP = st.tuples(st.integers(0, 2), st.booleans(), st.booleans(), st.sampled_from(TICKS))


def paired_runs(mode, ncpus, maxbatch, steps):
    """Run core.rcu.Rcu and Rcu26 side by side; return both (grace periods, frees)."""
    from routelab.core.dst import DstEntry
    from routelab.core.rcu import Rcu

    eng_freed, r26_freed = [], []
    clock = {"t": 0.0}
    eng = Rcu(mode, ncpus, maxbatch, lambda e, now: eng_freed.append((e.uid, now)) or 0.0,
              {"rcu_callback": 0.0, "rcu_tasklet": 0.0})
    r26 = Rcu26(ncpus, mode, maxbatch)
    queue = r26.call_rcu if mode == "vanilla" else r26.call_rcu_bh
    flavour = r26.rcu if mode == "vanilla" else r26.rcu_bh
    warm(r26)              # (a counter value of 0 is "no snapshot" in the kernel only)
    key = 0
    for k, per_cpu in enumerate(steps, start=1):
        t = k * 1e-3
        for cpu in range(ncpus):
            calls, switch, handler, tick = per_cpu[cpu % len(per_cpu)]
            for _ in range(calls):
                key += 1
                tq = t - 6e-4
                eng.call_rcu(cpu, DstEntry(key, tq), tq)
                queue(cpu, lambda a: r26_freed.append((a, clock["t"])), key, tq)
            if switch:
                eng.quiescent(cpu, t - 4e-4, "ctxsw")
                r26.note_context_switch(cpu)
            if handler:
                eng.quiescent(cpu, t - 2e-4, "softirq_handler")
                eng.quiescent(cpu, t - 2e-4, "softirq_loop")
                r26.softirq_handler_done(cpu)
        for cpu in range(ncpus):
            tick = per_cpu[cpu % len(per_cpu)][3]
            if tick in ("user", "idle"):
                eng.quiescent(cpu, t, "user_tick" if tick == "user" else "idle")
            elif tick == "syscall":
                eng.quiescent(cpu, t, "system_tick")
            if eng.rcu_pending(cpu):
                eng.rcu_tasklet(cpu, t)
            r26.tick(cpu, tick == "user", idle=tick == "idle",
                     in_softirq=tick in ("softirq", "kernel"))
            if r26.tasklet_pending(cpu):
                clock["t"] = t
                r26.rcu_process_callbacks(cpu, t)
    r26_gps = [(s, e) for _batch, s, e in flavour.ctrl.gp_log]
    return (eng.gp_log, eng_freed), (r26_gps, r26_freed)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["vanilla", "bh"]), st.integers(1, 3), st.sampled_from([0, 1, 3]),
       st.lists(st.lists(STEP, min_size=1, max_size=3), min_size=1, max_size=80))
def test_engine_rcu_and_rcu26_agree_event_by_event(mode, ncpus, maxbatch, steps):
    eng, r26 = paired_runs(mode, ncpus, maxbatch, steps)
    assert eng == r26


def test_the_pairing_sees_grace_periods_and_callbacks():
    """The paired driver exercises something: both models end grace periods and free."""
    steps = [[(1, False, True, "softirq"), (0, True, False, "user")]] * 10 \
        + [[(0, True, True, "idle")]] * 10
    (gps, freed), r26 = paired_runs("vanilla", 2, 0, steps)
    assert len(gps) >= 2 and len(freed) == 10 and (gps, freed) == r26


def test_a_context_switch_is_not_quiescent_for_bh_in_either_model():
    """schedule() bumps only the classic counter: bh grace periods need a handler end
    or a tick outside softirq, in core/rcu (since issue 24) as in rcu26."""
    steps = [[(1, False, False, "softirq")]] + [[(0, True, False, "softirq")]] * 6
    (eng_gps, eng_freed), (r26_gps, r26_freed) = paired_runs("bh", 1, 0, steps)
    assert not eng_freed and not eng_gps
    assert not r26_freed and not r26_gps
    (eng_gps, eng_freed), r26 = paired_runs("vanilla", 1, 0, steps)
    assert eng_freed and eng_gps and (eng_gps, eng_freed) == r26   # vanilla: they end it


def test_a_tick_in_a_system_call_is_quiescent_for_bh_only():
    steps = [[(1, False, False, "softirq")]] + [[(0, False, False, "syscall")]] * 6
    (bh_gps, bh_freed), r26 = paired_runs("bh", 1, 0, steps)
    assert bh_freed and (bh_gps, bh_freed) == r26
    (v_gps, v_freed), _ = paired_runs("vanilla", 1, 0, steps)
    assert not v_freed
