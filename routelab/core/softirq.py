"""The CPUs: softirq processing, ksoftirqd and the task they interrupt.

Kernel: kernel/softirq.c (do_softirq, its restarts, ksoftirqd), net/core/dev.c
(net_rx_action's budget and time limit), kernel/sched.c (2.6.0 O(1)
scheduler: scheduler_tick, schedule), kernel/rcupdate.c (quiescent states)
(MaximeChretien/linux-history, tags 2.4.24 and v2.6.0).

A :class:`Cpu` is one processor.  Its softirq work is served FIFO in arrival
order: ``busy`` is when the work queued so far ends.  A packet that finds the
CPU free starts a new ``net_rx_action`` run (paying ``softirq_entry``); one
that finds it busy joins the current run, which ends -- ``time_squeeze`` --
after ``netdev_max_backlog`` packets or once a jiffy has gone by (looked at
between ``dev->poll`` calls).  Then ``do_softirq`` restarts, up to
``MAX_SOFTIRQ_RESTART`` times, and gives up by waking ksoftirqd; with a user
task on the CPU the time between is the task's (:meth:`Cpu.do_softirq`).

Who is current -- ksoftirqd, the gettimeofday loop, other tasks -- is decided
by the CPU's 2.6.0 O(1) runqueue (:mod:`routelab.core.sched`), which this
module feeds with ticks, wakeups and schedule() calls at the points the kernel
has them.

Simplifications (each also said where it happens): hard-IRQ time is charged
into the same FIFO (it would preempt softirq work, which changes the order of
completion but not the total); tasks block and wake only at ticks; how a
stretch of user time between two ``do_softirq`` calls ends (:meth:`Cpu.sliver`)
rests on a reading of the e1000 driver plus the 8254x interrupt rules as
recalled (``INTERRUPTS``); whether a tick that ends it lands in user mode is
the current task's ``user_share`` (ASSUMED for the gettimeofday loop).
"""

from __future__ import annotations

import math

import cython

from ..sim.ledger import Ledger
from ..sim.queues import IntervalLog
from .dev import SoftnetData, flush_tx
from .sched import LOOP_NAME as _LOOP_NAME

__all__ = ["Cpu", "TimerTick", "MAX_SOFTIRQ_RESTART", "TX_IRQ_DELAY", "INTERRUPTS",
           "interrupts", "next_tick"]

MAX_SOFTIRQ_RESTART = 10   # kernel/softirq.c (2.6)
# The e1000 transmit interrupt delay, TIDV = 64 units of 1.024 us (driver
# default TxIntDelay, drivers/net/e1000/e1000_param.c, v2.6.0; the unit as
# recalled).  Until issue 24 every sliver of user time ended this long after
# it began; now it is only the ``tx_irq_s`` a run may choose (see INTERRUPTS).
TX_IRQ_DELAY = 64 * 1.024e-6
# (the same as C constants when compiled)
_MAX_RESTART = MAX_SOFTIRQ_RESTART

#: How a stretch of user time between two ``do_softirq`` calls ends under a
#: NAPI flood (:meth:`Cpu.sliver`), read when a :class:`Cpu` is made.  Change it
#: for a run with :func:`interrupts`.
#:
#: * ``irq0_phase_s``: CPU0 also takes IRQ0 (the PIT, routed to CPU0 only: in
#:   Olsson's /proc/interrupts of 31 Mar 2004 IRQ0 counts 297,156 on CPU0 against
#:   LOC 297,060 per CPU), this long after each local APIC tick.  Its handler
#:   (arch/i386/kernel/time.c timer_interrupt, do_timer) does not call
#:   update_process_times on SMP (kernel/timer.c, "SMP process accounting uses
#:   the local APIC timer"): no scheduler tick, no RCU check -- but its irq_exit
#:   runs do_softirq.  The phase is set at boot and unknown: ASSUMED 0.5 ms, the
#:   middle of its range 0..1 ms; ``None``: no IRQ0 (only the LAPIC tick).
#: * ``tx_irq_s``: ``None`` (the default) -- the output NIC's interrupt is masked
#:   when ``do_softirq`` returns, so it never ends a sliver.  The reading:
#:   e1000_intr masks every cause (IMC) and schedules the poll; e1000_clean
#:   re-enables them (IMS, which includes TXDW) when its RX work is below the
#:   quota -- always, on an output port -- and under the flood a TX write-back
#:   is latched in ICR by then, so the interrupt fires at once, inside the
#:   softirq, and puts the port back on the poll list, masked
#:   (drivers/net/e1000/e1000_main.c v2.6.0; the ICR/IMS rule is the 8254x's as
#:   recalled, unverified).  A number: the interrupt comes that many seconds
#:   after the return instead (``TX_IRQ_DELAY`` was the old assumption).
INTERRUPTS = {"irq0_phase_s": 0.5e-3, "tx_irq_s": None}


class interrupts:
    """Context manager: runs made inside use these ``INTERRUPTS`` settings
    (``with interrupts(irq0_phase_s=..., tx_irq_s=...): router.run(...)``)."""

    def __init__(self, irq0_phase_s=0.5e-3, tx_irq_s=None) -> None:
        if irq0_phase_s is not None and not 0.0 <= irq0_phase_s < 1e-3:
            raise ValueError(f"irq0_phase_s={irq0_phase_s!r}: in [0, 1 ms) or None")
        if tx_irq_s is not None and not 0.0 < tx_irq_s <= 1e-3:
            raise ValueError(f"tx_irq_s={tx_irq_s!r}: in (0, 1 ms] or None")
        self.new = {"irq0_phase_s": irq0_phase_s, "tx_irq_s": tx_irq_s}
        self.old = None

    def __enter__(self):
        self.old = dict(INTERRUPTS)
        INTERRUPTS.update(self.new)
        return self

    def __exit__(self, *exc) -> None:
        INTERRUPTS.update(self.old)
_SCHED_HZ = 1000           # routelab.core.sched.HZ: the 2.6.0 scheduler's jiffies
STALL_S = 0.05             # the loop's gaps recorded one by one (Cpu.loop_stalls)
_STALL_S = STALL_S


@cython.locals(x=cython.double, hz=cython.long)
def next_tick(x: float, hz: int) -> float:
    """The first timer tick strictly after time ``x`` (robust to float rounding)."""
    return (math.floor(x * hz + 1e-6) + 1) / hz


class Cpu:
    """One CPU: its softirq work, ksoftirqd and the tasks it interrupts.

    Parameters
    ----------
    num : int
    hz : int                 timer ticks per second (jiffy = 1/hz)
    budget : int             net_rx_action's packet budget (netdev_max_backlog)
    entry_cost : float       seconds of one net_rx_action/do_softirq start
    rq : Runqueue or None    the CPU's 2.6.0 O(1) runqueue
                             (:class:`routelab.core.sched.Runqueue`) with its tasks:
                             ksoftirqd, the gettimeofday loop and any others; None:
                             no user task, the CPU idles when there is no softirq work
                             and ksoftirqd runs whenever it is woken
    rcu : Rcu or None        the RCU state (quiescent states, the tasklet)
    softnet : SoftnetData    its backlog and softnet counters
    devices : list           every NetDevice (TX completions before RCU callbacks)
    ledger : Ledger
    max_restart : int
        ``do_softirq`` passes before ksoftirqd is woken: 10 in 2.6; 1 in 2.4
        (it never reruns a softirq it already ran, and NET_RX re-raises
        itself when it stops with work left).

    Attributes
    ----------
    busy : float             when the softirq work queued so far ends
    pass_n, pass_t0          packets in the current net_rx_action run, its start
    restarts : int           do_softirq restarts in the current invocation
    in_ksoftirqd : bool      ksoftirqd is the current task
    sched_t : float          the scheduler has been given every tick up to here
    loop_seen, loop_gap      when the gettimeofday loop last ran in user mode, and
                             the longest gap between two of its runs so far
    loop_user_s              seconds the loop really ran (in user mode)
    loop_stalls              (start, length) of every gap of at least ``STALL_S``
    ivlog : IntervalLog      softirq busy intervals
    ctxsw, ksoftirqd_wakeups, user_ticks, slivers : int  counters
    ksoftirqd_s : float      seconds ksoftirqd was the current task (top's view)
    """

    def __init__(self, num: int, hz: int, budget: int, entry_cost: float, rq,
                 rcu, softnet: SoftnetData, devices: list, ledger: Ledger,
                 max_restart: int = MAX_SOFTIRQ_RESTART) -> None:
        self.num = num
        self.hz = hz
        self.jiffy = 1.0 / hz
        self.budget = budget
        self.max_restart = max_restart
        self.rr = entry_cost
        self.rq = rq
        self.user = rq is not None
        self.ksd = None
        self.loop = None
        if rq is not None:
            for p in rq.tasks:
                if p.kind == "ksoftirqd":
                    self.ksd = p
                elif p.name == _LOOP_NAME and self.loop is None:
                    self.loop = p
            if self.ksd is None:
                raise ValueError("a runqueue for a Cpu needs its ksoftirqd task")
        self.rcu = rcu
        self.use_rcu = rcu is not None and rcu.mode != "none"
        kinds = rcu.qs_kinds if rcu is not None else frozenset()
        self.qs_handler = "softirq_handler" in kinds
        self.qs_loop = "softirq_loop" in kinds
        self.softnet = softnet
        self.devices = devices
        self.ledger = ledger
        self.slot_rcu = ledger.slot("rcu_tasklet")
        self.slot_entry = ledger.slot("net_rx_action")
        self.runs = 0           # net_rx_action runs started (each paid the entry cost rr)
        self.busy = 0.0
        self.pass_n = 0
        self.pass_t0 = 0.0
        self.restarts = 0
        self.in_ksoftirqd = False
        self.sched_t = 0.0
        self.loop_seen = 0.0
        self.loop_gap = 0.0
        self.loop_user_s = 0.0
        self.loop_stalls = []
        self.ivlog = IntervalLog()
        self.ctxsw = 0
        self.ksoftirqd_wakeups = 0
        self.user_ticks = 0
        self.slivers = 0
        self.ksoftirqd_s = 0.0
        self.ksoftirqd_since = 0.0
        # (no runqueue) ksoftirqd's time slice: nice 19 gets MIN_TIMESLICE,
        # 10 ms in jiffies of this kernel's HZ (at least one)
        self.ksd_slice = max(10 * hz // 1000, 1)
        self.ksd_left = self.ksd_slice
        self.ksd_expiry = 0
        self.resched_same = 0
        # how slivers end (INTERRUPTS, read now): IRQ0 only on CPU0
        ph = INTERRUPTS["irq0_phase_s"]
        self.irq0_phase = ph if (ph is not None and num == 0) else -1.0
        tx = INTERRUPTS["tx_irq_s"]
        self.tx_irq = tx if tx is not None else -1.0
        # where a sliver-ending tick lands: a per-CPU Lehmer generator (the same
        # numbers compiled and pure; it does not touch the run's other streams)
        self.lcg = 1 + 7919 * (num + 1)
        self.sys_ticks = 0
        self.irq0_ends = 0
        self.ksd_passes = 0

    # -- the softirq run a packet's service belongs to ------------------------------
    @cython.locals(b=cython.double, start=cython.double, svc=cython.double,
                   pn=cython.long, p0=cython.double, lg=Ledger)
    def net_rx_action(self, t: float, weight: int, cost: float) -> float:
        """A packet that arrived at ``t`` gets the CPU: return when its service
        starts, and leave its CPU time so far in ``ledger.svc`` (``cost``,
        plus the run's entry cost if it starts a run, plus the RCU tasklet if
        a run boundary ran it).  The runs are counted (:attr:`runs`), and
        :meth:`finish` charges their entry cost to the ``net_rx_action``
        slot (a count, not a charge per run: this is the hit path).

        Kernel: net/core/dev.c net_rx_action, process_backlog (2.4.24,
        2.6.0): a run ends after ``budget`` packets or once ``jiffies -
        start_time > 1`` (1 to 2 jiffies of work, by where the run began
        within its jiffy), tested between ``dev->poll`` calls (every
        ``weight`` packets; every packet of the 2.4 backlog); then
        ``do_softirq`` restarts or gives up (:meth:`do_softirq`).
        """
        lg = self.ledger
        b = self.busy
        if b < t:
            # the CPU had no softirq work since b: ksoftirqd (if it ran) went to
            # sleep, the tasks ran
            if self.user or self.in_ksoftirqd:
                start = self.cpu_was_free(b, t)
            else:
                start = t
            self.pass_n = 1
            self.pass_t0 = start
            self.restarts = 0
            lg.svc = self.rr + cost
            self.runs += 1
            if self.user:
                self.rq.curr.softirq_passes += 1
                if self.in_ksoftirqd:
                    self.ksd_passes += 1
            return start
        start = b
        svc = cost
        pn = self.pass_n + 1
        p0 = self.pass_t0
        # (the time limit: more than one jiffy has ticked since the run began,
        # ``jiffies - start_time > 1``: 1 to 2 jiffies of work)
        if pn > self.budget or (math.floor(start * self.hz) - math.floor(p0 * self.hz) > 1
                                and (pn - 1) % weight == 0):
            # net_rx_action returns with work left: budget used up, or a jiffy
            # gone (looked at between dev->poll calls, every ``weight`` packets)
            self.softnet.time_squeeze += 1
            if self.use_rcu and self.rcu.rcu_pending(self.num):
                flush_tx(self.devices, start)   # the RCU callbacks read reference counts
            start = self.do_softirq(start)
            svc = self.rr + lg.t + cost
            self.runs += 1
            if self.user:
                self.rq.curr.softirq_passes += 1
                if self.in_ksoftirqd:
                    self.ksd_passes += 1
            pn = 1
            self.pass_t0 = start
        self.pass_n = pn
        lg.svc = svc
        return start

    @cython.locals(b=cython.double, t=cython.double)
    def cpu_was_free(self, b: float, t: float) -> float:
        """A packet arrives at ``t`` on a CPU that has had no softirq work since ``b``.

        The driver's RX interrupt is enabled again (the ring was drained), so
        its interrupt starts a fresh ``do_softirq`` from ``irq_exit``.  Returns
        the time the packet's service may start (``t``).

        Kernel: kernel/softirq.c ksoftirqd (sleeps when no softirq is pending),
        kernel/sched.c schedule.  If ksoftirqd was running it went to sleep at
        ``b`` (schedule(): a quiescent state).  From ``b`` to ``t`` the tasks
        run in user mode (:meth:`user_runs`); the RCU side of those ticks is
        :class:`TimerTick`'s.
        """
        if self.rcu is not None and b > 0.0:
            # the do_softirq that ran out of work at b ended with a handler run and a
            # pass of its loop (the patches' quiescent states; vanilla ignores them)
            if self.qs_handler:
                self.rcu.quiescent(self.num, b, "softirq_handler")
            if self.qs_loop:
                self.rcu.quiescent(self.num, b, "softirq_loop")
        if self.rq is None:
            # no tasks: ksoftirqd sleeps, the CPU idles
            self.ksoftirqd_stops(b)
            self.ctxsw += 1
            if self.rcu is not None:
                self.rcu.quiescent(self.num, b, "ctxsw")
            return t
        self.sched_ticks(b, True)
        if self.in_ksoftirqd:
            self.rq.sleep(self.ksd, b)
            self.switched(b)
        self.user_runs(b, t, True)
        return t

    # -- the scheduler side ----------------------------------------------------------
    @cython.locals(upto=cython.double, k=cython.long, k1=cython.long, tk=cython.double)
    def sched_ticks(self, upto: float, in_softirq: bool) -> int:
        """Give the scheduler every tick up to ``upto`` that it has not seen; all
        of them landed in softirq work (``in_softirq``: on top of the current
        task, or ksoftirqd's own) -- the caller handles user-mode stretches.

        Kernel: kernel/timer.c update_process_times -> kernel/sched.c
        scheduler_tick (2.6.0, MaximeChretien/linux-history v2.6.0): the tick
        charges ``current``'s slice wherever it landed.  Sleepers whose timer
        is due wake from the interrupt.
        """
        rq = self.rq
        k = math.floor(self.sched_t * _SCHED_HZ + 1e-6) + 1
        k1 = math.floor(upto * _SCHED_HZ + 1e-6)
        while k <= k1:
            tk = k / _SCHED_HZ
            self.wake_sleepers(tk)
            rq.scheduler_tick(tk, in_softirq=True)
            k += 1
        if upto > self.sched_t:
            self.sched_t = upto
        return 0

    def wake_sleepers(self, t: float) -> int:
        """Timer wakeups of the mostly-sleeping tasks due by ``t`` (from the
        timer interrupt: ``activated = 2``)."""
        for p in self.rq.tasks:
            if p.kind == "sleeper" and p.array is None and 0 <= p.wake_at <= t * _SCHED_HZ + 1e-6:
                self.rq.wake_up(p, t, True)
        return 0

    def switched(self, t: float) -> int:
        """After a schedule() at ``t``: a quiescent state, and who is current now."""
        cur = self.rq.curr
        self.ctxsw += 1
        if self.rcu is not None:
            self.rcu.quiescent(self.num, t, "ctxsw")
        if cur is self.ksd:
            if not self.in_ksoftirqd:
                self.in_ksoftirqd = True
                self.ksoftirqd_since = t
        elif self.in_ksoftirqd:
            self.ksoftirqd_stops(t)
        return 0

    @cython.locals(a=cython.double, z=cython.double, x=cython.double, nt=cython.double,
                   seg=cython.double)
    def user_runs(self, a: float, z: float, preempt: bool) -> int:
        """From ``a`` to ``z`` no softirq work runs: the current task runs in user
        mode (the idle task idles), ticks land there, and (``preempt``) the
        return from each tick may switch tasks.  A mostly-sleeping task uses its
        burst and sleeps; the gettimeofday loop's gaps are recorded.

        Kernel: kernel/sched.c scheduler_tick (user tick), schedule at the
        return to user mode (2.6.0).  ``preempt`` is False for the stretch
        between an ``irq_exit`` and the next interrupt, which runs
        ``do_softirq`` again before it can reschedule.
        """
        rq = self.rq
        x = a
        while x < z:
            nt = math.floor(x * _SCHED_HZ + 1e-6) + 1
            nt = nt / _SCHED_HZ
            seg = nt if nt < z else z
            cur = rq.curr
            if cur is self.loop:
                if x - self.loop_seen > self.loop_gap:
                    self.loop_gap = x - self.loop_seen
                if x - self.loop_seen >= _STALL_S:
                    self.loop_stalls.append((self.loop_seen, x - self.loop_seen))
                self.loop_seen = seg
                self.loop_user_s += seg - x
            elif cur.kind == "sleeper":
                cur.burst_left -= (seg - x) * _SCHED_HZ
            if nt > z + 1e-12:
                break
            # the tick at nt lands in user mode (or idle)
            self.sched_t = nt
            self.wake_sleepers(nt)
            rq.scheduler_tick(nt, user_mode=bool(cur.mm))
            cur = rq.curr
            if cur.kind == "sleeper" and cur.burst_left <= 1e-9:
                cur.burst_left = cur.burst
                cur.wake_at = math.floor(nt * _SCHED_HZ + 1e-6) + cur.sleep
                rq.sleep(cur, nt)
                self.switched(nt)
            elif preempt and rq.need_resched:
                rq.schedule(nt)
                self.switched(nt)
            x = nt
        return 0

    @cython.locals(start=cython.double, w=cython.double, end=cython.double,
                   tick=cython.double, mark=cython.double, lg=Ledger)
    def do_softirq(self, start: float) -> float:
        """net_rx_action returned with work left at ``start``: what runs next,
        and where.  Returns when the next ``net_rx_action`` run starts; the
        RCU tasklet time run at this boundary is left in ``ledger.t``.

        Kernel: kernel/softirq.c do_softirq (restart at most 10 times, then
        wake ksoftirqd), ksoftirqd (do_softirq, then cond_resched);
        kernel/sched.c (2.6.0 O(1) scheduler, :mod:`routelab.core.sched`).

        The model of one CPU under a NAPI flood:

        * Softirqs run from ``irq_exit`` on top of whatever task the interrupt
          found (the timer tick, the output NIC's TX-completion interrupt;
          the input NIC's RX interrupt stays masked while it is polled).  One
          ``do_softirq`` makes at most ``max_restart`` passes, then wakes
          ksoftirqd.  Every tick during that work lands in softirq and is
          charged to the current task's slice (:meth:`sched_ticks`); the
          wall-clock time drains its ``sleep_avg`` at its next schedule().
        * At the return from the interrupt, ``need_resched`` (a slice used up,
          a better task woken) calls schedule(), a quiescent state.  If the
          current task is a user task it runs until the next interrupt
          (:meth:`sliver`): the next LAPIC tick, or IRQ0 on CPU0, the output
          NICs being masked; a LAPIC tick lands in user mode only with the
          task's ``user_share`` -- otherwise inside its system call.
        * ksoftirqd (nice 19, never interactive) runs ``do_softirq`` back to
          back in process context (its ticks land in softirq: no quiescent
          state), calling cond_resched() between them: schedule() only once
          ``need_resched`` is set.  When it finds nothing pending it sleeps
          (:meth:`cpu_was_free`).
        * Without a runqueue (no user task) ksoftirqd still has its time slice
          (nice 19: ``MIN_TIMESLICE``, 10 ms).  The tick that uses it up sets
          ``need_resched`` and refills it; the ``cond_resched()`` after the
          ``do_softirq`` that was running calls schedule(), which finds
          ksoftirqd alone (the arrays swap) and picks it again -- yet passes
          the quiescent-state increment on its way, so a CPU that only
          forwards still ends grace periods every 10 ms or so
          (:meth:`ksoftirqd_resched`).  Kernel: kernel/softirq.c ksoftirqd
          (the ``while`` loop of do_softirq and cond_resched, v2.6.1 and
          v2.6.0), kernel/sched.c scheduler_tick (slice expiry) and schedule
          (the ``switch_tasks`` label counts the quiescent state before it
          compares prev and next, v2.6.1), MaximeChretien/linux-history.

        Time with ksoftirqd current is summed (``ksoftirqd_s``, summary
        ``cpu_ksoftirqd_pct``): top charges a task every tick that lands
        while it is current, so this is what top shows on the ksoftirqd line.

        The restart rule is the kernel's (``max_restart``): 2.6.0 makes up to
        10 passes; 2.4.24 reruns only softirqs raised for the first time
        during its pass, so a NET_RX that re-raises itself wakes ksoftirqd
        after the first pass [24] kernel/softirq.c do_softirq.

        Simplified: interrupts are instantaneous (hard-IRQ time is folded into
        the per-packet costs); how a sliver ends follows ``INTERRUPTS``; with a 2.4 kernel the
        2.6.0 scheduler stands in for 2.4's (not modelled).
        """
        lg = self.ledger
        rcu = self.rcu
        w = 0.0
        if rcu is not None:
            if self.qs_handler:
                rcu.quiescent(self.num, start, "softirq_handler")
            if self.use_rcu:
                # the RCU tasklet, if a tick scheduled it (TASKLET_SOFTIRQ runs
                # after NET_RX in the pass)
                mark = lg.total
                w = rcu.tasklet_at(self.num, start)
                if w > 0.0:
                    lg.charge_rest(self.slot_rcu, w, mark)
        lg.t = w
        self.restarts += 1
        if self.restarts < self.max_restart:
            return start
        # this do_softirq invocation gives up
        self.restarts = 0
        if self.qs_loop and rcu is not None:
            rcu.quiescent(self.num, start, "softirq_loop")
        if self.rq is None:
            if not self.in_ksoftirqd:
                self.ksoftirqd_wakeups += 1
                self.ksoftirqd_runs(start)
            else:
                self.ksoftirqd_resched(start)
            return start
        rq = self.rq
        self.sched_ticks(start, True)
        if self.in_ksoftirqd:
            # ksoftirqd's loop: cond_resched() between do_softirq calls
            if not rq.need_resched:
                return start
        else:
            # irq_exit: wakeup_softirqd (from interrupt context)
            if self.ksd.array is None:
                self.ksoftirqd_wakeups += 1
                rq.wake_up(self.ksd, start, True)
            if not rq.need_resched:
                return self.sliver(start)
        rq.schedule(start)
        self.switched(start)
        if self.in_ksoftirqd:
            return start
        return self.sliver(start)

    @cython.locals(start=cython.double, end=cython.double, tick=cython.double,
                   irq0=cython.double, tx=cython.double, share=cython.double)
    def sliver(self, start: float) -> float:
        """Back in user mode at ``start`` until the next interrupt: return when it
        comes (and with it the next ``do_softirq``).

        Kernel: arch/i386/kernel/apic.c smp_local_timer_interrupt (the LAPIC
        tick, every CPU: update_process_times), arch/i386/kernel/time.c
        timer_interrupt (IRQ0, CPU0 only, no process accounting on SMP),
        include/asm-i386/hardirq.h irq_exit, drivers/net/e1000/e1000_main.c
        e1000_intr / e1000_clean / e1000_irq_enable, kernel/rcupdate.c
        rcu_check_callbacks (v2.6.0, MaximeChretien/linux-history).

        The input NICs stay masked (they never finish a poll under the flood);
        the output NICs' interrupt is masked too unless ``INTERRUPTS`` says
        otherwise (``tx_irq``).  So the sliver ends at the next LAPIC tick or,
        on CPU0, at IRQ0 if that comes first.  A LAPIC tick that ends it
        interrupted the current task's own code: in user mode with probability
        ``user_share`` (a quiescent state in every flavour), otherwise inside a
        system call (a quiescent state only of the call_rcu_bh patch: "any
        tick not in softirq"); in the idle task it is an idle tick.  IRQ0 and
        the TX interrupt are neither.  ``user_ticks``, ``sys_ticks`` and
        ``irq0_ends`` count the cases.
        """
        self.slivers += 1
        end = next_tick(start, self.hz)
        tick = end
        if self.irq0_phase >= 0.0:
            irq0 = next_tick(start - self.irq0_phase, self.hz) + self.irq0_phase
            if irq0 < end:
                end = irq0
        if self.tx_irq > 0.0:
            tx = start + self.tx_irq
            if tx < end:
                end = tx
        if end == tick:
            self.tick_qs(tick)
        elif self.tx_irq <= 0.0 or end < start + self.tx_irq:
            self.irq0_ends += 1
        self.user_runs(start, end, False)
        return end

    @cython.locals(share=cython.double)
    def tick_qs(self, tick: float) -> int:
        """A LAPIC tick at ``tick`` interrupted the current task's own code (no
        softirq work under way): pass the RCU event it is.  The idle task: an
        idle tick.  A user task: in user mode with probability ``user_share``
        (``user_ticks``), else inside a system call (``sys_ticks``).

        Kernel: kernel/rcupdate.c rcu_check_callbacks (v2.6.0: a user tick, or
        the idle task outside softirq; the call_rcu_bh patch adds any tick not
        in softirq for its own flavour).  Where in the loop a tick lands is
        drawn from a per-CPU Park-Miller generator (multiplier 48271), the same
        numbers compiled and pure, apart from the run's other random streams.
        """
        cur = self.rq.curr if self.rq is not None else None
        if cur is None or not cur.mm:
            self.user_ticks += 1
            if self.rcu is not None:
                self.rcu.quiescent(self.num, tick, "idle")
            return 0
        share = cur.user_share
        if share < 1.0:
            self.lcg = (self.lcg * 48271) % 2147483647
        if share >= 1.0 or self.lcg < share * 2147483647.0:
            self.user_ticks += 1
            if self.rcu is not None:
                self.rcu.quiescent(self.num, tick, "user_tick")
        else:
            self.sys_ticks += 1
            if self.rcu is not None:
                self.rcu.quiescent(self.num, tick, "system_tick")
        return 0

    @cython.locals(k=cython.long)
    def ksoftirqd_runs(self, t: float) -> int:
        """(No runqueue) ksoftirqd is woken and runs at ``t``: a context switch (a
        quiescent state), and ksoftirqd is the current task from now on.  Its
        slice runs out at the tick ``ksd_left`` ticks on (what is left of it
        carries over from its last run, as ``p->time_slice`` does)."""
        self.ctxsw += 1
        if self.rcu is not None:
            self.rcu.quiescent(self.num, t, "ctxsw")
        self.in_ksoftirqd = True
        self.ksoftirqd_since = t
        k = math.floor(t * self.hz + 1e-6)
        self.ksd_expiry = k + self.ksd_left
        return 0

    @cython.locals(k=cython.long)
    def ksoftirqd_resched(self, t: float) -> int:
        """(No runqueue) ksoftirqd's ``cond_resched()`` at ``t``, after a
        ``do_softirq``: if a tick since the last one used up its slice,
        schedule() runs and picks ksoftirqd again -- a quiescent state
        (``ctxsw``) though no other task runs.  The slice was refilled at the
        expiring tick; several expiries inside one long ``do_softirq`` give
        one schedule() (``need_resched`` is a flag).  Counted in ``ctxsw``
        (every schedule() pass, as the runqueue model counts them) and in
        ``resched_same``.

        Kernel: kernel/sched.c scheduler_tick and schedule, kernel/softirq.c
        ksoftirqd (v2.6.1, MaximeChretien/linux-history).  Simplified: a 2.4
        kernel gets the same 10 ms rule (its RCU-free route cache makes the
        quiescent state moot; only the counters see it).
        """
        k = math.floor(t * self.hz + 1e-6)
        if k < self.ksd_expiry:
            return 0
        self.ksd_expiry += self.ksd_slice * (1 + (k - self.ksd_expiry) // self.ksd_slice)
        self.ctxsw += 1
        self.resched_same += 1
        if self.rcu is not None:
            self.rcu.quiescent(self.num, t, "ctxsw")
        return 0

    @cython.locals(k=cython.long)
    def ksoftirqd_stops(self, t: float) -> int:
        """ksoftirqd stops being the current task at ``t`` (it sleeps, or was
        switched out): the time since it started is top's ksoftirqd time, and
        the ticks it was charged come off its slice."""
        was = self.in_ksoftirqd
        self.in_ksoftirqd = False
        self.ksoftirqd_s += t - self.ksoftirqd_since
        if self.rq is None and was:
            k = math.floor(t * self.hz + 1e-6)
            if k >= self.ksd_expiry:
                # its slice ran out while it worked (refilled at that tick)
                self.ksd_left = self.ksd_slice - (k - self.ksd_expiry) % self.ksd_slice
            else:
                self.ksd_left = self.ksd_expiry - k
        return 0

    # -- accounting ------------------------------------------------------------------
    @cython.locals(s0=cython.double)
    def charge(self, due: float, w: float) -> int:
        """Charge ``w`` seconds of work (a timer, the RCU tasklet, the hard IRQ of a
        dropped packet) starting at ``due`` or when the CPU is next free."""
        s0 = self.busy if self.busy > due else due
        self.ivlog.add(s0, w, s0 + w)
        self.busy = s0 + w
        return 0

    def served(self, start: float, svc: float, fin: float) -> int:
        """A packet's service ran from ``start`` for ``svc`` seconds until ``fin``."""
        self.busy = fin
        self.ivlog.add(start, svc, fin)
        return 0

    def finish(self, duration: float) -> None:
        """End of the run: the softirq work still queued runs (ksoftirqd stops when
        it is done), the tasks run to the end, and the gettimeofday loop's last
        gap is closed.  The runs' entry cost goes to the profile."""
        self.ledger.charge(self.slot_entry, self.rr * self.runs)
        end = min(self.busy, duration)
        if self.rq is None:
            if self.in_ksoftirqd:
                self.ksoftirqd_stops(end if end > self.ksoftirqd_since else self.ksoftirqd_since)
            return
        if end > self.sched_t:
            self.sched_ticks(end, True)
        if self.in_ksoftirqd:
            self.rq.sleep(self.ksd, max(end, self.sched_t))
            self.switched(max(end, self.sched_t))
        if duration > self.sched_t:
            self.user_runs(self.sched_t, duration, True)
        if self.loop is not None and duration - self.loop_seen > self.loop_gap:
            self.loop_gap = duration - self.loop_seen
        if self.loop is not None and duration - self.loop_seen >= _STALL_S:
            self.loop_stalls.append((self.loop_seen, duration - self.loop_seen))

    def tasks(self, now: float) -> list:
        """Per task on this CPU: name, nice, kind, seconds it was current (softirq
        work on top included), its longest runnable wait, ticks charged to it (and
        how many landed in softirq), final prio and sleep_avg, prio samples."""
        if self.rq is None:
            return []
        out = []
        for p in self.rq.tasks:
            out.append({"name": p.name, "nice": p.nice, "kind": p.kind,
                        "run_s": self.rq.run_ns(p, now) / 1e9, "worst_wait_s": p.worst_wait(now),
                        "ticks": p.ticks, "softirq_ticks": p.softirq_ticks, "prio": p.prio,
                        "sleep_avg_ms": p.sleep_avg / 1e6,
                        "prio_samples": [(t / 1e9, pr) for t, pr in p.prio_samples],
                        # do_softirq passes run while it was current: ksoftirqd's are
                        # its own loop's, the others' came from irq_exit on top of it
                        "softirq_passes": p.softirq_passes})
            if p is self.ksd:
                # the CPU's passes from irq_exit, whoever was current (idle too)
                out[-1]["cpu_irq_exit_passes"] = self.runs - self.ksd_passes
        return out


class TimerTick:
    """The per-CPU timer tick, as far as RCU needs it: on every tick, a CPU
    with no softirq work (in the user task or idle) passes a quiescent state
    and, if ``rcu_pending``, runs its RCU tasklet at the tick's ``irq_exit``.

    Kernel: kernel/timer.c update_process_times -> scheduler_tick ->
    rcu_check_callbacks (only if rcu_pending), kernel/rcupdate.c (2.6.0).
    The tick is simulated only while callbacks are pending (``Rcu.pending``):
    ``Rcu`` arms :attr:`timer` when the first one is queued and stops it when
    the last one has run.

    Simplification: a tick on a CPU busy with softirq work is not simulated
    here: it is never a quiescent state (vanilla), its slice charge is
    :meth:`Cpu.do_softirq`'s, and the tasklet it schedules runs at the next
    pass boundary (:meth:`routelab.core.rcu.Rcu.tasklet_at`).
    """

    def __init__(self, clock) -> None:
        self.timer = clock.timer("rcu tick", self.fire, raw=True)
        self.cpus: list = []
        self.rcu = None
        self.devices: list = []
        self.ledger = None
        self.hz = 1000
        self.user = False

    def bind(self, cpus: list, rcu, devices: list, ledger: Ledger, hz: int, user: bool) -> None:
        """Connect the tick to the run's CPUs and RCU (made after the clock)."""
        self.cpus = cpus
        self.rcu = rcu
        self.devices = devices
        self.ledger = ledger
        self.slot_rcu = ledger.slot("rcu_tasklet")
        self.hz = hz
        self.user = user
        rcu.tick = self.timer
        rcu.tick_at = 1.0 / hz
        rcu.hz = hz

    @cython.locals(due=cython.double, w=cython.double, mark=cython.double, c=Cpu)
    def fire(self, due: float) -> float:
        """A tick on every CPU at ``due``: a CPU with no softirq work passes the
        RCU event its current task makes of the tick (:meth:`Cpu.tick_qs`)."""
        rcu = self.rcu
        flush_tx(self.devices, due)
        for c in self.cpus:
            if c.busy <= due:
                if self.user:
                    c.tick_qs(due)
                else:
                    rcu.quiescent(c.num, due, "idle")
        for c in self.cpus:
            if c.busy <= due and rcu.rcu_pending(c.num):
                rcu.tick_seen[c.num] = math.floor(due * self.hz + 1e-6)
                mark = self.ledger.total
                w = rcu.rcu_tasklet(c.num, due)
                self.ledger.charge_rest(self.slot_rcu, w, mark)
                c.charge(due, w)
        rcu.tick_at = next_tick(due, self.hz)
        if rcu.pending:
            self.timer.mod(rcu.tick_at)
        return 0.0
