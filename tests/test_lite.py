"""``make lite``: the JupyterLite site builds offline and has what the browser needs.

The build (``scripts/build_lite.py``: a pure-Python wheel, the notebooks'
browser copies, ``jupyter lite build``) runs here once, into a temporary
directory, in about 15 s.  What cannot be checked on this offline machine is
the site *running*: the browser fetches Pyodide and its numpy/matplotlib from
a CDN at page load.  Everything up to that is checked: every notebook present
with its install lines and short explorer windows, the wheel in the site's own
package index, pure Python and importable by a plain CPython (no compiled
module, the same results as the compiled model), the widget manager and the
Pyodide kernel in the build.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from routelab import lite
from routelab.notebook.explorers import EXPLORERS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytest.importorskip("jupyterlite_core")
pytest.importorskip("jupyterlite_pyodide_kernel")


def _build_lite():
    spec = importlib.util.spec_from_file_location("build_lite", ROOT / "scripts" /
                                                  "build_lite.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("lite")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_lite.py"),
                        "--output", str(out / "_site"), "--work", str(out / "work")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    return out / "_site"


def _code(nb):
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def test_site_is_complete(site):
    assert _build_lite().check_site(site) == []
    assert (site / "index.html").exists() and (site / "lab" / "index.html").exists()


def test_widget_manager_and_pyodide_kernel_are_in_the_build(site):
    cfg = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    names = {e["name"] for e in cfg["federated_extensions"]}
    assert {"@jupyter-widgets/jupyterlab-manager", "@jupyterlite/pyodide-kernel-extension"} \
        <= names
    pkg = json.loads((site / "extensions" / "@jupyter-widgets" / "jupyterlab-manager" /
                      "package.json").read_text())
    # the one jupyterlab_widgets (pinned in requirements.txt) put in the venv
    env = json.loads((Path(sys.prefix) / "share" / "jupyter" / "labextensions" /
                      "@jupyter-widgets" / "jupyterlab-manager" / "package.json").read_text())
    assert pkg["version"] == env["version"]
    urls = cfg["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"][
        "pipliteUrls"]
    assert any(u.startswith("./pypi/all.json") for u in urls)   # the site's own index


def test_every_notebook_is_there_with_install_lines_and_short_windows(site):
    for path in NOTEBOOKS:
        orig, copy = json.loads(path.read_text()), json.loads((site / "files" / path.name)
                                                              .read_text())
        assert len(copy["cells"]) == len(orig["cells"]), path.name
        a, b = _code(orig), _code(copy)
        if not a:
            continue
        assert b[0].startswith(lite.INSTALL_SNIPPET) or lite.INSTALL_MARK in a[0], path.name
        for name, fn in lite.EXPLORER_CALLS.items():
            kw = lite.EXPLORER_DEFAULTS[name]
            if kw and any(f"{fn}()" in s for s in a):
                args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
                assert any(f"{fn}({args})" in s for s in b), (path.name, fn)
                assert not any(re.search(rf"\b{fn}\(\)", s) for s in b)


def test_the_wheel_is_pure_and_runs_on_plain_cpython(site, tmp_path):
    whl = next((site / "pypi").glob("routelab-*-py3-none-any.whl"))
    names = zipfile.ZipFile(whl).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))]
    assert "routelab/data/sweep_story1.json" in names and "routelab/router.py" in names
    zipfile.ZipFile(whl).extractall(tmp_path / "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROUTELAB")}
    # no compiler on the path, the unpacked wheel ahead of any installed routelab
    env.update(PYTHONPATH=str(tmp_path / "w"), CC="/nonexistent/cc", PATH="/nonexistent")
    code = ("import json, routelab, routelab.accel as a\n"
            "from routelab.scenarios import ping\n"
            "s = ping.run(seed=3, duration=0.3, background_pps=2000).summary()\n"
            "print(json.dumps({'file': routelab.__file__, 'compiled': a.compiled(),\n"
            "                  'status': sorted(set(a.status().values())), 'summary': s}))\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["file"].startswith(str(tmp_path / "w"))
    assert out["compiled"] is False and out["status"] == ["pure Python (not compiled)"]
    from routelab.scenarios import ping

    ref = ping.run(seed=3, duration=0.3, background_pps=2000).summary()
    assert out["summary"] == pytest.approx(json.loads(json.dumps(ref)), rel=0, nan_ok=True)


def test_install_snippet_is_a_no_op_outside_the_browser():
    from IPython.core.inputtransformer2 import TransformerManager

    py = TransformerManager().transform_cell(lite.INSTALL_SNIPPET)
    calls = []

    class Shell:
        def run_line_magic(self, *a):
            calls.append(a)

    exec(compile(py, "<setup>", "exec"), {"get_ipython": lambda: Shell()})
    assert calls == []                              # not Pyodide: nothing installed
    assert "run_line_magic('pip', 'install -q routelab ipywidgets==" in py
    # Pyodide's kernel rewrites lines matching ^\s*%pip (pyodide_kernel.litetransform)
    assert re.search(r"^\s+%pip install -q routelab ", lite.INSTALL_SNIPPET, re.M)


def test_install_snippet_pins_the_ipywidgets_of_requirements():
    pin = re.search(r"^ipywidgets==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert f"ipywidgets=={pin.group(1)}" in lite.INSTALL_SNIPPET


def test_lite_notebook_is_idempotent():
    bl = _build_lite()
    nb = json.loads(NOTEBOOKS[1].read_text())
    once, changes = bl.lite_notebook(nb)
    twice, again = bl.lite_notebook(once)
    assert once == twice and changes and not again


def test_explorer_defaults_fit_the_explorers(monkeypatch):
    assert set(lite.EXPLORER_DEFAULTS) == set(EXPLORERS) == set(lite.EXPLORER_CALLS)
    for name, fn in EXPLORERS.items():
        assert fn.__name__ == lite.EXPLORER_CALLS[name]
        params = inspect.signature(fn).parameters
        for k, v in lite.EXPLORER_DEFAULTS[name].items():
            assert k in params and v < params[k].default, (name, k)   # shorter than locally
    monkeypatch.delenv("ROUTELAB_LITE", raising=False)
    assert lite.explorer_kwargs("01-worm-cache-thrash") == {}
    monkeypatch.setenv("ROUTELAB_LITE", "1")
    assert lite.explorer_kwargs("01-worm-cache-thrash") == lite.EXPLORER_DEFAULTS[
        "01-worm-cache-thrash"]


def test_lite_defaults_were_measured_and_keep_a_move_under_a_second():
    res = json.loads((ROOT / "benchmarks" / "results" / "lite_sliders.json").read_text())
    for name, kw in lite.EXPLORER_DEFAULTS.items():
        r = res["explorers"][name]
        assert r["pure_lite"]["kwargs"] == kw, f"re-run benchmarks/bench_lite.py --save ({name})"
        # CPU time: the wall clock of a shared machine measures the other jobs too
        assert r["pure_lite"]["worst_cpu_median_s"] <= 1.0, name
