#!/usr/bin/env bash
# Run every check the project has, the same way locally and in CI:
#   1. scripts/setup-env.sh           (.venv, pinned requirements, routelab -e)
#   2. Debian chromium for the browser tests (apt-get, only when root and missing)
#   3. python scripts/student.py      (student/ and solutions/, as `make student`)
#   4. python -m pytest -n auto tests --nbval notebooks/
#        unit + property + browser + hand-out tests, and nbval (stored notebook
#        outputs still hold), in one session on every core (pytest-xdist);
#        the binder-environment test runs beside it in a process of its own
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
t_student=$SECONDS
"$PY" scripts/student.py >/dev/null || rc_student=$?
t_student=$((SECONDS - t_student))
[[ $rc_student == 0 ]] || echo "[test.sh] FAILED: scripts/student.py (exit $rc_student)"

REPORTS="$(mktemp -d /tmp/routelab-test-reports.XXXXXX)"
binder_pid=""
cleanup() {
    [[ -n "$binder_pid" ]] && kill "$binder_pid" 2>/dev/null
    rm -rf "$REPORTS"
}
trap cleanup EXIT

# --- stage: tests/ and nbval over notebooks/, one pytest session on every core ----
# Unit, property, browser and hand-out tests and nbval's run of every notebook
# are one pytest session spread over the cores by pytest-xdist (-n auto): most
# of the time goes into executing notebooks (nbval, the hand-out copies, the
# browser's Run All), each in a kernel of its own, so two cores run two at once.
# tests/conftest.py keeps each notebook's nbval cells together and in order on
# one worker (they share a kernel) and starts the notebook executions first,
# longest first (docs/development.md, "CI time budget").
# ROUTELAB_TEST_WORKERS=N picks the number of workers; 0 runs it all in one
# process, in file order.  The binder-environment test mostly waits on pip, so
# it runs in a pytest process of its own in the background.
BINDER_TEST="tests/test_binder_env.py::test_binder_requirements_alone_run_the_notebooks"
WORKERS="${ROUTELAB_TEST_WORKERS:-auto}"
deselect=()
t_binder=$SECONDS
if [[ -f tests/test_binder_env.py ]]; then
    say "background: python -m pytest $BINDER_TEST"
    "$PY" -m pytest "$BINDER_TEST" -s -p no:cacheprovider --timeout=900 \
        --junitxml="$REPORTS/binder.xml" "$@" >"$REPORTS/binder.log" 2>&1 &
    binder_pid=$!
    deselect=(--deselect "$BINDER_TEST")
fi

targets=(tests)
nbval_args=()
nbval_note=""
if compgen -G "notebooks/*.ipynb" >/dev/null; then
    targets+=(notebooks/)
    nbval_args=(--nbval --nbval-current-env --nbval-cell-timeout=600
                --nbval-sanitize-with tests/nbval_sanitize.cfg)
else
    nbval_note=" (no notebooks yet)"
fi
xdist_args=()
if [[ "$WORKERS" != 0 ]]; then
    if "$PY" -c 'import xdist' 2>/dev/null; then
        xdist_args=(-n "$WORKERS" --dist loadgroup --no-loadscope-reorder)
    else
        echo "[test.sh] NOTE: pytest-xdist is not installed; running in one process (slower)"
    fi
fi
say "python -m pytest ${xdist_args[*]} tests ${nbval_args[*]:+--nbval notebooks/}"
t_main=$SECONDS
# --timeout: no single test may hang CI (tests can set their own via the marker)
"$PY" -m pytest "${xdist_args[@]}" "${nbval_args[@]}" --timeout=900 "${deselect[@]}" \
    --junitxml="$REPORTS/main.xml" "$@" "${targets[@]}"
rc_main=$?
t_main=$((SECONDS - t_main))
rc_binder=0
if [[ -n "$binder_pid" ]]; then
    wait "$binder_pid"
    rc_binder=$?
    binder_pid=""
    t_binder=$((SECONDS - t_binder))
    say "background output: $BINDER_TEST"
    cat "$REPORTS/binder.log"
    # exit 5 = nothing collected: fine for either half as long as the other ran tests
    if [[ $rc_main == 5 && $rc_binder == 0 ]]; then rc_main=0; fi
    if [[ $rc_binder == 5 ]]; then rc_binder=0; fi
else
    t_binder=0
fi
# Which part failed: nbval's items are notebooks/*.ipynb cells, the rest is tests/.
read -r fail_unit fail_nbval n_nbval < <("$PY" - "$REPORTS/main.xml" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
unit = nbval = n_nbval = 0
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except Exception:
    cases = []
for case in cases:
    is_nb = case.get("classname", "").startswith("notebooks")
    n_nbval += is_nb
    bad = case.find("failure") is not None or case.find("error") is not None
    if bad and is_nb:
        nbval += 1
    elif bad:
        unit += 1
print(unit, nbval, n_nbval)
PYEOF
)
rc_unit=0; rc_nbval=0
if [[ $rc_main != 0 ]]; then
    if [[ ${fail_nbval:-0} != 0 ]]; then rc_nbval=$rc_main; fi
    if [[ ${fail_unit:-0} != 0 || ${fail_nbval:-0} == 0 ]]; then rc_unit=$rc_main; fi
fi
if [[ $rc_unit == 0 && $rc_binder != 0 ]]; then rc_unit=$rc_binder; fi
if [[ ${#nbval_args[@]} != 0 && ${n_nbval:-0} == 0 ]]; then
    nbval_note=" (no notebook cells collected)"
fi

# --- summary ---------------------------------------------------------------------
status() { if [[ $1 == 0 ]]; then echo "ok"; else echo "FAILED (pytest exit $1)"; fi; }
counts="$("$PY" - "$REPORTS"/main.xml "$REPORTS"/binder.xml <<'PYEOF'
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
echo "[test.sh] wall time: student/solutions ${t_student} s; tests + nbval ${t_main} s (${xdist_args[*]:-one process}); binder env (background) ${t_binder} s"
if [[ $overall == 0 ]]; then
    echo "[test.sh] ALL CHECKS PASSED in $((SECONDS - START)) s"
else
    echo "[test.sh] SOME CHECKS FAILED after $((SECONDS - START)) s"
    [[ $counts == *" 0 failed"* ]] && counts="${counts/ 0 failed/ 1 failed}"
fi
echo "summary: $counts"
exit $overall
