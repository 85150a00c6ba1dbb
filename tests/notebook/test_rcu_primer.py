"""Notebook 02's RCU primer: quiescent-state rules, grace period, free, explorer."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from routelab import KnobError
from routelab.notebook import (
    OKABE_ITO,
    RcuTimeline,
    rcu_primer_alt,
    rcu_primer_explorer,
    rcu_primer_figure,
    rcu_timeline,
)
from routelab.notebook.plots import PNG_SIGNATURE, png_bytes
from routelab.notebook.rcu_primer import (
    CTXSW,
    IDLE,
    KERNEL,
    LIVE_ENTRIES,
    MAX_SOFTIRQ_RESTART,
    RULES,
    SOFTIRQ,
    USER,
    RcuPrimerFigure,
)
from routelab.notebook.widgets import READOUT_CLASS

LOADS = (0, 20, 40, 60, 70, 80, 85, 90, 95, 99, 100)
INF = float("inf")


def _len(tl: RcuTimeline) -> float:
    """A's whole wait, call_rcu to free (two grace periods and the tasklets)."""
    return INF if tl.wait is None else tl.wait


# -- the timeline ---------------------------------------------------------------------

def test_same_seed_same_timeline_other_seed_another():
    a, b = rcu_timeline(70, "iter", ncpus=3, seed=5), rcu_timeline(70, "iter", ncpus=3, seed=5)
    for name in ("state", "pass_end", "qs", "entries"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert (a.qs_time, a.qs_kind, a.gp_end, a.free_time, a.grace_periods) == (
        b.qs_time, b.qs_kind, b.gp_end, b.free_time, b.grace_periods)
    assert not np.array_equal(a.state, rcu_timeline(70, "iter", ncpus=3, seed=6).state)


def test_a_cpu_timeline_does_not_depend_on_the_number_of_cpus():
    two, four = rcu_timeline(50, "vanilla", ncpus=2), rcu_timeline(50, "vanilla", ncpus=4)
    assert np.array_equal(two.state[0], four.state[0])


@pytest.mark.parametrize("seed", range(4))
def test_softirq_share_is_the_load_and_grows_as_a_superset(seed):
    prev = None
    for load in LOADS:
        tl = rcu_timeline(load, "vanilla", ncpus=1, seed=seed)
        soft = tl.state[0] == SOFTIRQ
        assert abs(soft.mean() - load / 100) <= 1 / tl.steps
        if prev is not None:
            assert not (prev & ~soft).any()    # every softirq step stays softirq
        prev = soft
    assert soft.all()


@pytest.mark.parametrize("seed", range(6))
def test_vanilla_grace_period_never_shortens_as_load_rises(seed):
    lengths = [_len(rcu_timeline(load, "vanilla", seed=seed)) for load in LOADS]
    assert lengths == sorted(lengths), lengths
    assert lengths[-1] == INF and lengths[0] < 25


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("load", (0, 50, 90, 100))
def test_vanilla_quiescent_states_never_fall_in_softirq(seed, load):
    tl = rcu_timeline(load, "vanilla", ncpus=3, seed=seed)
    assert not (tl.qs & (tl.state == SOFTIRQ)).any()
    assert not (tl.qs & (tl.state == KERNEL)).any()
    for c, q in enumerate(tl.qs_time):
        if q is not None:
            assert tl.state[c, q - 1] in (USER, IDLE, CTXSW)
            # from the snapshot until then the CPU stayed in softirq (or the reader's call)
            assert np.isin(tl.state[c, tl.snap_time[c]:q - 1], (SOFTIRQ, KERNEL)).all()


def test_vanilla_at_full_load_the_grace_period_never_ends():
    tl = rcu_timeline(100, "vanilla")
    # the tasklet batches A at the next tick and starts grace period 1, which never ends
    assert tl.batch == 2 and tl.batch_time == tl.remove_at + 1
    assert tl.grace_periods == ((1, tl.remove_at + 1, None),)
    assert tl.qs_time == (None, None) and tl.gp_end is None and tl.gp_length is None
    assert tl.free_time is None and tl.wait is None and (tl.entries == tl.entries[0]).all()
    assert f"grace period 1 not over after {tl.steps - tl.remove_at - 1} ms" in tl.status()
    assert "not over" in rcu_primer_alt(tl)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("load", (0, 50, 90))
def test_a_lone_callback_waits_for_two_grace_periods(rule, load):
    """2.6.0: A's batch is numbered curbatch + 1, so it waits out the grace period the
    tasklet starts for it and then its own; the tasklet frees it at the next tick."""
    tl = rcu_timeline(load, rule, ncpus=2, seed=1)
    (n1, a1, b1), (n2, a2, b2) = tl.grace_periods[:2]
    assert (n1, n2, tl.batch) == (1, 2, 2)
    assert a1 == tl.batch_time == tl.remove_at + 1
    assert b1 == a2 == tl.gp_start and b2 == tl.gp_end
    assert tl.free_time == tl.gp_end + 1 and tl.wait == tl.free_time - tl.remove_at
    for c in range(2):
        # each CPU: snapshot, a later quiescent state, then a tasklet run that sees it
        assert tl.gp_start <= tl.snap_time[c] < tl.qs_time[c] <= tl.clear_time[c] <= tl.gp_end
    assert max(tl.clear_time) == tl.gp_end


@pytest.mark.parametrize("ncpus", (1, 2, 4))
def test_bh_at_full_load_waits_only_a_few_ticks(ncpus):
    tl = rcu_timeline(100, "bh", ncpus=ncpus)
    assert set(tl.qs_kind) == {"softirq_handler"}
    for c in range(ncpus):
        assert tl.qs_time[c] == tl.snap_time[c] + 1      # the next handler run ends it
    assert tl.wait <= 10


@pytest.mark.parametrize("load", (30, 70, 95))
def test_bh_never_waits_past_the_first_handler_run_after_the_snapshot(load):
    tl = rcu_timeline(load, "bh", ncpus=4, seed=2)
    for c in range(4):
        ends = np.flatnonzero(tl.handler_end[c, tl.snap_time[c]:])
        if ends.size:
            assert tl.qs_time[c] <= tl.snap_time[c] + ends[0] + 1


def test_a_context_switch_is_not_quiescent_for_bh():
    assert "ctxsw" not in RULES["bh"][1] and "ctxsw" in RULES["vanilla"][1]
    tl = rcu_timeline(50, "bh", ncpus=3, seed=4)
    assert not (tl.qs & (tl.state == CTXSW)).any()


def test_iter_counts_only_the_end_of_a_do_softirq_call():
    tl = rcu_timeline(100, "iter", ncpus=1)
    (q,) = tl.qs_time
    assert tl.qs_kind == ("softirq_loop",) and tl.pass_end[0, q - 1]
    assert not tl.pass_end[0, tl.snap_time[0]:q - 1].any()
    assert tl.gp_length <= MAX_SOFTIRQ_RESTART + 1


def test_passes_end_with_the_burst_or_after_max_restart():
    tl = rcu_timeline(100, "iter", ncpus=1, steps=100)
    assert np.flatnonzero(tl.pass_end[0]).tolist() == list(range(9, 100, 10))
    tl = rcu_timeline(60, "iter", ncpus=2, seed=3)
    for c in range(2):
        soft, ends = tl.state[c] == SOFTIRQ, tl.pass_end[c]
        assert not (ends & ~soft).any()
        last_of_burst = soft[:-1] & ~soft[1:]
        assert (ends[:-1] >= last_of_burst).all()
        run = 0     # handler runs in the current __do_softirq call
        for i in range(tl.steps):
            run = run + 1 if soft[i] else 0
            assert run <= MAX_SOFTIRQ_RESTART
            if ends[i]:
                run = 0


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("load", (0, 60, 90, 100))
def test_more_quiescent_states_never_lengthen_the_grace_period(seed, load):
    v, i, b = (_len(rcu_timeline(load, r, ncpus=3, seed=seed)) for r in ("vanilla", "iter", "bh"))
    assert i <= v                  # iter's quiescent states are a superset of vanilla's
    if load >= 90:                 # bh's are not (no context switch), but under a flood
        assert b <= i              # every handler run ends one


@pytest.mark.parametrize("rule", RULES)
def test_the_reader_finishes_before_its_cpu_is_quiescent(rule):
    for load in (0, 50, 100):
        tl = rcu_timeline(load, rule, ncpus=2)
        c, start, end = tl.reader
        assert c == 1 and start < tl.remove_at < end
        assert (tl.state[c, start:end] == KERNEL).all()
        assert tl.qs_time[c] is None or tl.qs_time[c] > end
    assert rcu_timeline(50, "vanilla", ncpus=1).reader is None


def test_rules_match_the_simulator():
    from routelab.core.rcu import QS_KINDS
    for key, (_label, events) in RULES.items():
        assert events == QS_KINDS[key]


def test_rules_and_restart_limit_are_the_simulators_own():
    """Imported, not copied: a change in core/rcu.py or core/softirq.py reaches the primer."""
    from routelab.core import rcu, softirq
    from routelab.notebook import rcu_primer

    assert all(events is rcu.QS_KINDS[key] for key, (_label, events) in RULES.items())
    assert rcu_primer.MAX_SOFTIRQ_RESTART == softirq.MAX_SOFTIRQ_RESTART
    src = Path(rcu_primer.__file__).read_text()   # (a copy would be equal, so look)
    assert "frozenset(" not in src and "MAX_SOFTIRQ_RESTART =" not in src


# -- the entries counter and the free ---------------------------------------------------

@pytest.mark.parametrize("rule", RULES)
def test_entries_drop_only_when_a_is_freed(rule):
    tl = rcu_timeline(40, rule)
    e0 = LIVE_ENTRIES + 1
    assert tl.free_time > tl.gp_end
    assert (tl.entries[: tl.free_time] == e0).all()          # removal does not free
    assert (tl.entries[tl.free_time:] == e0 - 1).all()
    assert tl.entries[tl.remove_at] == e0


def test_2_6_0_runs_every_callback_at_once_and_maxbatch_spreads_them():
    once = rcu_timeline(40, "bh", backlog=25)
    assert once.maxbatch == 0                      # 2.6.0: no limit per tasklet run
    assert once.free_time == once.gp_end + 1 and (-np.diff(once.entries)).max() == 26
    tl = rcu_timeline(40, "bh", backlog=25, maxbatch=10)
    assert tl.gp_end == once.gp_end and tl.free_time == tl.gp_end + 1 + 2
    drops = -np.diff(tl.entries)
    assert (drops >= 0).all() and drops.sum() == 26
    assert drops[tl.gp_end: tl.gp_end + 3].tolist() == [10, 10, 6]


def test_free_outside_the_window_is_none():
    tl = rcu_timeline(40, "bh", steps=40, backlog=500, maxbatch=1)
    assert tl.gp_end is not None and tl.free_time is None and tl.wait is None
    assert tl.entries[-1] > LIVE_ENTRIES


def test_status_follows_the_story():
    tl = rcu_timeline(90, "vanilla")
    assert "entry A in the hash chain, CPU1 reading it" in tl.status(5)
    assert "A queued on CPU0" in tl.status(tl.remove_at)
    mid = tl.status(tl.remove_at + 2)
    assert "A in batch 2, which waits for grace period 1 running (1 ms)" in mid
    assert "not yet freed" in mid and "entries = 5" in mid
    own = tl.status(tl.gp_start + 1)
    assert "A's grace period 2 running (1 ms)" in own and "CPU0 waiting" in own
    assert "A waits for the RCU tasklet" in tl.status(tl.gp_end)
    end = tl.status(tl.free_time)
    assert f"A freed at t = {tl.free_time} ms, {tl.wait} ms after call_rcu (entries = 4)" in end
    assert "CPU0 ✓" in end
    assert [t for t, _ in tl.events()] == sorted(t for t, _ in tl.events())


def test_the_timeline_is_the_simulators_rcu():
    """The primer's grace periods come from routelab.core.rcu.Rcu itself."""
    from routelab.notebook import rcu_primer
    src = Path(rcu_primer.__file__).read_text()
    assert "from ..core.rcu import QS_KINDS, Rcu" in src and "Rcu(rule, ncpus" in src


# -- validation -------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [dict(load=-1), dict(load=100.5), dict(load="lots"),
                                 dict(rule="rcu"), dict(rule="vanilla 2.6.0"), dict(ncpus=0),
                                 dict(ncpus=5), dict(ncpus=1.5), dict(steps=10),
                                 dict(steps=5000), dict(seed=-1), dict(remove_at=200),
                                 dict(remove_at=2), dict(maxbatch=-1), dict(backlog=-3)])
def test_bad_inputs_name_the_knob(bad):
    args = {"load": 50.0, "rule": "vanilla", **bad}
    with pytest.raises(KnobError) as ei:
        rcu_timeline(**args)
    name = next(iter(bad))
    assert ei.value.knob == name and name in str(ei.value)


def test_explorer_rejects_unknown_start_values():
    with pytest.raises(KnobError) as ei:
        rcu_primer_explorer(speed=3)
    assert ei.value.knob == "speed"
    with pytest.raises(KnobError) as ei:
        rcu_primer_explorer(rule="fast")
    assert ei.value.knob == "rule"


# -- figure -----------------------------------------------------------------------------

def test_figure_is_labelled_and_renders():
    tl = rcu_timeline(90, "iter", ncpus=3)
    fig = rcu_primer_figure(tl, upto=60)
    assert isinstance(fig, Figure)
    ax, ax_e = fig.axes
    assert "[ms]" in ax_e.get_xlabel() and ax_e.get_ylabel() == "entries"
    title = fig.get_suptitle()
    assert "rcu-softirq" in title and "90 %" in title
    assert fig.legends and len(fig.legends[0].get_texts()) >= 10
    colours = {c.lower() for c in OKABE_ITO.values()}
    for h in fig.legends[0].legend_handles:
        if hasattr(h, "get_facecolor") and h.get_fill():
            from matplotlib.colors import to_hex
            assert to_hex(h.get_facecolor()) in colours
    assert png_bytes(fig, dpi=40).startswith(PNG_SIGNATURE)
    alt = rcu_primer_alt(tl, 60)
    assert "3 CPUs from 0 to 60 ms" in alt and "rcu-softirq" in alt


def test_figure_hides_the_future():
    tl = rcu_timeline(90, "vanilla")
    f = RcuPrimerFigure()
    f.update(tl, tl.remove_at - 1)
    assert not f.remove.get_visible() and not f.gp_line.get_visible()
    assert len(f.qs.get_xdata()) == 0 and len(f.free.get_xdata()) == 0
    f.update(tl)
    assert f.remove.get_visible() and f.gp_line.get_visible()
    assert len(f.qs.get_xdata()) == 2 and list(f.free.get_xdata()) == [tl.free_time]
    assert "not over" not in f.alt


def test_cached_render_matches_a_full_draw_and_is_fast():
    f = RcuPrimerFigure()
    f.update(rcu_timeline(80, "vanilla"), 120)
    f.render_png(dpi=60)
    f.update(rcu_timeline(85, "bh"), 150)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fast = f.render_png(dpi=60)
        times.append(time.perf_counter() - t0)
    assert min(times) < 0.3
    fast = np.asarray(Image.open(io.BytesIO(fast)).convert("RGB"))
    f.fig.set_dpi(60)
    full = np.asarray(Image.open(io.BytesIO(png_bytes(f.fig, dpi=60))).convert("RGB"))
    assert fast.shape == full.shape
    assert np.mean(np.any(fast != full, axis=-1)) < 0.003


# -- explorer ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def primer():
    return rcu_primer_explorer()


def test_explorer_builds(primer):
    assert set(primer.controls) == {"load", "rule", "ncpus", "t"}
    assert READOUT_CLASS in primer.readout._dom_classes
    assert primer.png.startswith(PNG_SIGNATURE) and primer.last_error is None
    # one step before the removal: the first two moves show the removal, then the batch
    assert primer.readout_text.split(" · ", 1)[1].startswith("t = 19 ms") and primer.alt
    assert [v for _, v in primer.controls["rule"].options] == list(RULES)
    row = next(b for b in primer.widget.children if primer.controls["t"] in
               getattr(b, "children", ()))
    assert primer.step_button in row.children and primer.next_button in row.children


@pytest.mark.parametrize("rule", RULES)
def test_explorer_runs_for_every_rule_and_load(primer, rule):
    for load in (0.0, 35.0, 90.0, 100.0):
        for ncpus in (1, 4):
            primer.update(rule=rule, load=load, ncpus=ncpus, t=120)
            assert primer.last_error is None, primer.last_error
            assert primer.readout_text.split(" · ", 1)[1].startswith("t = 120 ms")
            assert primer.timeline().rule == rule and primer.timeline().load == load
            assert primer.png.startswith(PNG_SIGNATURE)


def test_explorer_shows_a_grace_period_that_never_ends(primer):
    primer.update(rule="vanilla", load=100.0, ncpus=2, t=200)
    assert "grace period 1 not over after 179 ms" in primer.readout_text
    assert "not yet freed (entries = 5)" in primer.readout_text
    primer.update(rule="bh")
    assert "A freed at t =" in primer.readout_text and "(entries = 4)" in primer.readout_text


def test_step_and_next_event_buttons(primer):
    primer.update(rule="vanilla", load=90.0, ncpus=2, t=0)
    primer.step_button.click()
    assert primer.controls["t"].value == 1
    assert primer.readout_text.split(" · ", 1)[1].startswith("t = 1 ms")
    tl = primer.timeline()
    seen = []
    for _ in range(len(tl.events()) + 2):
        primer.next_button.click()
        seen.append(primer.controls["t"].value)
    assert seen[: len(set(t for t, _ in tl.events()))] == sorted({t for t, _ in tl.events()})
    assert seen[-1] == tl.steps
    primer.step_button.click()
    assert primer.controls["t"].value == tl.steps     # stays at the end
