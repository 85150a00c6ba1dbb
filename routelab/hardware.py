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

__all__ = ["CpuProfile", "NicProfile", "CPUS", "NICS", "cpu_profile", "nic_profile",
           "NETIF_F", "netdev_features", "features_mask", "Board", "BOARDS", "BOARD_CACHE"]


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

    @property
    def cache_bytes(self) -> float:
        """The largest cache data can stay in between packets (:data:`CACHE_BYTES`)."""
        return CACHE_BYTES.get(self.name, 512 * 1024)


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
        "piii-1000", 1.0e9, 1, 0.8, 130.0, _CSUM_COPY_BW_CELERON * 1.6,
        1.0e9 / (704 / 1024),
        "Intel Pentium III 1 GHz (Coppermine, 133 MHz FSB, PC133 SDRAM): a ~1 GHz PC of "
        "2002, story 3's NFS client (the report gives no CPU). ASSUMED: the Celeron-1200's "
        "core (same P6 family: ipc 0.8), its checksum cycles per KB (704, Vlasenko) at "
        "1 GHz, its memory-bound copy rate, and 130 ns memory latency."),
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
    # Re-fitted to 0.29 (RX-OK per port 5.40 M against 5.4 M) once the slow
    # path paid fib_validate_source's reverse FIB lookup (issue 24), which had
    # taken RX-OK to 0.80 of the report at 0.26.
    # Memory latency allowed in [100, 250] ns (400/533 MHz FSB shared by two
    # CPUs): 250 ns (was an assumed 140).  Bandwidths: assumptions, not fitted.
    CpuProfile(
        "p4-xeon-2400x2", 2.4e9, 2, 0.29, 250.0, 900e6, 2.5e9,
        "2-way 2.4 GHz P4 Xeon, 256 MB (story 2, Olsson's router). NetBurst's low "
        "IPC and 400/533 MHz shared FSB; ipc and memory latency fitted to the "
        "unpatched 2.6.0 report of story 2, bandwidths assumed."),
    CpuProfile(
        "xeon-2800", 2.8e9, 2, 0.65, 120.0, 1.2e9, 3.0e9,
        "2.8 GHz Xeon (i386), the 2007 container benchmarks (Lezcano, Mar 2007). "
        "Numbers are assumptions."),
    # Story 4's box (stories.md s4: i386, 2.6.20-rc5-netns; kernel.md s6: Lezcano's
    # netperf box is a 2.8 GHz Xeon with tg3, "2007 Xeon"): a NetBurst Xeon.  The CPU
    # count netperf's load spans is a set-up knob of the scenario (``cpus``).
    # ipc, copy_bw, csum_bw and mem_latency_ns are ASSUMED (no measurement of this
    # box), each inside a documented range; the calibration of story 4 swept them
    # and left them at these prior values, with which both reported cases already
    # fall in their bands (docs/calibration-story4.md):
    #   ipc in [0.26, 1.0]: 0.26 was story 2's fit (0.29 since issue 24) for a
    #     2.4 GHz NetBurst Xeon on
    #     cache-missing route-cache code (with it story 4's loads come out about
    #     twice the report: the two stories disagree, see the calibration note),
    #     1.0 the Opteron reference core; 0.65 the earlier xeon-2800 assumption;
    #   copy_bw in [0.8, 3.2] GB/s: memcpy of ~1.5 KB buffers; 3.2 GB/s is half the
    #     6.4 GB/s peak of an 800 MHz x 8 B front-side bus (read + write), the low
    #     end a 400 MHz bus with cold lines;
    #   csum_bw in [1.75, 4.1] GB/s: Vlasenko's Celeron-1200 704 cycles/KB (kernel.md
    #     s9) is 1.75 GB/s at 1.2 GHz and 4.1 GB/s scaled by clock to 2.8 GHz;
    #   mem_latency_ns in [100, 250] (DDR behind a 533/800 MHz bus; 250 is story 2's fit).
    CpuProfile(
        "xeon-2007", 2.8e9, 2, 0.65, 150.0, 1.2e9, 3.0e9,
        "2.8 GHz NetBurst Xeon (i386) of the 2007 container benchmarks (story 4). "
        "All four numbers assumed within documented ranges, not fitted "
        "(docs/calibration-story4.md)."),
    CpuProfile(
        "opteron-2400x2", 2.4e9, 2, 1.0, 80.0, 2.5e9, 5.0e9,
        "Dual Opteron 250 (Olsson, Feb 2005: 2.1 Mpps with cache hits, ~2300 "
        "cycles/packet): the reference core for routelab.costs."),
    # The epilogue's current server core (issue 26): a 2019 Xeon Gold 6248
    # (Cascade Lake, 20 cores, 2.5 GHz base, 27.5 MB shared L3: Intel's product
    # brief, from memory, unverified).  One core forwards (ncpus 1: the model's
    # softirq load is per CPU).  ASSUMED, each with its basis: ipc 2.0 relative to
    # the Opteron 250 (a K8 core of 2005; four wide with a larger window and
    # better branch prediction, on branchy kernel code about twice the work per
    # clock); DRAM latency 90 ns (typical loaded latency of a 6-channel DDR4-2933
    # server); copy 10 GB/s and checksum 20 GB/s for one core (AVX memcpy of warm
    # 1.5 KB buffers; csum_partial's add-with-carry loop at ~8 bytes per cycle).
    CpuProfile(
        "xeon-gold-2019", 2.5e9, 1, 2.0, 90.0, 10e9, 20e9,
        "One core of a 2019 Xeon Gold 6248 (2.5 GHz, 27.5 MB L3), the epilogue's "
        "current server. All performance numbers assumed (see hardware.py)."),
]}

#: The last-level cache each CPU keeps data in between packets, bytes: what a
#: FIB trie competes for (:func:`routelab.ipv4.fib.route_input_nocache`).  From
#: the parts' data sheets, from memory and UNVERIFIED: a Socket 7 board's
#: pipeline-burst L2 of 512 KB (K6); the Duron's 64 KB L2 plus its 128 KB L1
#: (exclusive caches); the Tualatin Celeron's 256 KB L2; the Prestonia and
#: Irwindale Xeons' 512 KB and 1 MB L2; the Opteron 250's 1 MB L2; the Xeon
#: Gold 6248's 27.5 MB L3 (shared by 20 cores: ASSUMED to hold the FIB, which
#: every core reads).
CACHE_BYTES: dict[str, float] = {
    "k6-200": 512 * 1024, "duron-900": 192 * 1024, "celeron-1200": 256 * 1024,
    "p4-xeon-2400x2": 512 * 1024, "xeon-2800": 512 * 1024, "xeon-2007": 1024 * 1024,
    "opteron-2400x2": 1024 * 1024, "xeon-gold-2019": 27.5 * 1024 * 1024,
}


# Device feature bits, dev->features.  Kernel: include/linux/netdevice.h
# NETIF_F_* (2.6.20, sagsango/linux-2.6.20); the GSO types sit above bit 16
# (NETIF_F_GSO_SHIFT) as SKB_GSO_* of include/linux/skbuff.h: TCPV4 1, UDP 2,
# DODGY 4, TCP_ECN 8, TCPV6 16.  2.4.24 and 2.6.0 (MaximeChretien/linux-history)
# have SG..VLAN_CHALLENGED with the same values (2.4.24 also DYNALLOC 16); 2.6.0's
# TSO is 2048, the bit 2.6.20 gives to GSO.  The model keeps names, not 2.6.0
# bit values: "TSO" means the device segments TCP in either kernel.
NETIF_F: dict[str, int] = {
    "SG": 1,               # scatter/gather: skbs with page frags need no linearising
    "IP_CSUM": 2,          # checksums TCP/UDP over IPv4 only
    "NO_CSUM": 4,          # needs no checksum at all (loopback, a reliable hop)
    "HW_CSUM": 8,          # checksums every packet
    "HIGHDMA": 32,         # DMA from high memory
    "FRAGLIST": 64,        # frag_list skbs
    "HW_VLAN_TX": 128,
    "HW_VLAN_RX": 256,
    "HW_VLAN_FILTER": 512,
    "VLAN_CHALLENGED": 1024,
    "GSO": 2048,           # software GSO
    "LLTX": 4096,          # lockless TX: the driver takes its own lock
    "TSO": 1 << 16,        # SKB_GSO_TCPV4 << 16
    "UFO": 2 << 16,        # SKB_GSO_UDP << 16
    "GSO_ROBUST": 4 << 16,  # SKB_GSO_DODGY << 16
    "TSO_ECN": 8 << 16,    # SKB_GSO_TCP_ECN << 16
    "TSO6": 16 << 16,      # SKB_GSO_TCPV6 << 16
    # OpenVZ only (bronson/linux-2.6.18.8-ovz-xen @ 9435a3ea include/linux/netdevice.h,
    # 2.6.18-ovz): NETIF_F_VENET = 1 << (NETIF_F_GSO_SHIFT - 1) marks OpenVZ's virtual
    # devices; its ip_forward skips skb_cow and ip_decrease_ttl for packets that came
    # in on one (story 4's "skip skb_cow" hack, routelab.ipv4.ip_forward)
    "VENET": 1 << 15,
}
#: NETIF_F_GEN_CSUM (NO_CSUM | HW_CSUM) and NETIF_F_ALL_CSUM (GEN_CSUM | IP_CSUM)
NETIF_F_GEN_CSUM = NETIF_F["NO_CSUM"] | NETIF_F["HW_CSUM"]
NETIF_F_ALL_CSUM = NETIF_F_GEN_CSUM | NETIF_F["IP_CSUM"]


def netdev_features(spec) -> frozenset:
    """A device's feature set from ``"SG,IP_CSUM,..."`` (names of
    :data:`NETIF_F`, without the ``NETIF_F_`` prefix, case and spaces
    ignored), ``"none"`` or ``""`` (no features), or an iterable of names.

    Raises
    ------
    KnobError
        A name that is not a 2.6.20 feature.
    """
    if isinstance(spec, str):
        names = [x.strip().upper() for x in spec.split(",")]
        names = [x for x in names if x]
        if names == ["NONE"]:
            names = []
    else:
        try:
            names = [str(x).strip().upper() for x in spec]
        except TypeError:
            raise KnobError("features", spec, "names from " + ", ".join(NETIF_F)
                            + " joined by commas, or 'none'") from None
    names = [x[len("NETIF_F_"):] if x.startswith("NETIF_F_") else x for x in names]
    bad = [x for x in names if x not in NETIF_F]
    if bad:
        raise KnobError("features", spec if isinstance(spec, str) else sorted(bad),
                        "names from " + ", ".join(NETIF_F) + " joined by commas, or 'none'")
    return frozenset(names)


def features_mask(features) -> int:
    """``dev->features`` as the kernel's bit mask (see :func:`netdev_features`)."""
    m = 0
    for name in netdev_features(features):
        m |= NETIF_F[name]
    return m


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
        ``NETIF_F_*`` feature flags (:data:`NETIF_F` names; may be given as
        ``"SG,IP_CSUM"`` or ``"none"``, see :func:`netdev_features`).  What
        ``dev_queue_xmit`` reads of them: the checksum bits
        (:func:`routelab.ipv4.ip_output.dev_queue_xmit_csum`).
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", netdev_features(self.features))

    @property
    def features_mask(self) -> int:
        """``dev->features`` as a bit mask."""
        return features_mask(self.features)


NICS: dict[str, NicProfile] = {p.name: p for p in [
    # features: drivers/net/e100/e100_main.c e100_found1 (2.4.24,
    # MaximeChretien/linux-history) sets SG, IP_CSUM and the VLAN offloads only on
    # chips with the IP checksum block (USE_IPCB: revision >= D102, 82550/82551),
    # none otherwise.  ASSUMED: story 1's card is an older 82557/8/9 -> none.
    NicProfile("e100", 100e6, False, 64, 64, 3 * 1024, 16, "none",
               "Intel EtherExpress Pro/100 with the 2.4 e100 driver: interrupt per "
               "packet, netif_rx. Ring sizes are the driver's defaults as we recall "
               "them (unverified); the 3 KB FIFO is an assumption. No features: a "
               "pre-82550 chip (ASSUMED)."),
    # features: drivers/net/e1000/e1000_main.c e1000_probe (2.6.0,
    # MaximeChretien/linux-history): SG, HW_CSUM and the VLAN offloads on 82543+,
    # TSO on 82544+ but 82547, HIGHDMA with 64-bit DMA.  ASSUMED: an 82544+ chip
    # (not 82547) with 64-bit DMA.  (2.6.20 adds LLTX, and TSO6 on newer parts.)
    NicProfile("e1000", 1e9, True, 256, 256, 48 * 1024, 64,
               "SG,HW_CSUM,HW_VLAN_TX,HW_VLAN_RX,HW_VLAN_FILTER,TSO,HIGHDMA",
               "Intel 8254x with the 2.6 e1000 driver: NAPI, weight 64 (e1000 5.2.20-k1, "
               "2.6.0), 256 RX descriptors, 48 KB RX packet buffer (assumed)."),
    # features: drivers/net/tg3.c tg3_init_one (2.6.20, sagsango/linux-2.6.20):
    # SG and IP_CSUM (HW_CSUM on 5755/5787) unless the chip's checksums are
    # broken, the VLAN offloads, TSO by default only on hardware-TSO chips,
    # HIGHDMA when the DMA mask allows.  ASSUMED: a hardware-TSO chip other than
    # 5755/5787, with 64-bit DMA.
    NicProfile("tg3", 1e9, True, 200, 512, 64 * 1024, 64,
               "SG,IP_CSUM,HW_VLAN_TX,HW_VLAN_RX,TSO,HIGHDMA",
               "Broadcom Tigon3 (Lezcano's 2007 Xeon box). Ring sizes assumed."),
    # features: ASSUMED none.  No copy of etun.c was found (sources.md, story
    # 4); the closest readable pair devices advertise no checksum offload and no
    # SG (OpenVZ veth, 2.6.18-ovz) or only LLTX (mainline veth, 2.6.24 era).
    NicProfile("etun", 0.0, False, 0, 0, 0, 64, "none",
               "etun pair device of 2.6.20-lxc8: no wire, no features by default "
               "(story 4; ASSUMED).", "pair"),
    # features: drivers/net/dummy.c (2.6.0, 2.6.20) sets none.
    NicProfile("dummy", 0.0, False, 0, 0, 0, 64, "none",
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


@dataclass(frozen=True, slots=True)
class Board:
    """What story 1's boards add to a :class:`CpuProfile` for the neighbour and
    route-cache walks and for the interrupt (issue 24, item 2).

    Only the boards listed in :data:`BOARDS` are re-costed this way; the other
    CPU profiles keep the one-line-per-entry charges of :mod:`routelab.costs`
    (not yet re-costed from a layout: their builds, line sizes and buses are
    not described).

    Attributes
    ----------
    line_bytes : int
        The kernel build's cache line (``L1_CACHE_BYTES``): the slab aligns
        ``struct neighbour`` to it (SLAB_HWCACHE_ALIGN) and a walk pays one
        memory access per distinct line it reads (:func:`routelab.costs.lines_read`).
    up_build : bool
        A uniprocessor kernel: ``rwlock_t`` and the per-entry ``write_lock``
        of the walks compile to nothing (include/linux/spinlock.h, 2.4.24).
    walk_line_ns : float
        Latency of one line of a walk, ns, when the walked slab memory is not
        cached by the board's L2 (the model's default: the CPU's DRAM
        latency).  ``l2_line_ns`` is the latency when it is.
    l2_line_ns : float
        One line from the board's L2 (the ``board_cache="l2"`` set-up).
    irq_io_s : float
        Port and register I/O of one receive interrupt: the slave 8259A's
        mask-and-ack and re-enable (arch/i386/kernel/i8259.c
        mask_and_ack_8259A, enable_8259A_irq: one inb and four outb) and the
        e100's uncached SCB reads (drivers/net/e100/e100_main.c e100intr,
        e100_disable_clear_intr, e100_rx_srv, e100_set_intr_mask: five
        readw), 2.4.24.  Charged with ``irq_rx`` (the board has no IO-APIC).
    source : str
    """

    line_bytes: int
    up_build: bool
    walk_line_ns: float
    l2_line_ns: float
    irq_io_s: float
    source: str


#: ASSUMED costs of the interrupt's I/O on a Socket-7 / Socket-A board: a
#: legacy (ISA-speed) port access ~0.7 us (range 0.5-1), an uncached PCI
#: MMIO read ~0.5 us (range 0.3-1: 10-30 cycles of a 33 MHz bus plus the
#: chipset); posted MMIO writes are not charged.  5 port accesses + 5 reads.
_IRQ_IO_S = 5 * 0.7e-6 + 5 * 0.5e-6

BOARDS: dict[str, Board] = {
    # K6: 32-byte L1 lines (AMD K6 data sheet; a CONFIG_MK6 build has
    # L1_CACHE_SHIFT 5).  L2: 512 KB pipeline-burst SRAM on the board at 66 MHz,
    # ASSUMED 75 ns per line on a hit (range 60-90).  Whether it caches the slab
    # depends on the chipset: Intel 430FX/VX/TX cache only the first 64 MB
    # (VIA VP3/MVP3 with 512 KB: 128 MB), and memory is handed out from the top
    # (Shuttle's table, archive.shuttle.eu/2004/de/mem64mb.htm): at 128 MB on
    # a 430TX board the slab is uncached.  Default: uncached (the DRAM latency
    # the model always charged), the band takes both.  UP build: ASSUMED (a
    # one-CPU router kernel, a Debian-style k6 flavour).
    "k6-200": Board(32, True, 180.0, 75.0, _IRQ_IO_S,
                    "Socket-7 board, K6 build (L1_CACHE_BYTES 32), UP kernel; 8259A PIC"),
    # Duron (K7 core): 64-byte lines (CONFIG_MK7: L1_CACHE_SHIFT 6); 64 KB
    # on-die L2 + 128 KB L1, exclusive: a table of a few thousand neighbours
    # (1-2 lines x 64 B each) does not stay cached, so lines come from DRAM
    # (its profile's 130 ns).  UP build, 8259A (a one-CPU Socket-A board
    # without IO-APIC): ASSUMED, as for the K6.
    "duron-900": Board(64, True, 130.0, 130.0, _IRQ_IO_S,
                       "Socket-A board, K7 build (L1_CACHE_BYTES 64), UP kernel; 8259A PIC"),
}

BOARD_CACHE = ("dram", "l2")
