#!/usr/bin/env bash
# Run every check the project has, the same way locally and in CI:
#   1. scripts/setup-env.sh           (.venv, pinned requirements, routelab -e)
#   2. Debian chromium for the browser tests (apt-get, only when root and missing)
#   3. python scripts/student.py      (student/ and solutions/, as `make student`)
#   4. python -m pytest tests         (unit + property + browser + binder + hand-out tests)
#   5. python -m pytest --nbval notebooks/   (stored notebook outputs still hold)
# Extra arguments are passed to both pytest runs, e.g.  bash scripts/test.sh -x -q
# Exit status is non-zero if any stage fails.  The last line is a count summary.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${ROUTELAB_VENV:-$ROOT/.venv}/bin/python"
START=$SECONDS

say() { printf '\n[test.sh] %s\n' "$*"; }

# The kernel inherits the environment: MPLBACKEND=Agg would make inline
# figures vanish and break the stored-vs-fresh comparison, so never pass it on.
unset MPLBACKEND

say "setting up the environment"
if ! bash scripts/setup-env.sh; then
    echo "[test.sh] FAILED: scripts/setup-env.sh"
    echo "summary: 0 passed, 1 failed"
    exit 1
fi
# The per-packet modules should run compiled (setup.py); CI insists on it
# (ROUTELAB_REQUIRE_COMPILED=1 in .ci/run) so a broken build cannot hide behind
# the pure-Python fallback, which gives the same results only slower.
if ! "$PY" -c 'import sys, routelab.accel as a; sys.exit(not a.compiled())' 2>/dev/null; then
    status="$("$PY" -c 'import routelab.accel as a; print(next(iter(a.status().values())))' 2>&1)"
    if [[ -n "${ROUTELAB_REQUIRE_COMPILED:-}" ]]; then
        echo "[test.sh] FAILED: the per-packet modules are not compiled: $status"
        echo "summary: 0 passed, 1 failed"
        exit 1
    fi
    echo "[test.sh] NOTE: per-packet modules run as $status (slower; results are the same)"
fi

# --- chromium for tests/browser --------------------------------------------
CHROMIUM="${ROUTELAB_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$CHROMIUM" ]]; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing Debian chromium for the browser tests (apt-get, ~30 s)"
        log="$(mktemp /tmp/routelab-apt-chromium.XXXXXX.log)"
        if DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >>"$log" 2>&1; then
            echo "[test.sh] chromium installed: $("$CHROMIUM" --version 2>/dev/null | head -1)"
        else
            echo "[test.sh] WARNING: could not install chromium; last lines of $log:"
            tail -n 20 "$log"
        fi
    else
        echo "[test.sh] NOTE: $CHROMIUM not found and not root; browser tests will be skipped"
        echo "[test.sh]       (unless ROUTELAB_REQUIRE_BROWSER=1, then they fail). Install: sudo apt-get install chromium"
    fi
fi

# --- student copies and answer keys (make student) ---------------------------------
# Generated, not committed: every run writes student/ and solutions/ afresh, so CI
# leaves them behind as its hand-out artefacts.  tests/notebook/test_handout.py then
# runs each student copy up to its first stub and each answer key through its checks.
say "writing student/ and solutions/ (scripts/student.py)"
rc_student=0
"$PY" scripts/student.py >/dev/null || rc_student=$?
[[ $rc_student == 0 ]] || echo "[test.sh] FAILED: scripts/student.py (exit $rc_student)"

REPORTS="$(mktemp -d /tmp/routelab-test-reports.XXXXXX)"
binder_pid=""
cleanup() {
    [[ -n "$binder_pid" ]] && kill "$binder_pid" 2>/dev/null
    rm -rf "$REPORTS"
}
trap cleanup EXIT

# --- stage: unit/browser/binder tests -----------------------------------------
# The binder-environment test mostly waits on pip, so it runs in the background
# (its own pytest process, output shown afterwards) while the rest of tests/ runs.
BINDER_TEST="tests/test_binder_env.py::test_binder_requirements_alone_run_the_notebooks"
deselect=()
if [[ -f tests/test_binder_env.py ]]; then
    say "stage 1/2 (background): python -m pytest $BINDER_TEST"
    "$PY" -m pytest "$BINDER_TEST" -s -p no:cacheprovider --timeout=900 \
        --junitxml="$REPORTS/binder.xml" "$@" >"$REPORTS/binder.log" 2>&1 &
    binder_pid=$!
    deselect=(--deselect "$BINDER_TEST")
fi
say "stage 1/2: python -m pytest tests"
# --timeout: no single test may hang CI (tests can set their own via the marker)
"$PY" -m pytest tests --timeout=900 "${deselect[@]}" --junitxml="$REPORTS/unit.xml" "$@"
rc_unit=$?
if [[ -n "$binder_pid" ]]; then
    wait "$binder_pid"
    rc_binder=$?
    binder_pid=""
    say "stage 1/2 (background) output: $BINDER_TEST"
    cat "$REPORTS/binder.log"
    # exit 5 = nothing collected: fine for either half as long as the other ran tests
    if [[ $rc_unit == 5 && $rc_binder == 0 ]]; then rc_unit=0; fi
    if [[ $rc_binder == 5 ]]; then rc_binder=0; fi
    if [[ $rc_unit == 0 && $rc_binder != 0 ]]; then rc_unit=$rc_binder; fi
fi

# --- stage: nbval ----------------------------------------------------------------
nbval_note=""
if compgen -G "notebooks/*.ipynb" >/dev/null; then
    say "stage 2/2: python -m pytest --nbval notebooks/"
    "$PY" -m pytest --nbval --nbval-current-env --nbval-cell-timeout=600 \
        --nbval-sanitize-with tests/nbval_sanitize.cfg \
        --junitxml="$REPORTS/nbval.xml" "$@" notebooks/
    rc_nbval=$?
    if [[ $rc_nbval == 5 ]]; then   # nothing collected (e.g. deselected by -k): not a failure here
        nbval_note=" (no notebook cells collected)"
        rc_nbval=0
    fi
else
    say "stage 2/2: no notebooks/*.ipynb yet -- nbval stage skipped"
    rc_nbval=0
    nbval_note=" (no notebooks yet)"
fi

# --- summary ---------------------------------------------------------------------
status() { if [[ $1 == 0 ]]; then echo "ok"; else echo "FAILED (pytest exit $1)"; fi; }
counts="$("$PY" - "$REPORTS"/unit.xml "$REPORTS"/binder.xml "$REPORTS"/nbval.xml <<'PYEOF'
import sys, xml.etree.ElementTree as ET
tot = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except Exception:
        continue
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for s in suites:
        for k in tot:
            tot[k] += int(s.get(k, 0) or 0)
failed = tot["failures"] + tot["errors"]
passed = tot["tests"] - failed - tot["skipped"]
print(f"{passed} passed, {failed} failed, {tot['skipped']} skipped")
PYEOF
)"
[[ -n "$counts" ]] || counts="0 passed, 0 failed"

overall=0
[[ $rc_unit == 0 && $rc_nbval == 0 && $rc_student == 0 ]] || overall=1
# pytest exit 5 in stage 1 means "no tests ran" -- that is a failure, not a pass.
say "student/solutions: $(status $rc_student); unit/browser/binder tests: $(status $rc_unit); notebooks (nbval): $(status $rc_nbval)$nbval_note"
if [[ $overall == 0 ]]; then
    echo "[test.sh] ALL CHECKS PASSED in $((SECONDS - START)) s"
else
    echo "[test.sh] SOME CHECKS FAILED after $((SECONDS - START)) s"
    [[ $counts == *" 0 failed"* ]] && counts="${counts/ 0 failed/ 1 failed}"
fi
echo "summary: $counts"
exit $overall
