#!/usr/bin/env bash
# The main job.
#   bash run_examples.sh                      every benchmark's embedded demo split, offline, with the weight-free
#                                             Naive-Baseline reference model, and RoCOCO retrieval on a tiny gallery
#                                             with the RoCOCO-Smoke-Hash smoke-test backend, through run.py; prints
#                                             the tables
#   MODEL=InternVL2-1B DATA="R-Bench-Full GRAB" JUDGE=gpt-4o-mini [JUDGE_BASE_URL=http://host:8000/v1] \
#     [WORK_DIR=outputs] bash run_examples.sh the real thing (keys from the environment, e.g. OPENAI_API_KEY)
#   PYTHON_VERSION=3.10 bash run_examples.sh  either of the above on Python 3.10 (or 3.12), in .venv-py3.10
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
# .venv with torch and ms-vlmeval 0.0.20 (PyPI's VLMEvalKit), if not there yet; PYTHON_VERSION=3.10 (or 3.12): the
# same in .venv-py3.10 on that Python
if [ -n "${PYTHON_VERSION:-}" ]; then
  bash scripts/setup_venv.sh --python "$PYTHON_VERSION"
  PY="$ROOT/.venv-py$PYTHON_VERSION/bin/python"
else
  bash scripts/setup_venv.sh
  PY="$ROOT/.venv/bin/python"
fi
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg

if [ -n "${MODEL:-}${DATA:-}" ]; then
  : "${MODEL:?set MODEL (a kit model name)}" "${DATA:?set DATA (dataset names)}"
  args=(--data $DATA --model $MODEL --work-dir "${WORK_DIR:-outputs}" --reuse)
  [ -n "${JUDGE:-}" ] && args+=(--judge "$JUDGE")
  [ -n "${JUDGE_BASE_URL:-}" ] && args+=(--judge-base-url "$JUDGE_BASE_URL")
  exec "$PY" run.py "${args[@]}"
fi

WORK="${WORK_DIR:-demo_outputs}"
case "$WORK" in /*) WORK_ABS="$WORK" ;; *) WORK_ABS="$ROOT/$WORK" ;; esac
export LMUData="${LMUData:-$WORK_ABS/LMUData}"
mkdir -p "$LMUData"
start=$SECONDS
# One run.py call per benchmark family: each line is exactly what a user would type.
"$PY" run.py --data R-Bench-Full_DEMO --model Naive-Baseline --judge offline --work-dir "$WORK"
"$PY" run.py --data GRAB_DEMO ReMI_DEMO ReMI_DEMO_composite RoCOCO-MCQ-same_concept_DEMO --model Naive-Baseline \
  --work-dir "$WORK"
# RoCOCO retrieval on a tiny gallery (8 real annotation entries per file, generated stand-in pictures) with
# RoCOCO-Smoke-Hash, a weight-free smoke-test backend: it checks the pipeline; its recalls are chance level and are
# never compared with the paper.
"$PY" -m vlmeval_ext rococo demo-gallery "$WORK/rococo_gallery" > /dev/null
RETRIEVAL=(RoCOCO-I2T-clean RoCOCO-I2T-same_concept RoCOCO-I2T-diff_concept RoCOCO-I2T-rand_voca RoCOCO-I2T-danger
           RoCOCO-T2I-mix)
for name in "${RETRIEVAL[@]}"; do
  "$PY" -m vlmeval_ext rococo prepare "$name" --ann-dir "$WORK/rococo_gallery/annotations" \
    --coco-root "$WORK/rococo_gallery/coco" --mixed-root "$WORK/rococo_gallery/mixed" > /dev/null
done
PRED_FORMAT=tsv "$PY" run.py --data "${RETRIEVAL[@]}" --model RoCOCO-Smoke-Hash --work-dir "$WORK"
"$PY" -m vlmeval_ext corrupt-image vlmeval_ext/demo/chelsea.jpg --out-dir "$WORK/corrupt" --preview
echo
echo "======== demo results: Naive-Baseline (the floor a real model should beat) and RoCOCO-Smoke-Hash (a smoke test"
echo "======== of the retrieval pipeline, not a model). Demo splits are small: the numbers are not the papers'."
"$PY" -m vlmeval_ext summary "$WORK"
echo "demo finished in $((SECONDS - start)) s; outputs under $WORK/Naive-Baseline and $WORK/RoCOCO-Smoke-Hash"
