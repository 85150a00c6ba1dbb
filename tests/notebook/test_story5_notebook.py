"""Notebook 05 helpers (routelab.notebook.story5) and its questions, headless, on short runs."""

from __future__ import annotations

import pytest

from routelab.core.skbuff import ip_to_int
from routelab.ipv4.fib_trie import Leaf, TNode
from routelab.notebook.answers import CROSSOVER, FLAT_36, WORM_36, for_notebook
from routelab.notebook.checks import ask
from routelab.notebook.explorers import EXPLORERS
from routelab.notebook.plots import PNG_SIGNATURE, png_bytes
from routelab.notebook.story5 import (
    SMALL_FIB,
    attack_runs,
    attack_table,
    cache_setup,
    cost_groups,
    diversity_explorer,
    diversity_readout,
    diversity_sweep,
    fnhe_growth,
    small_trie,
    storm_alt,
    storm_figure,
    storm_run,
    sweep_alt,
    sweep_figure,
    sweep_table,
    table_runs,
    table_triestat,
    trie_alt,
    trie_figure,
    trie_walk,
)
from routelab.scenarios import diversity

NB = "05-route-cache-removed"
DESTS = (1, 256, 4096, 16384, 65536)


@pytest.fixture(scope="module")
def sweep():
    # the notebook's run length: shorter runs count the first miss to each destination
    # against a cache that holds them all, and move the crossover (question 3)
    return diversity_sweep(dests=DESTS)


@pytest.fixture(scope="module")
def storm():
    return storm_run(duration=0.5)


@pytest.fixture(scope="module")
def attacks():
    return attack_runs()


# -- the trie -------------------------------------------------------------------------------

def _naive(addr: int):
    best = None
    for p in SMALL_FIB:
        net, plen = p.split("/")
        plen = int(plen)
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF if plen else 0
        if addr & mask == ip_to_int(net) and (best is None or plen > best[1]):
            best = (p, plen)
    return best[0] if best else None


@pytest.mark.parametrize("addr", ["198.18.77.1", "10.1.3.1", "10.1.9.9", "192.168.2.7",
                                  "8.8.8.8", "172.20.1.1", "203.0.113.255"])
def test_walk_answers_as_a_naive_scan_and_its_path_is_the_trace(addr):
    t = small_trie()
    value, trace, path = trie_walk(t, addr)
    assert value == _naive(ip_to_int(addr))
    assert len(path) == trace.nodes
    assert sum(isinstance(n, TNode) for n in path) == trace.tnodes
    assert sum(isinstance(n, Leaf) for n in path) == trace.leaves
    assert path[0] is t.root and isinstance(path[-1], Leaf)


def test_backtracking_walk_revisits_the_tnode():
    _v, trace, path = trie_walk(small_trie(), "10.1.3.1")
    assert trace.nodes == 7 and path[3] is path[5]


def test_trie_figure_and_alt():
    t = small_trie()
    fig = trie_figure(t, "10.1.3.1")
    assert png_bytes(fig).startswith(PNG_SIGNATURE)
    texts = [x.get_text() for x in fig.axes[0].texts]
    assert "4,6" in texts and any("10.1.2.0/24" in x for x in texts)
    alt = trie_alt(t, "10.1.3.1")
    assert "7 nodes" in alt and "10.1.0.0/16" in alt and "8 internal nodes" in alt
    assert "Aver depth" in table_triestat(1000)


# -- the sweep, the attacks, the storm --------------------------------------------------------

def test_sweep_shapes_the_prose_relies_on(sweep):
    c36 = [sweep[("3.6", d)]["cpu_us_per_packet"] for d in DESTS]
    assert max(c36) - min(c36) < 0.01
    for k in ("2.4.24", "2.6.0"):
        c = [sweep[(k, d)]["cpu_us_per_packet"] for d in DESTS]
        assert c == sorted(c) and c[-1] > 2 * c[0]
    assert sweep[("2.6.0", 1)]["cpu_us_per_packet"] < sweep[("3.6", 1)]["cpu_us_per_packet"]
    assert sweep[("2.6.0", 65536)]["cpu_us_per_packet"] > sweep[("3.6", 65536)]["cpu_us_per_packet"]
    text = sweep_table(sweep)
    assert "65,536" in text and "hit %" in text
    fig = sweep_figure(sweep)
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel().endswith("[µs]")
    assert "3.6 from" in sweep_alt(sweep)


def test_crossover_mechanism_the_explanation_names(sweep):
    # up to 4,096 destinations the cache holds them all: one dst (one miss) per destination
    assert sweep[("2.6.0", 4096)]["dst_allocs"] == 4096
    assert sweep[("2.6.0", 4096)]["cpu_us_per_packet"] < sweep[("3.6", 4096)]["cpu_us_per_packet"]
    # at 16,384 it cannot: the GC frees entries still in use, and they are allocated again
    assert sweep[("2.6.0", 16384)]["dst_allocs"] > 16384
    assert sweep[("2.6.0", 16384)]["cpu_us_per_packet"] > sweep[("3.6", 16384)]["cpu_us_per_packet"]
    fb = ask(NB, "crossover", "c", sweep=sweep)
    assert fb.ok and "4,096 dst entries" in fb.text() and "Traceback" not in fb.text()
    # a half-second run's first misses alone make 2.6.0 lose at 4,096 already
    short = diversity_sweep(kernels=("2.6.0", "3.6"), dests=(4096,), duration=0.5)
    assert short[("2.6.0", 4096)]["cpu_us_per_packet"] > short[("3.6", 4096)]["cpu_us_per_packet"]
    assert set(cache_setup()) >= {"rt_buckets", "gc_thresh", "max_size", "gc_min_interval"}


def test_attacks_table(attacks):
    text = attack_table(attacks)
    assert "route-cache entries (max)" in text and "ping loss" in text
    s = {k: r.summary() for k, r in attacks.items()}
    assert s["worm 3.6"]["route_cache_entries_max"] == 0
    assert s["DoS 3.6"]["rcu_pending_max"] == 0 and s["DoS 2.6.0"]["rcu_pending_max"] > 0
    assert s["DoS 3.6"]["forwarded_packets"] > s["DoS 2.6.0"]["forwarded_packets"]


def test_storm_growth_and_figure(storm):
    m, e, d = fnhe_growth(storm)
    assert m[0] == 0 and m[-1] == storm.summary()["local_packets"]
    assert (e <= d).all() and (e[1:] >= e[:-1]).all() and e[-1] == 2048 * 6
    assert png_bytes(storm_figure(storm)).startswith(PNG_SIGNATURE)
    assert "12,288" in storm_alt(storm)
    with pytest.raises(ValueError):
        fnhe_growth(diversity.run(kernel="2.6.0", duration=0.1, pmtu_pps=100.0))


# -- the questions --------------------------------------------------------------------------

def _facts(sweep, storm, attacks):
    base = diversity.run(kernel="3.6", destinations=1, duration=0.1)
    strict = diversity.run(kernel="3.6", destinations=1, duration=0.1, rp_filter=1)
    return {"trie-nodes": dict(trie=small_trie(), addr="10.1.3.1"),
            "flat-36": dict(sweep=sweep), "crossover": dict(sweep=sweep),
            "worm-36": dict(old=attacks["worm 2.4.24"], new=attacks["worm 3.6"]),
            "default-table": dict(runs=table_runs()),
            "fnhe-bound": dict(run=storm), "ex1-rp-filter": dict(base=base, strict=strict)}


RIGHT_WRONG = {"trie-nodes": (7, 5), "flat-36": ("b", "a"), "crossover": ("c", "b"),
               "worm-36": ("a", "c"), "default-table": ("c", "b"), "fnhe-bound": (12288, 65536),
               "ex1-rp-filter": (0.29, 0.6)}


def test_every_question_accepts_right_and_rejects_wrong(sweep, storm, attacks):
    facts = _facts(sweep, storm, attacks)
    qs = for_notebook(NB)
    assert [q.qid for q in qs] == list(RIGHT_WRONG) and len(qs) >= 5
    for q in qs:
        right, wrong = RIGHT_WRONG[q.qid]
        ok = ask(NB, q.qid, right, **facts[q.qid])
        assert ok.ok, (q.qid, ok.text())
        bad = ask(NB, q.qid, wrong, **facts[q.qid])
        assert not bad.ok and bad.hint, (q.qid, bad.text())
        assert "Traceback" not in bad.text()


def test_choice_answers_come_from_the_model(sweep):
    # with only a few destinations, 2.6.0 never loses its lead: the crossover answer moves
    few = diversity_sweep(dests=(1, 16, 256), duration=0.2)
    fb = ask(NB, "crossover", "b", sweep=few)
    assert not fb.ok and CROSSOVER[4] in fb.text()
    assert FLAT_36[1] in ask(NB, "flat-36", "a", sweep=sweep).text()
    assert len(WORM_36) == 3


# -- the explorer -----------------------------------------------------------------------------

def test_explorer_registered_moves_every_widget():
    assert EXPLORERS[NB] is diversity_explorer
    ex = diversity_explorer(duration=0.1)
    assert ex.last_error is None and ex.png.startswith(PNG_SIGNATURE)
    assert set(ex.controls) == {"kernel", "destinations", "routes", "rp_filter"}
    moves = [("kernel", "2.6.0"), ("destinations", 65536), ("routes", 100), ("rp_filter", 1),
             ("kernel", "3.6"), ("destinations", 1)]
    for name, value in moves:
        before, text = ex.png, ex.readout_text
        ex.update(**{name: value})
        assert ex.last_error is None, (name, ex.last_error)
        assert ex.png != before and ex.readout_text != text, name
        assert "µs" in ex.readout_text and ex.alt


def test_readout_and_groups():
    res = diversity.run(kernel="3.6", duration=0.1)
    g = cost_groups(res)
    assert sum(g.values()) == pytest.approx(res.summary()["cpu_us_per_packet"], rel=1e-3)
    text = diversity_readout(res)
    assert "no route cache" in text and "trie depth" in text
    text = diversity_readout(diversity.run(kernel="2.4.24", duration=0.1))
    assert "cache hits" in text and "fib_hash" in text
