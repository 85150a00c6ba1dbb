"""Build hook: compile the per-packet loop's modules with Cython, when possible.

routelab is a pure-Python package.  The modules on the per-packet path
(``ACCELERATED`` below) are *also* compiled, unchanged, by Cython; an
"augmenting" ``.pxd`` file beside a module, and ``@cython.locals``
declarations in it, give the hot variables C types.  There is one source
for each stage: the compiled module and the interpreted one run the same
code and give bit-identical results (``benchmarks/fingerprint.py`` checks).

The extensions are optional: with no C compiler, or with
``ROUTELAB_PURE=1`` set at install time, routelab installs as pure Python
and runs the same model several times slower (4-6x for the notebooks).
``routelab.accel`` reports what is in use and refuses a compiled module
whose source has changed since it was built (it falls back to the source,
with a warning).
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
MANIFEST = ROOT / "routelab" / "_accel_manifest.json"


def _accel():
    """routelab/accel.py, loaded on its own (standard library only: the build
    environment has no numpy): the module list and the digests it checks."""
    spec = importlib.util.spec_from_file_location("_routelab_accel", ROOT / "routelab/accel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ACCEL = _accel()
ACCELERATED = list(ACCEL.ACCELERATED.values())


def ext_modules() -> list:
    if os.environ.get("ROUTELAB_PURE", "") not in ("", "0"):
        return []          # (compiled modules already in the tree stay usable)
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("routelab: Cython not available, installing pure Python")
        return []
    exts = cythonize(ACCELERATED, quiet=True,
                     compiler_directives={"language_level": 3, "annotation_typing": False,
                                          "embedsignature": True})
    for e in exts:
        e.optional = True            # no compiler: keep going, pure Python
        # -O2 (ROUTELAB_CFLAGS_OPT overrides): since the per-packet stages became
        # methods of their kernel modules' C classes, -O2's inlining of Cython's
        # small helpers inside each module takes ~4 % of the instructions off the
        # cache-hit run (callgrind, 729 M vs 753 M); the build takes ~15 % longer
        e.extra_compile_args = [os.environ.get("ROUTELAB_CFLAGS_OPT", "-O2")]
    # what the compiled modules were built from (routelab.accel compares)
    digests = {p: ACCEL.source_digest(p, ROOT) for p in ACCELERATED}
    MANIFEST.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return exts


class ParallelBuildExt(build_ext):
    """Compile the extensions side by side (router.c alone takes most of a minute)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


setup(ext_modules=ext_modules(), cmdclass={"build_ext": ParallelBuildExt},
      package_data={"routelab": ["_accel_manifest.json", "*.pxd", "*/*.pxd", "data/*.json"]})
