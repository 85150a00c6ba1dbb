"""Notebook 04 helpers (routelab.notebook.story4) and its questions, headless, on short runs."""

from __future__ import annotations

import pytest

from routelab.hosts.tcp import IP_HDR, TCP_HDR
from routelab.notebook.answers import (
    COW_OUTCOMES,
    CSUM_OUTCOMES,
    SKIP_OUTCOMES,
    for_notebook,
)
from routelab.notebook.checks import ask
from routelab.notebook.explorers import EXPLORERS
from routelab.notebook.plots import PNG_SIGNATURE, png_bytes
from routelab.notebook.story4 import (
    GROUPS,
    REPORT,
    VARIANTS,
    anatomy_alt,
    anatomy_figure,
    container_explorer,
    container_readout,
    grouped_points,
    model_vs_report,
    profile_alt,
    profile_figure,
    run_variant,
    skb_walkthrough,
    variants_table,
)
from routelab.scenarios import container as C

NB = "04-container-checksums"
DUR = 0.05


@pytest.fixture(scope="module")
def runs():
    return {name: run_variant(name, duration=DUR) for name in VARIANTS}


# -- the skb anatomy -------------------------------------------------------------------------

def _state(steps, step, name):
    return dict(steps[step][1])[name]


def test_walkthrough_reflects_clone_and_cow():
    steps = skb_walkthrough()
    assert len(steps) == 3
    orig0 = _state(steps, 0, "original (write queue)")
    assert orig0["dataref"] == 1 and orig0["dataref_nohdr"] == 1 and not orig0["cloned"]
    orig1, clone = _state(steps, 1, "original (write queue)"), _state(steps, 1, "clone (sent)")
    assert orig1["buffer"] == clone["buffer"]                    # the clone shares the data
    assert clone["dataref"] == 2 and clone["skb_cloned"] and not clone["skb_header_cloned"]
    assert clone["data"] == orig1["data"] - IP_HDR - TCP_HDR     # TCP + IP headers pushed
    fwd = _state(steps, 2, "clone (forwarded)")
    assert fwd["buffer"] != clone["buffer"] and fwd["dataref"] == 1 and not fwd["skb_cloned"]
    assert fwd["copied"] == clone["tail"]                        # head..tail copied
    assert _state(steps, 2, "original (write queue)")["dataref"] == 1


def test_walkthrough_skip_and_gso():
    skip = skb_walkthrough(cow="skip")
    fwd = _state(skip, 2, "clone (forwarded)")
    assert fwd["copied"] == 0 and fwd["skb_cloned"] and fwd["dataref"] == 2
    gso = skb_walkthrough(gso=True)
    clone = _state(gso, 1, "clone (sent)")
    assert clone["nr_frags"] == 1 and clone["data_len"] == 1448
    fwd = _state(gso, 2, "clone (forwarded)")
    assert 0 < fwd["copied"] < 300 and fwd["nr_frags"] == 1      # header area only
    with pytest.raises(ValueError, match="cow"):
        skb_walkthrough(cow="sometimes")


def test_anatomy_figure_and_alt_follow_the_state():
    steps = skb_walkthrough()
    fig = anatomy_figure(steps)
    assert len(fig.axes) == 3 and "bytes" in fig.axes[-1].get_xlabel()
    assert png_bytes(fig, 40).startswith(PNG_SIGNATURE)
    alt = anatomy_alt(steps)
    assert "share one data buffer" in alt and "1,608 bytes copied" in alt
    # the figure above question 1 shows the counts, not the tests' results nor the copy
    before = anatomy_alt(steps[:2], tests=False)
    assert "dataref 2 (header-free 1)" in before
    assert "copied" not in before and "skb_cloned" not in before
    labels = [t.get_text() for t in anatomy_figure(steps[:2], tests=False).axes[1].texts]
    assert not any("skb_cloned" in t for t in labels)
    assert any("skb_cloned()=1" in x.get_text() for x in fig.axes[1].texts)
    one = anatomy_figure(steps[:1])
    assert len(one.axes) == 1
    assert "copied" not in anatomy_alt(skb_walkthrough(cow="skip"))


# -- runs, profiles, tables -------------------------------------------------------------------

def test_grouped_points_add_up_to_the_load(runs):
    for name in ("host", "container", "skip", "fixed"):
        pts = grouped_points(runs[name])
        assert set(pts) == {g for g, _, _ in GROUPS} | {"other"}
        assert sum(pts.values()) == pytest.approx(runs[name].summary()["cpu_load_pct"], rel=1e-9)
    assert grouped_points(runs["host"])["skb_cow copy"] == 0.0
    assert grouped_points(runs["container"])["skb_cow copy"] > 3.0
    assert grouped_points(runs["skip"])["skb_cow copy"] == 0.0
    # the raw profile is the busy time, within the work in flight at the end of the window
    res = runs["container"]
    raw = sum(res.counters["cpu_by_function"].values()) * 100 / (res.duration * 2)
    assert raw == pytest.approx(res.summary()["cpu_load_pct"], rel=0.03)


def test_run_variant_is_cached_and_checked():
    a = run_variant("skip", duration=DUR)
    assert run_variant("skip", duration=DUR) is a
    with pytest.raises(KeyError, match="known"):
        run_variant("bogus")


def test_tables(runs):
    text = model_vs_report(runs["host"], runs["container"])
    assert f"{REPORT['host'][1]:.2f}" in text and f"{REPORT['container'][1]:.2f}" in text
    table = variants_table(runs)
    assert len(table.splitlines()) == 2 + len(runs)
    assert VARIANTS["trap"][0] in table


def test_profile_figure_has_units_labels_and_alt(runs):
    shown = {k: runs[k] for k in ("host", "container", "skip")}
    fig = profile_figure(shown)
    ax = fig.axes[0]
    assert "%" in ax.get_xlabel() and ax.get_title() == "" and fig.get_suptitle()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "report: host" and "report: container" in labels
    assert png_bytes(fig, 40).startswith(PNG_SIGNATURE)
    alt = profile_alt(shown)
    assert "reported host: 10.45 %" in alt and "skb_cow copy" in alt


# -- the questions ----------------------------------------------------------------------------

def _facts(runs):
    steps = skb_walkthrough()
    return {
        "cow-copies": dict(steps=steps),
        "cow-points": dict(run=runs["container"]),
        "skip-saves": dict(host=runs["host"], base=runs["container"], skip=runs["skip"]),
        "loop-copies": dict(loop={c: C.ttl_loop(hops_max=200, cow=c) for c in ("normal", "skip")}),
        "csum-features": dict(skip=runs["skip"], trap=runs["trap"]),
        "ex1-fixed-cpu": dict(skip=runs["skip"], fixed=runs["fixed"]),
        "ex2-sg-bytes": dict(run=run_variant("container", duration=DUR, pair_features="SG")),
    }


RIGHT_WRONG = {
    "cow-copies": ("c", "a"),
    "cow-points": (4.8, 1.0),
    "skip-saves": ("a", "b"),
    "loop-copies": (1, 63),
    "csum-features": ("c", "a"),
    "ex1-fixed-cpu": (15.3, 16.8),
    "ex2-sg-bytes": (1608, 160),
}


def test_every_question_accepts_right_and_rejects_wrong(runs):
    facts = _facts(runs)
    qs = for_notebook(NB)
    assert [q.qid for q in qs] == list(RIGHT_WRONG) and len(qs) >= 5
    for q in qs:
        right, wrong = RIGHT_WRONG[q.qid]
        ok = ask(NB, q.qid, right, **facts[q.qid])
        assert ok.ok, (q.qid, ok.text())
        bad = ask(NB, q.qid, wrong, **facts[q.qid])
        assert not bad.ok and bad.hint, (q.qid, bad.text())
        assert "Traceback" not in bad.text()


def test_choice_answers_come_from_the_mechanism(runs):
    # skipping the copy: the clone is not copied, so "copy everything" is no longer the answer
    fb = ask(NB, "cow-copies", "c", steps=skb_walkthrough(cow="skip"))
    assert not fb.ok and COW_OUTCOMES[0] in fb.text()
    # with a forward path keeping CHECKSUM_PARTIAL the features only save CPU
    fb = ask(NB, "csum-features", "a", skip=runs["skip"], trap=runs["fixed"])
    assert fb.ok, fb.text()
    assert CSUM_OUTCOMES[2] in ask(NB, "csum-features", "a", skip=runs["skip"],
                                   trap=runs["trap"]).text()
    # the hack removes the copy only; a run that also drops the software checksum (features
    # with a forward path keeping CHECKSUM_PARTIAL) or the whole second trip would not be it
    fb = ask(NB, "skip-saves", "a", host=runs["host"], base=runs["container"], skip=runs["fixed"])
    assert not fb.ok and SKIP_OUTCOMES[1] in fb.text()
    fb = ask(NB, "skip-saves", "a", host=runs["host"], base=runs["container"], skip=runs["host"])
    assert not fb.ok and SKIP_OUTCOMES[2] in fb.text()
    ok = ask(NB, "skip-saves", "a", host=runs["host"], base=runs["container"], skip=runs["skip"])
    assert "µs" not in ok.text() and "points more than the host" in ok.text()


def test_the_model_predictions_the_prose_relies_on(runs):
    s = {k: r.summary() for k, r in runs.items()}
    assert s["trap"]["bad_checksums"] > 0 and s["trap"]["throughput_mbps"] < 100
    assert s["fixed"]["bad_checksums"] == 0
    assert s["host"]["cpu_load_pct"] < s["fixed"]["cpu_load_pct"] < s["skip"]["cpu_load_pct"] \
        < s["features"]["cpu_load_pct"] < s["container"]["cpu_load_pct"]
    for k in ("host", "container", "skip", "fixed", "features"):
        assert s[k]["throughput_mbps"] == pytest.approx(719.4, rel=0.02)


# -- the explorer -----------------------------------------------------------------------------

def test_explorer_registered_moves_every_widget():
    assert EXPLORERS[NB] is container_explorer
    ex = container_explorer(duration=0.05)
    assert ex.last_error is None and ex.png.startswith(PNG_SIGNATURE)
    assert set(ex.controls) == {"path", "cow", "pair_features", "kernel", "nic", "nic_tso",
                                "send_size"}
    moves = [("cow", "skip"), ("pair_features", "HW_CSUM"), ("kernel", "2.6.20-fwdcsum"),
             ("nic", "e1000"), ("nic_tso", True), ("send_size", 4096), ("cow", "normal"),
             ("pair_features", "none"), ("path", "host")]
    assert {n for n, _ in moves} == set(ex.controls)
    for name, value in moves:
        before = ex.png
        ex.update(**{name: value})
        assert ex.last_error is None, (name, ex.last_error)
        assert ex.png.startswith(PNG_SIGNATURE)
        assert "Mbit/s" in ex.readout_text and ex.alt
        if name in ("path", "cow"):
            assert ex.png != before
    # on the host path nothing is forwarded: cow and the pair's features are
    # greyed out and ignored (the scenario itself refuses them, one line)
    assert ex.controls["cow"].disabled and ex.controls["pair_features"].disabled
    before = ex.png
    ex.update(cow="skip")
    assert ex.last_error is None and ex.png == before
    ex.update(path="container", cow="normal")
    assert not ex.controls["cow"].disabled
    ex.update(path="container", kernel="2.6.20", pair_features="HW_CSUM")
    assert ex.last_error is None and "bad checksums at B" in ex.readout_text
    # the empty bar of a collapsed transfer says why, on the figure and in its alt text
    assert "transfer collapsed" in ex.alt



def test_readout(runs):
    text = container_readout(runs["trap"])
    assert "bad checksums" in text and "% CPU" in text


def test_explorer_title_sits_over_the_axes_clear_of_the_legend():
    from routelab.notebook.story4 import ProfileBar

    bar = ProfileBar()
    bar.update(run_variant("container", duration=DUR))
    assert bar.ax.get_title().startswith("CPU of host A") and not bar.fig.get_suptitle()
    assert all(len(line) <= 58 for line in bar.ax.get_title().splitlines())
    assert "collapsed" not in bar.alt
