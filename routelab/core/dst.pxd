# C types for dst.py when it is compiled (see setup.py, routelab/accel.py).
# An "augmenting" .pxd: dst.py stays the only source of the code; this file
# only says which of its attributes are C numbers, so that the per-packet
# loop reads and writes them without a dictionary lookup.

cdef class DstEntry:
    cdef public unsigned long long key      # daddr << 32 | saddr
    cdef public long ik
    cdef public long refcnt
    cdef public double lastuse
    cdef public long long use
    cdef public double created
    cdef public double expires
    cdef public bint valuable
    cdef public bint fast_clean
    cdef public bint output_route
    cdef public int rtype
    cdef public int oif
    cdef public object gw
    cdef public int obsolete
    cdef public int state
    cdef public long bucket
    cdef public object rate_tokens
    cdef public double rate_last
    cdef public long long uid
