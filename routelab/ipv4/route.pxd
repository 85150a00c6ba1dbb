# C types for route.py when it is compiled (see setup.py, routelab/accel.py):
# the cache entries its chain walks and GC passes touch are C structs.
from routelab.core.dst cimport DstEntry
