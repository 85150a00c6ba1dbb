"""The ledger: the one out-parameter every stage writes, and the run's profile.

A stage of the model (a kernel function) returns its main result -- an
entry, a time -- and leaves the rest here instead of returning a tuple: the
CPU seconds it took (``t``), why it refused the packet (``why``, an outcome
code, ``NO_DROP`` if it did not), whether it succeeded (``ok``).  Compiled,
these are C fields, so writing them costs what an attribute of the stage's
own object would, and no tuple or float object is made per packet.

The ledger also keeps the per-function profile of a run: named slots of C
doubles, each the seconds charged to one kernel function (or group of
them) that the per-packet arrays cannot account for by themselves (the slow
path, timers, RCU callbacks, interrupts of dropped frames).  A slot is made
once with :meth:`Ledger.slot` and charged with :meth:`Ledger.charge`; the
additions are the same IEEE double additions whether compiled or not.
Every second of CPU time is charged to exactly one slot, where it is spent
(its *exclusive* time): a stage that calls other stages which charge their
own slots -- a timer handler freeing neighbours, the slow path running the
GC -- charges only the rest, with :meth:`Ledger.charge_rest` and a mark
(:attr:`Ledger.total`) taken before the call, the way a profiler subtracts
the children from a function's inclusive time.  So the profile adds up to
the CPU's busy time.

Finally it records the outcome of each packet: :meth:`Ledger.drop` writes a
code into the current window's outcome column.

Model, not kernel: the kernel returns such second results through pointers
and error codes; this is the simulator's bookkeeping of them.
"""

from __future__ import annotations

from array import array

import cython

__all__ = ["Ledger", "NO_DROP"]

NO_DROP = -1       # ``why`` of a stage that did not refuse its packet


class Ledger:
    """Second results of the last stage call, per-function time, outcomes.

    Attributes
    ----------
    t : float
        Seconds the last stage call took (set by the stage).
    why : int
        Outcome code of the drop the last stage decided, or ``NO_DROP``.
    ok : bool
        Whether the last stage call succeeded (e.g. a GC pass made room).
    svc : float
        CPU seconds of the packet being served, so far: the stages of its
        service add to it in the order they run.
    outcome : bytearray or None
        The current window's per-packet outcome column (set by the run).
    born : int
        Packets born (injected by a host) since the run last looked: the
        dispatcher then picks its next packet afresh.
    total : float
        Seconds charged to all slots so far (a mark for :meth:`charge_rest`).
    """

    def __init__(self) -> None:
        self.t = 0.0
        self.svc = 0.0
        self.why = NO_DROP
        self.ok = True
        self.outcome = None
        self.born = 0
        self.total = 0.0
        self._names: list[str] = []
        self._acc = array("d")
        self.acc = self._acc

    # -- the profile ------------------------------------------------------------
    def slot(self, name: str) -> int:
        """The slot charged as ``name`` (made on first use); its number."""
        if name in self._names:
            return self._names.index(name)
        self._names.append(name)
        # (a new array: no typed view is held on the old one while it grows)
        acc = array("d", self._acc)
        acc.append(0.0)
        self._acc = acc
        self.acc = acc
        return len(self._names) - 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def charge(self, k: int, seconds: float) -> int:
        """Add ``seconds`` to slot ``k`` (see :meth:`slot`)."""
        self.acc[k] += seconds
        self.total += seconds
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(rest=cython.double)
    def charge_rest(self, k: int, seconds: float, mark: float) -> int:
        """Charge to slot ``k`` what of ``seconds`` (a stage's inclusive time)
        the stages it called have not charged to their own slots since
        ``mark`` (the :attr:`total` read before the call)."""
        rest = seconds - (self.total - mark)
        self.acc[k] += rest
        self.total += rest
        return 0

    def clear(self) -> int:
        """Zero every slot and :attr:`total` (the slots stay): set-up work
        before a run starts is no part of its profile."""
        for k in range(len(self._names)):
            self.acc[k] = 0.0
        self.total = 0.0
        return 0

    def charged(self, name: str) -> float:
        """Seconds charged so far as ``name`` (0 if never charged)."""
        if name not in self._names:
            return 0.0
        return self._acc[self._names.index(name)]

    def profile(self) -> dict[str, float]:
        """``{slot name: seconds}`` in the order the slots were made."""
        return {name: self._acc[i] for i, name in enumerate(self._names)}

    # -- outcomes ---------------------------------------------------------------
    def drop(self, j: int, reason: int) -> int:
        """Packet ``j`` ends with outcome ``reason`` (its code)."""
        self.outcome[j] = reason
        return 0
