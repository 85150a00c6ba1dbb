"""Real-browser checks of every notebook: JupyterLab + Debian chromium + Playwright.

For each ``notebooks/*.ipynb`` this opens the notebook in a JupyterLab server the
test starts itself, clears the stored outputs, runs all cells through the menu
(Run ▸ Run All Cells), and checks what a student would see:

* every code cell ran (has an execution count) and the kernel went back to Idle;
* no cell shows a traceback or any stderr output;
* widgets rendered (no "Error displaying widget"), and a notebook whose code
  mentions "explorer" shows at least one slider or dropdown;
* moving each slider / changing each dropdown, one at a time, changes BOTH the
  figure (``.widget-output img`` src) and the readout (the widget carrying CSS
  class ``routelab-readout``) in the same cell;
* every ``<img>`` in the notebook -- static figures and the explorers' live
  ones -- has a non-empty ``alt`` attribute (what a screen reader reads) and
  has loaded, after Run All and again after every control move.

Controls inside an element with class ``routelab-no-browser-check`` are left
alone (e.g. a "predict the value" input that drives no figure).

Screenshots go to ``screenshots/<notebook>-<step>.png`` at the repository root.

Environment variables
---------------------
ROUTELAB_REQUIRE_BROWSER=1  fail (instead of skip) when chromium or playwright is
                            missing -- CI sets it.
ROUTELAB_NOTEBOOKS_DIR      directory of notebooks to check (default: notebooks/).
ROUTELAB_CHROMIUM           chromium binary (default: /usr/bin/chromium).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

try:
    from playwright.sync_api import TimeoutError as PWTimeout
except ImportError:  # reported by the `browser` fixture (skip, or fail under CI)

    class PWTimeout(Exception):  # type: ignore[no-redef]
        pass


REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()
NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.glob("*.ipynb") if not p.name.startswith("."))
SCREENSHOTS = REPO / "screenshots"
CHROMIUM = os.environ.get("ROUTELAB_CHROMIUM", "/usr/bin/chromium")
REQUIRE_BROWSER = os.environ.get("ROUTELAB_REQUIRE_BROWSER", "") not in ("", "0")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

SERVER_START_TIMEOUT = 120  # s; first start compiles nothing but imports a lot
RUN_ALL_TIMEOUT = float(os.environ.get("ROUTELAB_BROWSER_RUN_TIMEOUT", "600"))  # s per notebook
CHANGE_TIMEOUT = float(os.environ.get("ROUTELAB_BROWSER_CHANGE_TIMEOUT", "20"))  # s per control
WIDGET_RENDER_TIMEOUT = 60  # s
VIEWPORT = {"width": 1400, "height": 1600}

# JupyterLab user settings for the throw-away server: no news/update toasts
# (they would need the internet and cover the page), no autosave (the test
# must never rewrite the committed notebooks), every cell attached to the DOM.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


# --------------------------------------------------------------------------- helpers
def _unavailable(why: str) -> None:
    """Skip loudly, or fail when the browser is required (CI)."""
    how = (
        "To run the browser tests: install Debian's chromium (`apt-get install -y chromium`, "
        "or point ROUTELAB_CHROMIUM at a binary) and the pinned playwright package "
        "(`bash scripts/setup-env.sh`); never `playwright install`. "
        "Set ROUTELAB_REQUIRE_BROWSER=1 to make this a failure instead of a skip."
    )
    if REQUIRE_BROWSER:
        pytest.fail(
            f"ROUTELAB_REQUIRE_BROWSER=1 but the browser is unavailable: {why}\n{how}",
            pytrace=False,
        )
    pytest.skip(f"BROWSER TESTS SKIPPED -- {why}. {how}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(method: str, url: str, timeout: float = 5.0):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
        return resp.status, (json.loads(body) if body else None)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "control"


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


@dataclass
class LabServer:
    url: str
    root: Path
    proc: subprocess.Popen
    log: Path

    def api(self, method: str, path: str):
        return _http(method, self.url + path)

    def shutdown_kernels_for(self, rel_path: str) -> None:
        """Shut down the kernel sessions of one notebook (keeps memory flat)."""
        try:
            _, sessions = self.api("GET", "/api/sessions")
            for s in sessions or []:
                if s.get("path") == rel_path:
                    self.api("DELETE", f"/api/sessions/{s['id']}")
        except (urllib.error.URLError, OSError):
            pass

    def stop(self) -> None:
        try:  # kernels are separate processes: ask the server to end them first
            _, kernels = self.api("GET", "/api/kernels")
            for k in kernels or []:
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except (urllib.error.URLError, OSError):
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                # start_new_session=True made our server the leader of its own group
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def lab_server(tmp_path_factory) -> LabServer:
    """A private JupyterLab on 127.0.0.1:<free port>, stopped by its own PID."""
    if not NOTEBOOKS:
        pytest.skip(f"no notebooks in {NOTEBOOKS_DIR}")
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        _unavailable("jupyterlab is not installed in this Python environment")

    tmp = tmp_path_factory.mktemp("jupyterlab")
    settings = tmp / "user-settings"
    for rel, content in LAB_SETTINGS.items():
        f = settings / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(content, indent=2))
    for d in ("config", "data", "runtime", "workspaces", "checkpoints", "ipython"):
        (tmp / d).mkdir()

    # Serve the notebooks' parent so URLs are /lab/tree/notebooks/<name>
    # (or /lab/tree/<dirname>/<name> for ROUTELAB_NOTEBOOKS_DIR).
    root = NOTEBOOKS_DIR.parent

    def command(port: int) -> list[str]:
        return lab_command(port, root, tmp, settings)

    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the kernel would inherit it and lose inline figures
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_DATA_DIR=str(tmp / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    # Another pytest-xdist worker (or anything else) may take the free port between
    # _free_port() and the server's bind: the server then exits at once
    # (port_retries=0), and we try again on a new port.
    for attempt in range(PORT_ATTEMPTS):
        log = tmp / f"jupyterlab-{attempt}.log"
        server = _start_lab(command, root, env, log)
        if server is not None:
            break
    else:
        pytest.fail(f"jupyter lab could not start on {PORT_ATTEMPTS} free ports:\n{_tail(log)}",
                    pytrace=False)
    try:
        yield server
    finally:
        server.stop()


PORT_ATTEMPTS = 3


def lab_command(port: int, root: Path, tmp: Path, settings: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        "--IdentityProvider.token=",
        "--ServerApp.disable_check_xsrf=True",  # loopback-only, lets the test use the REST API
        "--ServerApp.terminals_enabled=False",
        f"--ServerApp.root_dir={root}",
        f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}",  # keep the repo clean
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def _start_lab(command, root: Path, env: dict, log: Path) -> LabServer | None:
    """Start ``command(port)`` on a free port; None if the port was taken meanwhile."""
    port = _free_port()
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            command(port),
            cwd=root,
            env=env,
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = LabServer(url=f"http://127.0.0.1:{port}", root=root, proc=proc, log=log)
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    try:
        while True:
            if proc.poll() is not None:
                if "already in use" in log.read_text(errors="replace"):
                    return None
                pytest.fail(
                    f"jupyter lab exited with {proc.returncode}:\n{_tail(log)}", pytrace=False
                )
            try:
                status, _ = server.api("GET", "/api/status")
                if status == 200:
                    return server
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"jupyter lab did not answer within {SERVER_START_TIMEOUT} s:\n{_tail(log)}",
                    pytrace=False,
                )
            time.sleep(0.25)
    except BaseException:
        server.stop()
        raise


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"the playwright Python package is not importable ({exc})")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"no chromium executable at {CHROMIUM}")
    pw = sync_playwright().start()
    try:
        try:
            b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        except Exception as exc:  # noqa: BLE001 - any launch error means "no browser"
            _unavailable(f"chromium at {CHROMIUM} failed to start: {exc}")
        yield b
        b.close()
    finally:
        pw.stop()


# --------------------------------------------------------------------------- page logic
# JavaScript run in the page.  Kept as small functions with explicit results so
# every wait is "poll until a condition holds", never a fixed sleep.
JS_KERNEL_IDLE = r"""() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .some(e => /\bIdle\b/.test(e.textContent))"""

JS_ERRORS = r"""() => {
  const sel = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],' +
              '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]';
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const seen = new Set(), out = [];
  for (const el of document.querySelectorAll(sel)) {
    const top = el.closest('.jp-OutputArea-output') || el;
    if (seen.has(top)) continue;
    seen.add(top);
    const cell = el.closest('.jp-Cell');
    out.push({cell: cells.indexOf(cell), text: (top.innerText || '').slice(0, 3000)});
  }
  // ipywidgets 8 renders a view that failed to build as an "error widget"
  // ("Click to show javascript error."); clicking it reveals the message.
  for (const w of document.querySelectorAll('.jupyter-widgets-error-widget')) {
    if (w.classList.contains('icon-error') && w.parentElement) w.parentElement.click();
    out.push({cell: cells.indexOf(w.closest('.jp-Cell')),
              text: 'widget view failed to render: ' + (w.innerText || '').slice(0, 3000)});
  }
  const nb = document.querySelector('.jp-Notebook');
  if (nb && nb.innerText.includes('Error displaying widget')) {
    out.push({cell: -1, text: 'Error displaying widget (see the screenshot)'});
  }
  return out;
}"""

# Run-all progress: 'done' when the kernel is idle and every non-empty code
# cell shows [n]; 'error' as soon as an error/stderr output appears (Run All
# stops at the failing cell, so waiting longer would only time out).
JS_RUN_STATE = r"""() => {
  const idle = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
      .some(e => /\bIdle\b/.test(e.textContent));
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  let pending = 0;
  for (const c of cells) {
    const src = (c.querySelector('.jp-InputArea-editor .cm-content') || {}).textContent || '';
    if (!src.trim()) continue;
    const p = (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '';
    if (!/\[\d+\]/.test(p)) pending++;
  }
  if (document.querySelector(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) return 'error';
  return (idle && pending === 0) ? 'done' : false;
}"""

# Images a screen reader would announce without a description, or that did not load.
JS_IMG_PROBLEMS = r"""() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const imgs = [...document.querySelectorAll('.jp-Notebook .jp-Cell img')];
  const bad = imgs.filter(im => !(im.getAttribute('alt') || '').trim()
                              || (im.complete && im.naturalWidth === 0))
    .map(im => ({cell: cells.indexOf(im.closest('.jp-Cell')),
                 alt: im.getAttribute('alt'), loaded: im.naturalWidth > 0,
                 src: (im.getAttribute('src') || '').slice(0, 40)}));
  return {n: imgs.length, bad};
}"""

JS_PROMPTS = r"""() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]
    .map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '')"""

# Signature of what a control should change: figure image sources and readout
# texts, taken from the control's own cell when that cell has both, else from
# the whole notebook (an explorer may display its figure from another cell).
JS_SIGNATURE = r"""(cellIndex) => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const pick = (root) => ({
    imgs: [...root.querySelectorAll('.widget-output img')].map(i => i.getAttribute('src') || ''),
    readouts: [...root.querySelectorAll('.routelab-readout')].map(r => (r.innerText || '').trim()),
  });
  let s = cellIndex >= 0 ? pick(cells[cellIndex]) : null;
  let scope = 'cell';
  if (!s || !s.imgs.length || !s.readouts.length) { s = pick(document.querySelector('.jp-Notebook')); scope = 'notebook'; }
  return {scope, img: s.imgs.join('|'), readout: s.readouts.join('|'),
          nimg: s.imgs.filter(x => x).length, nreadout: s.readouts.filter(x => x).length};
}"""

JS_CHANGED = (
    r"""([cellIndex, before]) => {
  const sig = ("""
    + JS_SIGNATURE
    + r""")(cellIndex);
  const bad = document.querySelector(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],' +
      '.jupyter-widgets-error-widget');
  if (bad) return {state: 'error', sig};
  const imgChanged = sig.nimg > 0 && sig.img !== before.img;
  const readoutChanged = sig.nreadout > 0 && sig.readout !== before.readout;
  return (imgChanged && readoutChanged) ? {state: 'changed', sig} : false;
}"""
)


class NotebookPage:
    def __init__(self, page, stem: str):
        self.page = page
        self.stem = stem
        self.step = 0
        for old in SCREENSHOTS.glob(f"{stem}-[0-9][0-9]-*.png"):  # stale shots of an earlier run
            old.unlink()
        self.console: list[str] = []
        page.on("pageerror", lambda exc: self.console.append(f"pageerror: {exc}"))
        page.on(
            "console", lambda m: m.type == "error" and self.console.append(f"console: {m.text}")
        )

    # screenshots ------------------------------------------------------------
    def shot(self, name: str, locator=None) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"{self.stem}-{self.step:02d}-{name}.png"
        self.step += 1
        try:
            if locator is not None:
                locator.screenshot(path=str(path), timeout=15_000)
            else:
                self.page.screenshot(path=str(path), timeout=15_000)
        except Exception:  # noqa: BLE001 - a failed screenshot must not mask the real result
            try:
                self.page.screenshot(path=str(path), timeout=15_000)
            except Exception as exc:  # noqa: BLE001
                print(f"(could not save screenshot {path.name}: {exc})")
        return path

    # ui actions -------------------------------------------------------------
    def menu(self, top: str, item: str) -> None:
        page = self.page
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(top)}$")).click()
        entry = page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$"))
        entry.first.wait_for(state="visible")
        entry.first.click()
        page.locator(".lm-Menu").first.wait_for(state="hidden")

    def wait_kernel_ready(self, timeout_s: float) -> None:
        """Wait for Idle; accept a "Select Kernel" dialog (notebook without kernelspec)."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.page.wait_for_function(
                f"() => document.querySelector('.jp-Dialog') ? 'dialog' : ({JS_KERNEL_IDLE})()",
                timeout=max(1.0, deadline - time.monotonic()) * 1000,
                polling=200,
            ).json_value()
            if state != "dialog":
                return
            self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
            self.page.locator(".jp-Dialog").wait_for(state="detached")

    def errors(self) -> list[dict]:
        return self.page.evaluate(JS_ERRORS)

    def fail(self, msg: str) -> None:
        shot = self.shot("FAILED")
        extra = ("\nbrowser console:\n  " + "\n  ".join(self.console[-10:])) if self.console else ""
        pytest.fail(
            f"{self.stem}: {msg}\n(screenshot: {shot.relative_to(REPO)}){extra}", pytrace=False
        )

    def assert_no_errors(self, when: str) -> None:
        errs = self.errors()
        if errs:
            lines = [f"--- cell #{e['cell']}:\n{e['text']}" for e in errs]
            self.fail(f"error/stderr output {when}:\n" + "\n".join(lines))

    def assert_imgs_have_alt(self, when: str) -> int:
        """Every <img> has non-empty alt text and has loaded; returns how many there are."""
        try:  # a just-swapped live figure may still be decoding
            self.page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell img')]"
                ".every(im => im.complete)", timeout=10_000, polling=100)
        except PWTimeout:
            pass
        found = self.page.evaluate(JS_IMG_PROBLEMS)
        if found["bad"]:
            lines = [f"--- cell #{b['cell']}: alt={b['alt']!r}, loaded={b['loaded']}, "
                     f"src={b['src']}" for b in found["bad"]]
            self.fail(f"{len(found['bad'])} of {found['n']} <img> {when} lack alt text or did "
                      "not load:\n" + "\n".join(lines))
        return found["n"]

    def cell_of(self, locator) -> int:
        return locator.evaluate(
            "(el) => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]"
            ".indexOf(el.closest('.jp-Cell'))"
        )

    def label_of(self, locator, container: str) -> str:
        return locator.evaluate(
            "(el, sel) => { const c = el.closest(sel);"
            " const l = c && c.querySelector('.widget-label');"
            " return (l && l.innerText.trim()) || ''; }",
            container,
        )

    def signature(self, cell_index: int) -> dict:
        return self.page.evaluate(JS_SIGNATURE, cell_index)

    def wait_changed(self, cell_index: int, before: dict, what: str) -> None:
        handle = None
        try:
            handle = self.page.wait_for_function(
                JS_CHANGED, arg=[cell_index, before], timeout=CHANGE_TIMEOUT * 1000, polling=100
            )
        except PWTimeout:
            pass
        if handle is None:
            now = self.signature(cell_index)
            self.assert_no_errors(f"after {what}")
            parts = []
            if not (now["nimg"] and now["img"] != before["img"]):
                parts.append(
                    f"the figure (.widget-output img src) did not change "
                    f"({now['nimg']} image(s) in {now['scope']})"
                )
            if not (now["nreadout"] and now["readout"] != before["readout"]):
                parts.append(
                    f"the readout (.routelab-readout) did not change "
                    f"(text now: {now['readout'][:200]!r})"
                )
            self.fail(f"{what}: within {CHANGE_TIMEOUT:.0f} s " + " and ".join(parts))
        result = handle.json_value()
        if result["state"] == "error":
            self.assert_no_errors(f"after {what}")


def _code_sources(nb_path: Path) -> list[str]:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    return [
        "".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
    ]


def _in_opt_out(locator) -> bool:
    return locator.evaluate("(el) => !!el.closest('.routelab-no-browser-check')")


def _move_slider(nbp: NotebookPage, handle) -> str:
    """Move a slider handle to its far end (End/Home): one decisive value change,
    like a student dragging it across.  Returns a description of the move."""
    lo, hi, now = (
        float(handle.get_attribute(a)) for a in ("aria-valuemin", "aria-valuemax", "aria-valuenow")
    )
    key = "End" if now <= (lo + hi) / 2 else "Home"
    old_value = handle.get_attribute("aria-valuenow")
    handle.focus()
    handle.press(key)
    moved = False
    try:
        nbp.page.wait_for_function(
            "([el, v]) => el.getAttribute('aria-valuenow') !== v",
            arg=[handle.element_handle(), old_value],
            timeout=10_000,
        )
        moved = True
    except PWTimeout:
        pass
    if not moved:
        nbp.fail(
            f"pressing {key} on the focused slider handle did not move it "
            f"(value {old_value}, range {lo:g}..{hi:g})"
        )
    return f"moved with {key} to {handle.get_attribute('aria-valuenow')}"


def _next_option(nbp: NotebookPage, select) -> str:
    n_opts = select.locator("option").count()
    index = (select.evaluate("(el) => el.selectedIndex") + 1) % n_opts
    select.select_option(index=index)
    return f"changed to option {index} ({select.evaluate('(el) => el.value')!r})"


def _exercise(nbp: NotebookPage, control, what: str, slug: str, act) -> None:
    """Change one control and wait until its figure AND its readout change."""
    cell = nbp.cell_of(control)
    cell_loc = nbp.page.locator(".jp-Notebook .jp-Cell").nth(cell)
    control.scroll_into_view_if_needed()
    before = nbp.signature(cell)
    if not (before["nimg"] and before["nreadout"]):
        nbp.fail(
            f"{what}: needs a figure (.widget-output img) and a readout "
            f"(.routelab-readout) to check, found {before['nimg']} image(s) "
            f"and {before['nreadout']} readout(s)"
        )
    nbp.shot(f"{slug}-before", cell_loc)
    done = act(nbp, control)
    nbp.wait_changed(cell, before, f"{what} {done}")
    nbp.shot(f"{slug}-after", cell_loc)
    nbp.assert_imgs_have_alt(f"after {what} {done}")


# --------------------------------------------------------------------------- the test
if NOTEBOOKS:
    _params = [pytest.param(p, id=p.stem) for p in NOTEBOOKS]
else:
    _params = [
        pytest.param(
            None,
            id="no-notebooks",
            marks=pytest.mark.skip(
                reason=f"no *.ipynb in {NOTEBOOKS_DIR} yet -- nothing to check in the browser"
            ),
        )
    ]


# executes_notebook: a parallel run starts it early (tests/conftest.py); each
# pytest-xdist worker that runs one starts its own JupyterLab and chromium.
@pytest.mark.executes_notebook(param="nb_path", factor=1.1, extra=20.0)
@pytest.mark.parametrize("nb_path", _params)
def test_notebook_runs_and_explorers_respond(nb_path: Path, browser, lab_server: LabServer):
    rel = nb_path.relative_to(lab_server.root).as_posix()
    original = nb_path.read_bytes()
    sources = _code_sources(nb_path)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(60_000)
    nbp = NotebookPage(page, nb_path.stem)
    try:
        page.goto(f"{lab_server.url}/lab/tree/{quote(rel)}?reset", wait_until="domcontentloaded")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=90_000)
        nbp.wait_kernel_ready(120)

        # Clear stored outputs first: committed notebooks already show [1], [2], ...
        # and stored widget views, so only a cleared notebook proves a fresh run.
        nbp.menu("Edit", "Clear Outputs of All Cells")
        page.wait_for_function(
            "() => ![...document.querySelectorAll("
            "'.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]"
            ".some(p => /\\[\\d+\\]/.test(p.textContent))",
            timeout=30_000,
        )

        t0 = time.monotonic()
        nbp.menu("Run", "Run All Cells")
        state = None
        try:
            state = page.wait_for_function(
                JS_RUN_STATE, timeout=RUN_ALL_TIMEOUT * 1000, polling=250
            ).json_value()
        except PWTimeout:
            pass
        if state is None:
            nbp.assert_no_errors("while running all cells")
            nbp.fail(
                f"Run All Cells did not finish within {RUN_ALL_TIMEOUT:.0f} s; "
                f"prompts: {page.evaluate(JS_PROMPTS)}"
            )
        run_s = time.monotonic() - t0
        print(f"{nb_path.name}: Run All Cells took {run_s:.1f} s")
        if state == "error":
            nbp.assert_no_errors("while running all cells")

        # Widgets render asynchronously after the cells finish.
        wants_explorer = any("explorer" in s.lower() for s in sources)
        if wants_explorer:
            rendered = False
            try:
                page.wait_for_function(
                    "() => document.querySelector('.jp-Notebook .widget-slider, "
                    ".jp-Notebook .widget-dropdown') || document.querySelector('.jp-Notebook')"
                    ".innerText.includes('Error displaying widget')",
                    timeout=WIDGET_RENDER_TIMEOUT * 1000,
                    polling=200,
                )
                rendered = True
            except PWTimeout:
                pass
            if not rendered:
                nbp.fail(
                    "a code cell mentions 'explorer' but no slider or dropdown rendered "
                    f"within {WIDGET_RENDER_TIMEOUT} s"
                )
        nbp.shot("run-all")
        nbp.assert_no_errors("after Run All Cells")
        n_imgs = nbp.assert_imgs_have_alt("after Run All Cells")
        wants_figures = any("show(" in s for s in sources) or wants_explorer
        if wants_figures and not n_imgs:
            nbp.fail("the notebook shows figures, but no <img> rendered")
        print(f"{nb_path.name}: {n_imgs} <img>, all with alt text")

        sliders = page.locator(".jp-Notebook .widget-slider .noUi-handle")
        dropdowns = page.locator(".jp-Notebook .widget-dropdown select")
        n_sliders, n_dropdowns = sliders.count(), dropdowns.count()
        if wants_explorer and n_sliders + n_dropdowns == 0:
            nbp.fail(
                "a code cell mentions 'explorer' but no .widget-slider/.widget-dropdown rendered"
            )

        for i in range(n_sliders):
            handle = sliders.nth(i)
            if _in_opt_out(handle) or handle.evaluate(
                "(el) => !!el.closest('.noUi-target[disabled]')"
            ):
                continue
            label = nbp.label_of(handle, ".widget-slider") or f"slider{i}"
            _exercise(
                nbp, handle, f"slider {i} ({label!r})", f"slider-{_slug(label)}", _move_slider
            )

        for j in range(n_dropdowns):
            select = dropdowns.nth(j)
            if _in_opt_out(select) or select.is_disabled() or select.locator("option").count() < 2:
                continue
            label = nbp.label_of(select, ".widget-dropdown") or f"dropdown{j}"
            _exercise(
                nbp, select, f"dropdown {j} ({label!r})", f"dropdown-{_slug(label)}", _next_option
            )

        nbp.assert_no_errors("after moving the controls")
    finally:
        try:
            context.close()
        finally:
            lab_server.shutdown_kernels_for(rel)
            modified = nb_path.read_bytes() != original  # belt and braces: autosave is off
            if modified:
                nb_path.write_bytes(original)
    if modified:
        pytest.fail(
            f"{nb_path} was modified on disk during the browser test (restored the original)",
            pytrace=False,
        )


def test_a_taken_port_means_another_try_any_other_exit_a_failure(tmp_path):
    """_start_lab: the server lost the race for its port -> None (lab_server retries)."""
    def fake(msg: str, rc: int):
        return lambda port: [sys.executable, "-c", f"print({msg!r}); raise SystemExit({rc})"]

    env = dict(os.environ)
    taken = fake("[W ServerApp] The port 8888 is already in use.", 1)
    assert _start_lab(taken, tmp_path, env, tmp_path / "a.log") is None
    with pytest.raises(pytest.fail.Exception, match="exited with 2"):
        _start_lab(fake("[E ServerApp] something else", 2), tmp_path, env, tmp_path / "b.log")
