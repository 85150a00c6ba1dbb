"""Cycle costs of the kernel functions the model charges.

Every packet that passes a kernel function charges that function's cycles to
the CPU that runs it.  Three kinds of cost:

* ``PATH`` -- fixed instruction cost of a function, in cycles of the
  *reference core* (AMD Opteron, see below).  On another CPU it is divided by
  the profile's ``ipc`` factor (:mod:`routelab.hardware`).
* ``MISSES`` -- cache lines the function touches cold; each costs the CPU's
  memory latency.  This is what makes walking big hash tables expensive on
  old machines.
* per-byte work (copying, checksumming) -- charged from the CPU profile's
  bandwidths, so it grows with packet size.

Sources and assumptions
-----------------------
The only whole-path anchor in the brief is Olsson's Feb 2005 record: 2.1 Mpps
over 4 GigE on a dual 2.4 GHz Opteron with route-cache hits, i.e. about
2,300 cycles per forwarded packet (kernel.md s9, the brief's arithmetic).  The
fast-path constants below are split so that a cache-hit forward with NAPI
receive sums to ~2,300 reference cycles.  *How* that total divides between
functions is our assumption (guided by typical 2.6 profiles: driver RX/TX and
skb alloc/free dominate, ip_rcv/ip_forward are short).

The slow path, GC and ICMP constants have no measured source at all
(kernel.md s9, "Not found"): they are assumptions, each stated on its line.
Calibration against the stories only adjusts constants marked ``ASSUMED``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import BOARD_CACHE, BOARDS, CpuProfile

__all__ = ["PATH", "MISSES", "COMPOSITION", "CostTable", "cost_table", "composed",
           "wire_bytes", "STRUCT_OFFSETS", "WALK_FIELDS", "UP_PATH", "lines_read"]

# Reference-core cycles per call.  Comments give the source or the assumption.
PATH: dict[str, float] = {
    # --- receive -------------------------------------------------------------
    "irq_rx": 900.0,             # ASSUMED: hard IRQ entry/exit + e100 RX handler + skb alloc (2.4 non-NAPI)
    "napi_poll_rx": 500.0,       # ASSUMED: per-packet share of e1000 poll: descriptor, skb alloc, refill
    "netif_rx": 120.0,           # ASSUMED: enqueue on the per-CPU backlog (2.4 non-NAPI path)
    "netif_receive_skb": 150.0,  # ASSUMED: protocol demux to ip_rcv
    "ip_rcv": 180.0,             # ASSUMED: header sanity + ip_fast_csum over 20 bytes
    # --- route lookup --------------------------------------------------------
    "rt_hash": 40.0,             # ASSUMED: jhash_3words (~30 ALU ops)
    "ip_route_input": 90.0,      # ASSUMED: cache-hit bookkeeping: lastuse, refcount, skb->dst
    "ip_route_input_slow": 900.0,  # ASSUMED: martian checks, fib_validate_source, rt_set_nexthop
    "fib_lookup": 250.0,         # ASSUMED: fn_hash lookup in the main table (a handful of zones)
    # --- 3.6: no route cache, a fib_trie walk per packet (issue 26) ------------
    # DaveM's SPARC-T3 figures for 3.6 (kernel.md s8): an input route lookup
    # ~1169 cycles, ~1468 with rp_filter.  ASSUMED split, the T3 taken at half
    # the reference core's work per clock (an in-order, multithreaded core): the
    # ~300-cycle rp_filter step is one more fib_lookup (two small tables), so a
    # small table costs ~75 reference cycles to search (40 + ~3 nodes x 10), and
    # the rest of ~585 reference cycles is the route code around the lookups.
    "ip_route_input_noref": 440.0,  # ASSUMED: martian checks, in_dev, fib_validate_source's fast return, rt_cache_valid, skb_dst_set_noref (nexthop's dst, no allocation)
    "fib_table_lookup": 40.0,     # ASSUMED: fib_table_lookup's set-up and check_leaf of the leaf that matched, per table searched
    "fib_trie_node": 10.0,        # ASSUMED: one tnode indexed or leaf checked (extract bits, load child); its cache misses are priced from the trie's size
    "fib_rule": 60.0,            # ASSUMED: per policy rule examined in fib_rules.c
    "dst_alloc": 450.0,          # ASSUMED: kmem_cache_alloc(GFP_ATOMIC) + zeroing ~200 bytes
    "rt_intern_hash": 150.0,     # ASSUMED: insert at head + arp_bind_neighbour (neighbour hit)
    "rt_garbage_collect": 200.0,  # ASSUMED: entry/exit, goal arithmetic
    "gc_bucket": 25.0,           # ASSUMED: per bucket visited by the GC (lock, chain head)
    "gc_entry": 30.0,            # ASSUMED: per entry examined by rt_may_expire (+1 miss)
    "rt_free": 60.0,             # ASSUMED: unlink + hand to RCU / dst_free
    "dst_destroy": 350.0,        # ASSUMED: neighbour release + kmem_cache_free
    "dst_gc_entry": 40.0,        # ASSUMED: dst_run_gc per garbage-list entry examined (+1 miss)
    "dst_run_gc": 300.0,         # ASSUMED: timer entry/exit and re-arm
    "rt_check_expire": 300.0,    # ASSUMED: timer entry/exit
    "rcu_callback": 40.0,        # ASSUMED: per callback in rcu_do_batch (dst_rcu_free)
    "rcu_tasklet": 200.0,        # ASSUMED: tasklet entry/exit
    # --- forward and output --------------------------------------------------
    "ip_forward": 150.0,         # ASSUMED: TTL test, policy checks
    "skb_cow": 400.0,            # ASSUMED: pskb_expand_head fixed part (kmalloc + bookkeeping); bytes extra
    "ip_decrease_ttl": 10.0,     # incremental checksum update: a few ALU ops (kernel.md s6)
    "ip_forward_finish": 60.0,   # ASSUMED
    "ip_output": 200.0,          # ASSUMED: ip_finish_output + neighbour output (hh cache copy)
    "ip_fragment": 600.0,        # ASSUMED: per fragment: alloc + header build (payload copy extra)
    "dev_queue_xmit": 250.0,     # ASSUMED: pfifo_fast enqueue/dequeue + qdisc_restart
    "hard_start_xmit": 350.0,    # ASSUMED: driver TX: descriptor setup, doorbell
    "tx_complete": 300.0,        # ASSUMED: TX clean + kfree_skb + dst_release (NAPI amortised)
    "tx_irq": 500.0,             # ASSUMED: extra per-packet TX-done interrupt on 2.4 non-NAPI drivers
    "skb_checksum_help": 100.0,  # ASSUMED: skb_checksum_help's fixed part: offset checks, csum_fold, the 16-bit store; the sum is per byte (csum_s_per_byte)
    "kfree_skb": 150.0,          # ASSUMED: freeing a dropped skb
    "ip_local_deliver": 250.0,   # ASSUMED
    "icmp_rcv": 200.0,           # ASSUMED: echo request handling
    "icmp_send": 1500.0,         # ASSUMED: build error/reply, output route lookup, rate limit
    "softirq_entry": 300.0,      # ASSUMED: one net_rx_action/do_softirq invocation (amortised over a batch)
    # --- neighbour cache and ARP (net/core/neighbour.c, net/ipv4/arp.c, 2.4.24) ---
    "neigh_lookup": 50.0,        # ASSUMED: arp_hash (3 shift/xor) + read_lock_bh/unlock + neigh_hold; chain steps extra
    "neigh_chain_step": 10.0,    # ASSUMED: one entry examined in a neighbour chain walk: dev + 4-byte key compare, next
    "neigh_alloc": 400.0,        # ASSUMED: kmem_cache_alloc(SLAB_ATOMIC) + memset of the ~150-byte entry, timer/queue init (cf. dst_alloc)
    "arp_constructor": 300.0,    # ASSUMED: in_dev_get/put + inet_addr_type (a local-table FIB lookup, cf. fib_lookup) + ops choice
    "neigh_create": 120.0,       # ASSUMED: key copy, dev_hold, table write lock, head insert; second chain walk extra
    "neigh_forced_gc": 100.0,    # ASSUMED: entry/exit, last_flush; the walk is neigh_gc_bucket + neigh_gc_entry
    "neigh_gc_bucket": 25.0,     # ASSUMED: write_lock_bh/unlock of the table per bucket and the chain head (cf. gc_bucket)
    "neigh_gc_entry": 40.0,      # ASSUMED: per entry visited by a neighbour GC walk: n->lock write lock/unlock (2 locked ops) + tests
    "neigh_destroy": 300.0,      # ASSUMED: hh release, skb_queue_purge, dev_put, kmem_cache_free (cf. dst_destroy)
    "neigh_periodic_timer": 300.0,  # ASSUMED: timer entry/exit, reachable_time re-draw test, mod_timer (cf. rt_check_expire)
    "neigh_timer_handler": 150.0,  # ASSUMED: timer dispatch, entry write lock, NUD state tests, add_timer
    "neigh_event_send": 100.0,   # ASSUMED: __neigh_event_send: entry lock, state tests, arp_queue append/unlink
    "neigh_update": 200.0,       # ASSUMED: entry lock, lladdr compare/copy, neigh_sync, hh update, del_timer
    "arp_solicit": 500.0,        # ASSUMED: source choice (inet_addr_type or inet_select_addr, ~a FIB lookup) + arp_send's alloc_skb and header fill; the frame's transmit is the caller's
    "arp_rcv": 400.0,            # ASSUMED: arp_rcv + arp_process up to the table update: header checks, in_dev_get, kfree_skb (driver RX not included)
    "arp_bind_neighbour": 30.0,  # ASSUMED: the call, next-hop choice, dst->neighbour store; lookup/create extra
    # --- a TCP socket on the machine (story 4: netperf's sender, in the host or a
    # container; net/ipv4/tcp.c, tcp_output.c, tcp_input.c, tcp_ipv4.c, 2.6.20).
    # No profile of these was found: all ASSUMED, sized against the forward path's
    # own assumed rows above (a socket-layer function is a few hundred cycles)
    "sys_sendmsg": 1200.0,       # ASSUMED: system call entry/exit, sockfd_lookup, sock_sendmsg, lock_sock/release_sock, per send() call
    "tcp_sendmsg_skb": 350.0,    # ASSUMED: per skb: sk_stream_alloc_pskb (alloc_skb_fclone), skb_entail (skb_header_release), the per-skb part of tcp_sendmsg's loop; the bytes are per byte
    "skb_clone": 150.0,          # ASSUMED: kmem_cache_alloc of the fclone slot + copying ~40 fields of the head
    "tcp_transmit_skb": 400.0,   # ASSUMED: TCP header + timestamp option, tcp_v4_send_check (pseudo-header only with CHECKSUM_PARTIAL), tcp_event_data_sent
    "ip_queue_xmit": 250.0,      # ASSUMED: the socket's cached route, IP header, ip_send_check, ip_select_ident
    "pair_xmit": 250.0,          # ASSUMED: etun/veth hard_start_xmit: skb_orphan, dst drop, eth_type_trans, stats, then netif_rx (charged apart)
    "tcp_v4_rcv": 450.0,         # ASSUMED: socket lookup (established hash), tcp_rcv_established header prediction
    "tcp_ack": 350.0,            # ASSUMED: tcp_ack: snd_una, RTT sample, window update, cwnd step, tcp_data_snd_check
    "tcp_clean_rtx_skb": 150.0,  # ASSUMED: per acked skb: unlink from the write queue, sk_stream_free_skb (kfree_skb of the original)
}

# Cold cache lines touched per call (each costs CpuProfile.mem_latency_ns).
MISSES: dict[str, float] = {
    "irq_rx": 2.0,               # ASSUMED: descriptor + packet header (DMA'd, not in cache)
    "napi_poll_rx": 2.0,         # ASSUMED: same
    "ip_route_input": 1.0,       # ASSUMED: the bucket head
    "ip_route_input_slow": 3.0,  # ASSUMED: fib_info, net_device, in_device
    "fib_lookup": 2.0,           # ASSUMED: zone hash + fib_node
    "dst_alloc": 4.0,            # ASSUMED: a fresh ~200-byte object
    "rt_intern_hash": 1.0,       # ASSUMED: the bucket
    "dst_destroy": 1.0,          # ASSUMED
    "gc_bucket": 1.0,            # the bucket head
    "gc_entry": 1.0,             # the entry (each is its own slab object)
    "dst_gc_entry": 1.0,         # the entry
    "chain_step": 1.0,           # one entry stepped over in a chain walk
    "rcu_callback": 1.0,         # the entry being freed
    "neigh_chain_step": 1.0,     # each struct neighbour is its own slab object
    "neigh_gc_entry": 1.0,       # ASSUMED cold: the entry; 1025 entries x ~150 B = ~150 KB vs the K6's 32 KB L1 data cache
    "neigh_alloc": 3.0,          # ASSUMED: a fresh ~150-byte object, five 32-byte K6 lines, some warm in the slab
    "neigh_timer_handler": 1.0,  # ASSUMED: the entry is cold when its timer fires (>= 1 s after last touch)
    "neigh_update": 1.0,         # ASSUMED: the entry, cold when the ARP reply arrives
    "arp_rcv": 1.0,              # ASSUMED: the received ARP frame (DMA'd, not in cache)
}

# --- walks re-costed from the structures' layout (issue 24, item 2) ----------
# Byte offsets of the fields a walk reads, i386, gcc 2.95, 2.4.24 (worked out
# from the declarations, 4-byte pointers and longs; with gcc 2.95 a UP rwlock_t
# or spinlock_t still takes 4 bytes, with gcc 3 none, which moves refcnt to 48
# and primary_key to 92 -- the same lines on a 32-byte build):
# * struct neighbour (include/net/neighbour.h): next 0, dev 12, nud_state 29
#   (after used, confirmed, updated, flags), refcnt 52 (after probes, lock,
#   ha[8], hh), primary_key 100 (after output, arp_queue, timer, ops).  The
#   slab object is (sizeof + 4 + 15) & ~15 = 112 bytes, SLAB_HWCACHE_ALIGN
#   (net/core/neighbour.c neigh_table_init, net/ipv4/arp.c arp_tbl.entry_size),
#   so it starts on a line boundary.
# * struct rtable (include/net/route.h, include/net/dst.h): u.dst.next /
#   u.rt_next 0, __refcnt 4, lastuse 24, expires 28, rt_flags 100 (the
#   dst_entry is 100 bytes without CONFIG_NET_CLS_ROUTE), key.dst 124,
#   key.src 128, key.tos 144 (with CONFIG_IP_ROUTE_FWMARK).
# * 2.0.40's own structures, walked by the 2.0 profile (routelab.ipv4.route20):
#   struct rtable (include/net/route.h): rt_next 0, rt_dst 4, rt_refcnt 16,
#   rt_lastuse 28; struct arp_table (net/ipv4/arp.c): next 0, ip 16 (dev, at
#   32, is read only once ip matched).
STRUCT_OFFSETS: dict[str, dict[str, int]] = {
    "neighbour": {"next": 0, "dev": 12, "nud_state": 29, "refcnt": 52, "primary_key": 100},
    "rtable": {"next": 0, "refcnt": 4, "lastuse": 24, "expires": 28, "rt_flags": 100,
               "key.dst": 124, "key.src": 128, "key.tos": 144},
    "rtable_20": {"next": 0, "rt_dst": 4, "rt_refcnt": 16, "rt_lastuse": 28},
    "arp_table_20": {"next": 0, "ip": 16},
}

# The fields one step of each walk reads on the usual entry (the test that
# decides it, then the link to the next):
# * neigh_forced_gc (net/core/neighbour.c, 2.4.24): refcnt first -- a
#   neighbour held by a route fails there -- then n->next;
# * neigh_lookup: n->dev, then memcmp of primary_key (the router's table is
#   almost all eth0's), then n->next;
# * the route cache's chain walk (ip_route_input, net/ipv4/route.c): key.dst
#   first -- a chain's other entries are for other destinations -- then
#   u.rt_next;
# * rt_garbage_collect's rt_may_expire / rt_fast_clean / rt_valuable: refcnt,
#   lastuse, expires, rt_flags, then the next pointer.
WALK_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "neigh_gc_entry": ("neighbour", ("refcnt", "next")),
    "neigh_chain_step": ("neighbour", ("dev", "primary_key", "next")),
    "chain_step": ("rtable", ("key.dst", "next")),
    "gc_entry": ("rtable", ("refcnt", "lastuse", "expires", "rt_flags", "next")),
    # 2.0.40 (ip_rt_route's chain walk, rt_garbage_collect_1, arp_lookup):
    # priced with the 2.4 walks' cycles, from 2.0's own layout
    "chain_step_20": ("rtable_20", ("rt_dst", "next")),
    "gc_entry_20": ("rtable_20", ("rt_refcnt", "rt_lastuse", "next")),
    "neigh_chain_step_20": ("arp_table_20", ("ip", "next")),
}

#: the 2.4 walk whose cycles each 2.0 walk borrows
_WALK_CYCLES_OF = {"chain_step_20": "chain_step", "gc_entry_20": "gc_entry",
                   "neigh_chain_step_20": "neigh_chain_step"}

# Reference cycles of a walk step on a uniprocessor build, where
# write_lock(&n->lock) / write_unlock compile away (include/linux/spinlock.h,
# 2.4.24 UP): ASSUMED ~15 instructions -- load refcnt, compare, the NUD test
# when it is 1, load next, loop.  (PATH's 40 charges the two locked operations
# of an SMP build.)  The other walks take no per-entry lock and keep PATH.
UP_PATH: dict[str, float] = {"neigh_gc_entry": 15.0}


def lines_read(walk: str, line_bytes: int) -> int:
    """Distinct cache lines one step of ``walk`` (a :data:`WALK_FIELDS` name)
    reads on a build with ``line_bytes`` lines: 2 for every walk on the K6
    (32-byte lines); on 64-byte lines 1 for the forced GC, 2 for the others."""
    struct, fields = WALK_FIELDS[walk]
    off = STRUCT_OFFSETS[struct]
    return len({off[f] // line_bytes for f in fields})


# Which kernel functions make up each fixed part of a packet's service, in the
# order they run -- and are added up, in that order, by composed().  Every
# hand-priced sum of the model is a row here: the array stages price packets
# with them (routelab.prepare, routelab.ipv4.ip_output), the run's stages
# price ICMP and ARP frames with them (routelab.ipv4.icmp, routelab.ipv4.arp,
# routelab.router), and the run's profile attributes time to the same rows
# (routelab.result.profile).
COMPOSITION: dict[str, tuple[str, ...]] = {
    # NIC receive to ip_rcv: a NAPI poll, or the hard IRQ and netif_rx (2.4 e100)
    "receive_napi": ("napi_poll_rx", "netif_receive_skb", "ip_rcv"),
    "receive_irq": ("irq_rx", "netif_rx", "netif_receive_skb", "ip_rcv"),
    # one end of a pair device: no interrupt, the sender's xmit calls netif_rx
    "receive_pair": ("netif_rx", "netif_receive_skb", "ip_rcv"),
    # a frame netif_rx refuses: the hard IRQ still ran and the skb is freed
    "rx_drop_irq": ("irq_rx", "netif_rx", "kfree_skb"),
    # a route-cache hit (the chain walk is charged per entry stepped over)
    "route_hit": ("rt_hash", "ip_route_input"),
    # an ICMP message the router originates, from icmp_send (with its output
    # route lookup and rate-limit check) to the driver, and its TX completion
    # (the driver's TX clean: kfree_skb, dst_release), as a forwarded frame has
    "icmp_send": ("icmp_send", "ip_output", "dev_queue_xmit", "hard_start_xmit",
                  "tx_complete"),
    # an ARP request frame the router sends (arp_send -> dev_queue_xmit), and
    # its TX completion (the driver's TX clean frees it: kfree_skb)
    "arp_xmit": ("dev_queue_xmit", "hard_start_xmit", "tx_complete"),
    # arp_process's ip_route_input(skb, tip, sip, 0, dev) for an ARP request
    # from a host (2.4.24 net/ipv4/arp.c): the cache misses (nothing is cached
    # for an ARP target on the device it was asked on: e_inval), so the slow
    # path runs each time -- fib_lookup, then fib_validate_source's reverse
    # fib_lookup, each through the policy rules (ASSUMED: two rules examined
    # before the one that matches, as on story 1's router)
    "arp_route_input": ("rt_hash", "ip_route_input", "ip_route_input_slow", "fib_rule",
                        "fib_rule", "fib_lookup", "fib_rule", "fib_rule", "fib_lookup"),
    # each frame (fragment) of a forwarded packet, after ip_output: the qdisc,
    # the driver and the TX completion (plus a TX-done IRQ on non-NAPI drivers)
    "xmit_per_frag": ("dev_queue_xmit", "hard_start_xmit", "tx_complete"),
    # a packet for the router itself: delivered, answered (echo), sent, completed
    "local": ("ip_local_deliver", "icmp_rcv", "icmp_send", "ip_output", "dev_queue_xmit",
              "hard_start_xmit", "tx_complete"),
    # a TCP socket sending one segment (after tcp_sendmsg built the skb): the
    # clone, the headers, IP output (the device's part is the caller's)
    "tcp_xmit": ("skb_clone", "tcp_transmit_skb", "ip_queue_xmit"),
    # a TCP socket receiving a pure ACK from ip_local_deliver on
    "tcp_rcv_ack": ("tcp_v4_rcv", "tcp_ack"),
    # a packet for a local socket (story 4's netperf on the host: B's ACKs):
    # handed to the protocol; the socket's receive work is its host's charge
    "local_sock": ("ip_local_deliver",),
    # dev_queue_xmit finishing a CHECKSUM_PARTIAL packet's checksum in software
    # because the output device has no checksum feature for it: the fixed part;
    # csum_partial over the bytes from the transport header to the end is extra,
    # per byte (CostTable.csum_s_per_byte; routelab.ipv4.ip_output.skb_checksum_help)
    "csum_help": ("skb_checksum_help",),
}


def composed(fn: dict, part: str) -> float:
    """Seconds of one :data:`COMPOSITION` part: its functions' costs from
    ``fn`` (``CostTable.fn``), added in order."""
    t = 0.0
    first = True
    for name in COMPOSITION[part]:
        if first:
            t = fn[name]
            first = False
        else:
            t += fn[name]
    return t


ETH_OVERHEAD = 38  # preamble 8 + header 14 + FCS 4 + inter-frame gap 12 bytes (IEEE 802.3)
ETH_MIN_FRAME = 84  # 64-byte minimum frame + preamble + IFG


def wire_bytes(ip_len):
    """Bytes an IP packet occupies on Ethernet, framing included (works on arrays)."""
    import numpy as np

    return np.maximum(np.asarray(ip_len) + ETH_OVERHEAD, ETH_MIN_FRAME)


@dataclass(slots=True)
class CostTable:
    """Costs resolved for one CPU profile, in *seconds*.

    ``fn[name]`` is the time one call of kernel function ``name`` takes
    (fixed path plus its cold misses); ``copy_s_per_byte`` and
    ``csum_s_per_byte`` price per-byte work; ``miss_s`` one cache miss.

    ``csum_s_per_byte`` is ``1 / CpuProfile.csum_bw``: the Internet checksum
    (csum_partial) alone, no copy.  Its only measured anchor is Vlasenko's
    Celeron 1200 (LKML, Oct 2002: ~704 cycles per KB, data in cache); the
    other CPUs' ``csum_bw`` are assumptions scaled from it
    (:mod:`routelab.hardware`).  ``copy_s_per_byte`` is ``1 / copy_bw``.
    """

    cpu: CpuProfile
    fn: dict
    miss_s: float
    copy_s_per_byte: float
    csum_s_per_byte: float

    def cycles(self, seconds: float) -> float:
        """Convert seconds on this CPU back to cycles (for profiles)."""
        return seconds * self.cpu.hz


def cost_table(cpu: CpuProfile, overrides: dict | None = None) -> CostTable:
    """Resolve :data:`PATH` and :data:`MISSES` to seconds on ``cpu``.

    On the boards of :data:`routelab.hardware.BOARDS` (story 1's K6 and
    Duron) the walks of :data:`WALK_FIELDS` are priced from the layout
    instead: their cycles (:data:`UP_PATH` on a UP build) plus one line
    latency per line read (:func:`lines_read`), and ``irq_rx`` adds the
    board's interrupt I/O.

    Parameters
    ----------
    cpu : CpuProfile
    overrides : dict, optional
        ``{function: reference_cycles}`` replacing entries of :data:`PATH`
        (used by tests and by calibration studies).  It may also hold
        ``"board_cache"``: ``"dram"`` (default) or ``"l2"``, whether the
        board's L2 caches the walked slab memory (story 1's set-up).
    """
    path = dict(PATH)
    overrides = dict(overrides) if overrides else {}
    board_cache = overrides.pop("board_cache", "dram")
    if board_cache not in BOARD_CACHE:
        from .errors import KnobError
        raise KnobError("board_cache", board_cache, "one of " + ", ".join(BOARD_CACHE))
    if overrides:
        unknown = set(overrides) - set(path)
        if unknown:
            from .errors import KnobError
            raise KnobError("cost_overrides", sorted(unknown), "names from routelab.costs.PATH")
        path.update(overrides)
    miss_s = cpu.mem_latency_ns * 1e-9
    fn = {name: cyc / cpu.ipc / cpu.hz + MISSES.get(name, 0.0) * miss_s
          for name, cyc in path.items()}
    fn["chain_step"] = 8.0 / cpu.ipc / cpu.hz + MISSES["chain_step"] * miss_s  # ASSUMED 8 cycles compare
    for walk, base in _WALK_CYCLES_OF.items():
        fn[walk] = fn[base]          # (other CPUs: the 2.4 walks' one-line charges)
    board = BOARDS.get(cpu.name)
    if board is not None:
        # story 1's boards: the walks from the layout, the build, the board's memory
        line_s = (board.l2_line_ns if board_cache == "l2" else board.walk_line_ns) * 1e-9
        cyc = dict(path, chain_step=8.0)
        for walk in WALK_FIELDS:
            name = _WALK_CYCLES_OF.get(walk, walk)
            c = UP_PATH.get(name, cyc[name]) if board.up_build else cyc[name]
            if name in overrides:
                c = cyc[name]
            fn[walk] = c / cpu.ipc / cpu.hz + lines_read(walk, board.line_bytes) * line_s
        fn["irq_rx"] += board.irq_io_s
    return CostTable(cpu, fn, miss_s, 1.0 / cpu.copy_bw, 1.0 / cpu.csum_bw)
