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

Model, not kernel: the kernel's skbs are linked objects; these are the
simulator's arrays of them.
"""

from __future__ import annotations

from array import array

import cython
import numpy as np

__all__ = ["Packets", "COLUMNS", "vec", "column", "array_copy", "col_np", "COLUMN_DTYPE"]

COLUMN_DTYPE = {"d": np.float64, "q": np.int64, "Q": np.uint64}   # array.array codes

#: every column of :class:`Packets`: name -> array.array type code
#: (hot inputs first, then the rarely read inputs, then the outputs)
COLUMNS = {
    "t": "d", "dev": "q", "key": "Q", "ik": "q", "h": "q", "cls": "q", "cost": "d",
    "oif": "q", "nfrag": "q", "wire": "d", "fifo": "q",
    "rtype": "q", "gw": "q", "nrules": "q", "martian": "q", "saddr": "q", "iwire": "d",
    "path_cost": "d", "kind": "q", "tag": "q", "proto": "q",
    "t_start": "d", "t_depart": "d",
}
OUTPUTS = ("t_start", "t_depart")


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
    """One window's packets as columns (see :data:`COLUMNS`).

    Parameters
    ----------
    data : dict
        ``{column: numpy array}`` for every input column (the array stages'
        results); ``t_start`` starts as the arrival time, ``t_depart`` as
        NaN, every outcome as ``initial_outcome``.
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

    def __init__(self, data: dict, spare: int = 0, initial_outcome: int = 0) -> None:
        n0 = len(data["t"])
        self.n0 = n0
        self.cap = n0 + spare
        self.outcome = bytearray([initial_outcome]) * n0
        self._initial = initial_outcome
        self.cols = {}
        for name, code in COLUMNS.items():
            if name == "t_start":
                src = data["t"]
                # (always a copy: the run writes it)
                self.cols[name] = array_copy(src, code, spare) if cython.compiled \
                    else column(src, code, spare)
            elif name == "t_depart":
                self.cols[name] = array(code, [float("nan")]) * (n0 + spare) \
                    if cython.compiled else [float("nan")] * (n0 + spare)
            else:
                self.cols[name] = column(data[name], code, spare)
        self._bind()

    @property
    def n(self) -> int:
        """Packets so far (offered plus born in the run)."""
        return len(self.outcome)

    def _bind(self) -> None:
        c = self.cols
        self.t, self.dev, self.key, self.ik, self.h = c["t"], c["dev"], c["key"], c["ik"], c["h"]
        self.cls, self.cost, self.oif, self.nfrag = c["cls"], c["cost"], c["oif"], c["nfrag"]
        self.wire, self.fifo = c["wire"], c["fifo"]
        self.rtype, self.gw, self.nrules, self.martian = (c["rtype"], c["gw"], c["nrules"],
                                                          c["martian"])
        self.saddr, self.iwire, self.path_cost = c["saddr"], c["iwire"], c["path_cost"]
        self.kind, self.tag, self.proto = c["kind"], c["tag"], c["proto"]
        self.t_start, self.t_depart = c["t_start"], c["t_depart"]

    def _grow(self) -> None:
        """Double the room for packets born in the run (new columns, rebound)."""
        n = self.n
        cap = max(2 * self.cap, n + 16)
        for name, code in COLUMNS.items():
            old = self.cols[name]
            if isinstance(old, list):
                old.extend([0] * (cap - len(old)))
                continue
            self.cols[name] = array_copy(col_np(old, n), code, cap - n)
        self.cap = cap
        self._bind()

    def append(self, values: dict) -> int:
        """A packet born in the run, with every input column given in
        ``values``; returns its index.  It starts like an offered one: its
        service start is its arrival, no departure, the initial outcome."""
        j = self.n
        if j >= self.cap:
            self._grow()
        cols = self.cols
        for name in COLUMNS:
            if name not in ("t_start", "t_depart"):
                cols[name][j] = values[name]
        cols["t_start"][j] = values["t"]
        cols["t_depart"][j] = float("nan")
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
