"""The compiled dispatcher reads no module global: every module-level name that
``Run.dispatch`` and the router.py functions it calls read is declared in
``router.pxd`` (a C constant or C global) or cimported there.

A name the ``.pxd`` does not declare still works compiled, but as a dict
lookup by name (``__Pyx_GetModuleGlobalName``) and a Python-object comparison
on every packet: story 1's ``K_ARP``, ``O_HELD``, ``O_NEIGH_DROP`` and
``N_QUEUED`` did that on the cache-hit path, unnoticed.  Two checks: one on the
source (``ast``; runs everywhere), one on the generated ``router.c`` (after a
build).
"""
from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

from routelab import accel

ROUTER = Path(accel.__file__).resolve().parent / "router.py"
PXD = ROUTER.with_suffix(".pxd")
ROUTER_C = ROUTER.with_suffix(".c")
# Cython's compile-time module (cython.cast, cython.compiled): no lookup compiled.
COMPILE_TIME = {"cython"}


def pxd_names(text: str) -> set[str]:
    """Module-level names a ``.pxd`` declares: ``cdef``/``cpdef`` variables and
    functions, ``cdef class`` names, and ``from ... cimport`` names."""
    text = re.sub(r"#[^\n]*", "", text)
    # one logical line per declaration: join what parentheses continue
    lines, buf, depth = [], "", 0
    for line in text.splitlines():
        if not buf and (not line.strip() or line[0].isspace()):
            continue                      # blank, or a body line (an inline function's)
        buf += " " + line.strip()
        depth += line.count("(") - line.count(")")
        if depth <= 0:
            lines.append(buf.strip())
            buf, depth = "", 0
    names = set()
    for line in lines:
        m = re.match(r"from\s+\S+\s+cimport\s+(.*)", line)
        if m:
            for part in m.group(1).strip("() ").split(","):
                names.add(part.split(" as ")[-1].strip())
            continue
        m = re.match(r"(?:cdef|cpdef)\s+(.*)", line)
        if not m:
            continue
        decl = m.group(1).rstrip(":")
        if "(" in decl:                   # a function: the name before its arguments
            names.add(re.findall(r"(\w+)\s*\(", decl)[0])
        elif decl.startswith("class "):
            names.add(re.match(r"class\s+(\w+)", decl).group(1))
        else:                             # "long A, B, C": the type, then the names
            first, *rest = decl.split(",")
            names.add(first.split()[-1])
            names.update(r.strip() for r in rest)
    return {n for n in names if n}


def module_names(tree: ast.Module) -> set[str]:
    """Names bound at a module's top level (imports, assignments, defs, classes)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    out.add(sub.id)
    return out


def local_names(fn: ast.FunctionDef) -> set[str]:
    """Arguments and every name the function binds (its locals)."""
    a = fn.args
    out = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    out.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            out.add(sub.id)
    return out


def annotation_nodes(fn: ast.FunctionDef) -> set[int]:
    """The ``Name`` nodes inside annotations (never evaluated: the module has
    ``from __future__ import annotations``, and the build ignores them)."""
    a = fn.args
    notes = [fn.returns] + [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs
                            + [a.vararg, a.kwarg] if x is not None]
    notes += [n.annotation for n in ast.walk(fn) if isinstance(n, ast.AnnAssign)]
    return {id(n) for note in notes if note is not None for n in ast.walk(note)}


def hot_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """``dispatch`` and, transitively, every module-level function of router.py
    it calls by name (``_not_forwarded``, ...)."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    methods = [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
               if isinstance(m, ast.FunctionDef) and m.name == "dispatch"]
    assert len(methods) == 1, "router.py should define one dispatch method"
    hot, todo = {"dispatch": methods[0]}, [methods[0]]
    while todo:
        for sub in ast.walk(todo.pop()):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                    and sub.func.id in funcs and sub.func.id not in hot:
                hot[sub.func.id] = funcs[sub.func.id]
                todo.append(funcs[sub.func.id])
    return hot


def undeclared_reads(py_text: str, pxd_text: str) -> dict[str, set[str]]:
    """Per hot function, the module-level names it reads that the ``.pxd``
    neither declares nor cimports."""
    tree = ast.parse(py_text)
    declared, top = pxd_names(pxd_text), module_names(tree)
    out = {}
    for name, fn in hot_functions(tree).items():
        local = local_names(fn)
        notes = annotation_nodes(fn)
        reads = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load) and id(n) not in notes}
        bad = {r for r in reads - local - declared - COMPILE_TIME
               if r in top or not hasattr(builtins, r)}
        if bad:
            out[name] = bad
    return out


def test_dispatch_reads_only_declared_names():
    bad = undeclared_reads(ROUTER.read_text(), PXD.read_text())
    assert not bad, ("module-level names read per packet but not declared in router.pxd "
                     f"(declare them there, as cdef constants or objects): {bad}")


def test_the_check_sees_an_undeclared_constant():
    """The check itself: drop one declaration from the .pxd and it is named."""
    pxd = PXD.read_text()
    assert "K_REDIR, K_ARP" in pxd
    bad = undeclared_reads(ROUTER.read_text(), pxd.replace("K_REDIR, K_ARP", "K_REDIR"))
    assert "K_ARP" in bad["dispatch"] and "K_ARP" in bad["_not_forwarded"]
    # and a name only the module (not Python's builtins) defines
    src = ROUTER.read_text() + "\n\ndef _extra():\n    return KEEP_TIMES_MAX + len([])\n"
    src = src.replace("_not_forwarded(self, lg,", "_extra()\n                        "
                      "_not_forwarded(self, lg,")
    # (a def function is itself a module global: calling it is a lookup too)
    assert undeclared_reads(src, pxd) == {"dispatch": {"_extra"}, "_extra": {"KEEP_TIMES_MAX"}}


def test_pxd_names_parses_declarations():
    text = ("from a.b cimport X, Y as Z\ncdef long A, B\ncdef object c, d  # note\n"
            "cdef inline void f(Packets pk,\n        Py_ssize_t j) noexcept:\n    g(pk)\n"
            "cdef class K:\n    cdef long v\ncpdef double h(double x) except -1\n")
    assert pxd_names(text) == {"X", "Z", "A", "B", "c", "d", "f", "K", "h"}


def c_bodies(c_text: str, name: str) -> list[str]:
    """The bodies, in Cython's generated C, of router.py's function ``name``
    (a ``def``'s implementation, a ``cdef``/``cpdef`` function)."""
    head = re.compile(r"^static [^;\n]*\b__pyx_p?f_8routelab_6router_(?:\d+Run_)?\d*"
                      + re.escape(name) + r"\([^;]*$", re.M)
    out = []
    for m in head.finditer(c_text):
        end = c_text.find("\n}\n", m.end())
        out.append(c_text[m.start():end])
    return out


def test_compiled_dispatch_does_no_module_global_lookup():
    if not ROUTER_C.exists():
        pytest.skip("routelab/router.c is absent: build first "
                    "(python setup.py build_ext --inplace) to check the generated C")
    try:
        built = json.loads((ROUTER.parent / "_accel_manifest.json").read_text())
    except (OSError, ValueError):
        built = {}
    if built.get("routelab/router.py") != accel.source_digest("routelab/router.py"):
        pytest.skip("routelab/router.c was generated from an older router.py/.pxd: rebuild")
    c_text = ROUTER_C.read_text()
    found = {}
    for name in hot_functions(ast.parse(ROUTER.read_text())):
        bodies = c_bodies(c_text, name)
        assert bodies, f"no C body found for {name} in router.c"
        calls = [c for b in bodies for c in re.findall(r"__Pyx_GetModuleGlobalName\(([^)]*)\)", b)]
        found[name] = sorted({re.sub(r".*__pyx_n_[a-z]_", "", c) for c in calls})
    bad = {k: v for k, v in found.items() if v}
    assert not bad, f"compiled router.c looks these names up in the module dict: {bad}"


def test_c_bodies_finds_the_lookups():
    c = ("static PyObject *__pyx_pf_8routelab_6router_3Run_12dispatch(PyObject *s); /* proto */\n"
         "static PyObject *__pyx_pf_8routelab_6router_3Run_12dispatch(PyObject *s) {\n"
         "  __Pyx_GetModuleGlobalName(__pyx_t_2, __pyx_mstate_global->__pyx_n_u_K_ARP);\n}\n"
         "static int __pyx_f_8routelab_6router__not_forwarded(PyObject *r) {\n  return 0;\n}\n")
    (body,) = c_bodies(c, "dispatch")
    assert "K_ARP" in body and "proto" not in body
    assert c_bodies(c, "_not_forwarded") and not c_bodies(c, "forwarded")
