"""The compiled per-packet modules (setup.py, routelab/accel.py).

routelab's hot modules are compiled from their unchanged ``.py`` sources;
these tests check that the compiled and the interpreted code give the same
results, bit for bit, and that a compiled module is never used once its
source has changed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import routelab
from routelab import accel

REPO = Path(__file__).resolve().parents[1]

# Each run's fingerprint (benchmarks/fingerprint.py): summary, counters, profile and
# a hash of every per-packet, CPU-time and cache-sample array.
PROBE = r"""
import importlib.util, json, sys
import routelab.accel as accel
from routelab.scenarios import get
spec = importlib.util.spec_from_file_location("fingerprint", sys.argv[2])
fp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp)
out = {"status": accel.status(), "runs": {}}
for name, knobs in json.loads(sys.argv[1]):
    out["runs"][name + json.dumps(knobs)] = fp.plain_fingerprint(get(name).run(seed=3, **knobs))
print(json.dumps(out))
"""
CASES = [
    ("ping", {"duration": 1.0, "background_pps": 20000}),
    ("worm", {"duration": 1.0, "worm_hosts": 3}),
    ("worm", {"duration": 1.0, "worm_hosts": 2, "kernel": "2.4.24-nocache", "uplink_mbps": 6}),
    ("worm", {"duration": 1.0, "worm_hosts": 3, "kernel": "2.6.1"}),
    ("rcu", {"duration": 0.2}),
    ("rcu", {"duration": 0.2, "kernel": "2.6.0-rcu-bh", "flow_len": 4}),
    # one pinned loop with a sleeper (idle ticks on CPU1), the TX interrupt unmasked
    ("rcu", {"duration": 0.6, "loops": "cpu0", "sleepers": 1, "others_on": "loop",
             "tx_irq_us": 65.5, "user_tick_share": 0.3}),
]


def _probe(env_extra: dict) -> dict:
    """Fingerprints of CASES from a fresh interpreter with ``env_extra`` set."""
    env = {k: v for k, v in os.environ.items() if k != "ROUTELAB_PURE"}
    env.update(PYTHONPATH=str(REPO), **env_extra)
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CASES),
                        str(REPO / "benchmarks" / "fingerprint.py")], env=env,
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def test_status_names_every_accelerated_module():
    st = accel.status()
    assert set(st) == set(accel.ACCELERATED)
    for name, how in st.items():
        assert how == "compiled" or how.startswith("pure Python ("), (name, how)
    # all or nothing: the compiled modules share C types
    assert len(set(st.values())) == 1
    assert accel.compiled() == (next(iter(st.values())) == "compiled")


def test_the_package_in_use_is_the_one_reported():
    import routelab.router as router

    compiled_file = not router.__file__.endswith(".py")
    assert compiled_file == accel.compiled()


@pytest.mark.skipif(not accel.compiled(), reason="routelab is not compiled here")
def test_compiled_and_pure_python_give_identical_results():
    compiled = _probe({})
    pure = _probe({"ROUTELAB_PURE": "1"})
    assert set(compiled["status"].values()) == {"compiled"}
    assert all(v.startswith("pure Python (ROUTELAB_PURE") for v in pure["status"].values())
    assert compiled["runs"].keys() == pure["runs"].keys()
    for case, want in compiled["runs"].items():
        for part in want:
            assert want[part] == pure["runs"][case][part], (case, part)


@pytest.mark.skipif(not accel.compiled(), reason="routelab is not compiled here")
def test_a_compiled_module_older_than_its_source_is_not_used(tmp_path):
    # a copy of the package whose router.py was edited after the build
    pkg = tmp_path / "routelab"
    shutil.copytree(Path(routelab.__file__).parent, pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    with open(pkg / "router.py", "a") as f:
        f.write("\n# edited after the build\n")
    code = ("import warnings, json; warnings.simplefilter('always')\n"
            "import routelab.accel as a, routelab.router as r\n"
            "print(json.dumps([a.status(), r.__file__, a.needs_build()]))")
    env = {k: v for k, v in os.environ.items() if k != "ROUTELAB_PURE"}
    env["PYTHONPATH"] = str(tmp_path)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    status, router_file, needs_build = json.loads(p.stdout)
    assert set(status.values()) == {"pure Python (compiled from an older source)"}
    assert router_file.endswith("router.py")
    assert needs_build is True
    assert "no longer match their source" in p.stderr and "make build" in p.stderr


@pytest.mark.skipif(not accel.compiled(), reason="routelab is not compiled here")
@pytest.mark.skipif(shutil.which("objdump") is None or os.uname().machine != "x86_64",
                    reason="needs objdump on x86-64")
def test_the_compiled_loop_really_prefetches():
    # router.pxd _chain_prefetch is a pure speed hint: no result depends on it, so
    # only the machine code shows whether the compiler kept it (gcc -O1 deleted
    # the whole call as side-effect free before the volatile asm was added)
    import routelab.router as router

    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", router.__file__],
                         capture_output=True, text=True, timeout=120).stdout
    assert out.count("prefetcht0") >= 3
