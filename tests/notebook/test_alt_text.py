"""Every figure the notebooks store carries alt text that reaches a reader.

What the pinned front ends read (checked by hand in the browser and in
nbconvert's templates, see docs/development.md): neither JupyterLab 4.6 nor
nbconvert 7.17 puts ``metadata["image/png"]["alt"]`` on the ``<img>`` of an
``image/png`` output -- JupyterLab leaves ``alt`` out, nbconvert writes "No
description has been provided for this image".  Both render the ``alt`` of
an ``<img>`` inside a ``text/html`` output, which is what
``routelab.notebook.show`` emits.  tests/browser checks the live DOM; this
file checks the stored notebooks and their nbconvert HTML export.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()
NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.glob("*.ipynb") if not p.name.startswith("."))
PLACEHOLDER = "No description has been provided for this image"
pytestmark = pytest.mark.skipif(not NOTEBOOKS, reason=f"no notebooks in {NOTEBOOKS_DIR}")


def _outputs(path: Path):
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        for out in cell.get("outputs", []):
            yield i, out


def _figures(path: Path) -> int:
    n = 0
    for _i, out in _outputs(path):
        page = "".join(out.get("data", {}).get("text/html", ""))
        n += page.count("<img")
    return n


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_figures_are_imgs_with_alt_text(path):
    for i, out in _outputs(path):
        data = out.get("data", {})
        assert "image/png" not in data and "image/jpeg" not in data, \
            f"{path.name} cell {i}: a bare image output has no alt text a reader gets; use show()"
        page = "".join(data.get("text/html", ""))
        for img in BeautifulSoup(page, "html.parser").find_all("img"):
            assert (img.get("alt") or "").strip(), f"{path.name} cell {i}: <img> without alt"
            plain = "".join(data.get("text/plain", ""))
            assert plain.startswith("[figure] "), f"{path.name} cell {i}: no text/plain fallback"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbconvert_html_export_has_alt_text_for_every_image(path, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir",
         str(tmp_path), str(path)],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "JUPYTER_PLATFORM_DIRS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Alternative text is missing" not in proc.stderr, proc.stderr[-3000:]
    page = (tmp_path / f"{path.stem}.html").read_text(encoding="utf-8")
    assert PLACEHOLDER not in page
    imgs = BeautifulSoup(page, "html.parser").select(".jp-OutputArea-output img")
    assert len(imgs) == _figures(path), "every stored figure is an <img> in the export"
    for img in imgs:
        assert (img.get("alt") or "").strip(), img.attrs.get("src", "")[:40]
