#!/usr/bin/env bash
# Create/refresh the project virtualenv (.venv) -- idempotent.
#
#   bash scripts/setup-env.sh          # create .venv if missing, install if inputs changed
#   ROUTELAB_FORCE_INSTALL=1 bash scripts/setup-env.sh   # reinstall regardless of the stamp
#
# Installs the pinned requirements.txt, then routelab itself in editable mode.
# A stamp file inside .venv records a hash of requirements.txt + pyproject.toml +
# the interpreter version; when it matches, nothing is reinstalled (a no-op run
# takes well under a second).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${ROUTELAB_VENV:-$ROOT/.venv}"
STAMP="$VENV/.routelab-install-stamp"

say() { printf '[setup-env] %s\n' "$*" >&2; }
die() { printf '[setup-env] ERROR: %s\n' "$*" >&2; exit 1; }

# pip on some machines prints one "Location ... is ignored" warning per package
# for an unused local index; drop that noise, keep everything else and pip's status.
pip_quiet() {
    local rc=0
    "$VENV/bin/python" -m pip "$@" 2>&1 | grep -v "^WARNING: Location '.*' is ignored" || true
    rc=${PIPESTATUS[0]}
    return "$rc"
}

pick_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON not found"
        echo "$PYTHON"; return
    fi
    local cand
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$cand"; return
        fi
    done
    die "need Python >= 3.11 (tried python3.11, python3). Install it, e.g. 'apt-get install python3', or set PYTHON=/path/to/python3.11"
}

create_venv() {
    local py="$1"
    say "creating virtualenv $VENV with $("$py" --version 2>&1) ($(command -v "$py"))"
    if "$py" -m venv "$VENV" 2>/tmp/routelab-venv-err.$$; then
        rm -f /tmp/routelab-venv-err.$$; return 0
    fi
    cat /tmp/routelab-venv-err.$$ >&2 || true
    rm -f /tmp/routelab-venv-err.$$
    rm -rf "$VENV"   # a half-made venv (no pip) would fool the next run
    # Debian/Ubuntu ship venv/ensurepip separately (python3-venv).
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        local ver pkgs
        ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        say "'$py -m venv' failed (python3-venv missing?); installing it with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || die "apt-get update failed"
        pkgs="python3-venv"
        if apt-cache show "python${ver}-venv" >/dev/null 2>&1; then pkgs="$pkgs python${ver}-venv"; fi
        say "apt-get install $pkgs"
        # shellcheck disable=SC2086
        apt-get install -y -qq $pkgs >&2 || apt-get install -y -qq python3-venv >&2 \
            || die "apt-get install python3-venv failed"
        "$py" -m venv "$VENV" || { rm -rf "$VENV"; die "'$py -m venv' still fails after installing python3-venv"; }
    else
        die "'$py -m venv' failed. On Debian/Ubuntu run: sudo apt-get install python3-venv  (then re-run this script)"
    fi
}

PY="$(pick_python)"

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1; then
    [[ -e "$VENV" ]] && { say "existing $VENV is broken (no python/pip); recreating"; rm -rf "$VENV"; }
    create_venv "$PY"
fi

want="$( { cat requirements.txt pyproject.toml; "$VENV/bin/python" -VV; } | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"

if [[ "$want" == "$have" && -z "${ROUTELAB_FORCE_INSTALL:-}" ]] \
        && "$VENV/bin/python" -c 'import routelab' >/dev/null 2>&1; then
    # the compiled per-packet modules (setup.py) must match their sources,
    # e.g. after a git pull; recompile the ones that changed
    if "$VENV/bin/python" -W ignore -c 'import sys, routelab.accel as a; sys.exit(a.needs_build())' \
            >/dev/null 2>&1; then
        say "up to date ($VENV; requirements.txt/pyproject.toml unchanged)"
        exit 0
    fi
    say "recompiling the per-packet modules (their sources changed) ..."
    (cd "$ROOT" && "$VENV/bin/python" setup.py -q build_ext --inplace >/dev/null) \
        || say "WARNING: recompiling failed; routelab runs as pure Python (slower)"
    exit 0
fi

t0=$SECONDS
rm -f "$STAMP"
say "installing requirements.txt into $VENV ..."
pip_quiet install -q -r requirements.txt || die "pip install -r requirements.txt failed"
# A C compiler and Python's headers let pip compile the per-packet loop (setup.py,
# about a minute); without them routelab installs as pure Python (same results;
# notebooks 01 and 02 several times slower, see README.md).  As root with apt, fetch what is missing.
has_headers() { "$VENV/bin/python" -c 'import os, sysconfig, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; }
if [[ -z "${ROUTELAB_PURE:-}" ]] && { ! command -v cc >/dev/null 2>&1 || ! has_headers; }; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing a C compiler and Python headers (apt-get gcc python3-dev) ..."
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc python3-dev; } >&2 \
            || say "WARNING: apt-get failed; routelab will run as pure Python (slower)"
    else
        say "NOTE: no C compiler or Python headers: routelab will run as pure Python (slower)."
        say "      For the compiled loop: sudo apt-get install gcc python3-dev, then re-run."
    fi
fi
say "installing routelab (editable; compiling the per-packet loop, ~1 min) ..."
pip_quiet install -q --no-deps -e . || die "pip install -e . failed"
"$VENV/bin/python" -c 'import routelab' || die "routelab is not importable after install"
# compiled (fast) or pure Python (no C compiler): say which; both give the same results
"$VENV/bin/python" -c 'import routelab.accel as a
print("[setup-env] per-packet loop:", "compiled" if a.compiled()
      else next(iter(a.status().values())))' >&2
echo "$want" > "$STAMP"
say "done in $((SECONDS - t0)) s ($("$VENV/bin/python" --version))"
