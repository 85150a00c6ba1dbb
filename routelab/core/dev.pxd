# C types for dev.py when it is compiled (see setup.py, routelab/accel.py):
# devices and softnet data are C classes the per-packet stages call directly.
cimport cython
from routelab.core.dst cimport DstEntry, dst_release
from routelab.sim.columns cimport Packets
from routelab.sim.schedule cimport Schedule
from routelab.sim.ledger cimport Ledger
from routelab.sim.queues cimport Ring, TimeQueue

cdef double NAN
cdef long _O_FORWARDED, _O_QDISC


@cython.final
cdef class SoftnetData:
    cdef public long cpu, backlog_max
    cdef public TimeQueue backlog
    cdef public bint throttle
    cdef public long long dropped, throttled, time_squeeze

    cpdef bint netif_rx(self, double t) except -1


@cython.final
cdef class TxQueue(Ring):
    cdef public list dst, owner, tag
    cdef public Py_ssize_t owned

    cpdef int push(self, double dep, object e, object owner, long long tag) except -1
    cpdef Py_ssize_t retire(self, double now) except -1


@cython.final
cdef class NetDevice:
    cdef public long index, cpu, ring, weight, txcap, full_slots, host_mask
    cdef public str name
    cdef public bint napi, pair
    cdef public SoftnetData softnet
    cdef public TimeQueue rxq
    cdef public TxQueue txq
    cdef public double full_until, link_free
    cdef public long long rnbc, qdisc_drops, tx_packets
    cdef public object host, txc_timer
    cdef public Ledger ledger

    cpdef long nic_rx(self, double t, long fifo) except -2
    cpdef double dev_queue_xmit(self, double now, double wire, object e, object owner,
                                long long tag) except? -1.0


cpdef int flush_tx(list devices, double now) except -1
cpdef double dev_xmit_forwarded(NetDevice od, Ledger lg, Schedule sch, Packets pk,
                                Py_ssize_t j, double now, object e) except? -1.0
