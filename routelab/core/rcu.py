"""Read-copy-update: deferred freeing of route-cache entries.

Kernel: kernel/rcupdate.c, kernel/softirq.c (2.6.0, 2.6.11); LKML
<20040331214342.GD4543@in.ibm.com> (call_rcu_bh, Dipankar Sarma, 1 Apr 2004).

A route-cache entry taken out of its hash chain may still be in use by a
reader on another CPU, so it is handed to ``call_rcu`` and freed only after a
*grace period*: an interval during which every CPU has passed a quiescent
state.  Until then it still counts in ``dst_ops.entries``.

Which events are quiescent states depends on the kernel (``mode``):

=========  ================================================================
mode       quiescent states
=========  ================================================================
none       (2.4) no RCU: ``rt_free`` calls ``dst_free`` at once
vanilla    context switch, timer tick in user mode, idle (2.6.0)
iter       vanilla + the end of each ``__do_softirq`` invocation (the earlier
           rcu-softirq patch; our reading of "each full pass of the softirq
           loop")
bh         vanilla + the completion of every softirq handler (call_rcu_bh)
=========  ================================================================

Model of the machinery (simplified classic RCU):

* ``call_rcu`` puts the callback on the CPU's ``nxt`` list.
* When a CPU has no batch waiting (``cur`` empty) its ``nxt`` list becomes
  the ``cur`` batch, numbered for the *next* grace period to start (classic
  RCU's ``curbatch + 1``): a grace period already running began before these
  entries were unhashed, so it cannot cover them.  A grace period starts if
  none is running.
* A grace period ends when every CPU has reported a quiescent state after
  it started.  Every ``cur`` batch whose number it reaches moves to ``done``.
* ``done`` callbacks run from the per-CPU RCU tasklet, at most ``maxbatch``
  per run (0 = all); the tasklet runs when the CPU next processes softirqs.

Simplification: grace periods start the moment a batch is queued rather
than at the next tick, and a CPU's quiescent state counts from the instant
the grace period started (the kernel waits for each CPU to notice it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .dst import RCU_PENDING, DstEntry, DstOps

__all__ = ["Rcu", "QS_KINDS", "HOOKS"]

#: Observation hooks for tests (not kernel behaviour).  An ``Rcu`` created
#: while a hook is set calls ``HOOKS["call_rcu"](rcu, cpu, entry, now)`` on
#: every ``call_rcu`` and ``HOOKS["rcu_free"](entry, now)`` just before each
#: callback frees its entry.  (The compiled class cannot be monkeypatched.)
HOOKS: dict = {"call_rcu": None, "rcu_free": None}

QS_KINDS = {
    "none": frozenset(),
    "vanilla": frozenset({"idle", "user_tick", "ctxsw"}),
    "iter": frozenset({"idle", "user_tick", "ctxsw", "softirq_loop"}),
    "bh": frozenset({"idle", "user_tick", "ctxsw", "softirq_loop", "softirq_handler"}),
}


class Rcu:
    """RCU state of a run.

    Parameters
    ----------
    mode : str
        ``none``, ``vanilla``, ``iter`` or ``bh``.
    ncpus : int
    maxbatch : int
        Callbacks per tasklet run (0 = unlimited).
    free : callable(entry, now) -> seconds, or DstOps
        What a callback does (``dst_rcu_free`` -> ``dst_free``); a ``DstOps``
        stands for its ``dst_free`` (called directly when compiled).
    cost : dict
        Seconds for ``rcu_callback`` and ``rcu_tasklet``.
    """

    def __init__(self, mode: str, ncpus: int, maxbatch: int,
                 free: Callable | DstOps, cost: dict) -> None:
        if mode not in QS_KINDS:
            raise ValueError(f"unknown RCU mode {mode!r}")
        self.mode = mode
        self._none = mode == "none"
        self.qs_kinds = QS_KINDS[mode]
        self.ncpus = ncpus
        self.maxbatch = maxbatch
        # (a DstOps is called directly, see _free; anything else through ``free``)
        self.ops = free if isinstance(free, DstOps) else None
        self.free = None if self.ops is not None else free
        self.on_call = HOOKS["call_rcu"]
        self.on_free = HOOKS["rcu_free"]
        self._c_cb = cost["rcu_callback"]
        self._c_tasklet = cost["rcu_tasklet"]
        self.nxt = [[] for _ in range(ncpus)]
        self.cur = [[] for _ in range(ncpus)]
        self.done = [deque() for _ in range(ncpus)]
        self.pending = 0              # callbacks queued and not yet invoked
        self.gp_active = False
        self.gp_start = 0.0
        self.completed = 0            # grace periods completed (rcu_ctrlblk.completed)
        self.last_call = 0.0          # latest call_rcu time seen (see _complete)
        self.batch = [0] * ncpus      # grace period each CPU's cur batch waits for
        self.waiting = [False] * ncpus
        self.nwaiting = 0
        self.gp_log: list[tuple[float, float]] = []   # (start, end) of each grace period
        self.invoked = 0
        # the timer tick that drives the tasklets, simulated while callbacks are
        # pending (routelab.core.softirq.TimerTick sets these)
        self.tick = None
        self.tick_at = 0.0

    # -- queueing -----------------------------------------------------------
    def call_rcu(self, cpu: int, entry: DstEntry, now: float) -> float:
        """Queue ``entry`` to be freed after a grace period.

        Kernel: kernel/rcupdate.c call_rcu / call_rcu_bh.
        Returns the seconds charged now (the free itself is charged when the
        callback runs).
        """
        if self.on_call is not None:
            self.on_call(self, cpu, entry, now)
        if self._none:
            return self._free(entry, now)
        entry.state = RCU_PENDING
        self.nxt[cpu].append(entry)
        self.pending += 1
        if self.pending == 1 and self.tick is not None:
            self.tick.mod(self.tick_at)      # callbacks pending: the tick matters again
        if now > self.last_call:
            self.last_call = now
        if not self.cur[cpu]:
            self._advance(cpu, now)
        return 0.0

    def _advance(self, cpu: int, now: float) -> None:
        # nxt becomes the batch waiting for the next grace period
        if self.nxt[cpu] and not self.cur[cpu]:
            self.cur[cpu] = self.nxt[cpu]
            self.nxt[cpu] = []
            # wait for the next grace period to *start*, not one already running
            self.batch[cpu] = self.completed + (2 if self.gp_active else 1)
            if not self.gp_active:
                self._start_gp(now)

    def _start_gp(self, now: float) -> None:
        self.gp_active = True
        self.gp_start = now
        self.waiting = [True] * self.ncpus
        self.nwaiting = self.ncpus

    # -- quiescent states ---------------------------------------------------
    def quiescent(self, cpu: int, t: float, kind: str) -> None:
        """Report that ``cpu`` passed an event of ``kind`` at time ``t``.

        Ignored unless ``kind`` is a quiescent state in this mode.
        """
        if not self.gp_active or kind not in self.qs_kinds:
            return
        if t < self.gp_start or not self.waiting[cpu]:
            return
        self.waiting[cpu] = False
        self.nwaiting -= 1
        if self.nwaiting == 0:
            self._complete(t)

    def _complete(self, t: float) -> None:
        self.gp_log.append((self.gp_start, t))
        self.gp_active = False
        self.completed += 1
        for c in range(self.ncpus):
            if self.cur[c] and self.batch[c] <= self.completed:
                self.done[c].extend(self.cur[c])
                self.cur[c] = []
        for c in range(self.ncpus):
            if self.nxt[c] and not self.cur[c]:
                self.cur[c] = self.nxt[c]
                self.nxt[c] = []
                self.batch[c] = self.completed + 1
        # Batches still waiting (queued during the last one, or just moved up) need
        # a new grace period.  The caller's CPUs are not processed in time order:
        # ``t`` (a quiescent state stamped, e.g., when a CPU went idle) may be
        # earlier than a call_rcu another CPU already made.  Starting the next
        # grace period no earlier than the latest call keeps the RCU guarantee --
        # a whole grace period between call_rcu and the free -- in model time.
        if any(self.cur):
            self._start_gp(max(t, self.last_call))

    # -- callbacks ----------------------------------------------------------
    def _free(self, entry: DstEntry, now: float) -> float:
        """The callback: free ``entry``; return its seconds."""
        if self.on_free is not None:
            self.on_free(entry, now)
        if self.ops is not None:
            return self.ops.dst_free(entry, now)
        return self.free(entry, now)

    def has_done(self, cpu: int) -> bool:
        return bool(self.done[cpu])

    def rcu_tasklet(self, cpu: int, now: float) -> float:
        """Run up to ``maxbatch`` ready callbacks of ``cpu``; return seconds.

        Kernel: kernel/rcupdate.c rcu_process_callbacks / rcu_do_batch.
        """
        done = self.done[cpu]
        if not done:
            return 0.0
        n = len(done) if self.maxbatch == 0 else min(self.maxbatch, len(done))
        t = self._c_tasklet + n * self._c_cb
        for _ in range(n):
            t += self._free(done.popleft(), now)
        self.pending -= n
        self.invoked += n
        if not self.pending and self.tick is not None:
            self.tick.stop()
        return t

    def grace_periods(self):
        """Grace-period lengths in seconds (numpy array)."""
        import numpy as np

        if not self.gp_log:
            return np.zeros(0)
        a = np.asarray(self.gp_log)
        return a[:, 1] - a[:, 0]
