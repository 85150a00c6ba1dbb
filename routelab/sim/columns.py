"""Packet columns: the per-packet arrays the run's stages read and write.

A run never builds one Python object per packet.  Each window's packets are
a :class:`Packets` object: one flat typed column per field the per-packet
stages read (arrival time, device, flow key, hash bucket, class, cost,
output device...), plus the outputs (service start, departure, outcome).
Compiled, the stages read the columns through typed views (C arrays);
interpreted, the columns are Python lists, which index faster in Python.
Same values either way: a Python float is a C double.

Packets born during the run (an echo reply, a host's datagram) are appended
with :meth:`Packets.append`; the columns grow by doubling when they are
full (the views are rebound, so a stage holding the ``Packets`` object sees
the new columns).

Which columns there are, and their types, is the model's business: the
run gives :class:`Packets` the column specs (``core.skbuff.PACKET_SPECS``,
from the one table of packet columns); ``sim`` knows no packet field.

Model, not kernel: the kernel's skbs are linked objects; these are the
simulator's arrays of them.
"""

from __future__ import annotations

from array import array

import cython
import numpy as np

__all__ = ["Packets", "vec", "column", "array_copy", "col_np", "COLUMN_DTYPE"]

COLUMN_DTYPE = {"d": np.float64, "q": np.int64, "Q": np.uint64}   # array.array codes


def vec(code: str, values) -> list | array:
    """A small per-CPU/per-device vector of the loop (see :func:`column`)."""
    if cython.compiled:
        return values if isinstance(values, array) else array(code, values)
    return values.tolist() if isinstance(values, array) else list(values)


def column(a: np.ndarray, code: str, spare: int = 0) -> list | array | np.ndarray:
    """A packet column with ``spare`` zeroed slots at the end.

    Compiled and with no spare slots, the column is the numpy array itself
    when it already has the column's type (a typed view reads it as well as
    an ``array.array``), else one converted copy; with spare slots, an
    ``array.array`` copy.  Interpreted, a list.
    """
    if cython.compiled:
        if not spare:
            return np.ascontiguousarray(a, dtype=COLUMN_DTYPE[code])
        return array_copy(a, code, spare)
    a = np.ascontiguousarray(a, dtype=COLUMN_DTYPE[code])
    if spare:
        a = np.concatenate([a, np.zeros(spare, dtype=a.dtype)])
    return a.tolist()


def array_copy(a: np.ndarray, code: str, spare: int = 0) -> array:
    """A new ``array.array`` of type ``code`` holding ``a``, then ``spare``
    zeros (one copy when ``a`` already has the type)."""
    out = array(code)
    out.frombytes(memoryview(np.ascontiguousarray(a, dtype=COLUMN_DTYPE[code])).cast("B"))
    out.frombytes(bytes(out.itemsize * spare))
    return out


def col_np(col, n: int) -> np.ndarray:
    """The first ``n`` values of a column as a numpy array: a view of the
    column when it is an array (do not keep it), a new array for a list."""
    if isinstance(col, np.ndarray):
        return col[:n]
    if isinstance(col, array):
        return np.frombuffer(col, dtype=COLUMN_DTYPE[col.typecode], count=n)
    return np.array(col[:n])


class Packets:
    """One window's packets as columns.

    Parameters
    ----------
    data : dict
        ``{column: numpy array}`` for every input column (the array stages'
        results).
    specs : dict
        The columns: ``{name: (type code, start)}`` (the model's
        ``core.skbuff.PACKET_SPECS``): ``start`` is ``None`` for an input
        (taken from ``data``), a column name for an output that starts as a
        copy of that input (the service start: the arrival time), or a value
        an output starts filled with (the departure: NaN).  Compiled, every
        column is read through the typed view of its name declared in
        ``columns.pxd``.
    spare : int
        Room for this many packets born during the run before the columns
        have to grow.
    initial_outcome : int
        The outcome every packet starts with (the run's "missed by the NIC",
        so that a packet the full RX ring misses costs no write at all).

    Attributes
    ----------
    n0 : int          packets offered in this window (the first ``n0``)
    outcome : bytearray
    cols : dict       ``{column: the column object}`` (what the views read)
    """

    def __init__(self, data: dict, specs: dict, spare: int = 0,
                 initial_outcome: int = 0) -> None:
        n0 = len(data["t"])
        self.n0 = n0
        self.cap = n0 + spare
        self.outcome = bytearray([initial_outcome]) * n0
        self._initial = initial_outcome
        self.specs = specs
        self._inputs = tuple(name for name, (_, start) in specs.items() if start is None)
        self._copies = tuple((name, start) for name, (_, start) in specs.items()
                             if isinstance(start, str))
        self._fills = tuple((name, start) for name, (_, start) in specs.items()
                            if start is not None and not isinstance(start, str))
        self.cols = {}
        for name, (code, start) in specs.items():
            if start is None:
                self.cols[name] = column(data[name], code, spare)
            elif isinstance(start, str):
                src = data[start]
                # (always a copy: the run writes it)
                self.cols[name] = array_copy(src, code, spare) if cython.compiled \
                    else column(src, code, spare)
            else:
                self.cols[name] = array(code, [start]) * (n0 + spare) \
                    if cython.compiled else [start] * (n0 + spare)
        self._bind()

    @property
    def n(self) -> int:
        """Packets so far (offered plus born in the run)."""
        return len(self.outcome)

    def _bind(self) -> None:
        # (compiled, each attribute is the typed view columns.pxd declares)
        for name, col in self.cols.items():
            setattr(self, name, col)

    def _grow(self) -> None:
        """Double the room for packets born in the run (new columns, rebound)."""
        n = self.n
        cap = max(2 * self.cap, n + 16)
        for name, (code, _) in self.specs.items():
            old = self.cols[name]
            if isinstance(old, list):
                old.extend([0] * (cap - len(old)))
                continue
            self.cols[name] = array_copy(col_np(old, n), code, cap - n)
        self.cap = cap
        self._bind()

    def append(self, values: dict) -> int:
        """A packet born in the run, with every input column given in
        ``values``; returns its index.  It starts like an offered one: each
        output starts as for an offered packet (its service start is its
        arrival, no departure), the initial outcome."""
        j = self.n
        if j >= self.cap:
            self._grow()
        cols = self.cols
        for name in self._inputs:
            cols[name][j] = values[name]
        for name, src in self._copies:
            cols[name][j] = values[src]
        for name, x in self._fills:
            cols[name][j] = x
        self.outcome.append(self._initial)
        return j

    def value(self, j: int, name: str):
        """Packet ``j``'s value of column ``name`` (a Python number)."""
        x = self.cols[name][j]
        return x.item() if isinstance(x, np.generic) else x

    def set(self, j: int, name: str, x) -> None:
        """Set packet ``j``'s value of column ``name``."""
        self.cols[name][j] = x

    def array(self, name: str, n: int | None = None) -> np.ndarray:
        """Column ``name`` of the first ``n`` packets (all by default) as a
        numpy array (a view when possible: copy it to keep it)."""
        return col_np(self.cols[name], self.n if n is None else n)
