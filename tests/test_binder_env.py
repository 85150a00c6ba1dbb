"""binder/ is enough to run the notebooks on mybinder.org.

The fast tests check that binder/ agrees with the top-level pins.  The slow
test does what repo2docker does: a fresh virtualenv, ``pip install -r
binder/requirements.txt`` from the repository root, and then runs the notebooks
with nbclient inside that environment only: the first notebook in full, and
the setup cell (every import a notebook needs) of each of the others.  The
later notebooks run minutes of simulation, which nbval already executes in full
with the same pins (scripts/test.sh, stage 2); running them twice would double
CI time without testing anything about the environment.  It reuses pip's
download/wheel cache, so on a warm machine it takes about a minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"
# ROUTELAB_NOTEBOOKS_DIR: check another notebooks directory (as tests/browser does).
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()
NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.glob("*.ipynb") if not p.name.startswith("."))
# In ../requirements.txt only for the test suite; binder/ need not carry them.
TEST_ONLY = {"nbval", "pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "simpy",
             "playwright", "ruff"}
# ... or only for instructors (a Dask cluster for sweeps, building the JupyterLite site)
TEST_ONLY |= {"dask", "distributed", "jupyterlite-core", "jupyterlite-pyodide-kernel", "wheel"}
WIDGET_TRIO = {"jupyterlab", "ipywidgets", "jupyterlab-widgets"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)", line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def _binder_python() -> str:
    return (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")


# --------------------------------------------------------------------------- fast checks
def test_runtime_txt_names_a_python_version():
    assert re.fullmatch(r"3\.\d+", _binder_python()), (BINDER / "runtime.txt").read_text()


def test_binder_pins_match_top_level_requirements():
    top, binder = _pins(REPO / "requirements.txt"), _pins(BINDER / "requirements.txt")
    missing = {n: v for n, v in top.items() if n not in TEST_ONLY and n not in binder}
    assert not missing, f"pinned in requirements.txt but not in binder/requirements.txt: {missing}"
    drift = {n: (v, top.get(n)) for n, v in binder.items() if top.get(n) != v}
    assert not drift, f"binder pin != top-level pin (binder, top): {drift}"
    assert WIDGET_TRIO <= binder.keys(), "jupyterlab, ipywidgets, jupyterlab_widgets must be pinned"


def test_binder_requirements_install_routelab_itself():
    lines = [
        ln.split("#", 1)[0].strip() for ln in (BINDER / "requirements.txt").read_text().splitlines()
    ]
    assert "-e ." in lines or "." in lines, "binder/requirements.txt must install the repo (`-e .`)"


# --------------------------------------------------------------------------- slow: build it
def _find_python(version: str) -> str | None:
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        base = getattr(sys, "_base_executable", None) or sys.executable
        return base
    return shutil.which(f"python{version}")


def _run(cmd, *, env, cwd, timeout, what):
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd,
        check=False,
        env=env,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    dt = time.monotonic() - t0
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)  # drop ANSI colours
    out = "\n".join(
        ln for ln in text.splitlines() if not re.match(r"WARNING: Location '.*' is ignored", ln)
    )
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode}) after {dt:.0f} s:\n{out[-6000:]}"
    )
    print(f"binder env: {what}: {dt:.1f} s")
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_binder_requirements_alone_run_the_notebooks(tmp_path):
    version = _binder_python()
    python = _find_python(version)
    if python is None:
        pytest.skip(f"binder/runtime.txt asks for Python {version}, which is not installed here")

    venv = tmp_path / "binder-venv"
    bindir = venv / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MPLBACKEND")
        and not k.startswith("JUPYTER")
    }
    env.update(
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",  # ipykernel's kernel.json says "python"
        VIRTUAL_ENV=str(venv),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )

    _run(
        [python, "-m", "venv", str(venv)], env=env, cwd=tmp_path, timeout=120, what="python -m venv"
    )
    # Exactly what repo2docker runs, from the repository root (so `-e .` is the repo),
    # except that routelab's per-packet modules are not compiled again: an editable
    # build writes them into this very tree, under the test suite running beside
    # it (scripts/test.sh), and the main environment's build is already there.
    _run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", "-r", "binder/requirements.txt"],
        env={**env, "ROUTELAB_PURE": "1"},
        cwd=REPO,
        timeout=600,
        what="pip install -r binder/requirements.txt",
    )

    check = (
        "import sys, routelab, ipywidgets, matplotlib, numpy; "
        "print(sys.version.split()[0], routelab.__file__)"
    )
    out = _run(
        [str(bindir / "python"), "-c", check],
        env=env,
        cwd=tmp_path,
        timeout=120,
        what="import check",
    )
    assert out.split()[0].startswith(version + "."), out
    assert Path(out.split()[1]).resolve().is_relative_to(REPO), f"routelab not from the repo: {out}"

    # The widget manager must be a prebuilt lab extension of *this* environment,
    # else JupyterLab shows "Error displaying widget".
    ext = _run(
        [str(bindir / "jupyter"), "labextension", "list"],
        env=env,
        cwd=tmp_path,
        timeout=120,
        what="jupyter labextension list",
    )
    assert re.search(r"@jupyter-widgets/jupyterlab-manager v\S+ enabled\s+OK", ext), ext

    if not NOTEBOOKS:
        pytest.skip(
            "binder environment builds and imports routelab; no notebooks/*.ipynb to execute yet"
        )

    # One nbclient process for all notebooks (a `jupyter nbconvert` start-up per
    # notebook costs seconds); it runs on the binder venv's Python only.
    runner = tmp_path / "run_notebooks.py"
    runner.write_text(RUNNER)
    out = _run(
        [str(bindir / "python"), str(runner), *map(str, NOTEBOOKS)],
        env=env,
        cwd=tmp_path,
        timeout=300 + 600 * len(NOTEBOOKS),
        what=f"execute {len(NOTEBOOKS)} notebook(s) with nbclient",
    )
    print(out)
    assert "ALL NOTEBOOKS OK" in out, out


RUNNER = """
import os, sys, time
import nbformat
from nbclient import NotebookClient

failed = []
for k, path in enumerate(sys.argv[1:]):
    t0 = time.monotonic()
    nb = nbformat.read(path, as_version=4)
    if k:
        # later notebooks: their setup cell only (all the imports they need)
        first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
        if first is None:   # no code (the course map): nothing to run
            print(f"ok {path} (no code cells)")
            continue
        nb.cells = nb.cells[: first + 1]
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}})
    try:
        client.execute()
    except Exception as exc:
        failed.append(path)
        print(f"FAILED {path}:\\n{exc}")
        continue
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        failed.append(path)
        print(f"FAILED {path}: error output {errors[0].get('ename')}: {errors[0].get('evalue')}")
    else:
        print(f"ok {path} ({time.monotonic() - t0:.1f} s)")
print("ALL NOTEBOOKS OK" if not failed else f"{len(failed)} notebook(s) failed")
sys.exit(1 if failed else 0)
"""
