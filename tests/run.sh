#!/usr/bin/env bash
# The whole test suite on a fresh machine, once per VLMEvalKit flavour; sets up the venvs it needs.
#   bash tests/run.sh [PYTEST ARGS]                 every leg:
#     ms-vlmeval  ms-vlmeval 0.0.20 from PyPI, in .venv: the whole suite
#     upstream    an upstream VLMEvalKit checkout installed editable, in .venv-upstream; its source is
#                 $VLMEVALKIT_SRC (a checkout folder or a .tar.gz of one), else ../shared/vendor/VLMEvalKit-*.tar.gz
#                 beside this checkout; with neither, this leg does not run and the script says so. Every test
#                 that imports the kit, runs a command or opens the browser; the pure tests too when it runs alone
#     py3.10      Python 3.10 (the kit's users' usual one), ms-vlmeval 0.0.20, in .venv-py3.10: every module
#                 imports, tests/datasets, and the demo through run.py
#     py3.12      Python 3.12, ms-vlmeval 0.0.20, in .venv-py3.12: every module imports, and the demo
#                 (the full suite runs on Python 3.11, the two legs above)
#   bash tests/run.sh --kit ms|upstream|py3.10|py3.12 [PYTEST ARGS]   one leg only
#   bash tests/run.sh --fast [PYTEST ARGS]   the quick loop while editing (about a minute): the tests that need no
#                     subprocess, no browser and no kit import (markers slow, browser, kit: tests/conftest.py), in
#                     .venv as it is (made once if missing); the full run above is what CI runs
# Exit status: 0 when every leg that ran passed, 1 when any failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
export LITELLM_LOCAL_MODEL_COST_MAP=True   # the upstream kit imports litellm, which would fetch its price map

legs=(ms upstream py3.10 py3.12)
if [ "${1:-}" = --fast ]; then
  shift
  [ -x .venv/bin/python ] || bash scripts/setup_venv.sh || exit 1
  exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" \
    -m 'not slow and not browser and not kit' "$@"
fi
if [ "${1:-}" = --kit ]; then
  case "${2:-}" in
    ms|upstream|py3.10|py3.12) legs=("$2"); shift 2 ;;
    *) echo "usage: bash tests/run.sh [--kit ms|upstream|py3.10|py3.12] [PYTEST ARGS]" >&2; exit 2 ;;
  esac
fi
# With the ms leg in this run, the upstream leg leaves out the pure tests (markers: tests/conftest.py) that it runs.
ON_THE_KIT=''
case " ${legs[*]} " in *" ms "*) ON_THE_KIT='kit or slow or browser' ;; esac

upstream_source() {
  if [ -n "${VLMEVALKIT_SRC:-}" ]; then echo "$VLMEVALKIT_SRC"; return; fi
  local vendor="$ROOT/../shared/vendor" found
  [ -d "$vendor" ] || return 0
  found="$(ls -1 "$vendor"/VLMEvalKit-*.tar.gz 2>/dev/null | sort | tail -n 1)"
  [ -z "$found" ] || echo "$(cd "$vendor" && pwd -P)/$(basename "$found")"
}

# The free disk where the venvs go, e.g. 17G.
disk_free() { df -h --output=avail "$ROOT" | tail -n 1 | tr -d ' '; }

# run_leg NAME VENV SELECTION SETUP-ARGS...: sets up the venv, runs pytest in it with the marker SELECTION (empty:
# every test); returns pytest's exit status. A passing test's tmp_path is removed when it passes (a leg writes about
# 1 GB of them); a failing one's is kept. Idle workers take queued tests from busy ones (--dist worksteal), so one
# long test last in a queue does not leave the other core idle.
run_leg() {
  local name="$1" venv="$2" selection="$3"; shift 3
  echo "================ tests on $name ================"
  local start=$SECONDS
  echo "[tests] $name: $(disk_free) of disk free before set-up"
  bash scripts/setup_venv.sh "$@" || { echo "[tests] $name: setting up $venv failed" >&2; return 1; }
  echo "[tests] $name: venv ready in $((SECONDS - start)) s"
  local marks=(); [ -z "$selection" ] || marks=(-m "$selection")
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -o tmp_path_retention_policy=failed \
    -n "${PYTEST_WORKERS:-2}" --dist worksteal --durations=15 "${marks[@]}" "${PYTEST_ARGS[@]}"
}

# run_python_leg X.Y TEST-PATH...: another Python's venv, the given tests, then the demo through run.py (its output
# in a log, shown when it fails); returns 0 when both passed.
run_python_leg() {
  local version="$1"; shift
  echo "================ Python $version (ms-vlmeval 0.0.20) ================"
  local start=$SECONDS venv="$ROOT/.venv-py$version" demo_dir log rc=0
  echo "[tests] py$version: $(disk_free) of disk free before set-up"
  bash scripts/setup_venv.sh --python "$version" || { echo "[tests] py$version: setting up $venv failed" >&2; return 1; }
  echo "[tests] py$version: venv ready in $((SECONDS - start)) s ($("$venv/bin/python" -V))"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -o tmp_path_retention_policy=failed -n "${PYTEST_WORKERS:-2}" \
    "$@" || rc=1
  demo_dir="$(mktemp -d)"; log="$demo_dir/demo.log"
  if PYTHON_VERSION="$version" WORK_DIR="$demo_dir/out" bash run_examples.sh >"$log" 2>&1; then
    echo "[tests] py$version: demo through run.py passed ($(grep -c '^| ' "$log") table rows; $(tail -n 1 "$log"))"
    rm -rf "$demo_dir"
  else
    echo "[tests] py$version: demo through run.py FAILED; its last lines ($log):" >&2
    tail -n 40 "$log" >&2
    rc=1
  fi
  return "$rc"
}

# The report's browser test needs a Chromium; Debian's package, installed here when there is none.
ensure_chromium() {
  local name
  for name in chromium chromium-browser google-chrome; do command -v "$name" >/dev/null && return 0; done
  echo "[tests] installing Debian's chromium (the report's browser test opens the page in it)" >&2
  local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium; } \
    >/dev/null || { echo "[tests] could not install chromium (apt-get install -y chromium); the browser test will fail" >&2; return 0; }
}
ensure_chromium

# Arguments go to pytest; without a test path among them, the whole of tests/.
PYTEST_ARGS=("$@")
case " $* " in *" tests"*) ;; *) PYTEST_ARGS=(tests "$@") ;; esac
status=0
summary=()
for leg in "${legs[@]}"; do
  start=$SECONDS
  case "$leg" in
    ms) run_leg 'ms-vlmeval 0.0.20' .venv ''; rc=$? ;;
    upstream)
      src="$(upstream_source)"
      if [ -z "$src" ] && [ "${#legs[@]}" = 1 ]; then
        echo "[tests] --kit upstream needs an upstream VLMEvalKit source: VLMEVALKIT_SRC=/path/to/VLMEvalKit" \
             "(a checkout folder or a .tar.gz of one), or ../shared/vendor/VLMEvalKit-*.tar.gz beside this repo" >&2
        exit 2
      elif [ -z "$src" ]; then
        summary+=("upstream: DID NOT RUN (no upstream VLMEvalKit source here: no \$VLMEVALKIT_SRC, no ../shared/vendor)."
                  "  To run it: VLMEVALKIT_SRC=/path/to/VLMEvalKit bash tests/run.sh --kit upstream"
                  "  (a checkout folder or a .tar.gz of one)")
        continue
      fi
      # The pure tests (no kit import, no subprocess, no browser: tests/conftest.py) ran on the ms leg, with the
      # same pandas, numpy and matplotlib; here every test whose outcome can depend on the kit.
      run_leg "upstream VLMEvalKit ($src)" .venv-upstream "$ON_THE_KIT" --upstream "$src"; rc=$? ;;
    py3.10) run_python_leg 3.10 tests/datasets tests/plugin/test_every_module_imports.py; rc=$? ;;
    py3.12) run_python_leg 3.12 tests/plugin/test_every_module_imports.py; rc=$? ;;
  esac
  [ "$rc" = 0 ] || status=1
  summary+=("$leg: $([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - start)) s")
done
echo "================ summary ================"
printf '[tests] %s\n' "${summary[@]}"
echo "[tests] $(disk_free) of disk free at the end"
exit "$status"
