"""CPU and NIC profiles.

A :class:`CpuProfile` turns the cycle counts of :mod:`routelab.costs` into
seconds on a given machine; a :class:`NicProfile` says how a network card
receives (interrupt per packet or NAPI polling), how big its rings are and how
fast its wire is.

Most numbers here are *assumptions*: the brief found no measured memcpy
bandwidth, memory latency or per-packet cost for a K6-200, a Duron 900 or a
2.4 GHz P4 Xeon (kernel.md section 9, "Not found").  Each field says where its
value comes from.  Calibration (stories.md) may adjust only the constants that
are marked as assumptions, and says so in :mod:`routelab.costs`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KnobError

__all__ = ["CpuProfile", "NicProfile", "CPUS", "NICS", "cpu_profile", "nic_profile"]


@dataclass(frozen=True, slots=True)
class CpuProfile:
    """One CPU model.

    Attributes
    ----------
    name : str
        Profile name used by the ``cpu`` knob.
    hz : float
        Core clock in Hz.
    ncpus : int
        CPUs in the box (story 2's router has two).
    ipc : float
        Instructions-per-clock factor relative to the reference core the
        constants in :mod:`routelab.costs` are written for (an AMD Opteron,
        Olsson's 2005 record box).  Kernel path cycles are divided by it.
    mem_latency_ns : float
        Cost of one cache miss to DRAM; charged for every route-cache entry
        or hash bucket the code touches cold (chain walks, GC scans).
    copy_bw : float
        Sustained memcpy bandwidth of large, cold buffers, bytes/s.
    csum_bw : float
        Sustained Internet-checksum bandwidth over freshly received data, bytes/s.
    source : str
        Where the numbers come from.
    """

    name: str
    hz: float
    ncpus: int
    ipc: float
    mem_latency_ns: float
    copy_bw: float
    csum_bw: float
    source: str

    @property
    def miss_cycles(self) -> float:
        """Cache-miss cost expressed in this CPU's cycles."""
        return self.mem_latency_ns * 1e-9 * self.hz


# Vlasenko (LKML, Oct 2002) on a Celeron 1200: checksum ~704 cycles/KB and
# checksum+copy ~3423 cycles/KB (~360 MB/s).  That is our only measured
# anchor for per-byte costs; other machines scale from it by assumption.
_CELERON_HZ = 1.2e9
_CSUM_BW_CELERON = _CELERON_HZ / (704 / 1024)          # ~1.75 GB/s (cache-assisted)
_CSUM_COPY_BW_CELERON = _CELERON_HZ / (3423 / 1024)    # ~359 MB/s

CPUS: dict[str, CpuProfile] = {p.name: p for p in [
    CpuProfile(
        "k6-200", 200e6, 1, 0.55, 180.0, 70e6, 180e6,
        "AMD K6 200 MHz, Socket 7, 66 MHz bus (story 1). ipc, latency and "
        "bandwidths are assumptions: a 66 MHz EDO/SDRAM system of 1997, about a "
        "fifth of the Celeron-1200 copy rate Vlasenko measured."),
    CpuProfile(
        "duron-900", 900e6, 1, 0.85, 130.0, 300e6, 900e6,
        "AMD Duron 900 (story 1's faster box). 200 MHz DDR bus; all numbers "
        "assumed by scaling Vlasenko's Celeron-1200 figures (kernel.md s9)."),
    CpuProfile(
        "celeron-1200", 1.2e9, 1, 0.8, 120.0, _CSUM_COPY_BW_CELERON * 1.6,
        _CSUM_BW_CELERON,
        "Intel Celeron 1200, 100 MHz FSB: Vlasenko's measurement box (kernel.md s9). "
        "csum_bw from 704 cycles/KB; copy_bw chosen so copy+csum gives ~3423 cycles/KB."),
    # ipc and mem_latency_ns FITTED (docs/calibration-story2.md) to the unpatched
    # 2.6.0 run of story 2 (RX-OK per port; in_hlist_search per lookup), the
    # reference-core path costs being pinned by Olsson's Opteron anchor.  ipc
    # allowed in [0.2, 0.8] (NetBurst on branchy, cache-missing kernel code,
    # relative to an Opteron), came out near the low end: 0.26 (was an assumed
    # 0.6) -- the model may lack a CPU sink of the real box (see the doc).
    # Memory latency allowed in [100, 250] ns (400/533 MHz FSB shared by two
    # CPUs): 250 ns (was an assumed 140).  Bandwidths: assumptions, not fitted.
    CpuProfile(
        "p4-xeon-2400x2", 2.4e9, 2, 0.26, 250.0, 900e6, 2.5e9,
        "2-way 2.4 GHz P4 Xeon, 256 MB (story 2, Olsson's router). NetBurst's low "
        "IPC and 400/533 MHz shared FSB; ipc and memory latency fitted to the "
        "unpatched 2.6.0 report of story 2, bandwidths assumed."),
    CpuProfile(
        "xeon-2800", 2.8e9, 2, 0.65, 120.0, 1.2e9, 3.0e9,
        "2.8 GHz Xeon (i386), the 2007 container benchmarks (Lezcano, Mar 2007). "
        "Numbers are assumptions."),
    CpuProfile(
        "opteron-2400x2", 2.4e9, 2, 1.0, 80.0, 2.5e9, 5.0e9,
        "Dual Opteron 250 (Olsson, Feb 2005: 2.1 Mpps with cache hits, ~2300 "
        "cycles/packet): the reference core for routelab.costs."),
]}


@dataclass(frozen=True, slots=True)
class NicProfile:
    """One network card and its driver.

    Attributes
    ----------
    name : str
    speed_bps : float
        Wire speed (0 for a virtual device with no serialisation delay).
    napi : bool
        True: NAPI polling (2.6 e1000/tg3 style); False: an interrupt per
        packet and ``netif_rx`` into the per-CPU backlog (2.4 e100 style).
    rx_ring : int
        RX descriptors.
    tx_ring : int
        TX descriptors (packets the driver holds beyond the qdisc).
    rx_fifo_bytes : int
        On-chip receive FIFO that holds frames when no descriptor is free.
    weight : int
        NAPI poll weight.
    features : frozenset[str]
        ``NETIF_F_*`` feature flags (story 4).
    source : str
    kind : str
        ``"ether"`` (a NIC and its wire), ``"pair"`` (one end of a veth/etun
        pair: no wire, no rings; see routelab.core.dev) or ``"dummy"``.
    """

    name: str
    speed_bps: float
    napi: bool
    rx_ring: int
    tx_ring: int
    rx_fifo_bytes: int
    weight: int
    features: frozenset
    source: str
    kind: str = "ether"


NICS: dict[str, NicProfile] = {p.name: p for p in [
    NicProfile("e100", 100e6, False, 64, 64, 3 * 1024, 16, frozenset({"IP_CSUM", "SG"}),
               "Intel EtherExpress Pro/100 with the 2.4 e100 driver: interrupt per "
               "packet, netif_rx. Ring sizes are the driver's defaults as we recall "
               "them (unverified); the 3 KB FIFO is an assumption."),
    NicProfile("e1000", 1e9, True, 256, 256, 48 * 1024, 64, frozenset({"IP_CSUM", "SG"}),
               "Intel 8254x with the 2.6 e1000 driver: NAPI, weight 64 (kernel.md s7, "
               "unverified), 256 RX descriptors, 48 KB RX packet buffer (assumed)."),
    NicProfile("tg3", 1e9, True, 200, 512, 64 * 1024, 64,
               frozenset({"IP_CSUM", "SG", "HIGHDMA", "TSO"}),
               "Broadcom Tigon3 (Lezcano's 2007 Xeon box). Ring sizes assumed."),
    NicProfile("etun", 0.0, False, 0, 0, 0, 64, frozenset(),
               "etun pair device of 2.6.20-lxc8: no wire, no features by default "
               "(story 4).", "pair"),
    NicProfile("dummy", 0.0, False, 0, 0, 0, 64, frozenset(),
               "dummy0: discards every packet it is given (Olsson's test sink).", "dummy"),
]}


def cpu_profile(name: str) -> CpuProfile:
    """Return the CPU profile called ``name`` or raise KnobError."""
    try:
        return CPUS[name]
    except (KeyError, TypeError):
        raise KnobError("cpu", name, "one of " + ", ".join(sorted(CPUS))) from None


def nic_profile(name: str) -> NicProfile:
    """Return the NIC profile called ``name`` or raise KnobError."""
    try:
        return NICS[name]
    except (KeyError, TypeError):
        raise KnobError("nic", name, "one of " + ", ".join(sorted(NICS))) from None
