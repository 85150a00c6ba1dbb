"""What hosts use of a run: packets born in it, the packets' headers, local
output with an owner, CPU charges (see :mod:`routelab.hosts` for the seams
and ``docs/design.md``).

:class:`RunSeams` is a base of :class:`routelab.router.Run`; it is here, not
in ``router.py``, so that the dispatcher's file holds the dispatcher.  Its
methods are called per born or locally sent packet, not per offered packet,
and run as Python.
"""

from __future__ import annotations

import math

import numpy as np

from . import costs as _costs
from .core.skbuff import PacketTrace
from .errors import KnobError
from .prepare import column_data

__all__ = ["RunSeams"]


def _header_fields(fields: dict) -> dict:
    """Every header field but ``t``, from ``fields`` or its default."""
    dflt = PacketTrace.DEFAULTS
    return {name: fields[name] if name in fields else dflt[name]
            for name in PacketTrace.DTYPES if name != "t"}


class RunSeams:
    """The host-facing half of a run (mixed into ``Run``)."""

    # -- what hosts use -----------------------------------------------------------
    def inject(self, fields: dict, t: float) -> int:
        """A packet born in the run: it arrives at the router at ``t`` on device
        ``fields["iif"]``; ``fields`` are its header fields (``PacketTrace``
        names but ``t``; a field left out takes its default).  Returns its
        index in the current window (-1 if it arrives after the window: it is
        then carried to the next one;
        -1 too, and nothing happens, if it is born after the end, see
        :meth:`dispatch`).

        Its array stages are computed as for an offered packet (and cached:
        they depend on the header and the current hash key only)."""
        if not (isinstance(t, (int, float)) and math.isfinite(t)) or t < 0:
            raise KnobError("inject t", t, "a finite time >= 0 s")
        f = _header_fields(fields)
        if self.over:
            self.refused_after_end += 1
            return -1
        if not self._last_window and t >= self._t_end:
            self.sch.carry.append(dict(f, t=float(t)))
            return -1
        rnd = self.cache.hash_rnd if self.cache is not None else 0
        key = tuple(v for name, v in f.items() if name != "tag") + (rnd,)
        vals = self._inject_cache.get(key)
        if isinstance(vals, tuple):      # primed: a row of a batch (prime_injections)
            b, i = vals
            vals = {name: a.item(i) for name, a in self._primed[b].items()}
            self._inject_cache[key] = vals
        if vals is None:
            one = PacketTrace.build(np.array([t]), **f)
            cols = column_data(one, self._stages(one))
            vals = {name: np.asarray(a)[0].item() for name, a in cols.items()}
            self._inject_cache[key] = vals
        vals = dict(vals)
        vals["t"] = float(t)
        vals["tag"] = int(f["tag"])
        j = self.pk.append(vals)
        self._born[j] = dict(f, t=float(t))
        self.sch.born_push(float(t), j)
        self.ledger.born += 1
        return j

    def prime_injections(self, fields: dict) -> int:
        """Work out the array stages of packets a host *may* inject later, all at
        once (``fields``: equal-length arrays of ``PacketTrace`` fields but
        ``t`` and ``tag``; the others take their defaults), so that
        :meth:`inject` finds them ready instead of running the stages for one
        packet at a time.  Only a speed-up: the
        stages are the same.  Returns how many distinct headers were primed."""
        names = [n for n in PacketTrace.DTYPES if n not in ("t", "tag")]
        n = len(fields[names[0]]) if names and names[0] in fields else 0
        if n == 0:
            return 0
        given = {k: fields[k] for k in names if k in fields}
        tr = PacketTrace.build(np.zeros(n), **given)
        cols = column_data(tr, self._stages(tr))
        rnd = self.cache.hash_rnd if self.cache is not None else 0
        rows = zip(*(getattr(tr, k).tolist() for k in names), strict=True)
        primed = self._primed
        base = len(primed)
        primed.append(cols)
        new = 0
        for i, row in enumerate(rows):
            key = row + (rnd,)
            if key not in self._inject_cache:
                self._inject_cache[key] = (base, i)
                new += 1
        return new

    def header(self, j: int) -> dict:
        """Packet ``j``'s header fields (``PacketTrace`` names, with ``t`` its
        arrival at the router), as Python values.  A negative ``j`` names a
        packet kept past its window or sent by the router's own stack
        (:meth:`keep_header`, :meth:`ip_output`)."""
        if j < 0:
            return dict(self._kept[j])
        if j >= self.pk.n0:
            return dict(self._born[j])
        tr = self.tr
        # (ndarray.item(j): no numpy scalar made first, same Python value)
        return {name: getattr(tr, name).item(j) for name in PacketTrace.DTYPES}

    def field(self, j: int, name: str):
        """One header field of packet ``j`` (see :meth:`header`)."""
        if j < 0:
            return self._kept[j][name]
        if j >= self.pk.n0:
            return self._born[j][name]
        return getattr(self.tr, name).item(j)

    # -- local output: a socket on the router's own machine ------------------------
    def ip_output(self, fields: dict, t: float, owner=None, tag: int = 0,
                  oif: int | None = None, frames=None) -> float:
        """A frame the machine's own stack sends at ``t`` (one IP packet or one
        fragment: ``fields`` as for :meth:`inject`, ``length`` its IP length);
        return when its last bit leaves, or NaN if the qdisc was full (the
        frame is dropped silently, as for a socket without ``IP_RECVERR``).

        Kernel: net/ipv4/ip_output.c ip_queue_xmit / ip_build_xmit ->
        ip_output -> ip_finish_output2 -> net/core/dev.c dev_queue_xmit
        (2.4.19, 2.6.20).  The output device is ``oif`` or the FIB's answer
        for the destination.  The stack's cost from ``ip_output`` to the
        driver is charged on the device's CPU (ledger row ``ip_output
        (local)``), and the frame reaches the qdisc when that work is done;
        the caller charges its own socket layer (:meth:`charge`).  With an
        ``owner`` (a socket), ``owner.tx_complete(tag, t)`` runs when the
        frame has left the wire (``sock_wfree``).  A host beyond the device
        that asked for the frame's kind gets it at its departure time.

        ``frames``: a TSO skb (the device segments it, story 4's host
        netperf on a TSO NIC): a list of ``(ip_length, tag)`` of the frames
        the NIC cuts it into.  The stack is charged once; each frame takes
        its own wire time and is delivered to the host beyond on its own (with
        its length and tag); the owner hears ``tx_complete(tag)`` once, when
        the last frame has left (the skb is freed then).  Kernel:
        drivers/net/tg3.c tg3_start_xmit, e1000_tso (2.6.20): one skb, one
        set of descriptors, the segmentation in hardware.

        Simplified: no output route cache or neighbour resolution for local
        frames (the next hop is taken as resolved), and the frame does not
        queue behind softirq work already waiting on the CPU.
        """
        if not (isinstance(t, (int, float)) and math.isfinite(t)) or t < 0:
            raise KnobError("ip_output t", t, "a finite time >= 0 s")
        f = _header_fields(fields)
        if oif is None:
            rt, o, _, _ = self.r.fib.fib_lookup([f["daddr"]], [f["saddr"]], [f["tos"]], [-1])
            oif = int(o[0])
        if not 0 <= oif < len(self.devices):
            raise KnobError("ip_output oif", oif, f"a device index in [0, {len(self.devices) - 1}]"
                            " (no route to the destination?)")
        nd = self.devices[oif]
        fn = self.r.costs.fn
        w = fn["ip_output"] + fn["dev_queue_xmit"] + fn["hard_start_xmit"]
        cpu = self.cpus[nd.cpu]
        cpu.charge(t, w)
        self.ledger.charge(self._slot_local_out, w)
        self._mib["OutRequests"] += 1
        speed = self.r.devices[oif].speed
        if frames:
            return self._ip_output_tso(f, t + w, owner, tag, nd, speed, frames)
        wire = float(_costs.wire_bytes(int(f["length"]))) * 8.0 / speed if speed > 0 else 0.0
        dep = nd.dev_queue_xmit(t + w, wire, None, owner, tag)
        if dep != dep:
            return dep
        nd.tx_packets += 1
        if nd.host_mask and (nd.host_mask >> int(f["kind"])) & 1:
            self.sch.deliver_at(dep, nd.host, self.keep_header(dict(f, t=float(t))))
        return dep

    def _ip_output_tso(self, f: dict, t: float, owner, tag: int, nd, speed: float,
                       frames) -> float:
        """The frames of one TSO skb into the qdisc at ``t`` (see :meth:`ip_output`)."""
        dep = t
        last = len(frames) - 1
        for i, (length, ftag) in enumerate(frames):
            wire = float(_costs.wire_bytes(int(length))) * 8.0 / speed if speed > 0 else 0.0
            dep = nd.dev_queue_xmit(t, wire, None, owner if i == last else None, tag)
            if dep != dep:
                return dep
            nd.tx_packets += 1
            if nd.host_mask and (nd.host_mask >> int(f["kind"])) & 1:
                h = dict(f, t=float(t), length=int(length), tag=int(ftag))
                self.sch.deliver_at(dep, nd.host, self.keep_header(h))
        return dep

    def charge(self, fn: str, seconds: float, t: float, cpu: int = 0) -> None:
        """``seconds`` of CPU work done by kernel function or task ``fn`` at
        ``t`` on CPU ``cpu`` (a profile row of that name; the CPU is busy for
        it from ``t`` or when it is next free).  For hosts that run on the
        router's own machine: a socket's ``sendmsg``, a task's user time."""
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds)) or seconds < 0:
            raise KnobError(f"charge {fn} seconds", seconds, "a finite number >= 0")
        if not (isinstance(cpu, int) and 0 <= cpu < len(self.cpus)):
            raise KnobError(f"charge {fn} cpu", cpu, f"an integer in [0, {len(self.cpus) - 1}]")
        k = self._host_slots.get(fn)
        if k is None:
            k = self._host_slots[fn] = self.ledger.slot(fn)
        self.ledger.charge(k, seconds)
        self.cpus[cpu].charge(t, seconds)

    def keep_header(self, j) -> int:
        """Keep packet ``j``'s header (a dict: as given) past its window; return
        the negative index :meth:`header` knows it by."""
        h = j if isinstance(j, dict) else (self.header(j) if j >= 0 else self._kept[j])
        k = -1 - len(self._kept)
        self._kept[k] = h
        return k

    def _host_labels(self):
        """(label, host) of every host: the device name, or ``local/<proto>``."""
        r = self.r
        out = [(r.devices[d].name, h) for d, h in r.hosts.items()]
        out += [(f"local/{p}", h) for p, h in r.local_hosts.items()]
        return out

    def deliver_at(self, t: float, host, j: int) -> None:
        """``host.deliver(j, t)`` at ``t``: the dispatcher calls it in its time
        order (see :meth:`events_until`)."""
        self.sch.deliver_at(t, host, j)
