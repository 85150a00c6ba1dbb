# C types for icmp.py when it is compiled (see setup.py, routelab/accel.py):
# the router's ICMP output is a C class the per-packet stages call directly.
cimport cython

cdef long _ECHOREPLY, _DEST_UNREACH, _REDIRECT, _TIME_EXCEEDED
cdef double _NAN


@cython.final
cdef class Icmp:
    cdef public list devices
    cdef public dict counters, xrlim, errlim, redir
    cdef public long long limited, host_unreach
    cdef public double send_cost
    cdef public set out_keys
    cdef public list out_hit, out_slow

    cpdef int output_route(self, long typ, long dev, object saddr) except -1

    cpdef bint xrlim_allow(self, object saddr, double now) except -1
    cpdef bint ip_error_allow(self, object key, double now) except -1
    cpdef double icmp_send(self, long typ, long dev, double now, double wire, object saddr,
                           bint limited=*) except? -1.0
