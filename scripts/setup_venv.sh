#!/usr/bin/env bash
# Creates or refreshes .venv with everything vlmeval-ext needs (sourced by run_examples.sh and tests/run.sh).
# torch/torchvision: this machine's pip takes them from local disk; elsewhere pick the build for your hardware
# first (https://pytorch.org), then `pip install -e '.[test]'`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
STAMP="$VENV/.vlmeval-ext-setup"
want="$(cat "$ROOT/setup.py" "$ROOT/scripts/setup_venv.sh" | sha1sum | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  return 0 2>/dev/null || exit 0
fi
echo "[setup] preparing $VENV (first run: a few minutes)" >&2
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
"$VENV/bin/python" -m pip install -q torch==2.14.1 torchvision==0.29.1 2>&1 | grep -v '^WARNING: Location' >&2 || true
"$VENV/bin/python" -m pip install -q -e "$ROOT[test]" 2>&1 | grep -v '^WARNING: Location' >&2 || true
"$VENV/bin/python" -c "import torch, torchvision, vlmeval_ext, yaml, cv2, pytest" \
  || { echo "[setup] ERROR: the environment in $VENV is incomplete (see pip output above)" >&2; exit 1; }
echo "$want" > "$STAMP"
