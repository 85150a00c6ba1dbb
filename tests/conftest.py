"""Shared test doubles, and the scheduling of a parallel run (pytest-xdist).

* A fake clock (the routelab.sim.clock API) and a fake engine sink, used by
  tests/core/test_neighbour.py and tests/ipv4/test_arp.py through the
  ``fake_clock`` and ``fake_sink`` fixtures.
* The scheduling of ``-n N --dist loadgroup`` (scripts/test.sh):
  :func:`scheduling_unit` keeps the cells of one notebook's nbval run on one
  worker, in order (they share one kernel), with that notebook's executing
  hand-out tests after them (tests/nbval_answer_keys.py), and each other
  module's tests together; ``_schedule`` starts the work that executes
  notebooks first, longest first, so that the two cores finish at about the
  same time.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pytest


class FakeTimer:
    """``Timer`` of the clock API: ``mod(at)``, ``stop()``, ``at`` (inf when idle)."""

    __slots__ = ("name", "fire", "cpu", "at", "seq")

    def __init__(self, name, fire, cpu, seq):
        self.name, self.fire, self.cpu, self.seq = name, fire, cpu, seq
        self.at = math.inf

    def mod(self, at):
        self.at = float(at)

    def stop(self):
        self.at = math.inf


class FakeClock:
    """Runs due timers in (deadline, creation order); a fired timer reads ``at == inf``.

    ``call_at(t, fn)`` adds a one-shot test event (an ARP reply arriving) that
    takes part in the same ordering.  ``log`` records (name, time, seconds).
    """

    def __init__(self):
        self.timers = []
        self.now = 0.0
        self.log = []

    def timer(self, name, fire, cpu=0):
        t = FakeTimer(name, fire, cpu, len(self.timers))
        self.timers.append(t)
        return t

    def call_at(self, at, fn):
        def fire(now):
            fn(now)
            return 0.0

        t = self.timer("event", fire)
        t.mod(at)
        return t

    def next_due(self):
        armed = [t for t in self.timers if t.at != math.inf]
        return min(armed, key=lambda t: (t.at, t.seq)) if armed else None

    def run_until(self, t_end):
        while True:
            tm = self.next_due()
            if tm is None or tm.at > t_end:
                break
            self.now = tm.at
            tm.at = math.inf
            secs = tm.fire(self.now)
            assert secs >= 0.0
            self.log.append((tm.name, self.now, secs))
        self.now = max(self.now, t_end)

    def fired(self, name):
        return [t for n, t, _ in self.log if n == name]


class FakeDst:
    """An engine dst: a reference count and an expiry."""

    def __init__(self, name="dst"):
        self.name = name
        self.refcnt = 0
        self.expires = 0.0
        self.neighbour = None

    def __repr__(self):
        return f"FakeDst({self.name}, ref {self.refcnt})"


class FakeSink:
    """The engine side: records every callback and ends each packet exactly once.

    Packets are int tokens; ``send`` hands one to the table the way the
    engine's ip_finish_output2 would (taking the skb's dst reference first).
    ``ended[j]`` is the single outcome of token ``j``; a second one fails.
    """

    COST = {"neigh_output": 1e-6, "neigh_queue_drop": 2e-6, "arp_error_report": 5e-6,
            "arp_send": 3e-6}

    def __init__(self, clock):
        self.clock = clock
        self.arp = None          # set to answer ARP replies through arp_rcv
        self.ended = {}
        self.sent = []           # (time, dev, target, broadcast)
        self.replies = []        # (dev, addr, t_reply)
        self.events = []         # (kind, j, time)
        self.lladdr = {}         # addr -> link address the host answers with

    def _end(self, kind, j, dst, now):
        assert j not in self.ended, f"packet {j} ended twice: {self.ended[j]} then {kind}"
        self.ended[j] = kind
        self.events.append((kind, j, now))
        if dst is not None:
            dst.refcnt -= 1      # kfree_skb / TX completion -> dst_release
            assert dst.refcnt >= 0

    def neigh_output(self, j, dst, now):
        self._end("output", j, dst, now)
        return self.COST["neigh_output"]

    def neigh_queue_drop(self, j, dst, now):
        self._end("drop", j, dst, now)
        return self.COST["neigh_queue_drop"]

    def arp_error_report(self, j, dst, now):
        # ipv4_link_failure: icmp_send, then dst_set_expires(dst, 0)
        if dst.expires == 0.0 or dst.expires > now:
            dst.expires = now
        self._end("error", j, dst, now)
        return self.COST["arp_error_report"]

    def arp_send(self, dev, target, broadcast, now):
        self.sent.append((now, dev, target, broadcast))
        return self.COST["arp_send"]

    def arp_reply_due(self, dev, addr, t_reply):
        self.replies.append((dev, addr, t_reply))
        if self.arp is not None:
            ll = self.lladdr.get(addr, ("mac", addr))
            self.clock.call_at(t_reply, lambda now: self.arp.arp_rcv(dev, addr, ll, now))

    # the engine's transmit path for a packet whose dst points at neighbour n
    def send(self, tbl, n, j, dst, now):
        from routelab.core.neighbour import NEIGH_DROP, NEIGH_XMIT
        dst.refcnt += 1          # skb->dst
        rc = tbl.neigh_resolve_output(n, j, dst, now)
        assert tbl.ledger.t >= 0.0           # its seconds (the ledger convention)
        if rc == NEIGH_XMIT:
            self._end("xmit", j, dst, now)
        elif rc == NEIGH_DROP:
            self._end("dropped", j, dst, now)
        return rc


@pytest.fixture
def fake_clock():
    return FakeClock()


@pytest.fixture
def fake_sink(fake_clock):
    return FakeSink(fake_clock)


@pytest.fixture
def fake_dst():
    return FakeDst


@pytest.fixture
def neigh_fakes():
    """The fake classes themselves, for tests that build several (hypothesis examples)."""
    return SimpleNamespace(Clock=FakeClock, Sink=FakeSink, Dst=FakeDst)


# --------------------------------------------------------------------------- parallel runs
#: Seconds a notebook-executing test adds to its notebook's own run time: a kernel
#: start (imports routelab, numpy, matplotlib), or a JupyterLab page and its controls.
KERNEL_START_S = 5.0
BROWSER_EXTRA_S = 20.0
#: Weight of a notebook without recorded cell timings (a new one): start it early.
UNKNOWN_RUN_S = 120.0


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "executes_notebook(param='path', factor=1.0, extra=5.0): the test executes the "
        "notebook given by its parameter `param`; a parallel run schedules it early, "
        "weighted by the notebook's recorded run time (tests/conftest.py)")
    # The answer keys' checks in nbval's kernel, when nbval runs in this session
    # (tests/nbval_answer_keys.py; tests/ is on sys.path, as for this conftest).
    import nbval_answer_keys
    if not config.pluginmanager.has_plugin("routelab-xdist-groups"):
        config.pluginmanager.register(_Groups(), "routelab-xdist-groups")
    if not config.pluginmanager.has_plugin("routelab-answer-keys-in-nbval"):
        config.pluginmanager.register(nbval_answer_keys.AnswerKeysInNbval(),
                                      "routelab-answer-keys-in-nbval")


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


@cache
def notebook_run_seconds(path: Path) -> float:
    """How long a Run All of ``path`` took when it was last executed and saved.

    nbclient/nbconvert and JupyterLab record each cell's
    ``metadata.execution`` timestamps; their sum is the notebook's run time on
    the machine that executed it.  A notebook without them counts as
    ``UNKNOWN_RUN_S`` (long), so that it is started early.
    """
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return UNKNOWN_RUN_S
    total, timed, code = 0.0, 0, 0
    for c in cells:
        if c.get("cell_type") != "code" or not "".join(c.get("source", "")).strip():
            continue
        code += 1
        e = c.get("metadata", {}).get("execution", {})
        try:
            total += (_ts(e["shell.execute_reply"]) - _ts(e["iopub.execute_input"])).total_seconds()
            timed += 1
        except (KeyError, ValueError):
            pass
    if code and timed < code:
        return UNKNOWN_RUN_S
    return total


def _notebook_param(item, name: str) -> Path | None:
    spec = getattr(item, "callspec", None)
    value = spec.params.get(name) if spec is not None else None
    return Path(value) if isinstance(value, (str, Path)) and str(value).endswith(".ipynb") else None


def notebook_group(path: Path) -> str:
    """The xdist_group of a notebook's nbval cells and of its hand-out tests (one worker)."""
    return f"notebook-{Path(path).stem}"


def _weight(item) -> tuple[float, str | None]:
    """(estimated seconds, scheduling unit) of a test that executes a notebook, else (0, None)."""
    if type(item).__name__ == "IPyNbCell":              # a cell of nbval's run of a notebook
        path = Path(item.path)
        return notebook_run_seconds(path) + KERNEL_START_S, notebook_group(path)
    mark = item.get_closest_marker("executes_notebook")
    if mark is None:
        return 0.0, None
    path = _notebook_param(item, mark.kwargs.get("param", "path"))
    if path is None:
        return 0.0, None
    seconds = notebook_run_seconds(path) * mark.kwargs.get("factor", 1.0)
    return seconds + mark.kwargs.get("extra", KERNEL_START_S), None


class _Groups:
    """Registered as a plugin (global): a conftest's item hooks see only its own directory,
    and nbval's cells live in notebooks/."""

    @staticmethod
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(config, items):
        _schedule(config, items)


#: Test modules whose tests each execute a notebook on their own (one unit per test).
SPREAD_MODULES = ("tests/browser/test_notebooks_browser.py",)
#: Hand-out tests that go with their notebook's nbval cells (tests/nbval_answer_keys.py).
WITH_NBVAL = ("tests/notebook/test_handout.py::test_student_copy_runs_up_to_its_first_stub",
              "tests/notebook/test_handout.py::test_answer_key_passes_every_check")


def scheduling_unit(nodeid: str) -> str:
    """The work unit of a test: what one xdist worker runs together, in order.

    nbval's cells of a notebook and its two executing hand-out tests:
    ``notebook-<stem>`` (they share nbval's kernel and its record).  A browser
    test: itself.  Every other test: its module, so tests sharing a
    module-scoped fixture run in one worker, in file order, as in one process
    (e.g. tests/notebook/test_notebook_helpers.py moves one explorer's
    controls one after the other).  A function of the node id only, because
    xdist's controller, which hands out the units, sees only node ids (and
    pytest 9's node ids are no longer rewritten by ``xdist_group`` marks).
    """
    path, _, rest = nodeid.partition("::")
    if path.endswith(".ipynb"):
        return notebook_group(Path(path))
    m = re.fullmatch(r"(.*)\[(.+)\]", nodeid)
    if m and m.group(1) in WITH_NBVAL:
        return f"notebook-{m.group(2)}"
    if path in SPREAD_MODULES:
        return nodeid
    return path


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: hand out :func:`scheduling_unit` units, in collection order."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return NotebookScheduling(config, log)


def _schedule(config, items):
    """Put notebook executions first, longest first, each notebook's nbval cells first.

    In an xdist worker (``-n N``), or when nbval's cells are collected; a plain
    ``pytest tests`` keeps the file order.  Each worker collects the same items
    and sorts them the same way, so the controller sees one order; with
    ``--dist loadgroup --no-loadscope-reorder`` it hands the units
    (:func:`scheduling_unit`) out in that order.  Longest-first keeps the two
    workers' finishing times close (the last unit started is a short one).
    """
    is_nbval = [type(item).__name__ == "IPyNbCell" for item in items]
    if not (hasattr(config, "workerinput") or any(is_nbval)):
        return
    unit_weight: dict[str, float] = {}
    units = []
    for item in items:
        w, _ = _weight(item)
        unit = scheduling_unit(item.nodeid)
        unit_weight[unit] = max(unit_weight.get(unit, 0.0), w)   # one shared run
        units.append(unit)
    order = schedule_order(units, unit_weight, [not b for b in is_nbval])
    items[:] = [items[k] for k in order]


def schedule_order(units: list[str], weight: dict[str, float],
                   phase: list[int] | None = None) -> list[int]:
    """Indices of the items (``units[i]`` is item i's unit), heaviest unit first.

    A unit's items stay together, those of a lower ``phase`` first (nbval's
    cells before the hand-out tests of the same notebook), else in their order;
    units of equal weight (all the tests that execute no notebook weigh 0) keep
    the collection order.
    """
    phase = phase or [0] * len(units)
    first: dict[str, int] = {}
    for i, unit in enumerate(units):
        first.setdefault(unit, i)
    return sorted(range(len(units)),
                  key=lambda i: (-weight[units[i]], first[units[i]], phase[i], i))
