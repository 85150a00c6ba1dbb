#!/usr/bin/env bash
# Start JupyterLab on the notebooks -- "the main job".
#   bash scripts/lab.sh                 # sets up .venv if needed, opens notebooks/
#   bash scripts/lab.sh --port 8899     # extra arguments go to `jupyter lab`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-env.sh
VENV="${ROUTELAB_VENV:-$ROOT/.venv}"
args=()
if [[ "$(id -u)" == 0 ]]; then
    case " $* " in *" --allow-root "*) ;; *) args+=(--allow-root) ;; esac
fi
echo "[lab.sh] starting JupyterLab on notebooks/ (Ctrl-C twice to stop)" >&2
exec "$VENV/bin/python" -m jupyter lab "${args[@]}" "$@" notebooks/
