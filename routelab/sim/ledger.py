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
    """

    def __init__(self) -> None:
        self.t = 0.0
        self.svc = 0.0
        self.why = NO_DROP
        self.ok = True
        self.outcome = None
        self.born = 0
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
