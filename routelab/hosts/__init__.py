"""Endpoints that react: the machines around the router (and, through
``Router(local_hosts=...)``, local endpoints by IP protocol: the sockets of
``tcp.py`` and ``nfs.py`` are modelled inside their hosts).

A host takes part in a run through these seams (see ``docs/design.md``):

``deliver(j, t)``
    Packet ``j`` reaches the host at ``t``: for a host *beyond a device*,
    when the router has put its last bit on that device's wire (only for
    the packet kinds the host asked for, :attr:`Host.kinds`); for a *local*
    host, when ``ip_local_deliver`` hands it over (by IP protocol).  It is
    an event of the run: called in time order with the timers and packets,
    so ``t`` never goes backwards and the host's own earlier timers have
    fired.  ``run.header(j)`` / ``run.field(j, name)`` read the packet
    (``j`` may be negative: a packet kept past its window).
``tx_complete(tag, t)``
    A frame the host owns (queued with ``owner=host``) has left the wire:
    the skb is freed (``sock_wfree``: a socket's send buffer gets its memory
    back).
timers
    ``run.clock.timer(name, fire)`` and ``Timer.mod(at)``.
``run.inject(fields, t)``
    A packet born in the run reaches the router at ``t`` (on device
    ``fields["iif"]``); ``run.header(j)`` gives any packet's header fields.
    A host beyond a wire sends through a :class:`~routelab.hosts.nic.HostNic`
    (its own link and TX queue), which injects each frame when its last bit
    reaches the router.
``run.ip_output(fields, t, owner, tag)``
    A socket on the router's own machine sends a frame: ``dev_queue_xmit``
    with the socket as owner (``tx_complete`` when it left the wire).
``charge(fn, seconds, t, cpu)`` and ``counters()``
    CPU time a host spends on the router's machine (a profile row), and the
    host's own counters, collected into ``Result.counters["hosts"]``.

A host is given to the router with ``Router(hosts={device: host})``
(beyond a device) or ``Router(local_hosts={protocol: host})``; each run
calls :meth:`Host.start` first, so a host starts every run afresh.
"""

from __future__ import annotations

from ..core.skbuff import KIND

__all__ = ["Host", "HostGroup", "kind_mask"]


def kind_mask(kinds) -> int:
    """Bit mask of packet kinds (``KIND`` names or codes)."""
    m = 0
    for k in kinds:
        m |= 1 << (KIND[k] if isinstance(k, str) else int(k))
    return m


class Host:
    """Base class of every host (see the module docstring).

    Attributes
    ----------
    kinds : tuple
        Packet kinds (``KIND`` names) a host beyond a device wants to see.
    run : object
        The run it takes part in (set by :meth:`start`).
    dev : int
        The device it is attached beyond (-1 for a local host).
    """

    kinds: tuple = ()

    def __init__(self) -> None:
        self.run = None
        self.dev = -1

    def start(self, run, dev: int) -> None:
        """A run begins: reset the per-run state; ``dev`` is where the host sits."""
        self.run = run
        self.dev = dev

    def deliver(self, j: int, t: float) -> None:
        """Packet ``j`` reaches the host at ``t``."""

    def tx_complete(self, tag: int, t: float) -> None:
        """A frame the host owns (``tag``) left the wire at ``t``."""

    def finish(self, t: float) -> None:
        """The run ends at ``t``."""

    def counters(self) -> dict:
        """The host's own counters (name -> number), collected after
        :meth:`finish` into ``Result.counters["hosts"][label]`` (label: the
        device's name, or ``local/<protocol>``).  Empty: nothing reported."""
        return {}

    def ip_mib(self) -> dict:
        """For a local host that reassembles (the machine's ``ip_defrag``):
        its ``ReasmTimeout``/``ReasmReqds``/``ReasmOKs``/``ReasmFails``,
        added into the machine's Ip MIB (``Result.counters["ip"]``,
        ``/proc/net/snmp``); each rebuilt datagram also counts in
        ``InDelivers``, where its fragments did not.  Empty by default."""
        return {}

    def charge(self, fn: str, seconds: float, t: float, cpu: int = 0) -> None:
        """Charge CPU work the host does *on the router's machine* (a local
        socket's system calls, a container's stack, a task): a profile row
        ``fn`` and ``seconds`` of CPU ``cpu`` from ``t``.  A host on another
        machine (beyond a wire) has its own CPU and charges nothing."""
        self.run.charge(fn, seconds, t, cpu)


class HostGroup(Host):
    """Several hosts beyond one device: each sees the packet kinds it asked for.

    (The machines of a LAN behind one router port: the pinging PC, the hosts
    a worm probes...)  ``deliver`` goes to the first member whose kinds
    include the packet's; ``tx_complete`` is not used (members own no
    frames).
    """

    def __init__(self, *hosts: Host) -> None:
        super().__init__()
        self.hosts = hosts
        kinds: list = []
        for h in hosts:
            kinds.extend(k for k in h.kinds if k not in kinds)
        self.kinds = tuple(kinds)
        self._masks = [kind_mask(h.kinds) for h in hosts]

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        for h in self.hosts:
            h.start(run, dev)

    def deliver(self, j: int, t: float) -> None:
        kind = int(self.run.field(j, "kind"))
        for h, m in zip(self.hosts, self._masks, strict=True):
            if (m >> kind) & 1:
                h.deliver(j, t)
                return

    def finish(self, t: float) -> None:
        for h in self.hosts:
            h.finish(t)
            h.run = None

    def ip_mib(self) -> dict:
        """The members' reassembly counters, added up."""
        out: dict = {}
        for h in self.hosts:
            for k, v in h.ip_mib().items():
                out[k] = out.get(k, 0) + v
        return out

    def counters(self) -> dict:
        """The members' counters, each under its class name (and position)."""
        out = {}
        for i, h in enumerate(self.hosts):
            c = h.counters()
            if c:
                out[f"{i}:{type(h).__name__}"] = dict(c)
        return out
