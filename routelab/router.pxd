# C types for router.py when it is compiled (see setup.py, routelab/accel.py):
# the dispatcher calls the stage objects' C methods directly.
from routelab.core.dev cimport NetDevice, SoftnetData, dev_xmit_forwarded
from routelab.core.dst cimport DstEntry, dst_release
from routelab.core.softirq cimport Cpu, TimerTick
from routelab.ipv4.icmp cimport Icmp
from routelab.ipv4.ip_input cimport ip_local_deliver
from routelab.ipv4.route cimport RouteCache, _rl_prefetch, ip_error, ip_rt_send_redirect
from routelab.sim.clock cimport Clock, Timer
from routelab.sim.columns cimport Packets
from routelab.sim.ledger cimport Ledger
from routelab.sim.schedule cimport Schedule


cdef inline void _prefetch_columns(Packets pk, Py_ssize_t jp) noexcept:
    # A hint only (no result depends on it): the cache lines of packet jp's
    # hot columns, a dozen streams read side by side.
    _rl_prefetch(&pk.t[jp])
    _rl_prefetch(&pk.dev[jp])
    _rl_prefetch(&pk.key[jp])
    _rl_prefetch(&pk.ik[jp])
    _rl_prefetch(&pk.h[jp])
    _rl_prefetch(&pk.cls[jp])
    _rl_prefetch(&pk.cost[jp])
    _rl_prefetch(&pk.oif[jp])
    _rl_prefetch(&pk.wire[jp])
    _rl_prefetch(&pk.fifo[jp])
    _rl_prefetch(&pk.t_start[jp])
    _rl_prefetch(&pk.t_depart[jp])


# Every module-level name the dispatcher (and the functions it calls per packet)
# reads is declared here: a C constant, or a C global holding the object, so the
# compiled loop never looks a name up in the module's dict
# (tests/test_router_pxd.py checks).
cdef Py_ssize_t _COL_AHEAD
cdef double INF
cdef long K_FWD, K_HDR, K_MARTIAN, K_TTL, K_FRAGNEED, K_LOCAL, K_NOROUTE, K_REDIR, K_ARP
cdef long C_REFUSED, O_FORWARDED, O_TTL, O_FRAG_NEEDED, O_NO_ROUTE, O_MARTIAN, O_HDR
cdef long O_QDISC, O_BACKLOG, O_MISSED, T_TIME_EXCEEDED, T_DEST_UNREACH, NOT_DROPPED
cdef long O_HELD, O_NEIGH_DROP, N_QUEUED, N_DROP
cdef object math, bisect_right, Accumulator, TraceWindows, Counters

cdef int _not_forwarded(object run, Ledger lg, Icmp icmp, Packets pk, Py_ssize_t j, long cls,
                        long d, double fin, DstEntry e) except -1
cdef bint progress_due(object progress, long wno, long nwin, long every) except -1
