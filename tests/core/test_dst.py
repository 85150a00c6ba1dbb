"""Tests for routelab.core.dst: dst_alloc/dst_free/dst_run_gc and refcounts."""

from __future__ import annotations

import pytest

from routelab.core.dst import (
    DESTROYED,
    DST_GC_INC,
    DST_GC_MAX,
    DST_GC_MIN,
    GARBAGE,
    DstEntry,
    DstFamily,
    DstOps,
    dst_hold,
    dst_release,
)

COST = {"dst_alloc": 1e-6, "dst_destroy": 2e-6, "dst_run_gc": 3e-6, "dst_gc_entry": 1e-7}


class FakeGc(DstFamily):
    """Stands in for the route cache's rt_garbage_collect: records calls,
    answers ``ok`` through the ops' ledger."""

    def __init__(self, ok=True):
        self.ok = ok
        self.calls = []
        self.ops = None

    def gc(self, now, cpu):
        self.calls.append((now, cpu))
        self.ops.ledger.ok = self.ok
        return 5e-6


def make_ops(thresh, gc):
    ops = DstOps(thresh, gc, COST)
    if gc is not None:
        gc.ops = ops
    return ops


def alloc(ops, now, cpu):
    """dst_alloc as (entry, seconds)."""
    e = ops.dst_alloc(now, cpu)
    return e, ops.ledger.t


def test_alloc_calls_gc_only_above_threshold():
    gc = FakeGc()
    ops = make_ops(3, gc)
    got = [alloc(ops, 0.1 * i, 0) for i in range(6)]
    # entries before each call: 0,1,2,3 (no GC: not > 3), then 4, 5 (GC)
    assert [c[0] for c in gc.calls] == [pytest.approx(0.4), pytest.approx(0.5)]
    assert all(e is not None and e.refcnt == 0 for e, _ in got)
    assert ops.entries == 6 and ops.allocated == 6
    assert got[0][1] == pytest.approx(COST["dst_alloc"])
    assert got[5][1] == pytest.approx(COST["dst_alloc"] + 5e-6)   # GC time charged
    assert len({e.uid for e, _ in got}) == 6


def test_alloc_fails_when_gc_fails():
    gc = FakeGc(ok=False)
    ops = make_ops(1, gc)
    alloc(ops, 0, 0)
    alloc(ops, 0, 0)
    e, t = alloc(ops, 0, 1)
    assert e is None and t > 0
    assert ops.entries == 2 and ops.alloc_failed == 1 and gc.calls[-1] == (0, 1)


def test_no_gc_function_means_no_limit():
    ops = DstOps(0, None, COST)
    for _ in range(5):
        assert alloc(ops, 0, 0)[0] is not None


def test_free_unreferenced_destroys_at_once():
    ops = DstOps(100, None, COST)
    e, _ = alloc(ops, 0, 0)
    t = ops.dst_free(e, 1.0)
    assert t == pytest.approx(COST["dst_destroy"])
    assert e.state == DESTROYED and ops.entries == 0 and ops.destroyed == 1
    assert ops.garbage == [] and ops.gc_timer_at == float("inf")


def test_free_referenced_parks_on_garbage_list():
    ops = DstOps(100, None, COST)
    e, _ = alloc(ops, 0, 0)
    dst_hold(e)
    assert ops.dst_free(e, 2.0) == 0.0
    assert e.state == GARBAGE and e.obsolete == 2 and ops.garbage == [e]
    assert ops.entries == 1                         # still counted: only destroy lowers it
    assert ops.gc_timer_at == pytest.approx(2.0 + DST_GC_MIN)
    assert ops.dst_free(e, 2.05) == 0.0             # obsolete > 1: a second free is a no-op
    assert ops.garbage == [e]
    dst_release(e)
    assert ops.entries == 1 and e.state == GARBAGE  # release does not destroy either
    ops.dst_run_gc(ops.gc_timer_at)
    assert e.state == DESTROYED and ops.entries == 0 and ops.garbage == []
    assert ops.gc_timer_at == float("inf") and ops.gc_timer_inc == DST_GC_MAX


def test_run_gc_backoff_sequence_and_snap_back():
    ops = DstOps(100, None, COST)
    held, _ = alloc(ops, 0, 0)
    dst_hold(held)
    ops.dst_free(held, 0.0)
    gaps = []
    last = 0.0
    for _ in range(6):
        at = ops.gc_timer_at
        gaps.append(at - last)
        last = at
        ops.dst_run_gc(at)
        assert ops.garbage == [held] and ops.entries == 1
    assert gaps == pytest.approx([0.1, 0.6, 1.6, 3.1, 5.1, 7.6])
    assert ops.gc_runs == 6
    # a new entry on the backed-off list re-arms the timer at DST_GC_MIN
    other, _ = alloc(ops, last, 0)
    dst_hold(other)
    ops.dst_free(other, last + 1.0)
    assert ops.gc_timer_at == pytest.approx(last + 1.0 + DST_GC_MIN)
    assert ops.gc_timer_inc == DST_GC_INC
    # ... and the backoff restarts from there
    ops.dst_run_gc(ops.gc_timer_at)
    assert ops.gc_timer_at - (last + 1.0 + DST_GC_MIN) == pytest.approx(0.6)


def test_second_free_before_first_run_does_not_rearm():
    ops = DstOps(100, None, COST)
    a, _ = alloc(ops, 0, 0)
    b, _ = alloc(ops, 0, 0)
    dst_hold(a)
    dst_hold(b)
    ops.dst_free(a, 0.0)
    ops.dst_free(b, 0.05)
    assert ops.gc_timer_at == pytest.approx(0.1)     # not pushed to 0.15


def test_backoff_caps_at_dst_gc_max():
    ops = DstOps(100, None, COST)
    e, _ = alloc(ops, 0, 0)
    dst_hold(e)
    ops.dst_free(e, 0.0)
    for _ in range(40):
        prev = ops.gc_timer_at
        ops.dst_run_gc(prev)
    assert ops.gc_timer_at - prev == pytest.approx(DST_GC_MAX)


def test_run_gc_destroys_only_released_entries():
    ops = DstOps(100, None, COST)
    es = [alloc(ops, 0, 0)[0] for _ in range(4)]
    for e in es:
        dst_hold(e)
        ops.dst_free(e, 0.0)
    dst_release(es[1])
    dst_release(es[3])
    t = ops.dst_run_gc(0.1)
    assert ops.garbage == [es[0], es[2]]
    assert [e.state for e in es] == [GARBAGE, DESTROYED, GARBAGE, DESTROYED]
    assert ops.entries == 2 and ops.destroyed == 2
    assert ops.gc_run_log[-1] == (0.1, 4, 2)
    # cost: timer + 4 entries walked + 2 destroyed
    assert t == pytest.approx(COST["dst_run_gc"] + 4 * COST["dst_gc_entry"]
                              + 2 * COST["dst_destroy"])


def test_entries_drop_only_on_destroy():
    ops = DstOps(100, None, COST)
    e, _ = alloc(ops, 0, 0)
    dst_hold(e)
    dst_hold(e)
    dst_release(e)
    assert ops.entries == 1
    dst_release(e)
    assert ops.entries == 1
    ops.dst_destroy(e, 0.0)
    assert ops.entries == 0


def test_destroy_of_referenced_entry_raises():
    ops = DstOps(100, None, COST)
    e, _ = alloc(ops, 0, 0)
    dst_hold(e)
    with pytest.raises(AssertionError, match="referenced"):
        ops.dst_destroy(e, 0.0)
    dst_release(e)
    ops.dst_destroy(e, 0.0)
    with pytest.raises(AssertionError, match="double destroy"):
        ops.dst_destroy(e, 0.0)


def test_release_below_zero_raises():
    e = DstEntry(1, 0.0)
    with pytest.raises(AssertionError, match="below zero"):
        dst_release(e)
    dst_hold(e)
    dst_release(e)
    assert e.refcnt == 0
    with pytest.raises(AssertionError):
        dst_release(e)


def test_destroy_hook_sees_every_destroy(monkeypatch):
    from routelab.core import dst as dst_mod

    seen = []
    monkeypatch.setitem(dst_mod.HOOKS, "dst_destroy", lambda ops, e: seen.append(e.uid))
    ops = DstOps(100, None, COST)          # reads the hook when created
    e, _ = alloc(ops, 0.0, 0)
    ops.dst_free(e, 0.0)
    assert seen == [e.uid]
    monkeypatch.setitem(dst_mod.HOOKS, "dst_destroy", None)
    assert DstOps(100, None, COST).on_destroy is None


# dst_release has two bodies: dst.pxd's C inline (compiled into every compiled
# caller) and dst.py's (pure Python).  The same calls, in both.
RELEASE_PROBE = r"""
import json
from routelab import accel
from routelab.core.dev import TxQueue
from routelab.core.dst import DstEntry, dst_hold, dst_release

out = {"compiled": accel.compiled(), "none": dst_release(None)}
e = DstEntry(7, 0.0)
dst_hold(e)
dst_hold(e)
out["first"] = [dst_release(e), e.refcnt]
out["second"] = [dst_release(e), e.refcnt]
for name, call in (("direct", lambda: dst_release(e)),
                   ("tx completion", lambda: (q.push(0.0, e, None, 0), q.retire(1.0)))):
    q = TxQueue()
    try:
        call()
        out[name] = None
    except AssertionError as exc:
        out[name] = [str(exc).split(" of ")[0], e.refcnt]
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_double_release_raises_alike_compiled_and_pure(pure):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from routelab import accel

    if not pure and not accel.compiled():
        pytest.skip("routelab is not compiled here: " + accel.status()["routelab.core.dst"])
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "ROUTELAB_PURE"}
    env["PYTHONPATH"] = str(root)
    if pure:
        env["ROUTELAB_PURE"] = "1"
    p = subprocess.run([sys.executable, "-c", RELEASE_PROBE], env=env, cwd=root,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out == {"compiled": not pure, "none": 0, "first": [0, 1], "second": [0, 0],
                   "direct": ["dst_release below zero: refcnt 0", 0],
                   "tx completion": ["dst_release below zero: refcnt 0", 0]}
