"""The 2.6.0 O(1) scheduler: one runqueue per CPU, HZ 1000.

Kernel: kernel/sched.c (2.6.0, MaximeChretien/linux-history v2.6.0): task_timeslice,
effective_prio, recalc_task_prio, activate_task, try_to_wake_up, scheduler_tick,
schedule; kernel/timer.c update_process_times; include/linux/sched.h task_struct.

Story 2 needs to know *who is current* while softirq work runs at ``irq_exit``,
and what the scheduler then does to that task.  In 2.6.0:

* every timer tick takes one jiffy off the current task's ``time_slice``, even
  when the tick interrupted softirq work running on top of it (the tick then
  counts as ``softirq`` time in the CPU statistics, and that is all that
  differs);
* ``schedule()`` drains ``prev.sleep_avg`` by the wall-clock time since the
  task was last stamped (switched in, woken, or passed through ``schedule``),
  so softirq time done on top of a task drains it as if the task had run;
* an expired task waits in the *expired* array until the active array is
  empty, which interactive tasks can postpone until ``EXPIRED_STARVING``;
* every pass through ``schedule()`` is an RCU quiescent state, even when the
  same task is picked again.

Units: the public API takes ``now`` in seconds (the engine's clock) and keeps
everything internally in integer nanoseconds (``sleep_avg``, ``timestamp``:
the kernel's ``sched_clock`` units) and integer jiffies (``time_slice``,
``expired_timestamp``).

Simplifications (each also said where it happens): no real-time policies, no
load balancing or migration between runqueues (each :class:`Runqueue` is one
CPU; ksoftirqd is bound to its CPU anyway), no fork/exit sleep-average
penalties (a task's initial ``sleep_avg`` and ``interactive_credit`` are
parameters), no signals, and ``expired_timestamp`` uses ``None`` for "unset"
where the kernel uses 0 (which differs only if a task expires in jiffy 0).
``unsigned long`` arithmetic in ``recalc_task_prio`` wraps at 32 bits by default,
as on i386 (``ulong_bits``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = [
    "HZ", "NSEC_PER_JIFFY", "MAX_RT_PRIO", "MAX_PRIO", "MIN_TIMESLICE", "MAX_TIMESLICE",
    "AVG_TIMESLICE", "MAX_BONUS", "MAX_SLEEP_AVG", "NS_MAX_SLEEP_AVG", "STARVATION_LIMIT",
    "INTERACTIVE_DELTA", "CREDIT_LIMIT", "ON_RUNQUEUE_WEIGHT", "KINDS",
    "LOOP_NAME", "loop_runqueue", "task_timeslice", "current_bonus", "effective_prio", "delta",
    "task_interactive",
    "just_interactive_sleep", "timeslice_granularity",
    "Task", "PrioArray", "Runqueue", "simulate",
]

HZ = 1000
NSEC_PER_JIFFY = 1_000_000_000 // HZ
MAX_RT_PRIO = 100
MAX_PRIO = 140
MAX_USER_PRIO = MAX_PRIO - MAX_RT_PRIO            # 40
MIN_TIMESLICE = 10 * HZ // 1000                    # jiffies
MAX_TIMESLICE = 200 * HZ // 1000
# the slice of a nice-0 task: 10 + 190 * 19 // 39 = 102 jiffies
AVG_TIMESLICE = MIN_TIMESLICE + (MAX_TIMESLICE - MIN_TIMESLICE) * (MAX_PRIO - 1 - 120) // (
    MAX_USER_PRIO - 1)
ON_RUNQUEUE_WEIGHT = 30
PRIO_BONUS_RATIO = 25
MAX_BONUS = MAX_USER_PRIO * PRIO_BONUS_RATIO // 100  # 10
INTERACTIVE_DELTA = 2
MAX_SLEEP_AVG = AVG_TIMESLICE * MAX_BONUS          # 1020 jiffies
STARVATION_LIMIT = MAX_SLEEP_AVG
NS_MAX_SLEEP_AVG = MAX_SLEEP_AVG * NSEC_PER_JIFFY
CREDIT_LIMIT = 100
# the on-runqueue credit of a process-context wakeup, in 1/128ths (30 % -> 38)
_ONRQ_128 = ON_RUNQUEUE_WEIGHT * 128 // 100

#: task kinds: a CPU-bound loop, a task that runs then sleeps, the softirq daemon
KINDS = ("cpu", "sleeper", "ksoftirqd", "idle")

RUNNING, INTERRUPTIBLE, UNINTERRUPTIBLE = "running", "interruptible", "uninterruptible"


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero), for the signed nice scaling."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def task_timeslice(static_prio: int) -> int:
    """Timeslice in jiffies for a static priority: linear from 200 (nice -20) to 10 (nice 19).

    Kernel: kernel/sched.c BASE_TIMESLICE, task_timeslice (2.6.0, MaximeChretien/linux-history
    v2.6.0).  Integer arithmetic: nice 0 (static 120) gets 102 jiffies.
    """
    return MIN_TIMESLICE + (MAX_TIMESLICE - MIN_TIMESLICE) * (MAX_PRIO - 1 - static_prio) // (
        MAX_USER_PRIO - 1)


def current_bonus(sleep_avg_ns: int) -> int:
    """0..10: the sleep average in whole jiffies scaled onto MAX_BONUS.

    Kernel: kernel/sched.c CURRENT_BONUS (2.6.0, MaximeChretien/linux-history v2.6.0).
    """
    return (sleep_avg_ns // NSEC_PER_JIFFY) * MAX_BONUS // MAX_SLEEP_AVG


def effective_prio(static_prio: int, sleep_avg_ns: int) -> int:
    """Dynamic priority: static priority minus (bonus - 5), kept in 100..139.

    Kernel: kernel/sched.c effective_prio (2.6.0, MaximeChretien/linux-history v2.6.0).
    A nice-0 task ranges over 115 (bonus 10) .. 125 (bonus 0).
    """
    prio = static_prio - (current_bonus(sleep_avg_ns) - MAX_BONUS // 2)
    return min(max(prio, MAX_RT_PRIO), MAX_PRIO - 1)


def delta(nice: int) -> int:
    """How far below its static priority a task must be to count as interactive.

    Kernel: kernel/sched.c DELTA (2.6.0, MaximeChretien/linux-history v2.6.0): nice scaled
    by 10/40 with C truncation, plus INTERACTIVE_DELTA.  nice 0 -> 2, nice 19 -> 6.
    """
    return _cdiv(nice * MAX_BONUS, 40) + INTERACTIVE_DELTA


def task_interactive(prio: int, static_prio: int) -> bool:
    """Kernel: kernel/sched.c TASK_INTERACTIVE (2.6.0, MaximeChretien/linux-history v2.6.0).

    At nice 19 the best reachable priority is 139 - 5 = 134 but 133 is needed:
    ksoftirqd can never be interactive.
    """
    return prio <= static_prio - delta(static_prio - 120)


def just_interactive_sleep(nice: int) -> int:
    """Sleep (ns) beyond which a user task is simply set to just-interactive credit.

    Kernel: kernel/sched.c JUST_INTERACTIVE_SLEEP (2.6.0, MaximeChretien/linux-history
    v2.6.0).  nice 0: 1020 * 8 // 10 - 1 = 815 jiffies.
    """
    return (MAX_SLEEP_AVG * (MAX_BONUS // 2 + delta(nice) + 1) // MAX_BONUS - 1) * NSEC_PER_JIFFY


def timeslice_granularity(sleep_avg_ns: int, ncpus: int = 1) -> int:
    """Round-robin piece (jiffies) for an interactive task within its slice.

    Kernel: kernel/sched.c TIMESLICE_GRANULARITY (2.6.0, MaximeChretien/linux-history
    v2.6.0): MIN_TIMESLICE << (max(MAX_BONUS - bonus, 1) - 1); the CONFIG_SMP build
    multiplies by the number of online CPUs, the UP build does not (the same as
    ``ncpus=1``).  Bonus 10 or 9 -> 10 ms, 8 -> 20 ms, 7 -> 40 ms (per CPU online).
    """
    steps = (MAX_BONUS - current_bonus(sleep_avg_ns)) or 1
    return MIN_TIMESLICE * (1 << (steps - 1)) * ncpus


def _ns(now: float) -> int:
    return int(round(now * 1e9))


class Task:
    """One task_struct, reduced to what the 2.6.0 scheduler reads and writes.

    Kernel: include/linux/sched.h struct task_struct (2.6.0, MaximeChretien/linux-history
    v2.6.0): static_prio, prio, time_slice, sleep_avg, interactive_credit, timestamp,
    activated, array.

    Parameters
    ----------
    name : str
    nice : int              -20..19; ksoftirqd sets itself to 19 (kernel/softirq.c ksoftirqd)
    kind : str              "cpu" (always runnable), "sleeper" (runs ``burst`` ms of its own
                            work, then sleeps ``sleep`` ms), "ksoftirqd" (runnable while
                            softirqs are pending; a kernel thread: no ``mm``), "idle"
    burst, sleep : int      milliseconds, for "sleeper" (used by :func:`simulate`)
    sleep_avg_ms : int      initial sleep average (the kernel derives it at fork)
    interactive_credit : int
    user_share : float      share of the ticks that interrupt this task's own time (no
                            softirq on top) that land in user mode rather than inside a
                            system call (0..1; 1 by default).  Only a user-mode tick is an
                            RCU quiescent state (kernel/rcupdate.c rcu_check_callbacks,
                            2.6.0); the gettimeofday loop lives mostly inside
                            ``sys_gettimeofday`` (story 2: ASSUMED 0.05-0.20).
    cpus_allowed : tuple of int or None
                            CPUs the task may run on (``sched_setaffinity``; None = all):
                            :func:`loop_runqueue` places it on those CPUs only.  The model
                            has no SMP load balancer (``docs/story2-kernel-notes.md``), so
                            every task stays where it was placed -- as if pinned.

    Attributes (statistics, not kernel state)
    -----------------------------------------
    run_ns          wall-clock time as ``current`` (softirq work on top included)
    ticks           timer ticks charged to it; ``softirq_ticks`` of them landed in softirq
    worst_wait_ns   longest time runnable but not running (see :meth:`worst_wait`)
    prio_samples    (time ns, prio) at every priority change
    """

    __slots__ = ("name", "nice", "kind", "mm", "static_prio", "prio", "time_slice",
                 "first_time_slice", "sleep_avg", "interactive_credit", "timestamp",
                 "activated", "state", "array", "burst", "sleep", "burst_left", "wake_at",
                 "run_ns", "ticks", "softirq_ticks", "worst_wait_ns", "wait_since",
                 "switched_in", "prio_samples", "nvcsw", "nivcsw", "user_share",
                 "cpus_allowed", "softirq_passes")

    def __init__(self, name: str, nice: int = 0, kind: str = "cpu", *, burst: int = 1,
                 sleep: int = 10, sleep_avg_ms: int = 0, interactive_credit: int = 0,
                 user_share: float = 1.0, cpus_allowed=None):
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r}: must be one of {KINDS}")
        if not -20 <= nice <= 19:
            raise ValueError(f"nice={nice}: allowed range is -20..19")
        if not 0 <= sleep_avg_ms <= MAX_SLEEP_AVG:
            raise ValueError(f"sleep_avg_ms={sleep_avg_ms}: allowed range is 0..{MAX_SLEEP_AVG}")
        if kind == "sleeper" and (burst < 1 or sleep < 1):
            raise ValueError(f"burst={burst}, sleep={sleep}: both must be >= 1 ms")
        if not (isinstance(user_share, (int, float)) and 0.0 <= user_share <= 1.0):
            raise ValueError(f"user_share={user_share!r}: allowed range is 0..1")
        if cpus_allowed is not None:
            cpus_allowed = tuple(cpus_allowed)
            if not cpus_allowed or not all(isinstance(c, int) and 0 <= c < 64
                                           for c in cpus_allowed):
                raise ValueError(f"cpus_allowed={cpus_allowed!r}: a non-empty tuple of "
                                 "CPU numbers 0..63, or None")
        self.user_share = float(user_share)
        self.cpus_allowed = cpus_allowed
        self.softirq_passes = 0
        self.name, self.nice, self.kind = name, nice, kind
        self.mm = kind in ("cpu", "sleeper")        # kernel threads have no mm
        self.static_prio = MAX_RT_PRIO + 20 + nice
        self.sleep_avg = sleep_avg_ms * NSEC_PER_JIFFY
        self.interactive_credit = interactive_credit
        self.prio = MAX_PRIO if kind == "idle" else effective_prio(self.static_prio,
                                                                    self.sleep_avg)
        self.time_slice = task_timeslice(self.static_prio)
        self.first_time_slice = True
        self.timestamp = 0
        self.activated = 0
        self.state = INTERRUPTIBLE if kind == "ksoftirqd" else RUNNING
        self.array: PrioArray | None = None
        self.burst, self.sleep = burst, sleep
        self.burst_left, self.wake_at = burst, -1
        self.run_ns = self.ticks = self.softirq_ticks = self.worst_wait_ns = 0
        self.wait_since: int | None = None
        self.switched_in: int | None = None
        self.prio_samples: list[tuple[int, int]] = []
        self.nvcsw = self.nivcsw = 0

    def __repr__(self) -> str:
        return (f"Task({self.name!r}, prio={self.prio}, slice={self.time_slice}, "
                f"sleep_avg={self.sleep_avg // NSEC_PER_JIFFY}ms, {self.state})")

    @property
    def bonus(self) -> int:
        return current_bonus(self.sleep_avg)

    @property
    def interactive(self) -> bool:
        return task_interactive(self.prio, self.static_prio)

    def high_credit(self) -> bool:
        return self.interactive_credit > CREDIT_LIMIT

    def low_credit(self) -> bool:
        return self.interactive_credit < -CREDIT_LIMIT

    def worst_wait(self, now: float | None = None) -> float:
        """Longest runnable-but-not-running stretch (seconds), counting one still going on."""
        w = self.worst_wait_ns
        if now is not None and self.wait_since is not None:
            w = max(w, _ns(now) - self.wait_since)
        return w / 1e9

    def _set_prio(self, prio: int, t: int) -> None:
        if prio != self.prio:
            self.prio = prio
            self.prio_samples.append((t, prio))


class PrioArray:
    """One priority array: a FIFO per priority level and a bitmap of non-empty levels.

    Kernel: kernel/sched.c struct prio_array, enqueue_task, dequeue_task,
    sched_find_first_bit (2.6.0, MaximeChretien/linux-history v2.6.0).  The lowest set
    bit is the highest priority; a task is added at the tail of its level.
    """

    __slots__ = ("name", "nr_active", "bitmap", "queue")

    def __init__(self, name: str):
        self.name = name
        self.nr_active = 0
        self.bitmap = 0
        self.queue: list[deque[Task]] = [deque() for _ in range(MAX_PRIO)]

    def enqueue(self, p: Task) -> None:
        self.queue[p.prio].append(p)
        self.bitmap |= 1 << p.prio
        self.nr_active += 1
        p.array = self

    def dequeue(self, p: Task) -> None:
        q = self.queue[p.prio]
        q.remove(p)
        if not q:
            self.bitmap &= ~(1 << p.prio)
        self.nr_active -= 1

    def first(self) -> Task:
        idx = (self.bitmap & -self.bitmap).bit_length() - 1
        return self.queue[idx][0]

    def tasks(self) -> list[Task]:
        return [p for q in self.queue for p in q]


class Runqueue:
    """One CPU's runqueue with its active and expired arrays.

    Kernel: kernel/sched.c struct runqueue, scheduler_tick, schedule, try_to_wake_up
    (2.6.0, MaximeChretien/linux-history v2.6.0).

    Parameters
    ----------
    cpu : int
    ncpus : int             CPUs online (TIMESLICE_GRANULARITY scales with it on SMP)
    rcu : object or None    anything with ``rcu_pending(cpu)``,
                            ``rcu_check_callbacks(cpu, user, idle=, in_softirq=, in_hardirq=)``
                            and ``note_context_switch(cpu)`` (e.g. :class:`~.rcu26.Rcu26`)
    on_qs : callable or None
                            called as ``on_qs(cpu)`` at every schedule() pass
    ulong_bits : int        width of ``unsigned long`` (32 on i386, 64; see recalc_task_prio)

    Attributes
    ----------
    curr, idle, active, expired, nr_running, nr_switches, expired_timestamp (jiffies or None),
    need_resched, jiffies (of the last call), qsctr (schedule() passes = RCU_qsctr bumps from
    schedule), cpustat (ticks: user, nice, system, softirq, irq, idle)
    """

    __slots__ = ("cpu", "ncpus", "rcu", "on_qs", "ulong_mask", "curr", "idle", "active",
                 "expired", "nr_running", "nr_switches", "expired_timestamp", "need_resched",
                 "jiffies", "qsctr", "cpustat", "tasks", "now_ns")

    def __init__(self, cpu: int = 0, ncpus: int = 1, *, rcu=None,
                 on_qs: Callable[[int], None] | None = None, ulong_bits: int = 32):
        if ncpus < 1:
            raise ValueError(f"ncpus={ncpus}: must be >= 1")
        if ulong_bits not in (32, 64):
            raise ValueError(f"ulong_bits={ulong_bits}: must be 32 or 64")
        self.cpu, self.ncpus, self.rcu, self.on_qs = cpu, ncpus, rcu, on_qs
        self.ulong_mask = (1 << ulong_bits) - 1
        self.idle = Task(f"swapper/{cpu}", 0, "idle")
        self.curr = self.idle
        self.idle.switched_in = 0
        self.active, self.expired = PrioArray("A"), PrioArray("B")
        self.nr_running = self.nr_switches = 0
        self.expired_timestamp: int | None = None
        self.need_resched = False
        self.jiffies = 0
        self.now_ns = 0
        self.qsctr = 0
        self.cpustat = dict.fromkeys(("user", "nice", "system", "softirq", "irq", "idle"), 0)
        self.tasks: list[Task] = []

    # -- bookkeeping -------------------------------------------------------------------
    @property
    def current(self) -> Task:
        return self.curr

    def add(self, p: Task, now: float = 0.0) -> None:
        """Attach a task to this CPU: runnable on the active array (ksoftirqd: asleep).

        A stand-in for fork: no sleep-average penalty, a full first slice.
        """
        t = _ns(now)
        self.tasks.append(p)
        p.timestamp = t
        if p.state == RUNNING:
            self.active.enqueue(p)
            self.nr_running += 1
            p.wait_since = t
            if p.prio < self.curr.prio:
                self.need_resched = True

    def _clock(self, now: float) -> int:
        t = _ns(now)
        if t < self.now_ns:
            raise ValueError(f"now={now}: time went backwards (last {self.now_ns / 1e9})")
        self.now_ns = t
        self.jiffies = t // NSEC_PER_JIFFY
        return t

    def expired_starving(self) -> bool:
        """Kernel: kernel/sched.c EXPIRED_STARVING (2.6.0, MaximeChretien/linux-history v2.6.0).

        True once the first task to expire has waited STARVATION_LIMIT jiffies per runnable
        task, plus one: from then on even interactive tasks go to the expired array.
        """
        return (self.expired_timestamp is not None
                and self.jiffies - self.expired_timestamp
                >= STARVATION_LIMIT * self.nr_running + 1)

    # -- priority arithmetic -----------------------------------------------------------
    def recalc_task_prio(self, p: Task, now_ns: int) -> None:
        """Credit the time since ``p.timestamp`` as sleep, then recompute the priority.

        Kernel: kernel/sched.c recalc_task_prio (2.6.0, MaximeChretien/linux-history v2.6.0).
        The sleep counts up to 1.02 s.  A user task (not an uninterruptible sleeper) that
        slept longer than JUST_INTERACTIVE_SLEEP is put at MAX_SLEEP_AVG - AVG_TIMESLICE
        (918 ms, bonus 9).  Otherwise the sleep is multiplied by (MAX_BONUS - bonus), at
        least 1, so a drained task recovers fast; low-credit tasks get at most one
        timeslice of it; uninterruptible sleepers stop at JUST_INTERACTIVE_SLEEP; the sum
        is capped at MAX_SLEEP_AVG (each cap reached earns interactive credit).  The
        product and the sum are ``unsigned long``: on i386 (``ulong_bits=32``) they wrap.
        """
        sleep = now_ns - p.timestamp
        if sleep > NS_MAX_SLEEP_AVG:
            sleep = NS_MAX_SLEEP_AVG
        if sleep > 0:
            jis = just_interactive_sleep(p.nice)
            if p.mm and p.activated != -1 and sleep > jis:
                p.sleep_avg = (MAX_SLEEP_AVG - AVG_TIMESLICE) * NSEC_PER_JIFFY
                if not p.high_credit():
                    p.interactive_credit += 1
            else:
                sleep = (sleep * ((MAX_BONUS - p.bonus) or 1)) & self.ulong_mask
                slice_ns = task_timeslice(p.static_prio) * NSEC_PER_JIFFY
                if p.low_credit() and sleep > slice_ns:
                    sleep = slice_ns
                if p.activated == -1 and not p.high_credit() and p.mm:
                    if p.sleep_avg >= jis:
                        sleep = 0
                    elif p.sleep_avg + sleep >= jis:
                        p.sleep_avg = jis
                        sleep = 0
                p.sleep_avg = (p.sleep_avg + sleep) & self.ulong_mask
                if p.sleep_avg > NS_MAX_SLEEP_AVG:
                    p.sleep_avg = NS_MAX_SLEEP_AVG
                    if not p.high_credit():
                        p.interactive_credit += 1
        p._set_prio(effective_prio(p.static_prio, p.sleep_avg), now_ns)

    # -- the three entry points --------------------------------------------------------
    def wake_up(self, p: Task, now: float, from_irq: bool = False) -> bool:
        """Make a sleeping task runnable on the active array; True if it was asleep.

        Kernel: kernel/sched.c try_to_wake_up, activate_task (2.6.0,
        MaximeChretien/linux-history v2.6.0).  The sleep is credited at once; a wakeup
        from interrupt context (``from_irq``: hardirq or softirq, e.g. a timer or a
        packet) marks ``activated = 2`` so the coming run-queue wait will count fully as
        sleep when the task is picked, a process-context one ``activated = 1`` (30 %).
        An uninterruptible sleeper gets ``activated = -1``.  If the woken task has a
        better priority than ``current``, ``need_resched`` is set.
        """
        if p.kind == "idle":
            raise ValueError("the idle task is never woken")
        t = self._clock(now)
        if p.array is not None:
            p.state = RUNNING
            return False
        if p.state == UNINTERRUPTIBLE:
            p.activated = -1
        self.recalc_task_prio(p, t)
        if not p.activated:
            p.activated = 2 if from_irq else 1
        p.timestamp = t
        p.state = RUNNING
        self.active.enqueue(p)
        self.nr_running += 1
        p.wait_since = t
        if p.prio < self.curr.prio:
            self.need_resched = True
        return True

    def sleep(self, p: Task, now: float, uninterruptible: bool = False) -> Task:
        """The current task blocks (set_current_state + schedule); returns the next task.

        Kernel: kernel/sched.c schedule, deactivate_task (2.6.0, MaximeChretien/linux-history
        v2.6.0).  Only ``current`` can go to sleep.
        """
        if p is not self.curr or p.kind == "idle":
            raise ValueError(f"task {p.name!r}: only the current, non-idle task can sleep")
        p.state = UNINTERRUPTIBLE if uninterruptible else INTERRUPTIBLE
        return self.schedule(now)

    def scheduler_tick(self, now: float, in_softirq: bool = False, user_mode: bool = False,
                       in_hardirq: bool = False) -> None:
        """One local timer tick on this CPU.

        Kernel: kernel/sched.c scheduler_tick, kernel/timer.c update_process_times
        (2.6.0, MaximeChretien/linux-history v2.6.0).

        ``user_mode``: the tick interrupted user code (the kernel's ``user_tick``).
        ``in_softirq``: it interrupted softirq work (or a BH-disabled section) running on
        top of ``current``; ``in_hardirq``: it nested inside another hard interrupt.

        First RCU is told (``rcu_pending`` / ``rcu_check_callbacks``).  Then the tick is
        filed in ``cpustat`` -- the only place where softirq/hardirq context matters.
        The idle task has no slice.  Otherwise the tick comes off ``current``'s slice
        wherever it landed.  At zero the task is taken off the active array, its
        priority recomputed from its (unchanged) sleep average and its slice refilled;
        the first expiry since the last array switch stamps ``expired_timestamp``; a
        non-interactive task, or any task once EXPIRED_STARVING, goes to the expired
        array, an interactive one back to the tail of the active array.  An interactive
        task with slice left is sent to the tail of its level every
        TIMESLICE_GRANULARITY jiffies of its slice.  A task that already left the
        active array but has not been switched out just gets ``need_resched``.
        """
        if user_mode and (in_softirq or in_hardirq):
            raise ValueError("user_mode=True with in_softirq/in_hardirq: a tick cannot "
                             "interrupt user code and kernel interrupt work at once")
        t = self._clock(now)
        p = self.curr
        if self.rcu is not None and self.rcu.rcu_pending(self.cpu):
            self.rcu.rcu_check_callbacks(self.cpu, user_mode, idle=p is self.idle,
                                         in_softirq=in_softirq, in_hardirq=in_hardirq)
        sys_tick = 0 if user_mode else 1
        cs = self.cpustat
        if in_hardirq:
            cs["irq"] += sys_tick
            sys_tick = 0
        elif in_softirq:
            cs["softirq"] += sys_tick
            sys_tick = 0
        if p is self.idle:
            cs["idle"] += sys_tick
            return
        cs["nice" if p.nice > 0 else "user"] += 1 if user_mode else 0
        cs["system"] += sys_tick
        p.ticks += 1
        if in_softirq:
            p.softirq_ticks += 1
        if p.array is not self.active:
            self.need_resched = True
            return
        p.time_slice -= 1
        if p.time_slice == 0:
            self.active.dequeue(p)
            self.need_resched = True
            p._set_prio(effective_prio(p.static_prio, p.sleep_avg), t)
            p.time_slice = task_timeslice(p.static_prio)
            p.first_time_slice = False
            if self.expired_timestamp is None:
                self.expired_timestamp = self.jiffies
            if not p.interactive or self.expired_starving():
                self.expired.enqueue(p)
            else:
                self.active.enqueue(p)
        elif p.interactive:
            g = timeslice_granularity(p.sleep_avg, self.ncpus)
            if (task_timeslice(p.static_prio) - p.time_slice) % g == 0 and p.time_slice >= g:
                self.active.dequeue(p)
                self.need_resched = True
                p._set_prio(effective_prio(p.static_prio, p.sleep_avg), t)
                self.active.enqueue(p)

    def schedule(self, now: float) -> Task:
        """Pick the next task; returns it (possibly ``current`` again).

        Kernel: kernel/sched.c schedule (2.6.0, MaximeChretien/linux-history v2.6.0).

        ``run_time`` is the wall-clock time since ``prev`` was last stamped (capped at
        1.02 s; divided by the bonus for high-credit tasks).  A ``prev`` that is no longer
        running leaves the runqueue.  With nothing runnable the idle task runs and
        ``expired_timestamp`` is cleared.  The arrays are swapped only when the active
        one is empty (clearing ``expired_timestamp``).  The first task of the best
        level is picked; if it was woken and not yet run, its run-queue wait is
        credited as sleep (fully for an interrupt wakeup, 30 % otherwise).  Every pass
        counts an RCU quiescent state (``qsctr``, ``on_qs``, ``rcu``), even when
        ``prev`` is picked again.  Then ``prev.sleep_avg -= run_time`` (floor 0; hitting
        0 costs interactive credit) and ``prev`` is stamped with ``now``.
        """
        t = self._clock(now)
        prev = self.curr
        run_time = t - prev.timestamp
        if run_time >= NS_MAX_SLEEP_AVG:
            run_time = NS_MAX_SLEEP_AVG
        if prev.high_credit():
            run_time //= prev.bonus or 1
        if prev is not self.idle:
            if prev.state != RUNNING:
                self.nr_running -= 1
                prev.array.dequeue(prev)
                prev.array = None
                prev.nvcsw += 1
            else:
                prev.nivcsw += 1
        if not self.nr_running:
            nxt = self.idle
            self.expired_timestamp = None
        else:
            array = self.active
            if not array.nr_active:
                self.active, self.expired = self.expired, array
                array = self.active
                self.expired_timestamp = None
            nxt = array.first()
            if nxt.activated > 0:
                d = t - nxt.timestamp
                if nxt.activated == 1:
                    d = d * _ONRQ_128 // 128
                array = nxt.array
                array.dequeue(nxt)
                self.recalc_task_prio(nxt, nxt.timestamp + d)
                array.enqueue(nxt)
            nxt.activated = 0
        self.need_resched = False
        self.qsctr += 1
        if self.on_qs is not None:
            self.on_qs(self.cpu)
        if self.rcu is not None:
            self.rcu.note_context_switch(self.cpu)
        sa = prev.sleep_avg - run_time
        if sa <= 0:
            sa = 0
            if not (prev.high_credit() or prev.low_credit()):
                prev.interactive_credit -= 1
        prev.sleep_avg = sa
        prev.timestamp = t
        if nxt is not prev:
            nxt.timestamp = t
            self.nr_switches += 1
            self.curr = nxt
            prev.run_ns += t - prev.switched_in
            prev.switched_in = None
            if prev.state == RUNNING and prev is not self.idle:
                prev.wait_since = t
            if nxt.wait_since is not None:
                w = t - nxt.wait_since
                if w > nxt.worst_wait_ns:
                    nxt.worst_wait_ns = w
                nxt.wait_since = None
            nxt.switched_in = t
        return nxt

    # -- views ------------------------------------------------------------------------
    def run_ns(self, p: Task, now: float) -> int:
        """``p.run_ns`` including the stretch it is running now."""
        extra = _ns(now) - p.switched_in if p.switched_in is not None else 0
        return p.run_ns + extra

    def check(self) -> None:
        """Assert the runqueue invariants (for tests): array counts, membership, current."""
        seen = set()
        for arr in (self.active, self.expired):
            members = arr.tasks()
            assert len(members) == arr.nr_active, "nr_active out of step"
            for p in members:
                assert id(p) not in seen, f"{p.name} in two arrays"
                assert p.array is arr, f"{p.name}.array is wrong"
                seen.add(id(p))
            for prio in range(MAX_PRIO):
                assert bool(arr.bitmap >> prio & 1) == bool(arr.queue[prio]), "bitmap"
        assert len(seen) == self.nr_running, "nr_running out of step"
        assert (self.curr is self.idle) or self.curr.array is not None or \
            self.curr.state != RUNNING, "a running current task must be on the runqueue"
        assert sum(p.switched_in is not None for p in self.tasks + [self.idle]) == 1, \
            "exactly one task is current"


def simulate(rq: Runqueue, until_ms: int, *, start_ms: int = 0,
             softirq: Callable[[int], bool] | None = None,
             pending: Callable[[int], bool] | None = None,
             ksoftirqd: Task | None = None, check: bool = False) -> None:
    """Drive one runqueue jiffy by jiffy: a uniprocessor reference driver for tests.

    Not kernel code: the engine's ``Cpu`` (routelab/core/softirq.py) is the real driver.
    At each jiffy ``j``: the timer tick lands on ``current`` (``softirq(j)`` True means
    softirq work runs on top of ``current`` for the whole jiffy ``j``, so the tick hits
    softirq and the task makes no progress of its own); timers wake the sleepers due
    now and, if ``pending(j)``, ksoftirqd is woken (both from interrupt context); a
    sleeper that finished its burst blocks right after the tick (ksoftirqd likewise
    when nothing is pending), otherwise ``need_resched`` is acted on at the return from
    the interrupt; then ``current`` runs the jiffy.  ksoftirqd's own jiffies always
    count as in softirq.  Blocking and waking happen at ticks, so no task is ever
    switched in for zero time.
    """
    soft = softirq or (lambda j: False)
    pend = pending or (lambda j: False)
    for j in range(start_ms, until_ms):
        now = j / HZ
        cur = rq.curr
        in_soft = cur is ksoftirqd or soft(j)
        rq.scheduler_tick(now, in_softirq=in_soft, user_mode=not in_soft and cur.mm)
        for p in rq.tasks:
            if p.kind == "sleeper" and p.wake_at == j and p.array is None:
                rq.wake_up(p, now, from_irq=True)
        if ksoftirqd is not None and pend(j) and ksoftirqd.array is None:
            rq.wake_up(ksoftirqd, now, from_irq=True)
        if cur.kind == "sleeper" and cur.burst_left <= 0:
            cur.burst_left = cur.burst
            cur.wake_at = j + cur.sleep
            rq.sleep(cur, now)
        elif cur is ksoftirqd and not pend(j):
            rq.sleep(cur, now)
        elif rq.need_resched:
            rq.schedule(now)
        cur = rq.curr
        if cur.kind == "sleeper" and not soft(j):
            cur.burst_left -= 1
        if check:
            rq.check()


LOOP_NAME = "gettimeofday"   # the user program of story 2 (Cpu.loop)


def loop_runqueue(cpu: int, ncpus: int, tasks: list) -> Runqueue:
    """CPU ``cpu``'s O(1) runqueue for a run with a user task: ksoftirqd
    (nice 19, asleep), the gettimeofday loop (nice 0, CPU-bound) and the
    further ``tasks``, with the loop current at time 0.

    Kernel: kernel/softirq.c ksoftirqd (set_user_nice(current, 19)),
    kernel/sched.c (2.6.0, MaximeChretien/linux-history v2.6.0) -- as a
    run with ``Router(user_task=True)`` builds it.  Simplified:
    the tasks start with no sleep average (a fresh fork's penalties are not
    modelled) unless given one.

    Placement: a task with ``cpus_allowed`` goes on those CPUs only (one copy
    per CPU: the model's tasks never migrate).  If ``tasks`` names a task
    ``"gettimeofday"`` that entry *is* the loop (its ``user_share``, its CPUs),
    instead of the default loop on every CPU with ``user_share`` 1.
    """
    rq = Runqueue(cpu, ncpus)
    rq.add(Task(f"ksoftirqd/{cpu}", 19, "ksoftirqd"))
    if not any(t.get("name") == LOOP_NAME for t in tasks):
        rq.add(Task(LOOP_NAME, 0, "cpu"))
    for t in tasks:
        allowed = t.get("cpus_allowed")
        if allowed is not None and cpu not in tuple(allowed):
            continue
        rq.add(Task(**t))
    rq.schedule(0.0)
    return rq
