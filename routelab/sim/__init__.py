"""The engine: the clock and its timers, the ledger every stage writes into,
packet columns and bookkeeping queues.

Nothing here knows about packets' protocols or the kernel, and nothing here
imports the model (``tests/test_layering.py`` checks): ``routelab.core`` and
``routelab.ipv4`` build the model on these pieces (see ``docs/design.md``).
"""
