"""The CPUs: softirq processing, ksoftirqd and the task they interrupt.

Kernel: kernel/softirq.c (do_softirq, its restarts, ksoftirqd), net/core/dev.c
(net_rx_action's budget and time limit), kernel/sched.c (2.6.0 O(1)
scheduler: scheduler_tick, schedule), kernel/rcupdate.c (quiescent states)
(2.4.24, 2.6.0).

A :class:`Cpu` is one processor.  Its softirq work is served FIFO in arrival
order: ``busy`` is when the work queued so far ends.  A packet that finds the
CPU free starts a new ``net_rx_action`` run (paying ``softirq_entry``); one
that finds it busy joins the current run, which ends -- ``time_squeeze`` --
after ``netdev_max_backlog`` packets or once a jiffy has gone by (looked at
between ``dev->poll`` calls).  Then ``do_softirq`` restarts, up to
``MAX_SOFTIRQ_RESTART`` times, and gives up by waking ksoftirqd; with a user
task on the CPU the time between is the task's (:meth:`Cpu.do_softirq`).

Simplifications (each also said where it happens): hard-IRQ time is charged
into the same FIFO (it would preempt softirq work, which changes the order of
completion but not the total); the user task and ksoftirqd are the only
tasks, with the 2.6 O(1) timeslices of nice 0 and nice 19 and static
priorities; the output NIC's TX-completion interrupt delay is assumed
(``TX_IRQ_DELAY``).
"""

from __future__ import annotations

import math

import cython

from ..sim.ledger import Ledger
from ..sim.queues import IntervalLog
from .dev import SoftnetData, flush_tx

__all__ = ["Cpu", "TimerTick", "MAX_SOFTIRQ_RESTART", "USER_SLICE", "KSOFTIRQD_SLICE",
           "TX_IRQ_DELAY", "next_tick"]

MAX_SOFTIRQ_RESTART = 10   # kernel/softirq.c (2.6)
USER_SLICE = 0.1           # nice-0 timeslice of the 2.6 O(1) scheduler, ~100 ms
KSOFTIRQD_SLICE = 0.01     # nice-19 timeslice, 10 ms (MIN_TIMESLICE)
# Time from the end of an irq_exit softirq batch to the output NIC's next
# TX-completion interrupt (which starts the next batch).  ASSUMED: the e1000
# transmit interrupt delay, TIDV = 64 units of 1.024 us (the driver default
# TxIntDelay as we recall it, unverified); frames are always in flight under
# the flood, so that interrupt always comes.
TX_IRQ_DELAY = 64 * 1.024e-6
# (the same as C constants when compiled)
_MAX_RESTART, _USER_SLICE, _KSD_SLICE, _TX_IRQ_DELAY = (MAX_SOFTIRQ_RESTART, USER_SLICE,
                                                       KSOFTIRQD_SLICE, TX_IRQ_DELAY)


@cython.locals(x=cython.double, hz=cython.long)
def next_tick(x: float, hz: int) -> float:
    """The first timer tick strictly after time ``x`` (robust to float rounding)."""
    return (math.floor(x * hz + 1e-6) + 1) / hz


class Cpu:
    """One CPU: its softirq work, ksoftirqd and the user task.

    Parameters
    ----------
    num : int
    hz : int                 timer ticks per second (jiffy = 1/hz)
    budget : int             net_rx_action's packet budget (netdev_max_backlog)
    entry_cost : float       seconds of one net_rx_action/do_softirq start
    user : bool              a CPU-bound user task (nice 0) runs on this CPU
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
    user_left, ks_left       what is left of the user task's / ksoftirqd's slice
    ivlog : IntervalLog      softirq busy intervals
    ctxsw, ksoftirqd_wakeups, user_ticks, slivers, user_expired,
    ksoftirqd_expired : int  counters
    ksoftirqd_s : float      seconds ksoftirqd was the current task (top's view)
    """

    def __init__(self, num: int, hz: int, budget: int, entry_cost: float, user: bool,
                 rcu, softnet: SoftnetData, devices: list, ledger: Ledger,
                 max_restart: int = MAX_SOFTIRQ_RESTART) -> None:
        self.num = num
        self.hz = hz
        self.jiffy = 1.0 / hz
        self.budget = budget
        self.max_restart = max_restart
        self.rr = entry_cost
        self.user = bool(user)
        self.rcu = rcu
        self.use_rcu = rcu is not None and rcu.mode != "none"
        kinds = rcu.qs_kinds if rcu is not None else frozenset()
        self.qs_handler = "softirq_handler" in kinds
        self.qs_loop = "softirq_loop" in kinds
        # an idle CPU may report a quiescent state
        self.rcu_wake = rcu is not None and (self.user or "idle" in kinds)
        self.softnet = softnet
        self.devices = devices
        self.ledger = ledger
        self.slot_rcu = ledger.slot("rcu_tasklet")
        self.busy = 0.0
        self.pass_n = 0
        self.pass_t0 = 0.0
        self.restarts = 0
        self.in_ksoftirqd = False
        self.user_left = _USER_SLICE
        self.ks_left = _KSD_SLICE
        self.acct_t0 = 0.0          # when the current task's slice last was charged
        self.ivlog = IntervalLog()
        self.ctxsw = 0
        self.ksoftirqd_wakeups = 0
        self.user_ticks = 0
        self.slivers = 0
        self.user_expired = 0
        self.ksoftirqd_expired = 0
        self.ksoftirqd_s = 0.0
        self.ksoftirqd_since = 0.0

    # -- the softirq run a packet's service belongs to ------------------------------
    @cython.locals(b=cython.double, start=cython.double, svc=cython.double,
                   pn=cython.long, p0=cython.double, lg=Ledger)
    def net_rx_action(self, t: float, weight: int, cost: float) -> float:
        """A packet that arrived at ``t`` gets the CPU: return when its service
        starts, and leave its CPU time so far in ``ledger.svc`` (``cost``,
        plus the run's entry cost if it starts a run, plus the RCU tasklet if
        a run boundary ran it).

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
            # the CPU had no softirq work since b (nothing to do unless
            # ksoftirqd was running or RCU waits for a quiescent state)
            if self.in_ksoftirqd or (self.rcu_wake and self.rcu.gp_active):
                start = self.cpu_was_free(b, t)
            else:
                start = t
            self.pass_n = 1
            self.pass_t0 = start
            self.restarts = 0
            lg.svc = self.rr + cost
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
            if self.use_rcu and self.rcu.done[self.num]:
                flush_tx(self.devices, start)   # the RCU callbacks read reference counts
            start = self.do_softirq(start)
            svc = self.rr + lg.t + cost
            pn = 1
            self.pass_t0 = start
        self.pass_n = pn
        lg.svc = svc
        return start

    @cython.locals(b=cython.double, t=cython.double, tick=cython.double)
    def cpu_was_free(self, b: float, t: float) -> float:
        """A packet arrives at ``t`` on a CPU that has had no softirq work since ``b``.

        The driver's RX interrupt is enabled again (the ring was drained), so
        its interrupt starts a fresh ``do_softirq`` from ``irq_exit``.  Returns
        the time the packet's service may start (``t``).

        Kernel: kernel/softirq.c ksoftirqd (sleeps when no softirq is pending),
        kernel/sched.c schedule.  If ksoftirqd was running it went to sleep at
        ``b``: with a user task that is a context switch (a quiescent state)
        and the user task runs from ``b``; without one the CPU idled.  A timer
        tick between ``b`` and ``t`` lands in user mode (or in idle).
        """
        rcu = self.rcu
        if self.in_ksoftirqd:
            self.ksoftirqd_stops(b)
            if self.user:
                self.ks_left -= b - self.acct_t0
                self.acct_t0 = b
                self.ctxsw += 1
                if rcu is not None:
                    rcu.quiescent(self.num, b, "ctxsw")
        if self.rcu_wake and rcu.gp_active:
            if self.user:
                tick = next_tick(b, self.hz)
                if tick <= t:
                    rcu.quiescent(self.num, tick, "user_tick")
                    self.user_ticks += 1
            else:
                rcu.quiescent(self.num, b, "idle")
        return t

    @cython.locals(start=cython.double, w=cython.double, end=cython.double,
                   tick=cython.double, lg=Ledger)
    def do_softirq(self, start: float) -> float:
        """net_rx_action returned with work left at ``start``: what runs next,
        and where.  Returns when the next ``net_rx_action`` run starts; the
        RCU tasklet time run at this boundary is left in ``ledger.t``.

        Kernel: kernel/softirq.c do_softirq (restart at most 10 times, then
        wake ksoftirqd), ksoftirqd; kernel/sched.c (2.6.0 O(1) scheduler:
        scheduler_tick, schedule).

        The model of one CPU under a NAPI flood, with a CPU-bound user task
        (the gettimeofday loop, nice 0) and ksoftirqd (nice 19):

        * While the user task is *current*, softirqs run from ``irq_exit`` of
          whatever interrupt comes (the timer tick, the output NIC's
          TX-completion interrupt; the input NIC's RX interrupt stays masked
          while it is being polled).  One ``do_softirq`` makes at most 10
          passes (the first plus 9 restarts), then wakes ksoftirqd and
          returns to the user task.  The user task is current all along, so
          the timer tick charges the softirq time to *its* timeslice
          (scheduler_tick decrements ``current->time_slice``): its 100 ms
          slice runs out after 100 ms of wall time, however little of it the
          task really had.
        * Back in user mode the task runs until the next interrupt:
          ``TX_IRQ_DELAY`` later (the output NIC's TX-completion interrupt,
          frames are always in flight under the flood) or the next tick,
          whichever is first.  Only if the tick comes first does a tick land
          in user mode -- a quiescent state in every RCU flavour.
        * When the user task's slice has run out, schedule() (a quiescent
          state) moves it to the *expired* array and runs ksoftirqd (woken
          into the *active* array).  ksoftirqd runs ``do_softirq`` back to
          back in process context (ticks land in kernel mode: no quiescent
          state) until its 10 ms slice runs out; then it is expired too, the
          arrays swap, and the user task (better priority) runs again with a
          fresh slice (a context switch: a quiescent state).  If ksoftirqd
          finds nothing pending it sleeps (see :meth:`cpu_was_free`).
        * Without a user task, ksoftirqd runs until the work is done (its
          own slice expiries are not modelled).

        Time with ksoftirqd current is summed (``ksoftirqd_s``, summary
        ``cpu_ksoftirqd_pct``): top charges a task every tick that lands
        while it is current, so this is what top shows on the ksoftirqd line,
        hard IRQs that interrupt it included.

        The restart rule is the kernel's (``max_restart``): 2.6.0 makes up to
        10 passes; 2.4.24 reruns only softirqs raised for the first time
        during its pass, so a NET_RX that re-raises itself wakes ksoftirqd
        after the first pass [24] kernel/softirq.c do_softirq.

        Simplified: interrupts are instantaneous (hard-IRQ time
        is folded into the per-packet costs); the user task and ksoftirqd are
        the only tasks on the CPU; priorities are the static ones (nice 0
        beats nice 19 whatever the sleep bonus); the TX-completion interrupt
        delay is the e1000 default as we recall it (``TX_IRQ_DELAY``).
        """
        lg = self.ledger
        rcu = self.rcu
        w = 0.0
        if rcu is not None:
            if self.qs_handler:
                rcu.quiescent(self.num, start, "softirq_handler")
            if self.use_rcu and rcu.done[self.num]:
                w = rcu.rcu_tasklet(self.num, start)
                lg.charge(self.slot_rcu, w)
        lg.t = w
        self.restarts += 1
        if self.restarts < self.max_restart:
            return start
        # this do_softirq invocation gives up
        self.restarts = 0
        if self.qs_loop and rcu is not None:
            rcu.quiescent(self.num, start, "softirq_loop")
        if self.in_ksoftirqd:
            # ksoftirqd's loop: cond_resched() between do_softirq calls
            if not self.user:
                return start
            self.ks_left -= start - self.acct_t0
            self.acct_t0 = start
            if self.ks_left > 0:
                return start
            # ksoftirqd's slice is used up: expired; the arrays swap, the user runs
            self.ksoftirqd_expired += 1
            self.ks_left = _KSD_SLICE
            self.user_left = _USER_SLICE
            self.ksoftirqd_stops(start)
            self.ctxsw += 1
            if rcu is not None:
                rcu.quiescent(self.num, start, "ctxsw")
        else:
            # irq_exit: wakeup_softirqd
            self.ksoftirqd_wakeups += 1
            if not self.user:
                self.ksoftirqd_runs(start)
                return start
            self.user_left -= start - self.acct_t0
            self.acct_t0 = start
            if self.user_left <= 0:
                # the user task's slice ran out during the batch: schedule() puts it
                # in the expired array and runs ksoftirqd
                self.user_expired += 1
                self.ksoftirqd_runs(start)
                return start
        # back in user mode until the next interrupt
        self.slivers += 1
        end = start + _TX_IRQ_DELAY
        tick = next_tick(start, self.hz)
        if tick <= end:
            end = tick
            self.user_ticks += 1
            if rcu is not None:
                rcu.quiescent(self.num, tick, "user_tick")
        return end

    def ksoftirqd_runs(self, t: float) -> int:
        """schedule() switches to ksoftirqd at ``t``: a context switch (a
        quiescent state), and ksoftirqd is the current task from now on."""
        self.ctxsw += 1
        if self.rcu is not None:
            self.rcu.quiescent(self.num, t, "ctxsw")
        self.in_ksoftirqd = True
        self.ksoftirqd_since = t
        return 0

    def ksoftirqd_stops(self, t: float) -> int:
        """ksoftirqd stops being the current task at ``t`` (it sleeps, or its
        slice ran out): the time since it started is top's ksoftirqd time."""
        self.in_ksoftirqd = False
        self.ksoftirqd_s += t - self.ksoftirqd_since
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
        """End of the run: a ksoftirqd still running stops when its work is done
        (or the run ends)."""
        if self.in_ksoftirqd:
            end = min(self.busy, duration)
            self.ksoftirqd_stops(end if end > self.ksoftirqd_since else self.ksoftirqd_since)


class TimerTick:
    """The per-CPU timer tick, as far as RCU needs it: on every tick, idle
    CPUs pass a quiescent state and run their RCU tasklet.

    Kernel: kernel/timer.c update_process_times -> rcu_check_callbacks,
    kernel/rcupdate.c (2.6.0).  The tick is simulated only while callbacks
    are pending (``Rcu.pending``): ``Rcu`` arms :attr:`timer` when the first
    one is queued and stops it when the last one has run.

    Simplification: a tick on a busy CPU is not simulated here (the softirq
    run boundaries account for what it does to the user task and to RCU).
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

    @cython.locals(due=cython.double, w=cython.double, c=Cpu)
    def fire(self, due: float) -> float:
        """A tick on every CPU at ``due``."""
        rcu = self.rcu
        flush_tx(self.devices, due)
        kind = "user_tick" if self.user else "idle"
        for c in self.cpus:
            if c.busy <= due:
                rcu.quiescent(c.num, due, kind)
        for c in self.cpus:
            if c.busy <= due and rcu.done[c.num]:
                w = rcu.rcu_tasklet(c.num, due)
                self.ledger.charge(self.slot_rcu, w)
                c.charge(due, w)
        rcu.tick_at = next_tick(due, self.hz)
        if rcu.pending:
            self.timer.mod(rcu.tick_at)
        return 0.0
