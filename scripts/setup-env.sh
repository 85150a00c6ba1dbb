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
    say "up to date ($VENV; requirements.txt/pyproject.toml unchanged)"
    exit 0
fi

t0=$SECONDS
rm -f "$STAMP"
say "installing requirements.txt into $VENV ..."
pip_quiet install -q -r requirements.txt || die "pip install -r requirements.txt failed"
say "installing routelab (editable) ..."
pip_quiet install -q --no-deps -e . || die "pip install -e . failed"
"$VENV/bin/python" -c 'import routelab' || die "routelab is not importable after install"
echo "$want" > "$STAMP"
say "done in $((SECONDS - t0)) s ($("$VENV/bin/python" --version))"
