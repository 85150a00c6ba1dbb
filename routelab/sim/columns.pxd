# C types for columns.py when it is compiled (see setup.py, routelab/accel.py):
# the stages read packet columns through these typed views.
cimport cython


@cython.final
cdef class Packets:
    cdef public Py_ssize_t n0, cap
    cdef public bytearray outcome
    cdef public dict cols, specs
    cdef long _initial
    cdef tuple _inputs, _copies, _fills
    # the typed views, one per column of core/skbuff.py COLUMNS with a type code
    # (tests/core/test_columns_registry.py checks that the two agree)
    cdef public double[:] t, cost, wire, iwire, path_cost, vfib, t_start, t_depart
    cdef public long long[:] dev, ik, h, cls, oif, nfrag, fifo
    cdef public long long[:] rtype, gw, nrules, martian, saddr, kind, tag, proto
    cdef public unsigned long long[:] key
