#!/usr/bin/env bash
# The GPU path, run and measured on a machine with a CUDA device, in steps that each fit one
# `run` call (at most 10 minutes): bench/gpu_pack.sh first brings what the image lacks.
#   tests       the CUDA tests (float32 against the CPU, float16 and bfloat16 near float32, OOM)
#   scoring     the trie scorer against the matmul roofline in float32, float16 and bfloat16
#   kernels     the trie scorer's tree-attention kernels (math, efficient, flex) against plain
#               padded batches at Llama 2 7B's shape and on Gemma 3 270M, float16, k = $K: the MFU table
#   app         the Running page driven headless (AppTest) against `marginal estimate`, lattice at
#               k = $K, auto dtype: first result and Run -> Done (needs `bench/gpu_pack.sh pack app`)
#   precision   float16, bfloat16, bf16 autocast and TF32 against float32 (error and speed)
#   bfloat16    docs/precision.md's bfloat16 table on the GPU (split bfloat16 against float16-mixed)
#   estimators  lattice against proxy at equal k, float32 and float16
#   surprisal   Gemma 3's word strip of bench/paragraph.txt (526 bytes) by the prefix search, float32
#               and float16 (issue 49's target: 1,000 bytes/s or more)
#   next        what comes next on CUDA, float32: a 20-character greedy continuation of each of the
#               lesson's prompts under both models, characters/s (issue 58's target: 50 or more)
#   batching    a class's sessions in shared passes against taking turns (issue 20, item 5)
#   scale M..   bench.scale at the paper's sizes, one process per model (default: all, the
#               largest first; one or two models per call)
#   all         every step in that order
# Order for a 30-minute lease: tests+scoring+kernels+precision, then scale gemma3-27b, then scale
# gemma3-4b llama2-7b, then the rest. Every table is printed and the log goes to $LOG (default
# test-output/gpu.log). K=100 makes the estimator step quicker.
# Run: bench/gpu.sh STEP [models...]   (PYTHON defaults to .venv/bin/python, else python3)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LOG=${LOG:-test-output/gpu.log}
mkdir -p "$(dirname "$LOG")"
export PYTHONUNBUFFERED=1  # the benches run as modules (python -m bench.NAME) from the repository root
K=${K:-1000}
SIZES="gemma3-27b llama2-13b gemma3-12b llama2-7b gemma3-4b gemma3-1b"

step() {
  case "$1" in
    tests) "$PYTHON" -m pytest -q -m cuda tests/library/test_cuda.py -p no:cacheprovider ;;
    scoring) "$PYTHON" -m bench.scoring --device cuda --dtypes float32,float16,bfloat16 --samples 256 ;;
    kernels) "$PYTHON" -m bench.kernels --device cuda --dtypes float16 --samples "$K" --models llama2-7b,gemma3-270m ;;
    app) "$PYTHON" -m bench.app_headless --samples "$K" ;;
    precision) "$PYTHON" -m bench.precision --device cuda --modes float16,bfloat16,autocast,tf32 ;;
    bfloat16) "$PYTHON" -m bench.bfloat16 --device cuda --samples "$K" ;;
    estimators)
      for dtype in float32 float16; do
        "$PYTHON" -m bench.estimators --device cuda --dtype $dtype --samples "$K"
      done ;;
    surprisal)
      for dtype in float32 float16; do
        "$PYTHON" -m bench.surprisal --device cuda --dtype $dtype --models gemma3-270m --limit 0 \
          --extra bench/paragraph.txt --walk none
      done ;;
    next) "$PYTHON" -m bench.next_chars --device cuda --dtype float32 --parts continue --chars 20 ;;
    batching) "$PYTHON" -m bench.batching --device cuda --dtype float16 --sessions 1,8,16,32 ;;
    scale)
      shift
      for model in ${*:-$SIZES}; do
        "$PYTHON" -m bench.scale --device cuda --models "$model"
      done ;;
    *) echo "unknown step $1: tests, scoring, kernels, app, precision, bfloat16, estimators, surprisal, next, batching, scale [models], all" >&2; return 2 ;;
  esac
}

{
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.get_device_name(0))' || exit 1
  if [ "${1:-all}" = all ]; then
    for s in tests scoring kernels precision bfloat16 estimators surprisal next batching scale; do step $s; done
  else
    step "$@"
  fi
} 2>&1 | grep --line-buffered -v "Loading weights" | tee -a "$LOG"
