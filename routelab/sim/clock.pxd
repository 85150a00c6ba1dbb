# C types for clock.py when it is compiled (see setup.py, routelab/accel.py):
# the run reads Clock.nt for every packet, so it is a C double.
cimport cython

cdef double INF


@cython.final
cdef class Timer:
    cdef public Clock clock
    cdef public str name
    cdef public object fire
    cdef public long cpu
    cdef public bint raw
    cdef public long seq
    cdef public double at
    cdef public long long gen, fired

    cpdef void mod(self, double at) except *
    cpdef void stop(self)
    cpdef bint pending(self)


@cython.final
cdef class Clock:
    cdef public double nt
    cdef public object runner
    cdef public list timers
    cdef list _heap

    cpdef void _arm(self, Timer timer, double at) except *
    cpdef Timer _top(self)
    cpdef double next_due(self)
    cpdef long run_due(self, double t) except -1
