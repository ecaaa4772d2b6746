#!/usr/bin/env bash
# Creates or refreshes a venv for vlmeval-ext (run by run_examples.sh and tests/run.sh):
#   bash scripts/setup_venv.sh                 .venv: torch, then `pip install -e '.[ms,test]'` (the kit is
#                                              ms-vlmeval 0.0.20, PyPI's VLMEvalKit)
#   bash scripts/setup_venv.sh --python X.Y    .venv-pyX.Y: the same as .venv, on another Python (3.10, 3.12); the
#                                              interpreter is $PYTHON_X_Y (e.g. PYTHON_3_10), else pythonX.Y on the
#                                              PATH, else pyenv's newest X.Y; torch comes from the package index
#   bash scripts/setup_venv.sh --upstream SRC  .venv-upstream: torch, an upstream VLMEvalKit installed editable from
#                                              SRC (a checkout folder, or a .tar.gz of one, unpacked into the venv),
#                                              rouge_score, then `pip install -e '.[test]'`; checks afterwards that
#                                              `vlmeval` is still the checkout's (our install added no second kit)
# A venv is refreshed only when its inputs change (setup.py, this script, the upstream source): a hash stamp inside.
# torch/torchvision: this machine's pip takes them from local disk; elsewhere pick the build for your hardware
# first (https://pytorch.org), then `pip install -e '.[ms,test]'` (or `-e '.[test]'` next to your own kit).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
TORCH=(torch==2.14.1 torchvision==0.29.1)

fail() { echo "[setup] ERROR: $*" >&2; exit 1; }

# pip, quiet; pip's own exit status decides (its notes about unreadable index locations are dropped).
pip_q() {
  local log rc=0
  log="$(mktemp)"
  "$VENV/bin/python" -m pip install -q "$@" >"$log" 2>&1 || rc=$?
  grep -v '^WARNING: Location' "$log" >&2 || true
  rm -f "$log"
  [ "$rc" = 0 ] || fail "pip install $* failed in $VENV (exit $rc; pip's output above;" \
                        "$(df -h --output=avail "$VENV" | tail -n 1 | tr -d ' ') of disk free there)"
}

# The fingerprint of what a venv is built from: setup.py, this script, and the words given (source identities).
fingerprint() {
  { cat "$ROOT/setup.py" "$ROOT/scripts/setup_venv.sh"; printf '%s\n' "$@"; } | sha1sum | cut -d' ' -f1
}

complete() { [ -x "$1/bin/python" ] && [ -f "$1/.vlmeval-ext-setup" ]; }
up_to_date() { complete "$VENV" && [ "$(cat "$VENV/.vlmeval-ext-setup")" = "$1" ]; }

# Whether $VENV is one of the two test venvs, which run on $PYTHON (default python3), not a --python X.Y venv.
on_main_python() { case "$VENV" in "$ROOT/.venv"|"$ROOT/.venv-upstream") return 0 ;; *) return 1 ;; esac; }

# The other test venv, when it is complete: its torch stack is hard-linked into a new venv (scripts/share_torch.py)
# instead of installed a second time, so that the two venvs need about 9.5 GB of disk, not 15. A venv of another
# Python (3.10, 3.12) gets from .venv (else .venv-upstream) only the stack's wheels built for any Python 3, the CUDA
# libraries (3.1 GiB); torch, torchvision and triton for that Python come from the package index.
sibling_venv() {
  local other
  if on_main_python; then
    [ "$VENV" = "$ROOT/.venv" ] && other="$ROOT/.venv-upstream" || other="$ROOT/.venv"
    complete "$other" && echo "$other"
    return
  fi
  for other in "$ROOT/.venv" "$ROOT/.venv-upstream"; do complete "$other" && { echo "$other"; return 0; }; done
  return 1
}

new_venv() {
  echo "[setup] preparing $VENV (first run: a few minutes)" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  rm -f "$VENV/.vlmeval-ext-setup"
  pip_q --upgrade pip
  local other site share=()
  on_main_python || share=(--any-python)
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if [ ! -d "$site/torch" ] && other="$(sibling_venv)"; then
    "$other/bin/python" "$ROOT/scripts/share_torch.py" "${share[@]}" "$site" "${TORCH[0]#torch==}" "${TORCH[1]#torchvision==}" \
      || true
  fi
  # The torch stack is several GB: pip's cache would hold a downloaded copy of it a second time.
  pip_q --no-cache-dir "${TORCH[@]}"
}

# vlmeval-ext with ms-vlmeval 0.0.20 into $VENV, checked, then the stamp $1 that marks the venv complete.
install_with_ms() {
  pip_q -e "$ROOT[ms,test]"
  "$VENV/bin/python" -c "import importlib.metadata as m; m.version('ms-vlmeval')
import torch, torchvision, vlmeval_ext, yaml, cv2, pytest" || fail "the environment in $VENV is incomplete (see pip's output above)"
  echo "$1" > "$VENV/.vlmeval-ext-setup"
}

setup_ms() {
  VENV="$ROOT/.venv"
  local want; want="$(fingerprint ms)"
  up_to_date "$want" && return 0
  new_venv
  install_with_ms "$want"
}

setup_upstream() {
  local src="$1" want checkout
  VENV="$ROOT/.venv-upstream"
  case "$src" in
    *.tar.gz|*.tgz) [ -f "$src" ] || fail "no upstream VLMEvalKit archive $src"
                    src="$(cd "$(dirname "$src")" && pwd)/$(basename "$src")"
                    want="$(fingerprint upstream-archive "$(sha1sum < "$src")")"
                    checkout="$VENV/src/VLMEvalKit" ;;
    *)              [ -f "$src/run.py" ] && [ -d "$src/vlmeval" ] \
                      || fail "$src is not a VLMEvalKit checkout (no run.py and vlmeval/ in it)"
                    src="$(cd "$src" && pwd)"
                    want="$(fingerprint upstream-checkout "$src" "$(cat "$src"/setup.py "$src"/requirements.txt | sha1sum)")"
                    checkout="$src" ;;
  esac
  up_to_date "$want" && return 0
  new_venv
  if [ "$checkout" != "$src" ]; then
    rm -rf "$VENV/src" && mkdir -p "$VENV/src"
    tar xzf "$src" -C "$VENV/src"
    [ -f "$checkout/run.py" ] || fail "$src does not unpack to VLMEvalKit/run.py"
  fi
  pip_q -e "$checkout"
  pip_q rouge_score          # imported by vlmeval.dataset, missing from the kit's requirements
  pip_q -e "$ROOT[test]"
  # Our install must leave the user's kit in place: `vlmeval` is still the checkout's, and no ms-vlmeval came along.
  "$VENV/bin/python" - "$checkout" <<'EOF' || fail "installing vlmeval-ext changed the kit in $VENV"
import importlib.metadata, importlib.util, sys
from pathlib import Path
checkout = Path(sys.argv[1]).resolve()
origin = Path(importlib.util.find_spec('vlmeval').origin).resolve()
if not origin.is_relative_to(checkout):
    sys.exit(f'[setup] vlmeval is imported from {origin}, not from the checkout {checkout}')
try:
    sys.exit(f'[setup] ms-vlmeval {importlib.metadata.version("ms-vlmeval")} was installed over the checkout')
except importlib.metadata.PackageNotFoundError:
    pass
import torch, torchvision, vlmeval_ext, yaml, cv2, pytest  # noqa: E401,F401
EOF
  echo "$want" > "$VENV/.vlmeval-ext-setup"
}

# find_python X.Y: the path of a Python X.Y interpreter, or nothing.
find_python() {
  local want="$1" var cand prefix
  var="PYTHON_${want//./_}"
  # a candidate counts when it runs and is that version (a pyenv shim of a version not selected does not run)
  for cand in "${!var:-}" "python$want"; do
    [ -n "$cand" ] && [ "$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ] \
      && { command -v "$cand"; return 0; }
  done
  if command -v pyenv >/dev/null; then
    cand="$(pyenv versions --bare 2>/dev/null | grep -E "^$want\.[0-9]+$" | sort -V | tail -n 1)"
    if [ -n "$cand" ] && prefix="$(pyenv prefix "$cand" 2>/dev/null)" && [ -x "$prefix/bin/python$want" ]; then
      echo "$prefix/bin/python$want"; return 0
    fi
  fi
  return 1
}

setup_python() {
  local version="$1" want
  PY="$(find_python "$version")" || fail "no Python $version here: set PYTHON_${version//./_}=/path/to/python$version," \
                                          "put python$version on the PATH, or \`pyenv install $version\`"
  VENV="$ROOT/.venv-py$version"
  want="$(fingerprint "python-$version" "$("$PY" -c 'import sys; print(sys.version)')")"
  up_to_date "$want" && return 0
  new_venv
  install_with_ms "$want"
}

case "${1:-}" in
  '') setup_ms ;;
  --python) [ -n "${2:-}" ] || fail "--python needs a version, e.g. 3.10"; setup_python "$2" ;;
  --upstream) [ -n "${2:-}" ] || fail "--upstream needs a VLMEvalKit checkout folder or .tar.gz"; setup_upstream "$2" ;;
  *) fail "usage: bash scripts/setup_venv.sh [--upstream VLMEVALKIT_CHECKOUT_OR_TAR_GZ | --python X.Y]" ;;
esac
