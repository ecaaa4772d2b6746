#!/usr/bin/env bash
# The whole test suite on a fresh machine: sets up .venv if needed, then runs pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
exec .venv/bin/python -m pytest tests -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" --durations=15 "$@"
