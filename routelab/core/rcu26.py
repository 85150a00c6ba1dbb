"""Read-copy-update as 2.6.0 runs it: batches, a CPU mask and a per-CPU tasklet.

Kernel: kernel/rcupdate.c, include/linux/rcupdate.h (2.6.0, MaximeChretien/linux-history
v2.6.0); kernel/sched.c schedule and scheduler_tick (where the quiescent-state counter
is bumped and RCU is told about ticks).  The "bh" flavour follows the description of
Dipankar Sarma's rcu-softirq patch against 2.6.0 (LKML <20040331214342.GD4543@in.ibm.com>,
1 Apr 2004) in the project brief; its code was not read here.

The protocol, per flavour
-------------------------
* ``call_rcu`` appends a callback to the calling CPU's ``nxtlist``.
* ``rcu_pending(cpu)`` is true when the CPU has a ``curlist`` whose batch is over,
  or an empty ``curlist`` and a non-empty ``nxtlist``, or is still awaited by the
  running grace period (its bit in ``rcu_cpu_mask``).  Only then does the timer tick
  call ``rcu_check_callbacks``, which counts a quiescent state if the tick hit user
  mode or the idle task outside softirq (and outside any nested hardirq) -- not a
  tick inside softirq, not one in a system call -- and always schedules the CPU's
  RCU tasklet.
* The tasklet (``rcu_process_callbacks``, run in softirq on that CPU) (a) takes a
  ``curlist`` whose batch number the global ``curbatch`` has passed; (b) only if the
  ``curlist`` is then empty moves the whole ``nxtlist`` into it, tags it
  ``curbatch + 1`` and asks for that batch (``rcu_start_batch``); (c) checks its own
  quiescent state; (d) runs every finished callback, with no limit.
* ``rcu_start_batch`` records the highest batch asked for (``maxbatch``) and, if no
  grace period is running and that batch is not already done, starts one by setting
  ``rcu_cpu_mask`` to all online CPUs.
* ``rcu_check_quiescent_state``: a CPU in the mask first *records* its counter
  (``last_qsctr``), and on a later tasklet run must see it changed; then it leaves the
  mask, and the last CPU out ends the grace period: ``curbatch += 1`` and the next one
  starts if a later batch was asked for.

Two consequences the tests check: a grace period always starts *numbered*
``curbatch`` while new callbacks are tagged ``curbatch + 1``, so even on an idle
system a callback waits for two grace periods; and a callback queued while its CPU's
``curlist`` is busy stays on ``nxtlist`` until that batch is over, then waits for the
rest of the running grace period plus one more (two if none is running).

Modes
-----
``"vanilla"``  2.6.0: one flavour; quiescent states are context switches
               (:meth:`Rcu26.note_context_switch`, from ``schedule()``), user-mode ticks
               and idle ticks outside softirq.
``"bh"``       2.6.0 + rcu-softirq: a second flavour for :meth:`Rcu26.call_rcu_bh`, with
               its own control block, per-CPU data and counter.  The bh counter moves
               after every softirq handler (:meth:`Rcu26.softirq_handler_done`), when
               the outermost BH-disabled section ends (:meth:`Rcu26.local_bh_enable`),
               on the ticks that are quiescent for the classic flavour and on any tick
               not in softirq.  One tasklet per CPU serves both flavours.

``maxbatch`` (rs-throttle-rcu, boot parameter ``rcupdate.maxbatch``): at most that
many callbacks per tasklet run and flavour; the rest stay on the CPU's done list and the
tasklet reschedules itself.  0 (the default, 2.6.0) means no limit.  This is our reading
of the patch's description, not of its code; its ``plugticks`` is not modelled.

Beside the engine: :mod:`routelab.core.rcu` (what a run uses) is the same protocol
over per-CPU lists.  Fed the same events in time order, the two give the same grace
periods and run each callback at the same time (``tests/test_rcu26.py`` pairs them
with hypothesis); since issue 24 the engine's single-flavour ``"bh"`` mode counts
exactly the ``rcu_bh`` flavour's events here (no context switch: schedule() bumps
only the classic counter).  This module keeps what the engine leaves out: the two
flavours side by side, ``local_bh_enable`` and the tick's
``in_hardirq`` test.

Simplifications: CPUs are all online from the start (no hotplug); the tick-versus-
tasklet race the kernel tolerates ("may miss one quiescent state") cannot happen here
because the caller sequences events; ``qs_pending`` and the timing fields are views for
plotting, not kernel state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["RCU_QSCTR_INVALID", "MODES", "RcuCtrlBlk", "RcuData", "Rcu26",
           "rcu_batch_before", "rcu_batch_after"]

#: "no snapshot taken yet" -- the kernel uses 0, which is also the counter's start value
RCU_QSCTR_INVALID = 0
MODES = ("vanilla", "bh")


def rcu_batch_before(a: int, b: int) -> bool:
    """Kernel: include/linux/rcupdate.h rcu_batch_before (2.6.0). Wrap-safe in C."""
    return a - b < 0


def rcu_batch_after(a: int, b: int) -> bool:
    """Kernel: include/linux/rcupdate.h rcu_batch_after (2.6.0)."""
    return a - b > 0


class RcuCtrlBlk:
    """The global state of one flavour.

    Kernel: include/linux/rcupdate.h struct rcu_ctrlblk (2.6.0, MaximeChretien/linux-history
    v2.6.0).  ``curbatch``: the batch being (or next to be) waited for, starting at 1;
    ``maxbatch``: the highest batch number asked for; ``rcu_cpu_mask``: the CPUs the
    running grace period still waits for (empty: none is running).  ``gp_log`` (not
    kernel state): (batch, start, end) of every completed grace period, in seconds.
    """

    __slots__ = ("curbatch", "maxbatch", "rcu_cpu_mask", "gp_start", "gp_log")

    def __init__(self):
        self.curbatch = 1
        self.maxbatch = 1
        self.rcu_cpu_mask: set[int] = set()
        self.gp_start = 0.0
        self.gp_log: list[tuple[int, float, float]] = []


class RcuData:
    """One CPU's state for one flavour.

    Kernel: include/linux/rcupdate.h struct rcu_data (2.6.0, MaximeChretien/linux-history
    v2.6.0): ``qsctr`` (quiescent states seen), ``last_qsctr`` (the snapshot, or
    RCU_QSCTR_INVALID), ``batch`` (the tag of ``curlist``), ``nxtlist``, ``curlist``.
    ``donelist`` holds finished callbacks: in 2.6.0 it is a local list emptied in the
    same tasklet run; it only keeps callbacks across runs under ``maxbatch``.
    Entries are ``(func, arg, t_queued)``.
    """

    __slots__ = ("qsctr", "last_qsctr", "batch", "nxtlist", "curlist", "donelist")

    def __init__(self):
        self.qsctr = 0
        self.last_qsctr = RCU_QSCTR_INVALID
        self.batch = 0
        self.nxtlist: list = []
        self.curlist: list = []
        self.donelist: deque = deque()


class _Flavour:
    __slots__ = ("name", "ctrl", "data", "ncpus")

    def __init__(self, name: str, ncpus: int):
        self.name, self.ncpus = name, ncpus
        self.ctrl = RcuCtrlBlk()
        self.data = [RcuData() for _ in range(ncpus)]

    def pending(self, cpu: int) -> bool:
        d, c = self.data[cpu], self.ctrl
        return bool((d.curlist and rcu_batch_before(d.batch, c.curbatch))
                    or (not d.curlist and d.nxtlist)
                    or cpu in c.rcu_cpu_mask)

    def start_batch(self, newbatch: int, now: float) -> None:
        c = self.ctrl
        if rcu_batch_before(c.maxbatch, newbatch):
            c.maxbatch = newbatch
        if rcu_batch_before(c.maxbatch, c.curbatch) or c.rcu_cpu_mask:
            return
        c.rcu_cpu_mask = set(range(self.ncpus))
        c.gp_start = now

    def check_quiescent_state(self, cpu: int, now: float) -> None:
        c, d = self.ctrl, self.data[cpu]
        if cpu not in c.rcu_cpu_mask:
            return
        if d.last_qsctr == RCU_QSCTR_INVALID:
            d.last_qsctr = d.qsctr
            return
        if d.qsctr == d.last_qsctr:
            return
        c.rcu_cpu_mask.discard(cpu)
        d.last_qsctr = RCU_QSCTR_INVALID
        if c.rcu_cpu_mask:
            return
        c.gp_log.append((c.curbatch, c.gp_start, now))
        c.curbatch += 1
        self.start_batch(c.maxbatch, now)

    def advance(self, cpu: int, now: float) -> None:
        """Steps (a)-(c) of the tasklet: finished curlist -> done, nxtlist -> curlist, QS."""
        c, d = self.ctrl, self.data[cpu]
        if d.curlist and rcu_batch_after(c.curbatch, d.batch):
            d.donelist.extend(d.curlist)
            d.curlist = []
        if d.nxtlist and not d.curlist:
            d.curlist, d.nxtlist = d.nxtlist, []
            d.batch = c.curbatch + 1
            self.start_batch(d.batch, now)
        self.check_quiescent_state(cpu, now)


class Rcu26:
    """RCU for ``ncpus`` CPUs, as in 2.6.0 (``mode="vanilla"``) or with call_rcu_bh.

    Kernel: kernel/rcupdate.c call_rcu, rcu_start_batch, rcu_check_quiescent_state,
    rcu_process_callbacks, rcu_do_batch, rcu_check_callbacks; include/linux/rcupdate.h
    rcu_pending (2.6.0, MaximeChretien/linux-history v2.6.0).

    Parameters
    ----------
    ncpus : int
    mode : str          "vanilla" or "bh" (see the module docstring)
    maxbatch : int      callbacks per tasklet run and flavour, 0 = no limit (2.6.0)

    Attributes
    ----------
    rcu, rcu_bh         the flavours: ``.ctrl`` (:class:`RcuCtrlBlk`), ``.data[cpu]``
                        (:class:`RcuData`); ``rcu_bh`` is None in vanilla mode
    tasklet_scheduled   per CPU: the RCU tasklet is due at that CPU's next softirq run
    queued, invoked     callbacks so far; ``max_latency`` and ``sum_latency`` (seconds,
                        from call_rcu to the callback)
    """

    __slots__ = ("ncpus", "mode", "maxbatch", "rcu", "rcu_bh", "tasklet_scheduled",
                 "queued", "invoked", "max_latency", "sum_latency", "_flavours")

    def __init__(self, ncpus: int = 1, mode: str = "vanilla", maxbatch: int = 0):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: must be one of {MODES}")
        if ncpus < 1:
            raise ValueError(f"ncpus={ncpus}: must be >= 1")
        if maxbatch < 0:
            raise ValueError(f"maxbatch={maxbatch}: must be >= 0 (0 = no limit)")
        self.ncpus, self.mode, self.maxbatch = ncpus, mode, maxbatch
        self.rcu = _Flavour("rcu", ncpus)
        self.rcu_bh = _Flavour("rcu_bh", ncpus) if mode == "bh" else None
        self._flavours = (self.rcu,) if self.rcu_bh is None else (self.rcu, self.rcu_bh)
        self.tasklet_scheduled = [False] * ncpus
        self.queued = self.invoked = 0
        self.max_latency = self.sum_latency = 0.0

    # -- queueing -------------------------------------------------------------------
    def call_rcu(self, cpu: int, func: Callable[[Any], Any], arg: Any = None,
                 now: float = 0.0) -> None:
        """Queue ``func(arg)`` to run after a grace period (appended to ``nxtlist``).

        Kernel: kernel/rcupdate.c call_rcu (2.6.0, MaximeChretien/linux-history v2.6.0).
        """
        self.rcu.data[cpu].nxtlist.append((func, arg, now))
        self.queued += 1

    def call_rcu_bh(self, cpu: int, func: Callable[[Any], Any], arg: Any = None,
                    now: float = 0.0) -> None:
        """The bh flavour's call_rcu (rcu-softirq patch; ``mode="bh"`` only)."""
        if self.rcu_bh is None:
            raise ValueError("call_rcu_bh needs mode='bh' (2.6.0 has no bh flavour)")
        self.rcu_bh.data[cpu].nxtlist.append((func, arg, now))
        self.queued += 1

    # -- quiescent states -----------------------------------------------------------
    def note_context_switch(self, cpu: int) -> None:
        """RCU_qsctr(cpu)++ from every pass through schedule() (kernel/sched.c, 2.6.0)."""
        self.rcu.data[cpu].qsctr += 1

    def softirq_handler_done(self, cpu: int) -> None:
        """bh mode: the bh counter moves after each softirq handler in do_softirq."""
        if self.rcu_bh is not None:
            self.rcu_bh.data[cpu].qsctr += 1

    def local_bh_enable(self, cpu: int, outermost: bool = True) -> None:
        """bh mode: the bh counter moves when the outermost BH-disabled section ends."""
        if self.rcu_bh is not None and outermost:
            self.rcu_bh.data[cpu].qsctr += 1

    def rcu_pending(self, cpu: int) -> bool:
        """Does this CPU have RCU work for the tick?  (either flavour)

        Kernel: include/linux/rcupdate.h rcu_pending (2.6.0, MaximeChretien/linux-history
        v2.6.0).
        """
        return any(f.pending(cpu) for f in self._flavours)

    def rcu_check_callbacks(self, cpu: int, user: bool, *, idle: bool = False,
                            in_softirq: bool = False, in_hardirq: bool = False) -> None:
        """The tick's part: maybe count a quiescent state, then schedule the tasklet.

        Kernel: kernel/rcupdate.c rcu_check_callbacks (2.6.0, MaximeChretien/linux-history
        v2.6.0), called from scheduler_tick only when :meth:`rcu_pending`.  ``user``: the
        tick hit user mode; ``idle``: the idle task is current; ``in_softirq``: the tick
        hit softirq (or BH-disabled) code; ``in_hardirq``: it nested in another hardirq.
        A user tick, or an idle tick outside softirq and outside nested hardirqs, is a
        quiescent state.  bh mode: those ticks count for both flavours, and any tick
        outside softirq counts for the bh flavour.
        """
        if user or (idle and not in_softirq and not in_hardirq):
            self.rcu.data[cpu].qsctr += 1
            if self.rcu_bh is not None:
                self.rcu_bh.data[cpu].qsctr += 1
        elif self.rcu_bh is not None and not in_softirq:
            self.rcu_bh.data[cpu].qsctr += 1
        self.tasklet_scheduled[cpu] = True

    def tick(self, cpu: int, user: bool, *, idle: bool = False, in_softirq: bool = False,
             in_hardirq: bool = False) -> bool:
        """Convenience for drivers: what scheduler_tick does for RCU.  True if it called in."""
        if self.rcu_pending(cpu):
            self.rcu_check_callbacks(cpu, user, idle=idle, in_softirq=in_softirq,
                                     in_hardirq=in_hardirq)
            return True
        return False

    # -- the tasklet ----------------------------------------------------------------
    def tasklet_pending(self, cpu: int) -> bool:
        return self.tasklet_scheduled[cpu]

    def rcu_process_callbacks(self, cpu: int, now: float = 0.0) -> int:
        """Run the CPU's RCU tasklet; returns the number of callbacks invoked.

        Kernel: kernel/rcupdate.c rcu_process_callbacks, rcu_do_batch (2.6.0,
        MaximeChretien/linux-history v2.6.0).  Call it when the CPU runs TASKLET_SOFTIRQ
        with :meth:`tasklet_pending` true (it also works unscheduled: the kernel's
        tasklet simply would not run).  The engine charges the cost per callback.
        """
        self.tasklet_scheduled[cpu] = False
        n = 0
        for f in self._flavours:
            f.advance(cpu, now)
            n += self._do_batch(f.data[cpu].donelist, now)
            if f.data[cpu].donelist:
                self.tasklet_scheduled[cpu] = True      # maxbatch: come back for the rest
        return n

    def _do_batch(self, done: deque, now: float) -> int:
        limit = self.maxbatch or len(done)
        n = 0
        while done and n < limit:
            func, arg, t0 = done.popleft()
            func(arg)
            lat = now - t0
            self.sum_latency += lat
            if lat > self.max_latency:
                self.max_latency = lat
            n += 1
        self.invoked += n
        return n

    # -- views ----------------------------------------------------------------------
    def qs_pending(self, cpu: int, flavour: str = "rcu") -> bool:
        """Is this CPU still awaited by the running grace period? (a view, not a field)"""
        return cpu in self._flavour(flavour).ctrl.rcu_cpu_mask

    def waiting(self) -> int:
        """Callbacks queued and not yet invoked (they still hold their memory)."""
        return self.queued - self.invoked

    def _flavour(self, name: str) -> _Flavour:
        if name == "rcu":
            return self.rcu
        if name == "rcu_bh" and self.rcu_bh is not None:
            return self.rcu_bh
        raise ValueError(f"flavour={name!r}: must be 'rcu' or (in bh mode) 'rcu_bh'")
