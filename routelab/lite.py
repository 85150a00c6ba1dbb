"""The collection in the browser (JupyterLite + Pyodide): what differs there.

``make lite`` (``scripts/build_lite.py``) builds ``_site/``: JupyterLab in the
browser with the Pyodide kernel, the widget manager, the notebooks, and a
pure-Python wheel of routelab that each notebook's first cell installs with
``%pip`` from the site itself.  In the browser there is no C compiler, so the
per-packet stages run as pure Python (the same results, slower); the
explorers start there with shorter windows so that a slider move stays under
about a second.

Nothing here is kernel behaviour.
"""

from __future__ import annotations

import os
import sys

__all__ = ["in_browser", "INSTALL_SNIPPET", "INSTALL_MARK", "EXPLORER_DEFAULTS",
           "EXPLORER_CALLS", "explorer_kwargs"]

#: The lines that go first in every notebook's setup cell, before any routelab import.
#: Routelab-free (routelab is not installed yet when they run).  In Pyodide the kernel
#: turns the ``%pip`` line into piplite's install, which finds routelab's wheel in the
#: site's own index (ipywidgets, numpy, matplotlib and Cython's pure-Python wheel come
#: from Pyodide's CDN and PyPI); everywhere else the ``if`` is false and the same
#: notebook runs locally, on Binder or on a hub unchanged.  ipywidgets is pinned with
#: the widget manager the site carries (requirements.txt: jupyterlab_widgets 3.0.17).
INSTALL_MARK = 'sys.platform == "emscripten"'
INSTALL_SNIPPET = (
    "import sys\n"
    f"if {INSTALL_MARK}:  # in the browser (JupyterLite): routelab from the site\n"
    "    %pip install -q routelab ipywidgets==8.1.9\n")

#: Explorer -> keyword arguments it starts with in the browser.  Chosen from
#: ``benchmarks/bench_lite.py`` (pure Python, ``ROUTELAB_PURE=1``, as a proxy for
#: Pyodide; benchmarks/results/lite_sliders.json): the slowest control's median move
#: at most ~0.5 s natively as pure Python, leaving a factor of two for WebAssembly.
#: Keys are the names of ``routelab.notebook.explorers.EXPLORERS``.
EXPLORER_DEFAULTS: dict[str, dict] = {
    "00-packet-journey": {"duration": 1.0},
    "01-worm-cache-thrash": {"duration": 2.0},
    "02-rcu-primer": {},
    "02-rcu-softirq-latency": {"duration": 0.1},
    "03-fragment-flooding": {"file_mb": 1.0},
    # its window's minimum (0.05 s) is already its default; as pure Python a move
    # takes ~0.4 s of CPU there, so it keeps it
    "04-container-checksums": {},
    # as pure Python a move takes ~0.18 s of CPU at a 0.2 s window (2.0x compiled);
    # the notebook's own one-second window would take about five times that
    "05-route-cache-removed": {"duration": 0.2},
}

#: The function each notebook's explorer cell calls (EXPLORERS' values, by name).
EXPLORER_CALLS = {
    "00-packet-journey": "packet_journey_explorer",
    "01-worm-cache-thrash": "worm_explorer",
    "02-rcu-primer": "rcu_primer_explorer",
    "02-rcu-softirq-latency": "rcu_explorer",
    "03-fragment-flooding": "nfs_explorer",
    "04-container-checksums": "container_explorer",
    "05-route-cache-removed": "diversity_explorer",
}


def in_browser() -> bool:
    """True in Pyodide (JupyterLite), or with ``ROUTELAB_LITE=1`` (to try the lite settings)."""
    return sys.platform == "emscripten" or os.environ.get("ROUTELAB_LITE", "") not in ("", "0")


def explorer_kwargs(name: str) -> dict:
    """The keyword arguments explorer ``name`` starts with here: the lite ones in the
    browser, none (the explorer's own defaults) elsewhere."""
    if name not in EXPLORER_DEFAULTS:
        from .errors import KnobError

        raise KnobError("explorer", name, "one of " + ", ".join(EXPLORER_DEFAULTS))
    return dict(EXPLORER_DEFAULTS[name]) if in_browser() else {}
