"""The per-packet loop's queues and its busy-time log, as small ring buffers.

Containers the loop touches for nearly every packet:

``Ring``
    A FIFO of times grown by doubling, the base of the queues (here, and
    ``routelab.core.dev.TxQueue``, a device's qdisc + TX ring, which holds
    the frames' dsts and so belongs to the model).
``TimeQueue``
    A NIC RX ring (NAPI) or a CPU's ``netif_rx`` backlog: the service start
    of every admitted packet, oldest first.  The loop only needs its length,
    its head, to append, and to drop the starts that have passed.
``IntervalLog``
    A CPU's softirq busy intervals (start, duration), merged when one
    starts exactly where the last ended; ``Result`` turns them into CPU
    load per time bin.

Model, not kernel: these are bookkeeping structures of the simulator (the
kernel's queues are linked lists of skbs), so the only rule they follow is
FIFO order.  They store plain C doubles when compiled (see ``queues.pxd``,
``routelab/accel.py``) and run unchanged as Python otherwise; all of them
grow by doubling, so no capacity limit is hidden in them.
"""
from __future__ import annotations

from array import array

import cython
import numpy as np

_MIN_CAP = 16


def _zeros(n: int) -> array:
    return array("d", bytes(8 * n))


def _capacity(cap: int) -> int:
    """The smallest power of two >= ``cap`` (at least ``_MIN_CAP``)."""
    c = _MIN_CAP
    while c < cap:
        c *= 2
    return c


class Ring:
    """A FIFO ring buffer of times (C doubles when compiled), grown by doubling."""

    def __init__(self, cap: int = _MIN_CAP) -> None:
        c = _capacity(cap)
        self.buf = _zeros(c)
        self.v = self.buf
        self.mask = c - 1
        self.head = 0
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def first(self) -> float:
        """The oldest time (the queue must not be empty)."""
        return self.v[self.head]

    def values(self) -> array:
        """The queued times, oldest first (a copy)."""
        out = _zeros(self.n)
        for i in range(self.n):
            out[i] = self.v[(self.head + i) & self.mask]
        return out

    def _grow(self) -> None:
        old = self.values()
        c = 2 * (self.mask + 1)
        self.buf = _zeros(c)
        self.v = self.buf
        self.buf[:len(old)] = old
        self.mask = c - 1
        self.head = 0


class TimeQueue(Ring):
    """FIFO of times: a NIC RX ring or a CPU backlog (service starts)."""

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def push(self, x: float) -> int:
        if self.n > self.mask:
            self._grow()
        self.v[(self.head + self.n) & self.mask] = x
        self.n += 1
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(h=cython.Py_ssize_t, m=cython.Py_ssize_t, n=cython.Py_ssize_t)
    def retire(self, t: float) -> int:
        """Drop every time <= ``t`` from the front; return the length left."""
        h = self.head
        m = self.mask
        n = self.n
        while n and self.v[h] <= t:
            h = (h + 1) & m
            n -= 1
        self.head = h
        self.n = n
        return n


class IntervalLog:
    """A CPU's busy intervals, oldest first; one that starts where the last
    ended extends it (the same floating-point sum as adding the durations)."""

    def __init__(self, cap: int = 1024) -> None:
        c = _capacity(cap)
        self.sbuf = _zeros(c)
        self.dbuf = _zeros(c)
        self.s = self.sbuf
        self.d = self.dbuf
        self.cap = c
        self.n = 0
        self.last_end = -1.0

    def __len__(self) -> int:
        return self.n

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def add(self, start: float, dur: float, end: float) -> int:
        """Busy from ``start`` for ``dur`` seconds, until ``end`` (the caller's
        own ``start + dur``: kept as given, so the next interval is merged
        exactly when it starts where the caller's clock says this one ended)."""
        if start == self.last_end and self.n:
            self.d[self.n - 1] += dur
        else:
            if self.n == self.cap:
                self._grow()
            self.s[self.n] = start
            self.d[self.n] = dur
            self.n += 1
        self.last_end = end
        return 0

    def _grow(self) -> None:
        c = 2 * self.cap
        s, d = _zeros(c), _zeros(c)
        s[:self.n] = self.sbuf[:self.n]
        d[:self.n] = self.dbuf[:self.n]
        self.sbuf, self.dbuf = s, d
        self.s, self.d = s, d
        self.cap = c

    def arrays(self) -> tuple:
        """(starts, durations) as float64 arrays (copies)."""
        return (np.frombuffer(self.sbuf, dtype=np.float64, count=self.n).copy(),
                np.frombuffer(self.dbuf, dtype=np.float64, count=self.n).copy())
