"""Tests for routelab.core.sched: the 2.6.0 O(1) scheduler (kernel/sched.c, v2.6.0).

Every expected number below is worked out from the 2.6.0 macros and functions named in
the test, not from the model's output.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.core.sched import (
    AVG_TIMESLICE,
    MAX_BONUS,
    MAX_SLEEP_AVG,
    NS_MAX_SLEEP_AVG,
    NSEC_PER_JIFFY,
    STARVATION_LIMIT,
    PrioArray,
    Runqueue,
    Task,
    current_bonus,
    delta,
    effective_prio,
    just_interactive_sleep,
    simulate,
    task_interactive,
    task_timeslice,
    timeslice_granularity,
)

MS = NSEC_PER_JIFFY


def ms(x):
    return x / 1000


# -- constants and macros --------------------------------------------------------------

@pytest.mark.parametrize("nice, slice_", [(-20, 200), (-10, 151), (0, 102), (10, 53), (19, 10)])
def test_task_timeslice(nice, slice_):
    # 10 + 190 * (139 - static_prio) // 39, integer jiffies
    assert task_timeslice(120 + nice) == slice_


def test_timeslice_never_increases_with_nice():
    s = [task_timeslice(120 + n) for n in range(-20, 20)]
    assert s == sorted(s, reverse=True) and min(s) == 10 and max(s) == 200


def test_derived_constants():
    assert AVG_TIMESLICE == 102
    assert MAX_BONUS == 10
    assert MAX_SLEEP_AVG == 1020 == STARVATION_LIMIT
    assert NS_MAX_SLEEP_AVG == 1_020_000_000


@pytest.mark.parametrize("sleep_ms, bonus", [(0, 0), (101, 0), (102, 1), (713, 6), (714, 7),
                                              (1019, 9), (1020, 10)])
def test_current_bonus(sleep_ms, bonus):
    assert current_bonus(sleep_ms * MS) == bonus
    assert current_bonus(sleep_ms * MS + MS - 1) == bonus      # whole jiffies only


def test_effective_prio_range_and_clamp():
    assert effective_prio(120, 0) == 125
    assert effective_prio(120, NS_MAX_SLEEP_AVG) == 115
    assert effective_prio(100, NS_MAX_SLEEP_AVG) == 100       # 95 clamped to MAX_RT_PRIO
    assert effective_prio(139, 0) == 139                      # 144 clamped to MAX_PRIO - 1
    assert effective_prio(139, NS_MAX_SLEEP_AVG) == 134


def test_delta_uses_c_truncation():
    assert [delta(n) for n in (-20, -10, 0, 10, 19)] == [-3, 0, 2, 4, 6]


@pytest.mark.parametrize("nice, row", [
    (-20, [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]),
    (0, [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]),
    (10, [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    (19, [0] * 11),
])
def test_task_interactive_table(nice, row):
    # the x axis is the dynamic offset -5 .. +5 from the static priority
    sp = 120 + nice
    got = [int(task_interactive(sp + off, sp)) for off in range(-5, 6)]
    assert got == row


def test_nice0_interactive_needs_bonus_7():
    assert task_interactive(effective_prio(120, 714 * MS), 120)
    assert not task_interactive(effective_prio(120, 713 * MS), 120)


def test_ksoftirqd_can_never_be_interactive():
    k = Task("ksoftirqd/0", 19, "ksoftirqd")
    for s in range(0, MAX_SLEEP_AVG + 1):
        assert not task_interactive(effective_prio(k.static_prio, s * MS), k.static_prio)


def test_just_interactive_sleep():
    assert just_interactive_sleep(0) == 815 * MS
    # nice 19: 1020 * 12 // 10 - 1 = 1223 ms, beyond the 1.02 s a sleep can count
    assert just_interactive_sleep(19) > NS_MAX_SLEEP_AVG


@pytest.mark.parametrize("sleep_ms, g", [(1020, 10), (918, 10), (816, 20), (714, 40),
                                          (0, 10 * 2 ** 9)])
def test_timeslice_granularity(sleep_ms, g):
    assert timeslice_granularity(sleep_ms * MS) == g
    assert timeslice_granularity(sleep_ms * MS, ncpus=2) == 2 * g     # CONFIG_SMP


def test_task_validation():
    with pytest.raises(ValueError, match="nice"):
        Task("x", 20)
    with pytest.raises(ValueError, match="kind"):
        Task("x", 0, "batch")
    with pytest.raises(ValueError, match="sleep_avg_ms"):
        Task("x", 0, sleep_avg_ms=2000)


# -- priority arrays -------------------------------------------------------------------

def test_prio_array_picks_lowest_number_fifo_within_level():
    a = PrioArray("A")
    t1, t2, t3 = Task("a", 0), Task("b", 0), Task("c", -5)
    for t in (t1, t2, t3):
        a.enqueue(t)
    assert a.first() is t3                  # 120 - 5 + 5 = 120 < 125
    a.dequeue(t3)
    assert a.first() is t1                  # FIFO at 125
    a.dequeue(t1)
    a.enqueue(t1)
    assert a.first() is t2
    a.dequeue(t2)
    a.dequeue(t1)
    assert a.bitmap == 0 and a.nr_active == 0


# -- recalc_task_prio and wakeups ------------------------------------------------------

def _sleeping(rq, t, now):
    rq.add(t, 0.0)
    rq.schedule(0.0)
    if rq.curr is not t:
        raise AssertionError("setup: expected the task to run")
    rq.sleep(t, now)
    return t


def test_sleep_credit_is_multiplied_by_missing_bonus():
    rq = Runqueue(ulong_bits=64)
    t = _sleeping(rq, Task("sh", 0, "sleeper"), ms(0))
    rq.wake_up(t, ms(10))
    assert t.sleep_avg == 10 * MS * 10                          # bonus 0: x10
    rq2 = Runqueue(ulong_bits=64)
    t2 = _sleeping(rq2, Task("sh", 0, "sleeper", sleep_avg_ms=918), ms(0))
    before = t2.sleep_avg
    rq2.wake_up(t2, ms(10))
    assert t2.sleep_avg == before + 10 * MS * 1                 # bonus 9: x1


def test_long_sleep_sets_just_interactive_for_user_tasks_only():
    rq = Runqueue()
    t = _sleeping(rq, Task("sh", 0, "sleeper"), ms(0))
    rq.wake_up(t, ms(900))                                      # > 815 ms
    assert t.sleep_avg == (MAX_SLEEP_AVG - AVG_TIMESLICE) * MS and t.prio == 116
    rq2 = Runqueue(ulong_bits=64)
    k = Task("ksoftirqd/0", 19, "ksoftirqd")
    rq2.add(k)
    rq2.wake_up(k, ms(0))
    rq2.schedule(ms(0))
    rq2.sleep(k, ms(0))
    rq2.wake_up(k, ms(900))                                     # no mm: multiplied, capped
    assert k.sleep_avg == NS_MAX_SLEEP_AVG and k.prio == 134
    # (on i386 the 900 ms x 10 product wraps: 9e9 mod 2**32 ns = 410 ms)


def test_unsigned_long_product_wraps_on_i386():
    # 500 ms asleep at bonus 0: 500 ms x 10 = 5e9 ns does not fit 32 bits
    for bits, expect in ((32, 5_000_000_000 - 2 ** 32), (64, NS_MAX_SLEEP_AVG)):
        rq = Runqueue(ulong_bits=bits)
        t = _sleeping(rq, Task("sh", 0, "sleeper"), ms(0))
        rq.wake_up(t, ms(500))
        assert t.sleep_avg == expect


def test_uninterruptible_wakeup_stops_at_just_interactive():
    rq = Runqueue()
    t = Task("dd", 0, "sleeper", sleep_avg_ms=700)
    rq.add(t)
    rq.schedule(0.0)
    rq.sleep(t, 0.0, uninterruptible=True)
    rq.wake_up(t, ms(200))
    assert t.sleep_avg == just_interactive_sleep(0) and t.activated == -1


def test_low_credit_limits_the_credit_to_one_timeslice():
    rq = Runqueue(ulong_bits=64)
    t = Task("sh", 0, "sleeper", interactive_credit=-101)
    t = _sleeping(rq, t, ms(0))
    rq.wake_up(t, ms(50))                                       # 50 ms x 10 > 102 ms
    assert t.sleep_avg == 102 * MS


@pytest.mark.parametrize("from_irq, credited", [(True, 40 * MS), (False, 40 * MS * 38 // 128)])
def test_runqueue_wait_credit_on_first_run(from_irq, credited):
    rq = Runqueue(ulong_bits=64)
    hog = Task("hog", -20)                                      # keeps the CPU
    rq.add(hog)
    t = Task("sh", 0, "sleeper", sleep_avg_ms=918)
    rq.add(t)
    rq.schedule(0.0)
    assert rq.curr is hog
    t.state = "interruptible"                                    # take it off the queue
    rq.active.dequeue(t)
    t.array = None
    rq.nr_running -= 1
    rq.wake_up(t, ms(10), from_irq=from_irq)
    assert t.activated == (2 if from_irq else 1)
    after_wake = t.sleep_avg
    rq.sleep(hog, ms(50))                                       # t waited 40 ms
    assert rq.curr is t
    assert t.sleep_avg == min(after_wake + credited, NS_MAX_SLEEP_AVG)
    assert t.activated == 0


def test_wakeup_of_better_task_sets_need_resched():
    rq = Runqueue()
    hog = Task("hog")
    rq.add(hog)
    rq.schedule(0.0)
    sh = _sleeping(Runqueue(), Task("sh", 0, "sleeper", sleep_avg_ms=900), 0.0)
    rq.tasks.append(sh)
    rq.need_resched = False
    assert rq.wake_up(sh, ms(5), from_irq=True)
    assert rq.need_resched and sh.prio < hog.prio
    assert not rq.wake_up(sh, ms(6))                            # already runnable


# -- schedule() ------------------------------------------------------------------------

def test_schedule_counts_a_quiescent_state_even_when_prev_is_next():
    seen = []
    rq = Runqueue(on_qs=seen.append)
    hog = Task("hog")
    rq.add(hog)
    rq.schedule(0.0)
    sw = rq.nr_switches
    assert rq.schedule(ms(1)) is hog and rq.schedule(ms(2)) is hog
    assert rq.nr_switches == sw and rq.qsctr == 3 and seen == [0, 0, 0]


def test_run_time_is_wall_clock_so_softirq_on_top_drains_sleep_avg():
    rq = Runqueue()
    t = Task("sh", 0, "sleeper", sleep_avg_ms=900)
    rq.add(t)
    rq.schedule(0.0)
    for j in range(1, 51):                       # 50 ticks, every one inside softirq
        rq.scheduler_tick(ms(j), in_softirq=True)
    assert t.time_slice == 102 - 50              # all charged to the task
    assert rq.cpustat["softirq"] == 50 and rq.cpustat["user"] == rq.cpustat["system"] == 0
    rq.sleep(t, ms(50))
    assert t.sleep_avg == 850 * MS               # drained by 50 ms of wall clock


def test_high_credit_task_is_charged_less():
    rq = Runqueue()
    t = Task("x", 0, sleep_avg_ms=1020, interactive_credit=101)
    rq.add(t)
    rq.schedule(0.0)
    rq.schedule(ms(50))
    assert t.sleep_avg == (1020 - 5) * MS        # 50 ms / bonus 10


def test_sleep_avg_floor_costs_interactive_credit():
    rq = Runqueue()
    t = Task("x", 0, sleep_avg_ms=10)
    rq.add(t)
    rq.schedule(0.0)
    rq.schedule(ms(30))
    assert t.sleep_avg == 0 and t.interactive_credit == -1


def test_only_current_can_sleep_and_time_cannot_go_back():
    rq = Runqueue()
    a, b = Task("a"), Task("b")
    rq.add(a)
    rq.add(b)
    rq.schedule(ms(1))
    with pytest.raises(ValueError, match="only the current"):
        rq.sleep(b if rq.curr is a else a, ms(2))
    with pytest.raises(ValueError, match="backwards"):
        rq.schedule(0.0)


def test_arrays_swap_only_when_active_is_empty():
    rq = Runqueue()
    hog, other = Task("hog"), Task("other")
    rq.add(hog)
    rq.add(other)
    rq.schedule(0.0)
    first = rq.curr
    second = other if first is hog else hog
    a0 = rq.active
    for j in range(1, 103):
        rq.scheduler_tick(ms(j), user_mode=True)
    assert first.array is rq.expired and rq.expired_timestamp == 102
    rq.schedule(ms(102))
    assert rq.active is a0 and rq.curr is second           # no swap: active not empty
    for j in range(103, 205):
        rq.scheduler_tick(ms(j), user_mode=True)
    assert second.array is rq.expired and rq.active.nr_active == 0
    rq.schedule(ms(204))
    assert rq.active is not a0 and rq.expired_timestamp is None and rq.curr is first


# -- scheduler_tick() ------------------------------------------------------------------

def test_idle_tick_charges_nothing():
    rq = Runqueue()
    rq.scheduler_tick(ms(1))
    rq.scheduler_tick(ms(2), in_softirq=True)
    assert rq.cpustat["idle"] == 1 and rq.cpustat["softirq"] == 1 and rq.idle.ticks == 0


def test_tick_on_a_task_already_off_the_active_array_only_asks_for_resched():
    rq = Runqueue()
    hog, other = Task("hog"), Task("other")
    rq.add(hog)
    rq.add(other)
    rq.schedule(0.0)
    cur = rq.curr
    for j in range(1, 103):
        rq.scheduler_tick(ms(j), user_mode=True)
    rq.need_resched = False
    rq.scheduler_tick(ms(103), user_mode=True)               # expired, not switched out
    assert rq.need_resched and cur.time_slice == 102


def test_user_mode_and_softirq_together_is_rejected():
    with pytest.raises(ValueError, match="user_mode"):
        Runqueue().scheduler_tick(0.0, in_softirq=True, user_mode=True)


def test_interactive_task_goes_back_to_active_noninteractive_to_expired():
    rq = Runqueue()
    hi = Task("hi", 0, sleep_avg_ms=1020, interactive_credit=101)   # stays bonus 10
    rq.add(hi)
    rq.schedule(0.0)
    for j in range(1, 103):
        rq.scheduler_tick(ms(j), user_mode=True)
        if rq.need_resched:
            rq.schedule(ms(j))
    assert hi.array is rq.active and hi.interactive
    lo = Task("lo")
    rq2 = Runqueue()
    rq2.add(lo)
    rq2.schedule(0.0)
    for j in range(1, 103):
        rq2.scheduler_tick(ms(j), user_mode=True)
    assert lo.array is rq2.expired


def _round_robin_switches(ncpus: int) -> list[int]:
    """Two fully interactive nice-0 tasks for 60 ticks: the ticks at which the
    runqueue switched from one to the other."""
    rq = Runqueue(ncpus=ncpus)
    for name in ("a", "b"):
        rq.add(Task(name, 0, sleep_avg_ms=1020, interactive_credit=101))
    rq.schedule(0.0)
    switches = []
    for j in range(1, 61):
        rq.scheduler_tick(ms(j), user_mode=True)
        if rq.need_resched:
            before = rq.curr
            if rq.schedule(ms(j)) is not before:
                switches.append(j)
    return switches


def test_interactive_tasks_round_robin_every_granularity():
    assert _round_robin_switches(1) == [10, 20, 30, 40, 50, 60]   # TIMESLICE_GRANULARITY = 10 on UP


def test_round_robin_granularity_doubles_on_two_cpus():
    assert _round_robin_switches(2) == [20, 40, 60]


def test_expired_starving_formula():
    rq = Runqueue()
    rq.nr_running = 3
    rq.expired_timestamp = 100
    rq.jiffies = 100 + 3 * STARVATION_LIMIT
    assert not rq.expired_starving()
    rq.jiffies += 1
    assert rq.expired_starving()
    rq.expired_timestamp = None
    assert not rq.expired_starving()


def test_rcu_is_told_about_ticks_only_when_pending():
    calls = []

    class FakeRcu:
        pending = False

        def rcu_pending(self, cpu):
            return self.pending

        def rcu_check_callbacks(self, cpu, user, **kw):
            calls.append((cpu, user, kw))

        def note_context_switch(self, cpu):
            calls.append(("qs", cpu))

    rcu = FakeRcu()
    rq = Runqueue(cpu=1, rcu=rcu)
    rq.scheduler_tick(ms(1))
    assert calls == []
    rcu.pending = True
    rq.scheduler_tick(ms(2), in_softirq=True)
    assert calls == [(1, False, {"idle": True, "in_softirq": True, "in_hardirq": False})]
    rq.schedule(ms(3))
    assert calls[-1] == ("qs", 1)


# -- scenarios (simulate) --------------------------------------------------------------

def test_cpu_hog_drains_to_prio_125():
    rq = Runqueue()
    hog = Task("hog", 0, sleep_avg_ms=1020)
    rq.add(hog)
    simulate(rq, 3000, check=True)
    assert hog.sleep_avg == 0 and hog.prio == 125 and rq.run_ns(hog, 3.0) == 3 * 10 ** 9


def test_sleeper_stays_interactive_unless_softirq_sits_on_top_of_it():
    quiet = Runqueue()
    sh = Task("sh", 0, "sleeper", burst=5, sleep=10)
    quiet.add(sh)
    simulate(quiet, 5000)
    assert sh.interactive and sh.prio <= 116
    busy = Runqueue()
    sh2 = Task("sh", 0, "sleeper", burst=5, sleep=10, sleep_avg_ms=1020)
    busy.add(sh2)
    assert sh2.prio == 115 and sh2.interactive
    # softirq work on top of whoever is current in 49 of every 50 jiffies: 5 ms of
    # its own work take 250 ms of wall clock, which schedule() charges in full
    simulate(busy, 10000, softirq=lambda j: j % 50 != 0)
    assert max(p for _, p in sh2.prio_samples) == 125
    assert sh2.prio == 125 and not sh2.interactive
    assert sh2.softirq_ticks > 0.9 * sh2.ticks


@pytest.mark.parametrize("n_sleepers", [3, 6])
def test_expired_starving_bounds_the_wait_of_an_expired_hog(n_sleepers):
    rq = Runqueue()
    hog = Task("hog")
    rq.add(hog)
    for i in range(n_sleepers):           # interactive tasks that keep active non-empty
        rq.add(Task(f"s{i}", 0, "sleeper", burst=10, sleep=10, sleep_avg_ms=900))
    simulate(rq, 30_000)
    n = n_sleepers + 1
    wait = hog.worst_wait(30.0)
    # starvation really happens (far beyond the hog's 102 ms of others' slices) ...
    assert wait > STARVATION_LIMIT / 1000
    # ... but is bounded: 1.02 s x nr_running + 1 jiffy, plus what the others still had
    # of their slices when EXPIRED_STARVING began sending them to the expired array
    assert wait <= (STARVATION_LIMIT * n + 1) / 1000 + n_sleepers * 0.102


def test_hog_with_only_ksoftirqd_waits_at_most_its_10ms_slice():
    rq = Runqueue()
    hog, ksd = Task("hog"), Task("ksoftirqd/0", 19, "ksoftirqd")
    rq.add(hog)
    rq.add(ksd)
    simulate(rq, 10_000, ksoftirqd=ksd, pending=lambda j: True,
             softirq=lambda j: j % 10 != 0, check=True)
    assert hog.worst_wait(10.0) <= 0.011
    assert ksd.prio >= 134 and not ksd.interactive
    # ksoftirqd never preempts the hog: it gets about 10 ms per 102 + 10 ms round
    share = rq.run_ns(ksd, 10.0) / 1e10
    assert 0.07 < share < 0.1


# -- property ---------------------------------------------------------------------------

_task = st.tuples(st.sampled_from(["cpu", "sleeper"]), st.integers(-20, 19),
                  st.integers(1, 30), st.integers(1, 60), st.integers(0, 1020))


@settings(max_examples=40, deadline=None)
@given(tasks=st.lists(_task, min_size=0, max_size=5), ksd=st.booleans(),
       soft_mod=st.integers(1, 7), pend_mod=st.integers(1, 9),
       length=st.integers(1, 1500))
def test_property_accounting_and_membership(tasks, ksd, soft_mod, pend_mod, length):
    rq = Runqueue(ncpus=2)
    for i, (kind, nice, burst, sleep, sa) in enumerate(tasks):
        rq.add(Task(f"t{i}", nice, kind, burst=burst, sleep=sleep, sleep_avg_ms=sa))
    k = None
    if ksd:
        k = Task("ksoftirqd/0", 19, "ksoftirqd")
        rq.add(k)
    simulate(rq, length, softirq=lambda j: j % soft_mod == 0,
             pending=lambda j: j % pend_mod < 2, ksoftirqd=k, check=True)
    now = length / 1000
    total = sum(rq.run_ns(p, now) for p in rq.tasks)
    assert total + rq.run_ns(rq.idle, now) == length * MS
    for p in rq.tasks:
        assert 100 <= p.prio <= 139 and 0 <= p.sleep_avg <= NS_MAX_SLEEP_AVG
        assert 1 <= p.time_slice <= task_timeslice(p.static_prio)
    assert rq.qsctr >= rq.nr_switches
