"""Build the collection for the browser: ``make lite`` -> ``_site/`` (JupyterLite).

Steps, all offline (PyPI is not needed: the venv has every tool):

1. a pure-Python wheel of routelab: the package's sources copied without any
   compiled file (``*.so``, ``*.c``, the build manifest), built with
   ``ROUTELAB_PURE=1 pip wheel --no-deps --no-build-isolation`` -> a
   ``py3-none-any`` wheel;
2. the notebooks (``notebooks/*.ipynb``) copied, and in each copy
   * the install lines of :data:`routelab.lite.INSTALL_SNIPPET` put at the top of the
     first code cell (the setup cell) unless the notebook already has them;
   * each explorer call with no arguments (``worm_explorer()``) given the
     browser's shorter windows (:data:`routelab.lite.EXPLORER_DEFAULTS`);
3. ``jupyter lite build`` (jupyterlite-core + the Pyodide kernel; the widget
   manager, jupyterlab_widgets, comes from the venv's lab extensions) with the
   notebooks as contents and the wheel in the site's own package index;
4. :func:`check_site`: every notebook present, the wheel indexed and pure, the
   widget manager and the Pyodide kernel in the build.

The site runs only online: the browser downloads Pyodide and its numpy and
matplotlib from a CDN when the page loads.  Serve it with
``python -m http.server -d _site 8000`` and open http://localhost:8000/lab/.

Usage: ``python scripts/build_lite.py [--output _site] [--work build/lite]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from routelab.lite import EXPLORER_CALLS, EXPLORER_DEFAULTS, INSTALL_MARK, INSTALL_SNIPPET  # noqa: E402

COMPILED = (".so", ".pyd", ".c", ".o", ".dylib")
WIDGET_MANAGER = "@jupyter-widgets/jupyterlab-manager"
PYODIDE_KERNEL = "@jupyterlite/pyodide-kernel-extension"


def say(msg: str) -> None:
    print(f"[build_lite] {msg}", flush=True)


# --------------------------------------------------------------------------- 1. wheel
def _copy_sources(dst: Path) -> None:
    def ignore(folder, names):
        return [n for n in names if n.endswith(COMPILED) or n == "__pycache__"
                or n == "_accel_manifest.json" or n.endswith(".html")]

    shutil.copytree(ROOT / "routelab", dst / "routelab", ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, dst / name)


def build_wheel(work: Path) -> Path:
    """A pure-Python wheel of routelab in ``work/wheels``; returns its path."""
    src, out = work / "src", work / "wheels"
    for d in (src, out):
        shutil.rmtree(d, ignore_errors=True)
    out.mkdir(parents=True)
    _copy_sources(src)
    env = dict(os.environ, ROUTELAB_PURE="1", PIP_NO_INPUT="1")
    offline = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel", "Cython"))
    if offline:   # the venv's own build tools (requirements.txt pins wheel)
        isolation = ["--no-build-isolation", "--no-index"]
    else:         # e.g. a Python 3.12 venv has no setuptools: pip fetches the build tools
        say("setuptools/wheel/Cython not in this venv: pip fetches them (needs PyPI)")
        isolation = []
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w",
           str(out), str(src)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"[build_lite] pip wheel failed:\n{p.stdout}\n{p.stderr}")
    wheels = sorted(out.glob("routelab-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"[build_lite] expected one routelab wheel in {out}, got {wheels}")
    check_wheel(wheels[0])
    return wheels[0]


def check_wheel(path: Path) -> list[str]:
    """The wheel's file names; raises if it is not pure Python (tag or contents)."""
    if not path.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"[build_lite] {path.name} is not a pure-Python (py3-none-any) wheel")
    names = zipfile.ZipFile(path).namelist()
    compiled = [n for n in names if n.endswith(COMPILED)]
    if compiled:
        raise SystemExit(f"[build_lite] {path.name} carries compiled files: {compiled[:5]}")
    return names


# --------------------------------------------------------------------------- 2. notebooks
def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def lite_notebook(nb: dict) -> tuple[dict, list[str]]:
    """The browser's copy of a notebook: install lines and short explorer windows.

    Returns the new notebook and a list of what was changed (for the log)."""
    nb = json.loads(json.dumps(nb))
    changes = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if code and not any(INSTALL_MARK in _source(c) for c in code):
        code[0]["source"] = INSTALL_SNIPPET + _source(code[0])
        changes.append("install lines")
    calls = {fn: EXPLORER_DEFAULTS[name] for name, fn in EXPLORER_CALLS.items()
             if EXPLORER_DEFAULTS[name]}
    for c in code:
        src = _source(c)
        for fn, kw in calls.items():
            args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
            new = re.sub(rf"\b{fn}\(\)", f"{fn}({args})", src)
            if new != src:
                changes.append(f"{fn}({args})")
                src = new
        c["source"] = src
    return nb, changes


def stage_notebooks(work: Path) -> Path:
    files = work / "files"
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(parents=True)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb, changes = lite_notebook(json.loads(path.read_text()))
        (files / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        say(f"{path.name}: {', '.join(changes) or 'as it is'}")
    return files


# --------------------------------------------------------------------------- 3. + 4.
def build_site(output: Path, work: Path) -> Path:
    wheel = build_wheel(work)
    say(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e3:.0f} kB, pure Python)")
    files = stage_notebooks(work)
    shutil.rmtree(output, ignore_errors=True)
    lite_dir = work / "lite"
    shutil.rmtree(lite_dir, ignore_errors=True)
    lite_dir.mkdir(parents=True)
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter) if jupyter.exists() else "jupyter", "lite", "build",
           "--lite-dir", str(lite_dir), "--contents", str(files),
           "--piplite-wheels", str(wheel), "--output-dir", str(output.resolve())]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=lite_dir)
    if p.returncode != 0:
        raise SystemExit(f"[build_lite] jupyter lite build failed:\n{p.stdout[-3000:]}\n"
                         f"{p.stderr[-3000:]}")
    (output / "routelab-lite.json").write_text(json.dumps({
        "wheel": wheel.name, "notebooks": sorted(p.name for p in files.glob("*.ipynb")),
        "explorer_defaults": EXPLORER_DEFAULTS}, indent=1) + "\n")
    problems = check_site(output)
    if problems:
        raise SystemExit("[build_lite] the site is incomplete:\n  " + "\n  ".join(problems))
    size = sum(f.stat().st_size for f in output.rglob("*") if f.is_file())
    say(f"built {output} ({size / 1e6:.0f} MB); serve it with: "
        f"python -m http.server -d {output} 8000  (needs the internet: Pyodide's CDN)")
    return output


def _wheels_in_index(site: Path) -> dict[str, str]:
    """Package -> wheel file name, from the site's piplite index (pypi/all.json)."""
    index = site / "pypi" / "all.json"
    if not index.exists():
        return {}
    out = {}
    for name, info in json.loads(index.read_text()).items():
        for rel in info.get("releases", {}).values():
            for f in rel:
                out[name] = f.get("filename") or f.get("url", "").rsplit("/", 1)[-1]
    return out


def check_site(site: Path) -> list[str]:
    """What is missing from a built site (empty when it is complete)."""
    problems = []
    cfg_path = site / "jupyter-lite.json"
    if not cfg_path.exists():
        return [f"{cfg_path} missing: not a JupyterLite build"]
    cfg = json.loads(cfg_path.read_text())["jupyter-config-data"]
    exts = {e["name"] for e in cfg.get("federated_extensions", [])}
    for ext in (WIDGET_MANAGER, PYODIDE_KERNEL):
        if ext not in exts:
            problems.append(f"lab extension {ext} not in the build")
        if not (site / "extensions" / ext).is_dir():
            problems.append(f"extensions/{ext}/ missing")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = site / "files" / path.name
        if not copy.exists():
            problems.append(f"notebook files/{path.name} missing")
            continue
        nb = json.loads(copy.read_text())
        code = [_source(c) for c in nb["cells"] if c.get("cell_type") == "code"]
        if code and INSTALL_MARK not in code[0]:
            problems.append(f"files/{path.name}: its first code cell does not install routelab")
    wheels = _wheels_in_index(site)
    if "routelab" not in wheels:
        problems.append("routelab is not in the site's package index (pypi/all.json)")
    else:
        whl = site / "pypi" / wheels["routelab"]
        if not whl.exists():
            problems.append(f"pypi/{wheels['routelab']} missing")
        elif not whl.name.endswith("-py3-none-any.whl") or any(
                n.endswith(COMPILED) for n in zipfile.ZipFile(whl).namelist()):
            problems.append(f"pypi/{whl.name} is not pure Python")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=ROOT / "_site")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "lite")
    ap.add_argument("--check", action="store_true", help="only check an existing site")
    args = ap.parse_args(argv)
    if args.check:
        problems = check_site(args.output)
        print("\n".join(problems) or f"{args.output}: complete")
        return 1 if problems else 0
    build_site(args.output, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
