"""routelab.result.bin_index: the division-based binning equals searchsorted."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.result import bin_index


def _reference(edges, t):
    return np.clip(np.searchsorted(edges, t, side="right") - 1, 0, edges.size - 2)


@settings(max_examples=200, deadline=None)
@given(nb=st.integers(1, 5000), bin_s=st.sampled_from([1e-3, 0.01, 0.1, 1 / 3, 0.5, 1.0]),
       seed=st.integers(0, 2**32 - 1))
def test_bin_index_matches_searchsorted_on_and_around_every_edge(nb, bin_s, seed):
    edges = np.arange(nb + 1) * bin_s
    rng = np.random.default_rng(seed)
    t = np.concatenate([rng.random(500) * nb * bin_s * 1.2, edges,
                        np.nextafter(edges, -1.0).clip(0.0), np.nextafter(edges, np.inf)])
    assert np.array_equal(bin_index(edges, t), _reference(edges, t))


def test_bin_index_falls_back_for_odd_times():
    edges = np.arange(11) * 0.1
    for t in (np.array([np.nan, 0.5]), np.array([-1.0, 0.5]), np.array([np.inf, 0.05]),
              np.array([], dtype=float)):
        assert np.array_equal(bin_index(edges, t), _reference(edges, t))


def test_bin_index_falls_back_for_edges_it_was_not_made_for():
    rng = np.random.default_rng(3)
    t = rng.random(1000) * 10.0
    for edges in (np.array([0.0, 1.0, 5.0, 6.0, 10.0]), np.linspace(1.0, 9.0, 9),
                  np.geomspace(1e-3, 10.0, 20)):
        assert np.array_equal(bin_index(edges, t), _reference(edges, t))
